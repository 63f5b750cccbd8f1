//! Known-answer vectors for every wire format of this crate: the handshake's three
//! messages and its proofs, every active-message header, every bootstrap frame.
//!
//! The expected bytes are literals written by hand from the formats' documentation (the
//! module docs of `handshake`, `am`, `boot` and `auth`, and the field order of each
//! message: integers little-endian, text and byte strings as a `u32` length then the bytes,
//! bootstrap frames as a `u32` body length, a tag and the body). The round-trip tests
//! elsewhere check encode against decode; these check both against the literal, in both
//! directions (`encode(value) == bytes`, `decode(bytes) == value`), so that a change of field
//! order or endianness made symmetrically in encoder and decoder still fails here. Field
//! values are chosen with distinct bytes so that swapped fields show.
//!
//! The proofs are checked against an independent construction with `blake3` directly, as
//! `auth`'s documentation describes it, and against literal digests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_proto::am::{
    AmHeader, Bulk, Get, GetData, Put, RmaAsk, RmaDone, RmaKey, Short, Status, StatusCode,
    StatusOp, FLAG_EXPOSED, SHORT_LEN,
};
use spools_proto::auth::{Proof, Role, Secret};
use spools_proto::boot::{decode_frame, frame_len, CollOp, Endpoint, Frame, ToRank, ToServer};
use spools_proto::handshake::{Client, Identity, Purpose, Server};

#[path = "common/hex.rs"]
mod hex;

use hex::hx;

#[test]
fn the_hex_helper_reads_what_it_should() {
    assert_eq!(hx("01 0a_FF 'ab' 00"), vec![1, 10, 255, b'a', b'b', 0]);
    assert_eq!(hx(""), Vec::<u8>::new());
}

// ---------------------------------------------------------------------------------------
// Handshake and proofs
// ---------------------------------------------------------------------------------------

const SECRET: [u8; 16] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
];
const CLIENT_NONCE: [u8; 16] = [
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,
];
const SERVER_NONCE: [u8; 16] = [
    0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
];
const ID: Identity = Identity {
    rank: 0x0a0b_0c0d,
    lane: 0x0102,
    priority: 1,
};

/// The proof as `auth` documents it, built with `blake3` directly: a BLAKE3 hash keyed by
/// the secret-derived key, over the role's name, the client nonce, the server nonce, the
/// context's length (`u64` little-endian, written out here byte by byte) and the context.
fn reference_proof(role: &str, context: &[u8]) -> [u8; 32] {
    let key = blake3::derive_key("spools 2026 job secret proof key", &SECRET);
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(role.as_bytes());
    h.update(&CLIENT_NONCE);
    h.update(&SERVER_NONCE);
    let n = context.len();
    h.update(&[n as u8, (n >> 8) as u8, 0, 0, 0, 0, 0, 0]);
    h.update(context);
    *h.finalize().as_bytes()
}

fn proof(role: Role, context: &[u8]) -> [u8; 32] {
    Proof::compute(
        &Secret::from_bytes(SECRET),
        role,
        &CLIENT_NONCE,
        &SERVER_NONCE,
        context,
    )
    .0
}

/// The proofs for the contexts the handshake uses (the purpose; the purpose and the
/// identity) and for two others: equal to the independent construction above, and to
/// digests recorded from it as literals (so that a change of `blake3`'s key derivation or
/// of the derivation context shows too).
#[test]
fn proofs_are_the_documented_keyed_hash() {
    let cases: [(Role, &str, &[u8], &str); 4] = [
        (
            Role::Server,
            "server",
            &[0x02],
            "c6fd289c6723a4ae9f1ac5382c74274404aad91f5c12017ee2191a15ec829e74",
        ),
        (
            Role::Client,
            "client",
            &hx("02 0d0c0b0a 0201 01 00"),
            "e525f6c1e86218caaa06f31c4bae478f6bbde99421729c008cc607c093c9c454",
        ),
        (
            Role::Client,
            "client",
            b"ab",
            "a7d33b3795c5d6cc71602a11a02c200f67349c693047214f815d7bbae82519ac",
        ),
        (
            Role::Client,
            "client",
            b"",
            "1657b94bf070150fd5e279f82a04d9447ba901f3a4cbe77ef3a99ce8c6c1eabc",
        ),
    ];
    for (role, name, ctx, want) in cases {
        let got = proof(role, ctx);
        assert_eq!(got, reference_proof(name, ctx), "{name} {ctx:?}");
        assert_eq!(got.to_vec(), hx(want), "{name} {ctx:?}");
    }
}

