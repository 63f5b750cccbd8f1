//! The connection handshake and the job secret: the honest path succeeds; a peer without the
//! secret, a replayed or reflected proof, a changed identity or any changed byte makes it
//! fail; and the secret never shows in `Debug` or error text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use spools_proto::auth::{Proof, Role, Secret, NONCE_LEN, PROOF_LEN, SECRET_LEN};
use spools_proto::handshake::{
    Client, HandshakeError, Identity, Purpose, Server, ServerAwaitingAuth, CLIENT_AUTH_LEN,
    CLIENT_HELLO_LEN, MAGIC, SERVER_HELLO_LEN, VERSION,
};
use spools_proto::WireError;

mod common;
use common::config;

const SECRET_A: [u8; SECRET_LEN] = [0xa1; SECRET_LEN];
const SECRET_B: [u8; SECRET_LEN] = [0xb2; SECRET_LEN];
const CLIENT_NONCE: [u8; NONCE_LEN] = [0x01; NONCE_LEN];
const SERVER_NONCE: [u8; NONCE_LEN] = [0x02; NONCE_LEN];
const ID: Identity = Identity {
    rank: 7,
    lane: 3,
    priority: 1,
};

fn client(secret: [u8; SECRET_LEN], purpose: Purpose) -> Client {
    Client::new(Secret::from_bytes(secret), CLIENT_NONCE, purpose, ID)
}

fn server(secret: [u8; SECRET_LEN], nonce: [u8; NONCE_LEN]) -> Server {
    Server::new(Secret::from_bytes(secret), nonce)
}

/// The three messages of an honest handshake, and the server waiting for the last.
fn honest(
    purpose: Purpose,
) -> (
    [u8; CLIENT_HELLO_LEN],
    [u8; SERVER_HELLO_LEN],
    [u8; CLIENT_AUTH_LEN],
    ServerAwaitingAuth,
) {
    let c = client(SECRET_A, purpose);
    let hello = c.hello();
    let (awaiting, reply) = server(SECRET_A, SERVER_NONCE).on_hello(&hello).unwrap();
    let auth = c.on_server_hello(&reply).unwrap();
    (hello, reply, auth, awaiting)
}

/// Runs a handshake from the client's hello on, with each message passed through `edit`
/// before its receiver sees it; `Ok` only if both sides accept.
fn run(
    c: &Client,
    s: Server,
    edit: impl Fn(usize, &mut Vec<u8>),
) -> Result<(Purpose, Identity), HandshakeError> {
    let mut hello = c.hello().to_vec();
    edit(0, &mut hello);
    let (awaiting, reply) = s.on_hello(&hello)?;
    let mut reply = reply.to_vec();
    edit(1, &mut reply);
    let auth = c.on_server_hello(&reply)?;
    let mut auth = auth.to_vec();
    edit(2, &mut auth);
    awaiting.on_auth(&auth)
}

fn purpose() -> impl Strategy<Value = Purpose> {
    prop::sample::select(vec![
        Purpose::Bootstrap,
        Purpose::Data,
        Purpose::Pipe,
        Purpose::Port,
    ])
}

fn identity() -> impl Strategy<Value = Identity> {
    (any::<u32>(), any::<u16>(), any::<u8>()).prop_map(|(rank, lane, priority)| Identity {
        rank,
        lane,
        priority,
    })
}

#[test]
fn honest_handshake_succeeds() {
    for purpose in [
        Purpose::Bootstrap,
        Purpose::Data,
        Purpose::Pipe,
        Purpose::Port,
    ] {
        let (hello, reply, auth, awaiting) = honest(purpose);
        assert_eq!(&hello[..4], &MAGIC.to_le_bytes());
        assert_eq!(&hello[4..6], &VERSION.to_le_bytes());
        assert_eq!(&reply[..4], &MAGIC.to_le_bytes());
        assert_eq!(&reply[4..6], &VERSION.to_le_bytes());
        assert_eq!(&reply[8..24], &SERVER_NONCE);
        assert_eq!(awaiting.on_auth(&auth).unwrap(), (purpose, ID));
        // Checking the proof does not consume the state: the same answer again.
        assert_eq!(awaiting.on_auth(&auth).unwrap(), (purpose, ID));
    }
}

#[test]
fn the_secret_never_crosses_the_wire() {
    let (hello, reply, auth, _) = honest(Purpose::Data);
    for msg in [&hello[..], &reply[..], &auth[..]] {
        assert!(!msg.windows(SECRET_LEN).any(|w| w == SECRET_A));
    }
}

