//! Round trips: every active-message header and every bootstrap message decodes back to
//! itself (with the same payload), and a bootstrap stream cut anywhere inside a frame asks
//! for more bytes instead of failing or inventing a message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use spools_proto::am::{
    AmHeader, Bulk, Get, GetData, Put, RmaAsk, RmaDone, RmaKey, Short, Status, StatusCode,
    StatusOp, SHORT_LEN,
};
use spools_proto::boot::{
    decode_frame, CollOp, Endpoint, Frame, SpawnProc, ToRank, ToServer, MAX_RANKS, MAX_TEXT,
};

mod common;
use common::config;

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

fn short() -> impl Strategy<Value = Short> {
    (any::<u32>(), any::<u16>(), any::<u8>(), any::<[u64; 4]>()).prop_map(
        |(handler, channel, flags, args)| Short {
            handler,
            channel,
            flags,
            args,
        },
    )
}

/// A payload length, mostly small, sometimes zero.
fn payload(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

/// Any header with a payload it may carry.
fn am_message() -> impl Strategy<Value = (AmHeader, Vec<u8>)> {
    prop_oneof![
        short().prop_map(|s| (AmHeader::Short(s), Vec::new())),
        (
            payload(96),
            any::<u32>(),
            any::<u16>(),
            any::<u8>(),
            any::<[u64; 4]>()
        )
            .prop_flat_map(|(p, handler, channel, flags, args)| {
                let len = p.len() as u32;
                (len..=u32::MAX).prop_flat_map(move |total| {
                    let p = p.clone();
                    (0..=total - len).prop_map(move |offset| {
                        (
                            AmHeader::Bulk(Bulk {
                                handler,
                                channel,
                                flags,
                                total,
                                offset,
                                args,
                            }),
                            p.clone(),
                        )
                    })
                })
            }),
        prop::collection::vec(short(), 0..=6).prop_map(|shorts| {
            let mut p = Vec::new();
            for s in &shorts {
                let mut b = [0u8; SHORT_LEN];
                s.write(&mut b);
                p.extend_from_slice(&b);
            }
            (
                AmHeader::Batch {
                    count: shorts.len() as u16,
                },
                p,
            )
        }),
        (
            payload(96),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u8>()
        )
            .prop_flat_map(|(p, token, key, offset, flags)| {
                let len = p.len() as u64;
                (len..=u64::MAX).prop_flat_map(move |total| {
                    let p = p.clone();
                    (0..=total - len).prop_map(move |chunk| {
                        (
                            AmHeader::Put(Put {
                                token,
                                key,
                                offset,
                                total,
                                chunk,
                                flags,
                            }),
                            p.clone(),
                        )
                    })
                })
            }),
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(token, key, offset, len)| (
                AmHeader::Get(Get {
                    token,
                    key,
                    offset,
                    len
                }),
                Vec::new()
            )
        ),
        (any::<u32>(), any::<u64>(), any::<u8>(), payload(96)).prop_map(
            |(token, chunk, flags, p)| (
                AmHeader::GetData(GetData {
                    token,
                    chunk,
                    flags
                }),
                p
            )
        ),
        (
            prop::sample::select(vec![StatusOp::Put, StatusOp::Get, StatusOp::Message]),
            prop::sample::select(vec![
                StatusCode::Ok,
                StatusCode::UnknownHandler,
                StatusCode::UnknownRegion,
                StatusCode::OutOfBounds,
                StatusCode::Malformed,
            ]),
            any::<u32>()
        )
            .prop_map(|(op, code, token)| (
                AmHeader::Status(Status { op, code, token }),
                Vec::new()
            )),
        (any::<u32>(), any::<u32>())
            .prop_map(|(token, key)| (AmHeader::RmaAsk(RmaAsk { token, key }), Vec::new())),
        any::<u32>().prop_map(|token| (AmHeader::RmaDone(RmaDone { token }), Vec::new())),
        (
            any::<u32>(),
            prop::sample::select(vec![StatusCode::Ok, StatusCode::UnknownRegion]),
            any::<u8>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(token, code, flags, addr, rkey, len)| (
                AmHeader::RmaKey(RmaKey {
                    token,
                    code,
                    flags,
                    addr,
                    rkey,
                    len
                }),
                Vec::new()
            )),
    ]
}