fn client(purpose: Purpose) -> Client {
    Client::new(Secret::from_bytes(SECRET), CLIENT_NONCE, purpose, ID)
}

/// ClientHello: magic "SPLS" (0x534c5053 little-endian), version 1, purpose, a zero
/// byte, the client nonce.
#[test]
fn client_hello_bytes() {
    for (purpose, code) in [(Purpose::Bootstrap, "01"), (Purpose::Data, "02")] {
        let want = hx(&format!(
            "'SPLS' 0100 {code} 00 c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
        ));
        assert_eq!(want.len(), 24);
        assert_eq!(client(purpose).hello().to_vec(), want, "{purpose:?}");
        // The literal decodes: a server accepts it and answers for that purpose.
        let (_, reply) = Server::new(Secret::from_bytes(SECRET), SERVER_NONCE)
            .on_hello(&want)
            .unwrap();
        assert_eq!(reply[24..].to_vec(), reference_proof("server", &hx(code)));
    }
}

/// ServerHello: magic, version, two zero bytes, the server nonce, the server's proof over
/// the purpose. ClientAuth: rank, lane, priority, a zero byte, the client's proof over the
/// purpose and those 8 identity bytes.
#[test]
fn server_hello_and_client_auth_bytes() {
    let c = client(Purpose::Data);
    let server_hello = [
        hx("'SPLS' 0100 0000 505152535455565758595a5b5c5d5e5f"),
        reference_proof("server", &[0x02]).to_vec(),
    ]
    .concat();
    assert_eq!(server_hello.len(), 56);
    let identity = hx("0d0c0b0a 0201 01 00");
    let client_auth = [
        identity.clone(),
        reference_proof("client", &[&[0x02][..], &identity].concat()).to_vec(),
    ]
    .concat();
    assert_eq!(client_auth.len(), 40);

    // Encode: the server's reply and the client's answer are these bytes.
    let (awaiting, reply) = Server::new(Secret::from_bytes(SECRET), SERVER_NONCE)
        .on_hello(&c.hello())
        .unwrap();
    assert_eq!(reply.to_vec(), server_hello);
    // Decode: the client accepts the literal reply and answers with the literal auth ...
    assert_eq!(
        c.on_server_hello(&server_hello).unwrap().to_vec(),
        client_auth
    );
    // ... and the server reads the identity out of the literal auth.
    assert_eq!(awaiting.on_auth(&client_auth).unwrap(), (Purpose::Data, ID));
}

// ---------------------------------------------------------------------------------------
// Active-message headers
// ---------------------------------------------------------------------------------------

const ARGS: [u64; 4] = [
    0x1112_1314_1516_1718,
    0x2122_2324_2526_2728,
    0x3132_3334_3536_3738,
    0x4142_4344_4546_4748,
];
const ARGS_HEX: &str = "1817161514131211 2827262524232221 3837363534333231 4847464544434241";

fn encoded(h: &AmHeader) -> Vec<u8> {
    let mut v = Vec::new();
    h.encode(&mut v);
    assert_eq!(v.len(), h.encoded_len(), "{h:?}");
    v
}