#[test]
fn client_with_another_secret_is_rejected_both_ways() {
    let c = client(SECRET_B, Purpose::Data);
    let hello = c.hello();
    // The client detects that the server does not share its secret ...
    let (awaiting, reply) = server(SECRET_A, SERVER_NONCE).on_hello(&hello).unwrap();
    assert_eq!(c.on_server_hello(&reply), Err(HandshakeError::BadProof));
    // ... and the server rejects the proof such a client sends (obtained from a server of
    // the client's own job that happens to use the same nonce).
    let (_, reply_b) = server(SECRET_B, SERVER_NONCE).on_hello(&hello).unwrap();
    let auth_b = c.on_server_hello(&reply_b).unwrap();
    assert_eq!(awaiting.on_auth(&auth_b), Err(HandshakeError::BadProof));
    // The same with the roles of the two secrets swapped.
    assert_eq!(
        run(
            &client(SECRET_A, Purpose::Bootstrap),
            server(SECRET_B, SERVER_NONCE),
            |_, _| {}
        ),
        Err(HandshakeError::BadProof)
    );
}

#[test]
fn client_auth_replayed_on_another_connection_is_rejected() {
    let c = client(SECRET_A, Purpose::Data);
    // Connection 1, observed by an attacker.
    let (_, reply1) = server(SECRET_A, [0x31; NONCE_LEN])
        .on_hello(&c.hello())
        .unwrap();
    let auth1 = c.on_server_hello(&reply1).unwrap();
    // Connection 2: the attacker replays the client's hello (same client nonce) and auth.
    let (awaiting2, reply2) = server(SECRET_A, [0x32; NONCE_LEN])
        .on_hello(&c.hello())
        .unwrap();
    assert_ne!(reply1, reply2);
    assert_eq!(awaiting2.on_auth(&auth1), Err(HandshakeError::BadProof));
    // And the server hello of connection 1 replayed to a client with a new nonce.
    let c2 = Client::new(
        Secret::from_bytes(SECRET_A),
        [0x09; NONCE_LEN],
        Purpose::Data,
        ID,
    );
    assert_eq!(c2.on_server_hello(&reply1), Err(HandshakeError::BadProof));
}

#[test]
fn proofs_cannot_be_reflected() {
    let (_, reply, _, awaiting) = honest(Purpose::Data);
    // The server's own proof sent back as the client's.
    let mut auth = [0u8; CLIENT_AUTH_LEN];
    auth[..4].copy_from_slice(&ID.rank.to_le_bytes());
    auth[4..6].copy_from_slice(&ID.lane.to_le_bytes());
    auth[6] = ID.priority;
    auth[8..].copy_from_slice(&reply[24..]);
    assert_eq!(awaiting.on_auth(&auth), Err(HandshakeError::BadProof));
    // Role separation at the proof level.
    let s = Secret::from_bytes(SECRET_A);
    let p = Proof::compute(&s, Role::Server, &CLIENT_NONCE, &SERVER_NONCE, b"x");
    assert!(p.verify(&s, Role::Server, &CLIENT_NONCE, &SERVER_NONCE, b"x"));
    assert!(!p.verify(&s, Role::Client, &CLIENT_NONCE, &SERVER_NONCE, b"x"));
    // Swapping the nonces is another proof.
    assert!(!p.verify(&s, Role::Server, &SERVER_NONCE, &CLIENT_NONCE, b"x"));
}

#[test]
fn any_changed_byte_of_server_hello_fails() {
    for purpose in [Purpose::Bootstrap, Purpose::Data] {
        let c = client(SECRET_A, purpose);
        let (_, reply, _, _) = honest(purpose);
        for i in 0..SERVER_HELLO_LEN {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut t = reply;
                t[i] ^= mask;
                let got = c.on_server_hello(&t);
                assert!(got.is_err(), "byte {i} ^ {mask:#x} accepted");
                let want_wire = i < 8;
                assert_eq!(
                    matches!(got, Err(HandshakeError::Wire(_))),
                    want_wire,
                    "byte {i}: {got:?}"
                );
            }
        }
    }
}