/// Text of at most `max_chars` characters, any Unicode (so up to 4 bytes each).
fn text(max_chars: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=max_chars).prop_map(|c| c.into_iter().collect())
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (text(24), any::<u32>(), text(24), text(24)).prop_map(|(host, pid, shm, tcp)| Endpoint {
        host,
        pid,
        shm,
        tcp,
    })
}

fn coll_op() -> impl Strategy<Value = CollOp> {
    prop_oneof![
        Just(CollOp::Barrier),
        any::<u32>().prop_map(|root| CollOp::Broadcast { root }),
        Just(CollOp::Allgather),
    ]
}

fn spawn_proc() -> impl Strategy<Value = SpawnProc> {
    (
        text(30),
        prop::collection::vec(text(20), 0..=4),
        prop::collection::vec((text(10), text(30)), 0..=4),
        text(20),
        text(10),
    )
        .prop_map(|(program, args, env, wdir, host)| SpawnProc {
            program,
            args,
            env,
            wdir,
            host,
        })
}

fn to_server() -> impl Strategy<Value = ToServer> {
    prop_oneof![
        (any::<u32>(), 0..=MAX_RANKS, endpoint()).prop_map(|(rank, size, endpoint)| {
            ToServer::Join {
                rank,
                size,
                endpoint,
            }
        }),
        (any::<u64>(), coll_op(), payload(300)).prop_map(|(seq, op, data)| ToServer::Collective {
            seq,
            op,
            data
        }),
        (
            prop::collection::vec((any::<u32>(), any::<u32>()), 0..=5),
            prop::collection::vec((any::<u32>(), any::<u64>()), 0..=5)
        )
            .prop_map(|(collectives, sent)| ToServer::Finalize { collectives, sent }),
        text(60).prop_map(|cause| ToServer::Abort { cause }),
        (any::<u32>(), text(60)).prop_map(|(rank, cause)| ToServer::Blame { rank, cause }),
        (any::<u32>(), prop::collection::vec(spawn_proc(), 0..=3))
            .prop_map(|(id, procs)| ToServer::Spawn { id, procs }),
    ]
}

