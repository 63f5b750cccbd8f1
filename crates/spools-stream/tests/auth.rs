//! A receiver that requires the job secret's proof: a sender with the right secret is
//! served; one without a secret or with another one gets a typed error, and the receiver
//! names and refuses it and serves the next.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{data, open, serve_with};
use spools_proto::auth::Secret;
use spools_proto::handshake::HandshakeError;
use spools_stream::{Event, Limits, Receiver, SendError, Sender};

fn secret(b: u8) -> Secret {
    Secret::from_bytes([b; 16])
}

/// Sends one ADU of 100 bytes over `s`.
fn send_one(mut s: Sender) {
    s.open(open(1, 30, 100)).unwrap();
    s.send_adu(1, 0, &data(3, 100)).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
}

#[test]
fn only_a_sender_that_proves_the_secret_is_served() {
    let r = Receiver::bind("127.0.0.1:0", Limits::default())
        .unwrap()
        .require_proof(secret(1));
    let (addr, done) = serve_with(r, 1, |_| {});

    let e = Sender::connect(addr, 2)
        .err()
        .expect("refused without a secret");
    assert!(matches!(e, SendError::ProofRequired { link: 0 }), "{e}");
    let e = Sender::connect_proving(addr, 2, &secret(2))
        .err()
        .expect("refused with another secret");
    assert!(
        matches!(
            e,
            SendError::Handshake {
                link: 0,
                source: HandshakeError::BadProof
            }
        ),
        "{e}"
    );
    send_one(Sender::connect_proving(addr, 3, &secret(1)).unwrap());

    let (summary, got) = done();
    assert_eq!(
        got[0].event,
        Event::Adu {
            stream: 1,
            adu: 0,
            data: data(3, 100)
        }
    );
    assert_eq!(summary.connections, 1);
    assert!(summary.broken.is_empty(), "{summary:?}");
    assert_eq!(summary.refused.len(), 2, "{summary:?}");
    assert!(
        summary.refused[0].contains("link 0 of connection")
            && summary.refused[0].contains("requires the job secret's proof"),
        "{summary:?}"
    );
    assert!(
        summary.refused[1].contains("did not prove the job secret"),
        "{summary:?}"
    );
}

#[test]
fn a_forged_proof_is_refused() {
    use spools_proto::handshake::{Client, Identity, Purpose, CLIENT_AUTH_LEN, SERVER_HELLO_LEN};
    use spools_proto::stream::{Frame, Hello, HELLO_CAN_PROVE, VERSION};
    use std::io::{Read, Write};
    let r = Receiver::bind("127.0.0.1:0", Limits::default())
        .unwrap()
        .require_proof(secret(1));
    let (addr, done) = serve_with(r, 1, |_| {});
    // A client that claims it can prove, then answers the challenge with zeros.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(common::BOUND)).unwrap();
    let mut b = Vec::new();
    Frame::Hello(Hello {
        version: VERSION,
        flags: HELLO_CAN_PROVE,
        links: 1,
        link: 0,
        conn: 9,
    })
    .encode(&mut b);
    let id = Identity {
        rank: 0,
        lane: 0,
        priority: 0,
    };
    b.extend_from_slice(&Client::new(secret(2), [4; 16], Purpose::Data, id).hello());
    c.write_all(&b).unwrap();
    let mut welcome_and_reply = [0u8; 12 + SERVER_HELLO_LEN];
    c.read_exact(&mut welcome_and_reply).unwrap();
    c.write_all(&[0; CLIENT_AUTH_LEN]).unwrap();
    // Refused: the receiver hangs up without a second welcome.
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    send_one(Sender::connect_proving(addr, 1, &secret(1)).unwrap());
    let (summary, _) = done();
    assert_eq!(summary.adus, 1);
    assert_eq!(summary.refused.len(), 1, "{summary:?}");
    assert!(
        summary.refused[0].contains("could not prove it knows this job's secret"),
        "{summary:?}"
    );
}

#[test]
fn a_receiver_that_does_not_ask_takes_a_sender_with_a_secret() {
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let (addr, done) = serve_with(r, 1, |_| {});
    send_one(Sender::connect_proving(addr, 2, &secret(1)).unwrap());
    let (summary, got) = done();
    assert_eq!(summary.adus, 1, "{got:?}");
}