#[test]
fn any_changed_byte_of_client_auth_fails() {
    for purpose in [Purpose::Bootstrap, Purpose::Data] {
        let (_, _, auth, awaiting) = honest(purpose);
        for i in 0..CLIENT_AUTH_LEN {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut t = auth;
                t[i] ^= mask;
                assert_eq!(
                    awaiting.on_auth(&t),
                    Err(HandshakeError::BadProof),
                    "byte {i} ^ {mask:#x}"
                );
            }
        }
    }
}

#[test]
fn any_changed_byte_of_client_hello_fails() {
    for purpose in [Purpose::Bootstrap, Purpose::Data] {
        let c = client(SECRET_A, purpose);
        for i in (0..CLIENT_HELLO_LEN).filter(|&i| i != 7) {
            for mask in [0x01u8, 0x03, 0x80, 0xff] {
                let got = run(&c, server(SECRET_A, SERVER_NONCE), |step, m| {
                    if step == 0 {
                        m[i] ^= mask;
                    }
                });
                assert!(got.is_err(), "byte {i} ^ {mask:#x} accepted: {got:?}");
            }
        }
    }
}

/// Reserved bytes (ServerHello bytes 6..8, ClientHello byte 7) must be zero: changing one
/// fails the handshake.
#[test]
fn reserved_bytes_are_checked() {
    let c = client(SECRET_A, Purpose::Data);
    let mut accepted = Vec::new();
    for (step, i) in [(0usize, 7usize), (1, 6), (1, 7)] {
        let got = run(&c, server(SECRET_A, SERVER_NONCE), |s, m| {
            if s == step {
                m[i] ^= 0xff;
            }
        });
        if got.is_ok() {
            accepted.push(["ClientHello", "ServerHello"][step].to_string() + &format!(" byte {i}"));
        }
    }
    assert!(accepted.is_empty(), "changed and accepted: {accepted:?}");
}

#[test]
fn identity_and_purpose_are_bound() {
    let (_, _, auth, awaiting) = honest(Purpose::Data);
    let others = [
        Identity { rank: 0, ..ID },
        Identity { lane: 0, ..ID },
        Identity { priority: 0, ..ID },
        Identity {
            rank: u32::MAX,
            lane: u16::MAX,
            priority: u8::MAX,
        },
    ];
    for other in others {
        let mut t = auth;
        t[..4].copy_from_slice(&other.rank.to_le_bytes());
        t[4..6].copy_from_slice(&other.lane.to_le_bytes());
        t[6] = other.priority;
        assert_eq!(
            awaiting.on_auth(&t),
            Err(HandshakeError::BadProof),
            "{other:?}"
        );
    }
    // An auth made for a bootstrap connection does not open a data connection with the
    // same nonces.
    let (_, _, boot_auth, _) = honest(Purpose::Bootstrap);
    assert_eq!(awaiting.on_auth(&boot_auth), Err(HandshakeError::BadProof));
}