fn to_rank() -> impl Strategy<Value = ToRank> {
    prop_oneof![
        (any::<u64>(), prop::collection::vec(endpoint(), 0..=6))
            .prop_map(|(job, endpoints)| ToRank::Table { job, endpoints }),
        (any::<u64>(), prop::collection::vec(payload(40), 0..=8))
            .prop_map(|(seq, parts)| ToRank::Collective { seq, parts }),
        Just(ToRank::Finalized),
        (any::<u32>(), text(60)).prop_map(|(rank, cause)| ToRank::Abort { rank, cause }),
        text(60).prop_map(|reason| ToRank::Refused { reason }),
        (
            any::<u32>(),
            prop::collection::vec((any::<u32>(), any::<u32>()), 0..=5),
            any::<u64>()
        )
            .prop_map(|(rank, collectives, sent_to_you)| ToRank::Finalizing {
                rank,
                collectives,
                sent_to_you
            }),
        (any::<u32>(), prop::option::of(text(60)))
            .prop_map(|(id, refused)| ToRank::Spawned { id, refused }),
        (any::<u32>(), any::<u32>(), any::<bool>(), text(60)).prop_map(
            |(id, index, success, how)| ToRank::SpawnExit {
                id,
                index,
                success,
                how
            }
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

fn check_frame<T>(msg: &T) -> Result<(), TestCaseError>
where
    T: Frame + PartialEq + std::fmt::Debug,
{
    let bytes = msg.encode();
    prop_assert!(bytes.len() >= 5, "a frame holds a length and a tag");
    let announced = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    prop_assert_eq!(announced + 4, bytes.len(), "length prefix");
    let (back, used) = decode_frame::<T>(&bytes)?.expect("a whole frame decodes");
    prop_assert_eq!(&back, msg);
    prop_assert_eq!(used, bytes.len());
    // Decoding is canonical: the decoded message encodes to the very same bytes.
    prop_assert_eq!(back.encode(), bytes.clone());
    prop_assert_eq!(&T::decode_body(&bytes[4..])?, msg);
    // Every strict prefix asks for more.
    for cut in 0..bytes.len() {
        let got = decode_frame::<T>(&bytes[..cut]);
        prop_assert!(
            matches!(got, Ok(None)),
            "prefix of {} / {} bytes gave {:?}",
            cut,
            bytes.len(),
            got
        );
    }
    // A following frame (or any bytes) is left alone.
    let mut stream = bytes.clone();
    stream.extend_from_slice(&bytes);
    stream.extend_from_slice(&[0xde, 0xad]);
    let (first, used) = decode_frame::<T>(&stream)?.expect("first frame");
    prop_assert_eq!(&first, msg);
    prop_assert_eq!(used, bytes.len());
    let (second, used2) = decode_frame::<T>(&stream[used..])?.expect("second frame");
    prop_assert_eq!(&second, msg);
    prop_assert_eq!(used2, bytes.len());
    prop_assert!(matches!(
        decode_frame::<T>(&stream[used + used2..]),
        Ok(None)
    ));
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn am_headers_round_trip((header, payload) in am_message()) {
        let mut buf = Vec::new();
        header.encode(&mut buf);
        prop_assert_eq!(buf.len(), header.encoded_len(), "header length of {:?}", header);
        buf.extend_from_slice(&payload);
        let (back, rest) = AmHeader::decode(&buf)?;
        prop_assert_eq!(back, header);
        prop_assert_eq!(rest, &payload[..]);
        // The payload is the tail of the buffer, not a copy.
        if !rest.is_empty() {
            prop_assert_eq!(rest.as_ptr(), buf[header.encoded_len()..].as_ptr());
        }
    }

    #[test]
    fn short_write_read_round_trip(s in short()) {
        let mut b = [0u8; SHORT_LEN];
        s.write(&mut b);
        prop_assert_eq!(Short::read(&b)?, s);
        let mut v = Vec::new();
        AmHeader::Short(s).encode(&mut v);
        prop_assert_eq!(&v[..], &b[..], "Short::write and AmHeader::encode agree");
    }

    #[test]
    fn batch_payload_holds_its_shorts(shorts in prop::collection::vec(short(), 0..=6)) {
        let mut buf = Vec::new();
        AmHeader::Batch { count: shorts.len() as u16 }.encode(&mut buf);
        for s in &shorts {
            AmHeader::Short(*s).encode(&mut buf);
        }
        let (h, payload) = AmHeader::decode(&buf)?;
        prop_assert_eq!(h, AmHeader::Batch { count: shorts.len() as u16 });
        let back: Vec<Short> = payload
            .chunks_exact(SHORT_LEN)
            .map(Short::read)
            .collect::<Result<_, _>>()?;
        prop_assert_eq!(back, shorts);
    }

    #[test]
    fn to_server_round_trips(msg in to_server()) {
        check_frame(&msg)?;
    }

    #[test]
    fn to_rank_round_trips(msg in to_rank()) {
        check_frame(&msg)?;
    }

    #[test]
    fn mixed_stream_decodes_in_order(msgs in prop::collection::vec(to_rank(), 0..=5)) {
        let mut stream = Vec::new();
        for m in &msgs {
            stream.extend_from_slice(&m.encode());
        }
        let mut at = 0;
        let mut back = Vec::new();
        while let Some((m, used)) = decode_frame::<ToRank>(&stream[at..])? {
            back.push(m);
            at += used;
        }
        prop_assert_eq!(at, stream.len());
        prop_assert_eq!(back, msgs);
    }
}

#[test]
fn every_am_kind_at_its_extremes() {
    let all = [
        AmHeader::Short(Short {
            handler: u32::MAX,
            channel: u16::MAX,
            flags: u8::MAX,
            args: [u64::MAX; 4],
        }),
        AmHeader::Bulk(Bulk {
            handler: 0,
            channel: 0,
            flags: 0,
            total: 0,
            offset: 0,
            args: [0; 4],
        }),
        AmHeader::Bulk(Bulk {
            handler: u32::MAX,
            channel: u16::MAX,
            flags: u8::MAX,
            total: u32::MAX,
            offset: u32::MAX,
            args: [u64::MAX; 4],
        }),
        AmHeader::Batch { count: 0 },
        AmHeader::Put(Put {
            token: u32::MAX,
            key: u32::MAX,
            offset: u64::MAX,
            total: u64::MAX,
            chunk: u64::MAX,
            flags: u8::MAX,
        }),
        AmHeader::Get(Get {
            token: u32::MAX,
            key: u32::MAX,
            offset: u64::MAX,
            len: u64::MAX,
        }),
        AmHeader::GetData(GetData {
            token: u32::MAX,
            chunk: u64::MAX,
            flags: u8::MAX,
        }),
        AmHeader::Status(Status {
            op: StatusOp::Message,
            code: StatusCode::Malformed,
            token: u32::MAX,
        }),
    ];
    for h in all {
        let mut buf = Vec::new();
        h.encode(&mut buf);
        assert_eq!(buf.len(), h.encoded_len(), "{h:?}");
        let (back, rest) = AmHeader::decode(&buf).unwrap();
        assert_eq!(back, h);
        assert!(rest.is_empty());
    }
}

#[test]
fn text_fields_at_the_limit_round_trip() {
    let long = "x".repeat(MAX_TEXT);
    let e = Endpoint {
        host: long.clone(),
        pid: u32::MAX,
        shm: long.clone(),
        tcp: long.clone(),
    };
    let msgs = [
        ToServer::Join {
            rank: u32::MAX,
            size: MAX_RANKS,
            endpoint: e.clone(),
        },
        ToServer::Join {
            rank: 0,
            size: 0,
            endpoint: Endpoint::default(),
        },
    ];
    for m in &msgs {
        let b = m.encode();
        assert_eq!(
            decode_frame::<ToServer>(&b).unwrap(),
            Some((m.clone(), b.len()))
        );
    }
    let msgs = [
        ToRank::Table {
            job: u64::MAX,
            endpoints: vec![e.clone(), Endpoint::default()],
        },
        ToRank::Table {
            job: 0,
            endpoints: Vec::new(),
        },
        ToRank::Abort {
            rank: u32::MAX,
            cause: long.clone(),
        },
        ToRank::Refused {
            reason: long.clone(),
        },
        ToRank::Collective {
            seq: u64::MAX,
            parts: vec![Vec::new(), vec![0; 1000], Vec::new()],
        },
    ];
    for m in &msgs {
        let b = m.encode();
        assert_eq!(
            decode_frame::<ToRank>(&b).unwrap(),
            Some((m.clone(), b.len()))
        );
    }
}

/// Words longer than the decoder takes (a cause naming a long program, a refusal listing
/// many hosts) go out cut at `MAX_TEXT` bytes on a character boundary, and decode.
#[test]
fn long_words_are_cut_to_what_the_decoder_takes() {
    let long = format!("x{}", "é".repeat(MAX_TEXT));
    for m in [
        ToRank::Abort {
            rank: 1,
            cause: long.clone(),
        },
        ToRank::Spawned {
            id: 1,
            refused: Some(long.clone()),
        },
        ToRank::SpawnExit {
            id: 1,
            index: 2,
            success: false,
            how: long.clone(),
        },
    ] {
        let (back, _) = decode_frame::<ToRank>(&m.encode()).unwrap().unwrap();
        let text = match back {
            ToRank::Abort { cause, .. } => cause,
            ToRank::Spawned { refused, .. } => refused.unwrap(),
            ToRank::SpawnExit { how, .. } => how,
            other => panic!("{other:?}"),
        };
        assert!(
            text.len() <= MAX_TEXT && text.len() >= MAX_TEXT - 1,
            "{}",
            text.len()
        );
        assert!(long.starts_with(&text));
    }
    let m = ToServer::Abort {
        cause: long.clone(),
    };
    let (back, _) = decode_frame::<ToServer>(&m.encode()).unwrap().unwrap();
    assert!(matches!(back, ToServer::Abort { cause } if long.starts_with(&cause)));
}
