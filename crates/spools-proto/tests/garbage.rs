//! Bytes from a peer that are not a valid message: random bytes, mangled and truncated
//! encodings, lying length fields. Decoders must give a `WireError` (never panic) and must
//! never accept a message with content other than what was sent. (The libFuzzer targets in
//! `fuzz/` explore further; these run on stable in every test run.)
//!
//! (Longer than 600 lines on purpose: one section per decoder of the wire formats, each
//! with the same three kinds of garbage, kept side by side so that a new decoder gets all
//! three.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use spools_proto::am::{
    AmHeader, Bulk, Get, GetData, Put, Short, Status, StatusCode, StatusOp, SHORT_LEN,
};
use spools_proto::auth::Secret;
use spools_proto::boot::{
    decode_frame, frame_len, CollOp, Endpoint, Frame, ToRank, ToServer, MAX_COMMUNICATORS,
    MAX_FRAME, MAX_RANKS, MAX_TEXT,
};
use spools_proto::handshake::{
    Client, HandshakeError, Identity, Purpose, Server, CLIENT_AUTH_LEN, CLIENT_HELLO_LEN,
    SERVER_HELLO_LEN,
};
use spools_proto::WireError;

mod common;
use common::config;

fn secret() -> Secret {
    Secret::from_bytes(*b"garbage-in-proto")
}

const ID: Identity = Identity {
    rank: 5,
    lane: 2,
    priority: 1,
};

fn client() -> Client {
    Client::new(secret(), [0x11; 16], Purpose::Data, ID)
}

fn server() -> Server {
    Server::new(secret(), [0x22; 16])
}

fn am_samples() -> Vec<(AmHeader, Vec<u8>)> {
    let s = Short {
        handler: 0x0102_0304,
        channel: 9,
        flags: 2,
        args: [1, u64::MAX, 3, 1 << 40],
    };
    let mut two = Vec::new();
    for _ in 0..2 {
        let mut b = [0u8; SHORT_LEN];
        s.write(&mut b);
        two.extend_from_slice(&b);
    }
    vec![
        (AmHeader::Short(s), Vec::new()),
        (
            AmHeader::Bulk(Bulk {
                handler: 77,
                channel: 1,
                flags: 0,
                total: 100,
                offset: 90,
                args: [4, 3, 2, 1],
            }),
            vec![0xab; 10],
        ),
        (AmHeader::Batch { count: 2 }, two),
        (
            AmHeader::Put(Put {
                token: 8,
                key: 3,
                offset: 4096,
                total: 64,
                chunk: 32,
                flags: 1,
            }),
            vec![0xcd; 32],
        ),
        (
            AmHeader::Get(Get {
                token: 8,
                key: 3,
                offset: 4096,
                len: 1 << 20,
            }),
            Vec::new(),
        ),
        (
            AmHeader::GetData(GetData {
                token: 8,
                chunk: 1 << 19,
                flags: 1,
            }),
            vec![0xef; 7],
        ),
        (
            AmHeader::Status(Status {
                op: StatusOp::Get,
                code: StatusCode::OutOfBounds,
                token: 8,
            }),
            Vec::new(),
        ),
    ]
}

fn encode_am(h: &AmHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    h.encode(&mut v);
    v.extend_from_slice(payload);
    v
}

fn endpoint() -> Endpoint {
    Endpoint {
        host: "node-ü".into(),
        pid: 4242,
        shm: "/spools-1".into(),
        tcp: "10.0.0.1:7000".into(),
    }
}

fn server_samples() -> Vec<ToServer> {
    vec![
        ToServer::Join {
            rank: 3,
            size: 8,
            endpoint: endpoint(),
        },
        ToServer::Collective {
            seq: 12,
            op: CollOp::Broadcast { root: 2 },
            data: b"root's bytes".to_vec(),
        },
        ToServer::Collective {
            seq: 13,
            op: CollOp::Allgather,
            data: Vec::new(),
        },
        ToServer::Finalize {
            collectives: vec![(1, 3), (5, 0)],
            sent: vec![(0, 12), (3, 1)],
        },
        ToServer::Abort {
            cause: "it returned an error".into(),
        },
        ToServer::Blame {
            rank: 4,
            cause: "it finalised early".into(),
        },
    ]
}