/// Checks both directions for a header and the payload that follows it.
fn check_am(h: AmHeader, header_hex: &str, payload: &[u8]) {
    let want = hx(header_hex);
    assert_eq!(encoded(&h), want, "encode {h:?}");
    let msg = [want, payload.to_vec()].concat();
    let (back, rest) = AmHeader::decode(&msg).unwrap_or_else(|e| panic!("{h:?}: {e}"));
    assert_eq!(back, h, "decode");
    assert_eq!(rest, payload, "{h:?}: payload");
}

/// Short (40 bytes): kind 1, flags, channel u16, handler u32, four u64 arguments.
#[test]
fn short_bytes() {
    let s = Short {
        handler: 0x0403_0201,
        channel: 0x0605,
        flags: 2,
        args: ARGS,
    };
    let hexs = format!("01 02 0506 01020304 {ARGS_HEX}");
    check_am(AmHeader::Short(s), &hexs, &[]);
    let want: [u8; SHORT_LEN] = hx(&hexs).try_into().unwrap();
    let mut b = [0u8; SHORT_LEN];
    s.write(&mut b);
    assert_eq!(b, want);
    assert_eq!(Short::from_array(&want), Ok(s));
    assert_eq!(Short::read(&want), Ok(s));
}

/// Bulk fragment (48 bytes): kind 2, flags, channel, handler, total u32, offset u32, args.
#[test]
fn bulk_bytes() {
    check_am(
        AmHeader::Bulk(Bulk {
            handler: 0x0403_0201,
            channel: 0x0605,
            flags: 2,
            total: 0x0001_0203,
            offset: 0x0001_0200,
            args: ARGS,
        }),
        &format!("02 02 0506 01020304 03020100 00020100 {ARGS_HEX}"),
        &[0xee; 3],
    );
}

/// Batch (8 bytes): kind 3, a zero byte, count u16, four zero bytes; the shorts follow.
#[test]
fn batch_bytes() {
    let one = format!("01 00 0100 07000000 {ARGS_HEX}");
    let two = format!("01 02 0200 08000000 {ARGS_HEX}");
    check_am(
        AmHeader::Batch { count: 2 },
        "03 00 0200 00000000",
        &hx(&format!("{one} {two}")),
    );
    check_am(
        AmHeader::Batch { count: 0x0102 },
        "03 00 0201 00000000",
        &[0; 0x0102 * SHORT_LEN],
    );
}

/// Put chunk (40 bytes): kind 4, flags, two zero bytes, token, key, four zero bytes, offset
/// u64, total u64, chunk u64.
#[test]
fn put_bytes() {
    check_am(
        AmHeader::Put(Put {
            token: 0x0403_0201,
            key: 0x0807_0605,
            offset: 0x1112_1314_1516_1718,
            total: 0x20,
            chunk: 0x1c,
            flags: 1,
        }),
        "04 01 0000 01020304 05060708 00000000 1817161514131211 2000000000000000 1c00000000000000",
        &[0xab; 4],
    );
}

/// Get request (32 bytes): kind 5, three zero bytes, token, key, four zero bytes, offset,
/// len.
#[test]
fn get_bytes() {
    check_am(
        AmHeader::Get(Get {
            token: 0x0403_0201,
            key: 0x0807_0605,
            offset: 0x1112_1314_1516_1718,
            len: 0x2122_2324_2526_2728,
        }),
        "05 00 0000 01020304 05060708 00000000 1817161514131211 2827262524232221",
        &[],
    );
}

/// Get data chunk (16 bytes): kind 6, flags, two zero bytes, token, chunk u64.
#[test]
fn get_data_bytes() {
    check_am(
        AmHeader::GetData(GetData {
            token: 0x0403_0201,
            chunk: 0x1112_1314_1516_1718,
            flags: 1,
        }),
        "06 01 0000 01020304 1817161514131211",
        b"data",
    );
}

