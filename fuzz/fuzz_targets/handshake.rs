//! Fuzzes both sides of the connection handshake with arbitrary peer bytes: no input may
//! panic, and no input may pass that an honest peer knowing the job secret would not have
//! sent.
//!
//! The server side reads the input as a client hello (its first 24 bytes) followed by a
//! client auth (the rest); the client side reads the whole input as a server hello. The
//! seeds in `fuzz/seeds/handshake` are honest messages for the keys and nonces below
//! (kept in sync by `crates/spools-proto/tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_proto::auth::{Secret, NONCE_LEN};
use spools_proto::handshake::{
    Client, HandshakeError, Identity, Purpose, Server, CLIENT_HELLO_LEN, SERVER_HELLO_LEN,
};

const SECRET: [u8; 16] = [0x5a; 16];
const SERVER_NONCE: [u8; NONCE_LEN] = [0xa5; NONCE_LEN];
const CLIENT_NONCE: [u8; NONCE_LEN] = [0x3c; NONCE_LEN];
const ID: Identity = Identity {
    rank: 3,
    lane: 1,
    priority: 0,
};

fn secret() -> Secret {
    Secret::from_bytes(SECRET)
}

fuzz_target!(|data: &[u8]| {
    // Server side.
    let split = data.len().min(CLIENT_HELLO_LEN);
    let (hello, auth) = data.split_at(split);
    match Server::new(secret(), SERVER_NONCE).on_hello(hello) {
        Ok((awaiting, reply)) => {
            assert_eq!(reply.len(), SERVER_HELLO_LEN);
            if let Ok((purpose, id)) = awaiting.on_auth(auth) {
                // Only an honest client with this hello's nonce could have sent this auth.
                let nonce: [u8; NONCE_LEN] = hello[8..24].try_into().expect("16 bytes");
                let honest = Client::new(secret(), nonce, purpose, id)
                    .on_server_hello(&reply)
                    .expect("the server's reply verifies");
                assert_eq!(&honest[..], auth, "accepted an auth no honest client sends");
            }
        }
        Err(e) => {
            assert!(matches!(e, HandshakeError::Wire(_)), "{e:?}");
            let _ = e.to_string();
        }
    }
    // The whole input as a hello.
    let _ = Server::new(secret(), SERVER_NONCE).on_hello(data);

    // Client side.
    let client = Client::new(secret(), CLIENT_NONCE, Purpose::Data, ID);
    if let Ok(auth) = client.on_server_hello(data) {
        // Only the honest server with the nonce in the reply could have sent it.
        let nonce: [u8; NONCE_LEN] = data[8..24].try_into().expect("16 bytes");
        let (awaiting, honest) = Server::new(secret(), nonce)
            .on_hello(&client.hello())
            .expect("an honest hello");
        assert_eq!(&honest[..], data);
        assert_eq!(
            awaiting.on_auth(&auth).expect("the server accepts"),
            (Purpose::Data, ID)
        );
    }
});