fn rank_samples() -> Vec<ToRank> {
    vec![
        ToRank::Table {
            job: 99,
            endpoints: vec![endpoint(), Endpoint::default()],
        },
        ToRank::Collective {
            seq: 12,
            parts: vec![b"a".to_vec(), Vec::new(), b"ccc".to_vec()],
        },
        ToRank::Finalized,
        ToRank::Abort {
            rank: 1,
            cause: "killed by signal 9".into(),
        },
        ToRank::Refused {
            reason: "job is full".into(),
        },
        ToRank::Finalizing {
            rank: 2,
            collectives: vec![(1, 7)],
            sent_to_you: 5,
        },
    ]
}

/// Whatever `AmHeader::decode` accepts is a header followed by a payload that is the tail
/// of the input, and it re-encodes to a message that decodes the same.
fn check_am(b: &[u8]) -> Result<(), TestCaseError> {
    if let Ok((h, payload)) = AmHeader::decode(b) {
        let hl = h.encoded_len();
        prop_assert_eq!(hl + payload.len(), b.len());
        if !payload.is_empty() {
            prop_assert_eq!(payload.as_ptr(), b[hl..].as_ptr());
        }
        let again = encode_am(&h, payload);
        let (h2, p2) = AmHeader::decode(&again)?;
        prop_assert_eq!(h2, h);
        prop_assert_eq!(p2, payload);
    }
    if let Ok(s) = Short::read(b) {
        prop_assert!(b.len() >= SHORT_LEN);
        let mut w = [0u8; SHORT_LEN];
        s.write(&mut w);
        prop_assert_eq!(&w[..], &b[..SHORT_LEN]);
    }
    Ok(())
}

/// Whatever `decode_frame` accepts re-encodes to exactly the bytes it took.
fn check_frame<T: Frame + PartialEq + std::fmt::Debug>(b: &[u8]) -> Result<(), TestCaseError> {
    match decode_frame::<T>(b) {
        Ok(Some((msg, used))) => {
            prop_assert!((5..=b.len()).contains(&used));
            prop_assert_eq!(&msg.encode()[..], &b[..used]);
        }
        Ok(None) => {
            prop_assert!(b.len() < 4 || b.len() < 4 + frame_len(b[..4].try_into().unwrap())?);
        }
        Err(_) => {}
    }
    if let Ok(msg) = T::decode_body(b) {
        prop_assert_eq!(&msg.encode()[4..], b);
    }
    Ok(())
}

/// The handshake steps on arbitrary bytes: no panic, and nothing passes that an honest
/// peer knowing the secret would not have sent.
fn check_handshake(b: &[u8]) -> Result<(), TestCaseError> {
    match server().on_hello(b) {
        Ok((awaiting, reply)) => {
            prop_assert_eq!(b.len(), CLIENT_HELLO_LEN);
            prop_assert_eq!(reply.len(), SERVER_HELLO_LEN);
            prop_assert!(awaiting.on_auth(b).is_err());
        }
        Err(e) => prop_assert!(matches!(e, HandshakeError::Wire(_)), "{:?}", e),
    }
    let (awaiting, reply) = server().on_hello(&client().hello())?;
    if let Ok((purpose, id)) = awaiting.on_auth(b) {
        let honest = Client::new(secret(), [0x11; 16], purpose, id).on_server_hello(&reply)?;
        prop_assert_eq!(
            &honest[..],
            b,
            "accepted a client auth no honest client sends"
        );
    }
    if let Ok(auth) = client().on_server_hello(b) {
        // Only a server knowing the secret could have sent it: the one with that nonce.
        let nonce: [u8; 16] = b[8..24].try_into().unwrap();
        let (aw, honest) = Server::new(secret(), nonce).on_hello(&client().hello())?;
        prop_assert_eq!(&honest[..], b);
        prop_assert_eq!(aw.on_auth(&auth)?, (Purpose::Data, ID));
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..300)) {
        check_am(&b)?;
        check_frame::<ToServer>(&b)?;
        check_frame::<ToRank>(&b)?;
        check_handshake(&b)?;
    }

    /// Random bytes behind a valid kind byte / frame header reach deeper than pure noise.
    #[test]
    fn random_bodies_never_panic(
        kind in 0u8..=9,
        len in 0u32..300,
        body in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut am = vec![kind];
        am.extend_from_slice(&body);
        check_am(&am)?;
        let mut frame = len.to_le_bytes().to_vec();
        frame.push(kind);
        frame.extend_from_slice(&body);
        check_frame::<ToServer>(&frame)?;
        check_frame::<ToRank>(&frame)?;
        check_frame::<ToServer>(&frame[4..])?;
        check_frame::<ToRank>(&frame[4..])?;
    }

    /// Valid encodings with a few bytes changed: still no panic, and what decodes
    /// round-trips.
    #[test]
    fn mangled_encodings_never_panic(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut all: Vec<Vec<u8>> = am_samples().iter().map(|(h, p)| encode_am(h, p)).collect();
        all.extend(server_samples().iter().map(Frame::encode));
        all.extend(rank_samples().iter().map(Frame::encode));
        let (awaiting, reply) = server().on_hello(&client().hello())?;
        let auth = client().on_server_hello(&reply)?;
        all.push(client().hello().to_vec());
        all.push(reply.to_vec());
        all.push(auth.to_vec());
        let mut b = all[which.index(all.len())].clone();
        for (at, v) in &edits {
            let i = at.index(b.len());
            b[i] = *v;
        }
        check_am(&b)?;
        check_frame::<ToServer>(&b)?;
        check_frame::<ToRank>(&b)?;
        check_handshake(&b)?;
        let _ = awaiting.on_auth(&b);
    }
}