#[test]
fn malformed_hellos_are_wire_errors() {
    let c = client(SECRET_A, Purpose::Data);
    let mut h = c.hello();
    h[0] ^= 1;
    assert!(matches!(
        server(SECRET_A, SERVER_NONCE).on_hello(&h),
        Err(HandshakeError::Wire(WireError::BadMagic(_)))
    ));
    let mut h = c.hello();
    h[4] = 2;
    assert!(matches!(
        server(SECRET_A, SERVER_NONCE).on_hello(&h),
        Err(HandshakeError::Wire(WireError::Version { got: 2, want: 1 }))
    ));
    for p in [0u8, 5, 0xff] {
        let mut h = c.hello();
        h[6] = p;
        assert!(matches!(
            server(SECRET_A, SERVER_NONCE).on_hello(&h),
            Err(HandshakeError::Wire(WireError::Invalid {
                what: "connection purpose",
                ..
            }))
        ));
    }
    let (_, mut reply, _, _) = honest(Purpose::Data);
    reply[5] = 9;
    assert!(matches!(
        c.on_server_hello(&reply),
        Err(HandshakeError::Wire(WireError::Version { .. }))
    ));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn handshake_succeeds_iff_secrets_match(
        sa in any::<[u8; SECRET_LEN]>(),
        sb in any::<[u8; SECRET_LEN]>(),
        cn in any::<[u8; NONCE_LEN]>(),
        sn in any::<[u8; NONCE_LEN]>(),
        purpose in purpose(),
        id in identity(),
        same in any::<bool>(),
    ) {
        let sb = if same { sa } else { sb };
        let c = Client::new(Secret::from_bytes(sa), cn, purpose, id);
        let got = run(&c, Server::new(Secret::from_bytes(sb), sn), |_, _| {});
        if sa == sb {
            prop_assert_eq!(got, Ok((purpose, id)));
        } else {
            prop_assert_eq!(got, Err(HandshakeError::BadProof));
        }
    }

    #[test]
    fn replay_across_server_nonces_fails(
        s in any::<[u8; SECRET_LEN]>(),
        cn in any::<[u8; NONCE_LEN]>(),
        sn1 in any::<[u8; NONCE_LEN]>(),
        sn2 in any::<[u8; NONCE_LEN]>(),
        purpose in purpose(),
        id in identity(),
    ) {
        prop_assume!(sn1 != sn2);
        let c = Client::new(Secret::from_bytes(s), cn, purpose, id);
        let (_, r1) = Server::new(Secret::from_bytes(s), sn1).on_hello(&c.hello())?;
        let auth1 = c.on_server_hello(&r1)?;
        let (aw2, _) = Server::new(Secret::from_bytes(s), sn2).on_hello(&c.hello())?;
        prop_assert_eq!(aw2.on_auth(&auth1), Err(HandshakeError::BadProof));
    }

    #[test]
    fn changed_identity_fails(
        id in identity(),
        other in any::<[u8; 8]>(),
        purpose in purpose(),
    ) {
        let c = Client::new(Secret::from_bytes(SECRET_A), CLIENT_NONCE, purpose, id);
        let (aw, reply) = server(SECRET_A, SERVER_NONCE).on_hello(&c.hello())?;
        let mut auth = c.on_server_hello(&reply)?;
        prop_assume!(auth[..8] != other);
        auth[..8].copy_from_slice(&other);
        prop_assert_eq!(aw.on_auth(&auth), Err(HandshakeError::BadProof));
    }

    #[test]
    fn changed_byte_of_auth_or_reply_fails(
        at in 0..SERVER_HELLO_LEN + CLIENT_AUTH_LEN,
        mask in 1u8..=255,
        purpose in purpose(),
        id in identity(),
    ) {
        let c = Client::new(Secret::from_bytes(SECRET_A), CLIENT_NONCE, purpose, id);
        let got = run(&c, server(SECRET_A, SERVER_NONCE), |step, m| {
            if step == 1 && at < SERVER_HELLO_LEN {
                m[at] ^= mask;
            } else if step == 2 && at >= SERVER_HELLO_LEN {
                m[at - SERVER_HELLO_LEN] ^= mask;
            }
        });
        prop_assert!(got.is_err(), "byte {} ^ {:#x}: {:?}", at, mask, got);
    }

    #[test]
    fn secret_hex_round_trips(b in any::<[u8; SECRET_LEN]>()) {
        let s = Secret::from_bytes(b);
        let hex = s.to_hex();
        prop_assert_eq!(hex.len(), 2 * SECRET_LEN);
        prop_assert!(hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        prop_assert_eq!(Secret::from_hex(&hex).unwrap(), s.clone());
        prop_assert_eq!(Secret::from_hex(&hex.to_uppercase()).unwrap(), s.clone());
        prop_assert_eq!(s.as_bytes(), &b);
        // Debug never shows the secret, alone or inside the handshake states.
        let dbg = format!(
            "{:?} {:?} {:?}",
            s,
            Client::new(s.clone(), [0; NONCE_LEN], Purpose::Data, ID),
            Server::new(s.clone(), [0; NONCE_LEN]),
        );
        prop_assert!(!dbg.contains(&hex), "{}", dbg);
        prop_assert!(!dbg.to_lowercase().contains(&hex));
        let (aw, _) = Server::new(s.clone(), [0; NONCE_LEN])
            .on_hello(&Client::new(s, [0; NONCE_LEN], Purpose::Data, ID).hello())?;
        let dbg = format!("{aw:?}");
        prop_assert!(!dbg.contains(&hex), "{}", dbg);
    }

    #[test]
    fn from_hex_of_any_text_never_panics(t in "\\PC{0,40}") {
        if let Ok(s) = Secret::from_hex(&t) {
            prop_assert_eq!(s.to_hex(), t.trim().to_lowercase());
        }
    }
}

#[test]
fn from_hex_rejects_wrong_lengths() {
    let ok = "00112233445566778899aabbccddeeff";
    assert!(Secret::from_hex(ok).is_ok());
    for len in [0, 1, 2, 30, 31, 33, 34, 64] {
        let t: String = ok.chars().cycle().take(len).collect();
        let e = Secret::from_hex(&t).unwrap_err();
        assert!(
            e.to_string().contains(&format!("got {len} characters")),
            "{e}"
        );
    }
}

#[test]
fn from_hex_rejects_non_hex() {
    let bad = [
        "00112233445566778899aabbccddeefg",
        "g0112233445566778899aabbccddeeff",
        "0x112233445566778899aabbccddeeff",
        "00112233445566778899aabbccdd-eff",
        "0011223344556677 899aabbccddeeff",
        "00112233445566778899aabbccddee_f",
        // 32 bytes that are not 32 ASCII characters.
        "éééééééééééééééé",
        "0é112233445566778899aabbccddeef",
        "€0112233445566778899aabbccddee",
    ];
    for t in bad {
        assert_eq!(t.len(), 32, "{t:?}");
        let e = Secret::from_hex(t).unwrap_err();
        // The error text does not echo the (possibly almost right) secret.
        assert!(!e.to_string().contains(t), "{e}");
    }
}

/// `u8::from_str_radix` accepts a leading `+`; `Secret::from_hex` must not.
#[test]
fn from_hex_rejects_plus_signs() {
    for t in [
        "+0+0+0+0+0+0+0+0+0+0+0+0+0+0+0+0",
        "+f112233445566778899aabbccddeeff",
        "00112233445566778899aabbccddee+f",
    ] {
        assert!(Secret::from_hex(t).is_err(), "{t:?} accepted");
    }
}

#[test]
fn secret_debug_is_redacted() {
    let s = Secret::from_bytes(SECRET_A);
    assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    let dbg = format!("{s:?} {s:#?}");
    assert!(!dbg.contains(&s.to_hex()), "{dbg}");
    assert!(!dbg.contains("a1a1"), "{dbg}");
    assert!(!dbg.contains("161"), "{dbg}"); // 0xa1 in decimal
    let c = client(SECRET_A, Purpose::Data);
    let s2 = server(SECRET_A, SERVER_NONCE);
    let dbg = format!("{c:?} {s2:?} {c:#?}");
    assert!(!dbg.contains("a1a1") && !dbg.contains("161"), "{dbg}");
}

/// The context is hashed after its length (`u64` little-endian), so that a proof says
/// where its context ends. The expected digest is built here with `blake3` directly; a
/// proof without the prefix (or with another width or byte order of it) differs from it.
#[test]
fn proof_context_is_length_prefixed() {
    let s = Secret::from_bytes(SECRET_A);
    let key = blake3::derive_key("spools 2026 job secret proof key", &SECRET_A);
    let hash = |prefix: &[u8], ctx: &[u8]| {
        let mut h = blake3::Hasher::new_keyed(&key);
        h.update(b"client");
        h.update(&CLIENT_NONCE);
        h.update(&SERVER_NONCE);
        h.update(prefix);
        h.update(ctx);
        *h.finalize().as_bytes()
    };
    for ctx in [&b""[..], b"a", b"ab", &[0x02, 7, 0, 0, 0, 3, 0, 1, 0]] {
        let n = ctx.len() as u8;
        let got = Proof::compute(&s, Role::Client, &CLIENT_NONCE, &SERVER_NONCE, ctx).0;
        assert_eq!(got, hash(&[n, 0, 0, 0, 0, 0, 0, 0], ctx), "{ctx:?}");
        assert_ne!(got, hash(&[], ctx), "{ctx:?}: the prefix is missing");
        if n != 0 {
            assert_ne!(
                got,
                hash(&[0, 0, 0, 0, 0, 0, 0, n], ctx),
                "{ctx:?}: big-endian"
            );
        }
    }
    let a = Proof::compute(&s, Role::Client, &CLIENT_NONCE, &SERVER_NONCE, b"ab");
    let b = Proof::compute(&s, Role::Client, &CLIENT_NONCE, &SERVER_NONCE, b"a");
    assert_ne!(a, b);
    assert_eq!(a.0.len(), PROOF_LEN);
    let other = Secret::from_bytes(SECRET_B);
    assert!(!a.verify(&other, Role::Client, &CLIENT_NONCE, &SERVER_NONCE, b"ab"));
    assert_ne!(s.tag(b"segment"), other.tag(b"segment"));
    assert_ne!(s.tag(b"segment"), s.tag(b"segment2"));
}