/// Status (8 bytes): kind 7, operation (put 1, get 2, message 3), code u16 (ok 0, unknown
/// handler 1, unknown region 2, out of bounds 3, malformed 4), token.
#[test]
fn status_bytes() {
    let ops = [
        (StatusOp::Put, "01"),
        (StatusOp::Get, "02"),
        (StatusOp::Message, "03"),
    ];
    let codes = [
        (StatusCode::Ok, "0000"),
        (StatusCode::UnknownHandler, "0100"),
        (StatusCode::UnknownRegion, "0200"),
        (StatusCode::OutOfBounds, "0300"),
        (StatusCode::Malformed, "0400"),
    ];
    for (op, o) in ops {
        for (code, c) in codes {
            check_am(
                AmHeader::Status(Status {
                    op,
                    code,
                    token: 0x0403_0201,
                }),
                &format!("07 {o} {c} 01020304"),
                &[],
            );
        }
    }
}

/// RmaAsk (12 bytes): kind 8, three zero bytes, token, region key.
#[test]
fn rma_ask_bytes() {
    check_am(
        AmHeader::RmaAsk(RmaAsk {
            token: 0x0403_0201,
            key: 0x0807_0605,
        }),
        "08 00 0000 01020304 05060708",
        &[],
    );
}

/// RmaDone (8 bytes): kind 10, three zero bytes, token.
#[test]
fn rma_done_bytes() {
    check_am(
        AmHeader::RmaDone(RmaDone { token: 0x0403_0201 }),
        "0a 00 0000 01020304",
        &[],
    );
}

/// RmaKey (32 bytes): kind 9, flags (1: exposed), code u16 (as in Status), token,
/// network address u64, network key u64, region length u64.
#[test]
fn rma_key_bytes() {
    check_am(
        AmHeader::RmaKey(RmaKey {
            token: 0x0403_0201,
            code: StatusCode::Ok,
            flags: FLAG_EXPOSED,
            addr: 0x1817_1615_1413_1211,
            rkey: 0x2827_2625_2423_2221,
            len: 0x1000,
        }),
        "09 01 0000 01020304 1112131415161718 2122232425262728 0010000000000000",
        &[],
    );
    check_am(
        AmHeader::RmaKey(RmaKey {
            token: 7,
            code: StatusCode::UnknownRegion,
            flags: 0,
            addr: 0,
            rkey: 0,
            len: 0,
        }),
        "09 00 0200 07000000 0000000000000000 0000000000000000 0000000000000000",
        &[],
    );
}

// ---------------------------------------------------------------------------------------
// Bootstrap frames
// ---------------------------------------------------------------------------------------

/// Checks both directions for a whole frame (length prefix included).
fn check_frame<T: Frame + PartialEq + std::fmt::Debug>(msg: T, frame_hex: &str) {
    let want = hx(frame_hex);
    assert_eq!(msg.encode(), want, "encode {msg:?}");
    let prefix: [u8; 4] = want[..4].try_into().unwrap();
    assert_eq!(
        frame_len(prefix),
        Ok(want.len() - 4),
        "{msg:?}: length prefix"
    );
    let (back, used) = decode_frame::<T>(&want).unwrap().unwrap();
    assert_eq!((back, used), (msg, want.len()), "decode");
}

fn ep(host: &str, pid: u32, shm: &str, tcp: &str) -> Endpoint {
    Endpoint {
        host: host.into(),
        pid,
        shm: shm.into(),
        tcp: tcp.into(),
    }
}