// ---------------------------------------------------------------------------------------
// Truncations
// ---------------------------------------------------------------------------------------

fn is_truncated<T: std::fmt::Debug>(r: &Result<T, WireError>) -> bool {
    matches!(r, Err(WireError::Truncated { need, have }) if have < need)
}

#[test]
fn truncated_am_headers_are_truncated_errors() {
    for (h, payload) in am_samples() {
        let full = encode_am(&h, &payload);
        let hl = h.encoded_len();
        for cut in 0..full.len() {
            let got = AmHeader::decode(&full[..cut]);
            if cut < hl {
                assert!(is_truncated(&got), "{h:?} cut at {cut}: {got:?}");
            } else if let AmHeader::Batch { .. } = h {
                // A batch must carry all its messages.
                assert!(
                    matches!(
                        got,
                        Err(WireError::Invalid {
                            what: "batch length",
                            ..
                        })
                    ),
                    "{h:?} cut at {cut}: {got:?}"
                );
            } else {
                // Fragments and chunks may be shorter; the header is never wrong.
                let (back, rest) = got.unwrap();
                assert_eq!(back, h);
                assert_eq!(rest, &payload[..cut - hl]);
            }
        }
        if matches!(h, AmHeader::Short(_)) {
            for cut in 0..SHORT_LEN {
                assert!(is_truncated(&Short::read(&full[..cut])), "cut at {cut}");
            }
        }
    }
}

#[test]
fn truncated_frame_bodies_are_truncated_errors() {
    fn check<T: Frame + std::fmt::Debug>(msgs: &[T]) {
        for m in msgs {
            let full = m.encode();
            let body = &full[4..];
            for cut in 0..body.len() {
                let got = T::decode_body(&body[..cut]);
                assert!(is_truncated(&got), "{m:?} body cut at {cut}: {got:?}");
                // The same truncation behind an honest length prefix.
                let mut framed = (cut as u32).to_le_bytes().to_vec();
                framed.extend_from_slice(&body[..cut]);
                let got = decode_frame::<T>(&framed);
                assert!(
                    matches!(got, Err(WireError::Truncated { .. })),
                    "{m:?} framed cut at {cut}: {got:?}"
                );
            }
            // One byte too many inside the frame.
            let mut longer = body.to_vec();
            longer.push(0);
            assert_eq!(
                T::decode_body(&longer).unwrap_err(),
                WireError::Trailing(1),
                "{m:?}"
            );
        }
    }
    check(&server_samples());
    check(&rank_samples());
}

#[test]
fn truncated_handshake_messages_are_truncated_errors() {
    let hello = client().hello();
    let (awaiting, reply) = server().on_hello(&hello).unwrap();
    let auth = client().on_server_hello(&reply).unwrap();
    let trunc = |r: Result<_, HandshakeError>| matches!(r, Err(HandshakeError::Wire(WireError::Truncated { need, have })) if have < need);
    for cut in 0..CLIENT_HELLO_LEN {
        assert!(trunc(server().on_hello(&hello[..cut]).map(|_| ())), "{cut}");
    }
    for cut in 0..SERVER_HELLO_LEN {
        assert!(
            trunc(client().on_server_hello(&reply[..cut]).map(|_| ())),
            "{cut}"
        );
    }
    for cut in 0..CLIENT_AUTH_LEN {
        assert!(trunc(awaiting.on_auth(&auth[..cut]).map(|_| ())), "{cut}");
    }
    let trailing =
        |r: Result<(), HandshakeError>| r == Err(HandshakeError::Wire(WireError::Trailing(1)));
    let mut h = hello.to_vec();
    h.push(0);
    assert!(trailing(server().on_hello(&h).map(|_| ())));
    let mut r = reply.to_vec();
    r.push(0);
    assert!(trailing(client().on_server_hello(&r).map(|_| ())));
    let mut a = auth.to_vec();
    a.push(0);
    assert!(trailing(awaiting.on_auth(&a).map(|_| ())));
    // The untouched messages still complete the handshake.
    assert_eq!(awaiting.on_auth(&auth).unwrap(), (Purpose::Data, ID));
}

