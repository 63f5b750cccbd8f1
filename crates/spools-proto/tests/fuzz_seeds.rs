//! The seed inputs of the libFuzzer targets in `fuzz/` (`am`, `boot`, `handshake`): valid
//! encodings, so that fuzzing starts from messages that get past the first checks.
//!
//! This test checks that the files in `fuzz/seeds/<target>/` are still exactly the current
//! encodings; after a format change, rewrite them with
//! `SPOOLS_WRITE_FUZZ_SEEDS=1 cargo test -p spools-proto --test fuzz_seeds`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use spools_proto::am::{AmHeader, Bulk, Put, Short, Status, StatusCode, StatusOp, SHORT_LEN};
use spools_proto::auth::Secret;
use spools_proto::boot::{CollOp, Endpoint, Frame, SpawnProc, ToRank, ToServer};
use spools_proto::handshake::{Client, Identity, Purpose, Server};

/// Keys and nonces of `fuzz/fuzz_targets/handshake.rs`.
const SECRET: [u8; 16] = [0x5a; 16];
const SERVER_NONCE: [u8; 16] = [0xa5; 16];
const CLIENT_NONCE: [u8; 16] = [0x3c; 16];
const ID: Identity = Identity {
    rank: 3,
    lane: 1,
    priority: 0,
};

fn am(h: AmHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    h.encode(&mut v);
    v.extend_from_slice(payload);
    v
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let short = |handler, arg| Short {
        handler,
        channel: 1,
        flags: 0,
        args: [arg, 2, 3, 4],
    };
    let mut batch = Vec::new();
    for s in [short(10, 1), short(11, 5)] {
        let mut b = [0u8; SHORT_LEN];
        s.write(&mut b);
        batch.extend_from_slice(&b);
    }
    let endpoint = |host: &str, pid, shm: &str, tcp: &str| Endpoint {
        host: host.into(),
        pid,
        shm: shm.into(),
        tcp: tcp.into(),
    };
    // Honest handshake messages for the fuzz target's server and client.
    let secret = || Secret::from_bytes(SECRET);
    let server_side = |nonce, purpose, id| {
        let c = Client::new(secret(), nonce, purpose, id);
        let (_, reply) = Server::new(secret(), SERVER_NONCE)
            .on_hello(&c.hello())
            .unwrap();
        let mut v = c.hello().to_vec();
        v.extend_from_slice(&c.on_server_hello(&reply).unwrap());
        v
    };
    let client = Client::new(secret(), CLIENT_NONCE, Purpose::Data, ID);
    let (_, reply) = Server::new(secret(), [0x77; 16])
        .on_hello(&client.hello())
        .unwrap();

    vec![
        (
            "am",
            "bulk-fragment",
            am(
                AmHeader::Bulk(Bulk {
                    handler: 42,
                    channel: 2,
                    flags: 0,
                    total: 64,
                    offset: 48,
                    args: [7, 0, 0, 1],
                }),
                &[0xab; 16],
            ),
        ),
        (
            "am",
            "batch-of-two",
            am(AmHeader::Batch { count: 2 }, &batch),
        ),
        (
            "am",
            "put-chunk",
            am(
                AmHeader::Put(Put {
                    token: 9,
                    key: 4,
                    offset: 4096,
                    total: 24,
                    chunk: 16,
                    flags: 1,
                }),
                &[0xcd; 8],
            ),
        ),
        (
            "am",
            "status",
            am(
                AmHeader::Status(Status {
                    op: StatusOp::Get,
                    code: StatusCode::OutOfBounds,
                    token: 9,
                }),
                &[],
            ),
        ),
        (
            "boot",
            "join",
            ToServer::Join {
                rank: 1,
                size: 4,
                endpoint: endpoint("node-a", 4242, "/spools-1", "10.0.0.1:7000"),
            }
            .encode(),
        ),
        (
            "boot",
            "broadcast-then-finalize",
            [
                ToServer::Collective {
                    seq: 3,
                    op: CollOp::Broadcast { root: 0 },
                    data: b"root data".to_vec(),
                }
                .encode(),
                ToServer::Finalize {
                    collectives: vec![(1, 2)],
                    sent: vec![(0, 4)],
                }
                .encode(),
            ]
            .concat(),
        ),
        (
            "boot",
            "table",
            ToRank::Table {
                job: 0x1234_5678,
                endpoints: vec![
                    endpoint("node-a", 4242, "/spools-1", "10.0.0.1:7000"),
                    endpoint("node-b", 17, "", "10.0.0.2:7000"),
                ],
            }
            .encode(),
        ),
        (
            "boot",
            "allgather-result",
            ToRank::Collective {
                seq: 3,
                parts: vec![b"a".to_vec(), Vec::new(), b"ccc".to_vec()],
            }
            .encode(),
        ),
        (
            "boot",
            "spawn",
            ToServer::Spawn {
                id: 2,
                procs: vec![SpawnProc {
                    program: "/bin/prog".into(),
                    args: vec!["child".into()],
                    env: vec![("SPOOLS_RANK".into(), "2".into())],
                    wdir: "/tmp".into(),
                    host: "node-b".into(),
                }],
            }
            .encode(),
        ),
        (
            "boot",
            "spawned-then-exit",
            [
                ToRank::Spawned {
                    id: 2,
                    refused: None,
                }
                .encode(),
                ToRank::SpawnExit {
                    id: 2,
                    index: 0,
                    success: false,
                    how: "was killed by signal 9 (SIGKILL)".into(),
                }
                .encode(),
            ]
            .concat(),
        ),
        (
            "handshake",
            "hello-auth-data",
            server_side([0x3c; 16], Purpose::Data, ID),
        ),
        (
            "handshake",
            "hello-auth-bootstrap",
            server_side(
                [0x01; 16],
                Purpose::Bootstrap,
                Identity {
                    rank: 0,
                    lane: 0,
                    priority: 0,
                },
            ),
        ),
        ("handshake", "server-hello", reply.to_vec()),
    ]
}

#[test]
fn seeds_are_valid_messages() {
    for (target, name, bytes) in seeds() {
        match target {
            "am" => {
                AmHeader::decode(&bytes).unwrap();
            }
            "boot" => {
                let ok = spools_proto::boot::decode_frame::<ToServer>(&bytes)
                    .is_ok_and(|m| m.is_some())
                    || spools_proto::boot::decode_frame::<ToRank>(&bytes)
                        .is_ok_and(|m| m.is_some());
                assert!(ok, "{name}");
            }
            "handshake" => {
                if name == "server-hello" {
                    let c =
                        Client::new(Secret::from_bytes(SECRET), CLIENT_NONCE, Purpose::Data, ID);
                    c.on_server_hello(&bytes).unwrap();
                } else {
                    let (aw, _) = Server::new(Secret::from_bytes(SECRET), SERVER_NONCE)
                        .on_hello(&bytes[..24])
                        .unwrap();
                    aw.on_auth(&bytes[24..]).unwrap();
                }
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn seed_files_are_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    // The repository always has fuzz/: a missing directory is a broken checkout (or a
    // moved crate), not a reason to check nothing.
    assert!(
        root.is_dir(),
        "{} is missing: the fuzz seeds live in the repository's fuzz/ directory, beside \
         crates/; run this test from a whole checkout",
        root.display()
    );
    for (target, name, bytes) in seeds() {
        common::keep_seed(&root.join(target).join(name), &bytes);
    }
}