#[test]
fn to_server_frames() {
    // Join (tag 1): rank, size, endpoint (host, pid, shm, tcp).
    check_frame(
        ToServer::Join {
            rank: 0x0102_0304,
            size: 0x0001_0000,
            endpoint: ep("node-a", 0x1092, "/s1", "10.0.0.1:7000"),
        },
        "2f000000 01 04030201 00000100
         06000000 'node-a' 92100000 03000000 '/s1' 0d000000 '10.0.0.1:7000'",
    );
    // Collective (tag 2): seq u64, op (barrier 0, broadcast 1 + root, allgather 2), data.
    check_frame(
        ToServer::Collective {
            seq: 0x0102_0304_0506_0708,
            op: CollOp::Broadcast { root: 0x0a0b_0c0d },
            data: b"xy".to_vec(),
        },
        "14000000 02 0807060504030201 01 0d0c0b0a 02000000 'xy'",
    );
    check_frame(
        ToServer::Collective {
            seq: 3,
            op: CollOp::Barrier,
            data: Vec::new(),
        },
        "0e000000 02 0300000000000000 00 00000000",
    );
    check_frame(
        ToServer::Collective {
            seq: 4,
            op: CollOp::Allgather,
            data: b"a".to_vec(),
        },
        "0f000000 02 0400000000000000 02 01000000 'a'",
    );
    // Finalize (tag 3): count, then (context, collectives) pairs; count, then (job
    // rank, messages sent) pairs.
    check_frame(
        ToServer::Finalize {
            collectives: vec![(1, 0x0203), (0x0405_0607, 4)],
            sent: vec![(2, 0x0102_0304_0506)],
        },
        "25000000 03 02000000 01000000 03020000 07060504 04000000
         01000000 02000000 0605040302010000",
    );
    // Abort (tag 4): cause.
    check_frame(
        ToServer::Abort {
            cause: "oops".into(),
        },
        "09000000 04 04000000 'oops'",
    );
    // Blame (tag 5): rank, cause.
    check_frame(
        ToServer::Blame {
            rank: 5,
            cause: "late".into(),
        },
        "0d000000 05 05000000 04000000 'late'",
    );
}

#[test]
fn to_rank_frames() {
    // Table (tag 1): job u64, count, endpoints.
    check_frame(
        ToRank::Table {
            job: 0x1122_3344_5566_7788,
            endpoints: vec![ep("a", 1, "", "t"), ep("bb", 0x0102_0304, "/x", "")],
        },
        "33000000 01 8877665544332211 02000000
         01000000 'a' 01000000 00000000 01000000 't'
         02000000 'bb' 04030201 02000000 '/x' 00000000",
    );
    // Collective (tag 2): seq, count, parts.
    check_frame(
        ToRank::Collective {
            seq: 9,
            parts: vec![b"a".to_vec(), Vec::new(), b"ccc".to_vec()],
        },
        "1d000000 02 0900000000000000 03000000 01000000 'a' 00000000 03000000 'ccc'",
    );
    // Finalized (tag 3): no body.
    check_frame(ToRank::Finalized, "01000000 03");
    // Abort (tag 4): rank, cause.
    check_frame(
        ToRank::Abort {
            rank: 0x0102,
            cause: "x".into(),
        },
        "0a000000 04 02010000 01000000 'x'",
    );
    // Refused (tag 5): reason.
    check_frame(
        ToRank::Refused {
            reason: "no".into(),
        },
        "07000000 05 02000000 'no'",
    );
    // Finalizing (tag 6): rank, then the counts as in Finalize, then the messages it
    // sent to the rank told (u64).
    check_frame(
        ToRank::Finalizing {
            rank: 1,
            collectives: vec![(7, 0x0800)],
            sent_to_you: 3,
        },
        "19000000 06 01000000 01000000 07000000 00080000 0300000000000000",
    );
}

/// A stream of two literal frames decodes one after the other.
#[test]
fn literal_stream_decodes_in_order() {
    let stream = hx("01000000 03 07000000 05 02000000 'no'");
    let (first, used) = decode_frame::<ToRank>(&stream).unwrap().unwrap();
    assert_eq!((first, used), (ToRank::Finalized, 5));
    let (second, used2) = decode_frame::<ToRank>(&stream[used..]).unwrap().unwrap();
    assert_eq!(
        (second, used + used2),
        (
            ToRank::Refused {
                reason: "no".into()
            },
            stream.len()
        )
    );
}