// ---------------------------------------------------------------------------------------
// Lying fields
// ---------------------------------------------------------------------------------------

fn bulk(total: u32, offset: u32) -> AmHeader {
    AmHeader::Bulk(Bulk {
        handler: 1,
        channel: 0,
        flags: 0,
        total,
        offset,
        args: [0; 4],
    })
}

#[test]
fn bulk_fragment_past_its_total_is_rejected() {
    for (total, offset, len) in [
        (0u32, 0u32, 1usize),
        (10, 0, 11),
        (10, 10, 1),
        (10, 11, 0),
        (100, 95, 6),
        (u32::MAX, u32::MAX, 1),
        (0, u32::MAX, 0),
        (u32::MAX - 1, u32::MAX, 0),
    ] {
        let b = encode_am(&bulk(total, offset), &vec![7; len]);
        let got = AmHeader::decode(&b);
        assert_eq!(
            got,
            Err(WireError::Invalid {
                what: "bulk fragment end",
                value: u64::from(offset) + len as u64,
            }),
            "total {total} offset {offset} len {len}"
        );
    }
    // Exactly reaching the end is fine.
    let b = encode_am(&bulk(10, 4), &[1; 6]);
    assert_eq!(AmHeader::decode(&b).unwrap(), (bulk(10, 4), &[1u8; 6][..]));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn bulk_fragment_ends_are_checked(total in 0u32..200, offset in any::<u32>(), len in 0usize..200) {
        let b = encode_am(&bulk(total, offset), &vec![7; len]);
        let fits = u64::from(offset) + len as u64 <= u64::from(total);
        prop_assert_eq!(AmHeader::decode(&b).is_ok(), fits);
    }

    #[test]
    fn batch_length_must_be_count_times_short(count in 0u16..8, len in 0usize..400) {
        let b = encode_am(&AmHeader::Batch { count }, &vec![0; len]);
        let got = AmHeader::decode(&b);
        if len == usize::from(count) * SHORT_LEN {
            prop_assert_eq!(got?.0, AmHeader::Batch { count });
        } else {
            prop_assert_eq!(
                got,
                Err(WireError::Invalid { what: "batch length", value: len as u64 })
            );
        }
    }

    #[test]
    fn put_chunk_past_its_total_is_rejected(
        total in any::<u64>(),
        chunk in any::<u64>(),
        len in 0usize..64,
    ) {
        let h = AmHeader::Put(Put { token: 1, key: 2, offset: 3, total, chunk, flags: 0 });
        let b = encode_am(&h, &vec![0; len]);
        let fits = chunk.checked_add(len as u64).is_some_and(|e| e <= total);
        prop_assert_eq!(AmHeader::decode(&b).is_ok(), fits);
    }
}

#[test]
fn batch_with_a_wrong_length_is_rejected() {
    for (count, len) in [
        (1u16, 0usize),
        (1, 39),
        (1, 41),
        (2, 40),
        (0, 1),
        (u16::MAX, 40),
        (3, 3 * SHORT_LEN + 1),
    ] {
        let b = encode_am(&AmHeader::Batch { count }, &vec![0; len]);
        assert_eq!(
            AmHeader::decode(&b),
            Err(WireError::Invalid {
                what: "batch length",
                value: len as u64
            }),
            "count {count} len {len}"
        );
    }
}

