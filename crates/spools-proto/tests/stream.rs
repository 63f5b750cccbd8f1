//! The stream wire format: known-answer bytes written by hand from the format in
//! `spools_proto::stream`'s documentation (both directions), every prefix of a frame asks
//! for more, garbage is refused without a panic, and the SU geometry tiles every ADU.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::config;
use proptest::prelude::*;
use spools_proto::stream::{
    decode, su_range, tus, Ack, Close, Frame, Hello, Open, Su, Welcome, MAX_SU, NOT_SEQUENCED,
    VARIABLE,
};
use spools_proto::WireError;

/// Bytes from hexadecimal text (whitespace ignored).
fn hx(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    d.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// `frame` encodes to exactly `bytes`, and `bytes` decode to exactly `frame`, using them all.
fn known(frame: Frame<'_>, bytes: &[u8]) {
    let mut out = Vec::new();
    frame.encode(&mut out);
    assert_eq!(out, bytes, "{frame:?} encodes to other bytes");
    let (back, used) = decode(bytes).unwrap().expect("a whole frame");
    assert_eq!(back, frame);
    assert_eq!(used, bytes.len());
}

#[test]
fn hello_and_welcome_bytes() {
    known(
        Frame::Hello(Hello {
            version: 1,
            flags: 1,
            links: 3,
            link: 2,
            conn: 0x0807_0605_0403_0201,
        }),
        &hx("53505348 0100 0100 0300 0200 0102030405060708"),
    );
    known(
        Frame::Welcome(Welcome {
            version: 1,
            flags: 1,
        }),
        &hx("53505357 0100 0100 00000000"),
    );
}

/// The `move` frame (after a `welcome` with `WELCOME_MOVE`, to a hello with
/// `HELLO_CAN_MOVE`): an IPv4 address travels IPv4-mapped, an IPv6 one as it is.
#[test]
fn move_bytes() {
    use spools_proto::stream::{Move, HELLO_CAN_MOVE, HELLO_CAN_PROVE, WELCOME_ACKS, WELCOME_MOVE};
    known(
        Frame::Move(Move {
            addr: "10.1.2.3:7001".parse().unwrap(),
        }),
        &hx("5350534d 591b 0000 00000000000000000000ffff 0a010203"),
    );
    known(
        Frame::Move(Move {
            addr: "[fd00::5]:258".parse().unwrap(),
        }),
        &hx("5350534d 0201 0000 fd000000000000000000000000000005"),
    );
    known(
        Frame::Hello(Hello {
            version: 1,
            flags: HELLO_CAN_PROVE | HELLO_CAN_MOVE,
            links: 3,
            link: 1,
            conn: 1,
        }),
        &hx("53505348 0100 0300 0300 0100 0100000000000000"),
    );
    known(
        Frame::Welcome(Welcome {
            version: 1,
            flags: WELCOME_ACKS | WELCOME_MOVE,
        }),
        &hx("53505357 0100 0a00 00000000"),
    );
    // Reserved bytes, port 0: refused; a prefix asks for more.
    assert!(decode(&hx("5350534d 591b 0100 00000000000000000000ffff 0a010203")).is_err());
    assert!(matches!(
        decode(&hx("5350534d 0000 0000 00000000000000000000ffff 0a010203")),
        Err(WireError::Invalid {
            what: "move port",
            ..
        })
    ));
    let whole = hx("5350534d 591b 0000 00000000000000000000ffff 0a010203");
    for n in 0..whole.len() {
        assert_eq!(decode(&whole[..n]), Ok(None), "{n} bytes");
    }
}

#[test]
fn open_close_and_ack_bytes() {
    known(
        Frame::Open(Open {
            stream: 0x0403_0201,
            group: 5,
            after: NOT_SEQUENCED,
            flags: 0,
            tu: 0x0001_8000,
            adu: VARIABLE,
        }),
        &hx("5350534f 01020304 05000000 ffffffff 00000000 0080010000000000 ffffffffffffffff"),
    );
    known(
        Frame::Close(Close {
            stream: 7,
            adus: 0x0102,
        }),
        &hx("53505343 07000000 00000000 0201000000000000"),
    );
    known(
        Frame::Ack(Ack { stream: 9, adu: 3 }),
        &hx("53505341 09000000 00000000 0300000000000000"),
    );
}

#[test]
fn su_bytes() {
    let su = Su {
        stream: 1,
        su: 2,
        link: 3,
        adu: 4,
        tu: 5,
        offset: 6,
        size: 9,
        crc: 0xa1b2_c3d4,
    };
    known(
        Frame::Su(su, b"abc"),
        &hx(
            "53505344 01000000 0200 0300 0400000000000000 0500000000000000
             0600000000000000 0900000000000000 03000000 d4c3b2a1 616263",
        ),
    );
    // An empty ADU is one empty SU.
    let empty = Su {
        size: 0,
        offset: 0,
        ..su
    };
    let mut b = Vec::new();
    Frame::Su(empty, b"").encode(&mut b);
    assert_eq!(b.len(), 52);
    assert_eq!(decode(&b).unwrap(), Some((Frame::Su(empty, b""), 52)));
}

#[test]
fn every_prefix_asks_for_more_and_trailing_bytes_are_left() {
    let su = Su {
        stream: 1,
        su: 0,
        link: 0,
        adu: 0,
        tu: 0,
        offset: 0,
        size: 4,
        crc: 0,
    };
    let frames = [
        Frame::Hello(Hello {
            version: 1,
            flags: 0,
            links: 1,
            link: 0,
            conn: 1,
        }),
        Frame::Welcome(Welcome {
            version: 1,
            flags: 0,
        }),
        Frame::Su(su, b"data"),
        Frame::Close(Close { stream: 1, adus: 1 }),
    ];
    for f in frames {
        let mut b = Vec::new();
        f.encode(&mut b);
        for n in 0..b.len() {
            assert_eq!(decode(&b[..n]), Ok(None), "{f:?}: prefix of {n} bytes");
        }
        b.extend_from_slice(b"SPSA");
        let (back, used) = decode(&b).unwrap().unwrap();
        assert_eq!((back, used), (f, b.len() - 4));
    }
}

#[test]
fn bad_frames_are_named() {
    assert_eq!(decode(b"X"), Err(WireError::BadMagic(0x5800_0000)));
    assert_eq!(decode(b"SPSZ"), Err(WireError::UnknownKind(b'Z')));
    // A link outside its connection, no links at all, too many.
    let hello = |links: u16, link: u16| {
        let mut b = hx("53505348 0100 0000");
        b.extend_from_slice(&links.to_le_bytes());
        b.extend_from_slice(&link.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        decode(&b).map(|r| r.map(|(_, n)| n))
    };
    assert!(matches!(
        hello(3, 3),
        Err(WireError::Invalid {
            what: "link",
            value: 3
        })
    ));
    assert!(matches!(
        hello(0, 0),
        Err(WireError::Invalid { what: "links", .. })
    ));
    assert!(matches!(
        hello(1025, 0),
        Err(WireError::Invalid { what: "links", .. })
    ));
    // An SU past the end of its ADU, or longer than MAX_SU.
    let su = |offset: u64, size: u64, len: u32| {
        let s = Su {
            stream: 0,
            su: 0,
            link: 0,
            adu: 0,
            tu: 0,
            offset,
            size,
            crc: 0,
        };
        decode(&s.header(len)).map(|r| r.map(|(_, n)| n))
    };
    assert!(matches!(
        su(6, 9, 4),
        Err(WireError::Invalid {
            what: "SU offset",
            value: 6
        })
    ));
    assert!(matches!(
        su(u64::MAX, u64::MAX, 1),
        Err(WireError::Invalid { .. })
    ));
    assert!(matches!(
        su(0, u64::MAX, MAX_SU + 1),
        Err(WireError::TooLong { .. })
    ));
    assert_eq!(su(5, 9, 4), Ok(None), "a whole header asks for its payload");
    // Reserved fields and flags must be zero; a TU of 0 bytes is refused.
    assert!(decode(&hx("53505357 0100 0000 01000000")).is_err());
    assert!(decode(&hx("53505343 07000000 01000000 0000000000000000")).is_err());
    let open = |flags: u32, tu: u64| {
        let mut b = hx("5350534f 01000000 00000000 ffffffff");
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&tu.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        decode(&b).map(|r| r.map(|(_, n)| n))
    };
    assert!(open(0, 1).is_ok());
    assert!(open(1, 1).is_err());
    assert!(open(0, 0).is_err());
}

#[test]
fn su_geometry_by_hand() {
    // 10 bytes, TUs of 4 over 3 links: SUs of ceil(4/3) = 2 bytes; TU 0 = [0,4) as SUs
    // of 2,2,0; TU 1 = [4,8) the same; TU 2 = [8,10) as SUs of 2,0,0.
    assert_eq!(tus(10, 4), 3);
    let got: Vec<_> = (0..3)
        .map(|t| (0..3).map(|s| su_range(10, 4, 3, t, s)).collect::<Vec<_>>())
        .collect();
    assert_eq!(
        got,
        vec![
            vec![Some((0, 2)), Some((2, 2)), None],
            vec![Some((4, 2)), Some((6, 2)), None],
            vec![Some((8, 2)), None, None],
        ]
    );
    assert_eq!(su_range(10, 4, 3, 3, 0), None, "past the last TU");
    assert_eq!(su_range(0, 4, 3, 0, 0), None, "an empty ADU has no TU");
    // When the links divide the TU, an ADU is the stripe layout of its bytes: byte b on
    // link (b / SU) % K.
    for b in 0..50u64 {
        let t = b / 12;
        let on: Vec<u16> = (0..4)
            .filter(|&s| su_range(50, 12, 4, t, s).is_some_and(|(o, l)| (o..o + l).contains(&b)))
            .collect();
        assert_eq!(on, vec![((b / 3) % 4) as u16], "byte {b}");
    }
    assert_eq!(tus(0, 4), 0);
    // 12 bytes in one TU over 5 links: SUs of 3,3,3,3,0.
    let sus: Vec<_> = (0..5).map(|s| su_range(12, 12, 5, 0, s)).collect();
    assert_eq!(
        sus,
        vec![Some((0, 3)), Some((3, 3)), Some((6, 3)), Some((9, 3)), None]
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_frames_never_panic(
        kind in prop::sample::select(b"HWODCAMX".to_vec()),
        body in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        // Past the magic, so that every kind's decoder sees random fields.
        let mut b = b"SPS".to_vec();
        b.push(kind);
        b.extend_from_slice(&body);
        if let Ok(Some((f, used))) = decode(&b) {
            prop_assert!(used <= b.len());
            let mut again = Vec::new();
            f.encode(&mut again);
            prop_assert_eq!(&again[..], &b[..used]);
        }
    }

    #[test]
    fn moves_round_trip(ip in any::<[u8; 16]>(), v4 in any::<[u8; 4]>(), port in 1u16..) {
        for addr in [
            std::net::SocketAddr::new(std::net::Ipv6Addr::from(ip).to_canonical(), port),
            std::net::SocketAddr::from((v4, port)),
        ] {
            let f = Frame::Move(spools_proto::stream::Move { addr });
            let mut b = Vec::new();
            f.encode(&mut b);
            prop_assert_eq!(b.len(), spools_proto::stream::MOVE_LEN);
            prop_assert_eq!(decode(&b), Ok(Some((f, b.len()))));
        }
    }

    #[test]
    fn sus_tile_every_adu_once(size in 0u64..5000, tu in 1u64..700, links in 1u16..9) {
        let mut covered = vec![0u8; size as usize];
        for t in 0..tus(size, tu) {
            let this_tu = tu.min(size - t * tu);
            for s in 0..links {
                if let Some((off, len)) = su_range(size, tu, links, t, s) {
                    prop_assert!(len > 0 && len <= tu.div_ceil(u64::from(links)));
                    prop_assert!(off >= t * tu && off + len <= t * tu + this_tu);
                    for b in &mut covered[off as usize..(off + len) as usize] {
                        *b += 1;
                    }
                }
            }
        }
        prop_assert!(covered.iter().all(|&c| c == 1));
    }
}

/// The seeds of the `stream` fuzz target (`fuzz/seeds/stream/`): what each side of a link
/// sends, as the current encodings. Rewrite them after a format change with
/// `SPOOLS_WRITE_FUZZ_SEEDS=1 cargo test -p spools-proto --test stream`.
#[test]
fn fuzz_seeds_are_current() {
    use spools_proto::stream::WELCOME_REQUIRE_PROOF;
    use spools_proto::stream::{HELLO_CAN_PROVE, VERSION, WELCOME_ACKS, WELCOME_PROVEN};
    let frames = |fs: &[Frame<'_>]| {
        let mut v = Vec::new();
        fs.iter().for_each(|f| f.encode(&mut v));
        v
    };
    let open = |stream, adu| Open {
        stream,
        group: 3,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 4,
        adu,
    };
    // The decoder does not check CRCs (the reassembly does): any value will do.
    let su = |stream, offset, size| Su {
        stream,
        su: 0,
        link: 0,
        adu: 0,
        tu: 0,
        offset,
        size,
        crc: 0x5eed,
    };
    let seeds = [
        (
            "sender",
            frames(&[
                Frame::Hello(Hello {
                    version: VERSION,
                    flags: HELLO_CAN_PROVE,
                    links: 2,
                    link: 0,
                    conn: 0x1234,
                }),
                Frame::Open(open(1, 6)),
                Frame::Su(su(1, 0, 6), b"ab"),
                Frame::Su(su(1, 4, 6), b"ef"),
                Frame::Close(Close { stream: 1, adus: 1 }),
            ]),
        ),
        (
            "variable",
            frames(&[
                Frame::Open(open(2, VARIABLE)),
                Frame::Su(su(2, 0, 0), b""),
                Frame::Close(Close { stream: 2, adus: 1 }),
            ]),
        ),
        (
            "receiver",
            frames(&[
                Frame::Welcome(Welcome {
                    version: VERSION,
                    flags: WELCOME_REQUIRE_PROOF | WELCOME_ACKS,
                }),
                Frame::Welcome(Welcome {
                    version: VERSION,
                    flags: WELCOME_PROVEN | WELCOME_ACKS,
                }),
                Frame::Ack(Ack { stream: 1, adu: 0 }),
            ]),
        ),
        (
            "mover",
            frames(&[
                Frame::Welcome(Welcome {
                    version: VERSION,
                    flags: WELCOME_ACKS | spools_proto::stream::WELCOME_MOVE,
                }),
                Frame::Move(spools_proto::stream::Move {
                    addr: "192.0.2.7:7000".parse().unwrap(),
                }),
            ]),
        ),
    ];
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/stream");
    for (name, bytes) in seeds {
        // Every seed is frames, one after another, to the last byte.
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let (_, used) = decode(rest).unwrap().expect("whole frames");
            rest = &rest[used..];
        }
        common::keep_seed(&root.join(name), &bytes);
    }
}