#[test]
fn oversized_frame_prefix_is_too_long() {
    let want = |len: u32| WireError::TooLong {
        what: "bootstrap frame",
        len: u64::from(len),
        max: MAX_FRAME as u64,
    };
    for len in [MAX_FRAME as u32 + 1, u32::MAX, 1 << 31] {
        let prefix = len.to_le_bytes();
        assert_eq!(frame_len(prefix), Err(want(len)));
        // Rejected from the prefix alone: no waiting for (or buffering) the body.
        assert_eq!(decode_frame::<ToServer>(&prefix), Err(want(len)));
        assert_eq!(decode_frame::<ToRank>(&prefix), Err(want(len)));
        let mut more = prefix.to_vec();
        more.extend_from_slice(&[3, 0, 0]);
        assert_eq!(decode_frame::<ToRank>(&more), Err(want(len)));
    }
    // The limit itself is allowed: more bytes are needed.
    let at_limit = (MAX_FRAME as u32).to_le_bytes();
    assert_eq!(frame_len(at_limit), Ok(MAX_FRAME));
    assert_eq!(decode_frame::<ToServer>(&at_limit), Ok(None));
}

#[test]
fn oversized_fields_are_too_long() {
    // A text field one byte over the limit.
    let mut e = endpoint();
    e.tcp = "x".repeat(MAX_TEXT + 1);
    let b = ToServer::Join {
        rank: 0,
        size: 1,
        endpoint: e,
    }
    .encode();
    assert!(matches!(
        decode_frame::<ToServer>(&b),
        Err(WireError::TooLong { what: "tcp address", len, .. }) if len == MAX_TEXT as u64 + 1
    ));
    // A job larger than the rank limit.
    let b = ToServer::Join {
        rank: 0,
        size: MAX_RANKS + 1,
        endpoint: endpoint(),
    }
    .encode();
    assert!(matches!(
        decode_frame::<ToServer>(&b),
        Err(WireError::TooLong {
            what: "job size",
            ..
        })
    ));
    // Tables and part lists with more entries than ranks, and a lying entry count.
    for tag in [1u8, 2] {
        let mut body = vec![tag];
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&(MAX_RANKS + 1).to_le_bytes());
        assert!(matches!(
            ToRank::decode_body(&body),
            Err(WireError::TooLong { .. })
        ));
        body.truncate(9);
        body.extend_from_slice(&MAX_RANKS.to_le_bytes());
        assert!(matches!(
            ToRank::decode_body(&body),
            Err(WireError::Truncated { .. })
        ));
    }
    // A collective contribution announcing more than a frame.
    let mut body = vec![2];
    body.extend_from_slice(&0u64.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&(MAX_FRAME as u32 + 1).to_le_bytes());
    assert!(matches!(
        ToServer::decode_body(&body),
        Err(WireError::TooLong {
            what: "collective data",
            ..
        })
    ));
}

/// The collective counts of `Finalize` and `Finalizing` hold at most
/// `MAX_COMMUNICATORS` entries: one more is refused from the count alone; exactly that many
/// is a count to be read (short of bytes here, whole below).
#[test]
fn collective_counts_stop_at_max_communicators() {
    let head = |tag: u8, n: u32| {
        let mut b = vec![tag];
        if tag == 6 {
            b.extend_from_slice(&9u32.to_le_bytes()); // Finalizing: the rank first.
        }
        b.extend_from_slice(&n.to_le_bytes());
        b
    };
    let too_long = WireError::TooLong {
        what: "collective counts",
        len: u64::from(MAX_COMMUNICATORS) + 1,
        max: u64::from(MAX_COMMUNICATORS),
    };
    let entries = 8 * MAX_COMMUNICATORS as usize;
    assert_eq!(
        ToServer::decode_body(&head(3, MAX_COMMUNICATORS + 1)),
        Err(too_long.clone())
    );
    assert_eq!(
        ToRank::decode_body(&head(6, MAX_COMMUNICATORS + 1)),
        Err(too_long)
    );
    assert_eq!(
        ToServer::decode_body(&head(3, MAX_COMMUNICATORS)),
        Err(WireError::Truncated {
            need: entries,
            have: 0
        })
    );
    assert_eq!(
        ToRank::decode_body(&head(6, MAX_COMMUNICATORS)),
        Err(WireError::Truncated {
            need: entries,
            have: 0
        })
    );
    let mut full = head(3, MAX_COMMUNICATORS);
    full.resize(full.len() + entries + 4, 0);
    match ToServer::decode_body(&full) {
        Ok(ToServer::Finalize { collectives, .. }) => {
            assert_eq!(collectives.len(), MAX_COMMUNICATORS as usize);
        }
        other => panic!("{other:?}"),
    }
}

/// A short message must fill its transport message; the error says by how much it does not.
#[test]
fn a_short_message_with_trailing_bytes_names_their_count() {
    let mut b = encode_am(
        &AmHeader::Short(Short {
            handler: 1,
            channel: 0,
            flags: 0,
            args: [0; 4],
        }),
        &[],
    );
    for extra in 1..=3 {
        b.push(0);
        assert_eq!(AmHeader::decode(&b), Err(WireError::Trailing(extra)));
    }
}

#[test]
fn invalid_utf8_and_unknown_tags_are_rejected() {
    let mut b = ToRank::Refused {
        reason: "ab".into(),
    }
    .encode();
    let n = b.len();
    b[n - 1] = 0xff;
    assert_eq!(
        decode_frame::<ToRank>(&b),
        Err(WireError::NotUtf8("refusal reason"))
    );
    for tag in [0u8, 7, 0xff] {
        assert_eq!(
            ToServer::decode_body(&[tag]),
            Err(WireError::UnknownKind(tag))
        );
    }
    for tag in [0u8, 9, 0xff] {
        assert_eq!(
            ToRank::decode_body(&[tag]),
            Err(WireError::UnknownKind(tag))
        );
    }
    assert_eq!(
        ToServer::decode_body(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0]),
        Err(WireError::Invalid {
            what: "collective operation",
            value: 3
        })
    );
    for kind in [0u8, 11, 0xff] {
        assert_eq!(
            AmHeader::decode(&[kind; 64]),
            Err(WireError::UnknownKind(kind))
        );
    }
    assert_eq!(
        AmHeader::decode(&[]),
        Err(WireError::Truncated { need: 1, have: 0 })
    );
    // Status with an unknown operation or code.
    let mut st = encode_am(
        &AmHeader::Status(Status {
            op: StatusOp::Put,
            code: StatusCode::Ok,
            token: 1,
        }),
        &[],
    );
    st[1] = 0;
    assert!(matches!(
        AmHeader::decode(&st),
        Err(WireError::Invalid {
            what: "status operation",
            ..
        })
    ));
    st[1] = 1;
    st[2] = 5;
    assert!(matches!(
        AmHeader::decode(&st),
        Err(WireError::Invalid {
            what: "status code",
            ..
        })
    ));
    // A short message read as something else, and vice versa.
    let mut s = [0u8; SHORT_LEN];
    Short {
        handler: 1,
        channel: 1,
        flags: 0,
        args: [0; 4],
    }
    .write(&mut s);
    s[0] = 2;
    assert_eq!(Short::read(&s), Err(WireError::UnknownKind(2)));
}

/// A spawn request that announces more processes, arguments or variables than its bytes
/// can hold is refused before anything is allocated for them, and flags other than 0 and
/// 1 are refused (the encoding stays canonical).
#[test]
fn spawn_counts_beyond_the_bytes_and_odd_flags_are_refused() {
    use spools_proto::boot::{SpawnProc, MAX_SPAWN_PROCS};
    // Tag, id, then a count of processes the two bytes after it cannot hold.
    let mut b = vec![6u8, 1, 0, 0, 0];
    b.extend_from_slice(&1000u32.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    assert!(matches!(
        ToServer::decode_body(&b),
        Err(WireError::Truncated { .. })
    ));
    let mut b = vec![6u8, 1, 0, 0, 0];
    b.extend_from_slice(&(MAX_SPAWN_PROCS + 1).to_le_bytes());
    assert!(matches!(
        ToServer::decode_body(&b),
        Err(WireError::TooLong { .. })
    ));
    // One process whose argument count is far beyond its bytes.
    let one = ToServer::Spawn {
        id: 3,
        procs: vec![SpawnProc {
            program: "p".into(),
            ..SpawnProc::default()
        }],
    }
    .encode();
    let mut body = one[4..].to_vec();
    // tag, id, count, program (4 + 1): the argument count follows.
    let at = 1 + 4 + 4 + 5;
    body[at..at + 4].copy_from_slice(&4000u32.to_le_bytes());
    assert!(matches!(
        ToServer::decode_body(&body),
        Err(WireError::Truncated { .. })
    ));
    // The answers' flags.
    let mut b = ToRank::Spawned {
        id: 1,
        refused: None,
    }
    .encode();
    let n = b.len();
    b[n - 1] = 2;
    assert!(matches!(
        decode_frame::<ToRank>(&b),
        Err(WireError::Invalid { .. })
    ));
    let mut b = ToRank::SpawnExit {
        id: 1,
        index: 0,
        success: true,
        how: String::new(),
    }
    .encode();
    b[4 + 1 + 8] = 7;
    assert!(matches!(
        decode_frame::<ToRank>(&b),
        Err(WireError::Invalid { .. })
    ));
}
