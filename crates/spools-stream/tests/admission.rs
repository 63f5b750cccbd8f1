//! Hostile peers on a receiver's port and a receiver that stops reading: links that never
//! finish their hello are evicted past the pending bound and closed at the hello timeout,
//! while a real sender is still served; a sender whose receiver welcomes and then reads
//! nothing fails with `Stalled` after its stall timeout instead of waiting for ever.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{data, open, serve_with, BOUND};
use spools_stream::{Admission, Event, Limits, Receiver, SendError, Sender};

/// A partial hello: the magic and half the version, then nothing.
const PARTIAL_HELLO: &[u8] = b"SPSH\x01";

/// Opens `n` links to `addr` that send a partial hello and hold.
fn silent_links(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, BOUND).expect("connect a silent link");
            s.write_all(PARTIAL_HELLO).expect("send a partial hello");
            s
        })
        .collect()
}

/// Whether the receiver closed `s` within `limit` (its read sees the end, or a reset).
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn silent_links_beyond_the_pending_bound_are_evicted_and_a_sender_is_served() {
    let r = Receiver::bind("127.0.0.1:0", Limits::default())
        .unwrap()
        .admission(Admission {
            max_pending: 8,
            max_links: 64,
            hello_timeout: Duration::from_secs(60),
        });
    let (addr, done) = serve_with(r, 1, |_| {});
    // Five times the pending bound, and more than the links the receiver holds at once.
    let mut flood = silent_links(addr, 80);
    // The oldest were evicted to make room for the newer: the first link is closed long
    // before its hello timeout.
    assert!(
        closed_within(&mut flood[0], Duration::from_secs(30)),
        "the oldest silent link is still open past the pending bound"
    );
    let mut s = Sender::connect(addr, 3).expect("a sender is welcomed past the flood");
    s.open(open(1, 3000, 100_000)).unwrap();
    s.send_adu(1, 0, &data(5, 100_000)).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let (summary, got) = done();
    assert_eq!(
        got[0].event,
        Event::Adu {
            stream: 1,
            adu: 0,
            data: data(5, 100_000)
        }
    );
    assert!(
        summary
            .refused
            .iter()
            .any(|r| r.contains("closed before its hello")),
        "{:?}",
        summary.refused
    );
    drop(flood);
}

#[test]
fn a_link_that_does_not_finish_its_hello_is_closed_at_the_hello_timeout() {
    let r = Receiver::bind("127.0.0.1:0", Limits::default())
        .unwrap()
        .admission(Admission {
            hello_timeout: Duration::from_secs(1),
            ..Admission::default()
        });
    let (addr, done) = serve_with(r, 1, |_| {});
    let start = Instant::now();
    let mut silent = silent_links(addr, 1);
    assert!(
        closed_within(&mut silent[0], Duration::from_secs(30)),
        "a link silent past its hello timeout is still open"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "closed before its hello timeout"
    );
    let mut s = Sender::connect(addr, 1).unwrap();
    s.open(open(1, 100, 100)).unwrap();
    s.send_adu(1, 0, &data(1, 100)).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let (summary, _) = done();
    assert!(
        summary
            .refused
            .iter()
            .any(|r| r.contains("did not say its hello within")),
        "{:?}",
        summary.refused
    );
}

/// A receiver that welcomes one link (with acks) and then reads nothing: the socket is
/// held open until the returned sender of the end is dropped.
fn welcome_then_stall() -> (std::net::SocketAddr, std::sync::mpsc::Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (end, ended) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut hello = [0u8; 20];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(&hello[..4], b"SPSH");
        // welcome: version 1, flags ACKS.
        s.write_all(b"SPSW\x01\x00\x02\x00\x00\x00\x00\x00")
            .unwrap();
        // Reads nothing more; holds the link until the test is done.
        let _ = ended.recv_timeout(BOUND);
        drop(s);
    });
    (addr, end)
}

#[test]
fn a_sender_fails_with_stalled_when_the_receiver_stops_reading() {
    let (addr, _end) = welcome_then_stall();
    let start = Instant::now();
    let mut s = Sender::connect(addr, 1)
        .unwrap()
        .with_stall_timeout(Some(Duration::from_secs(1)));
    s.open(open(1, 1 << 20, 64 << 20)).unwrap();
    // Far more than the sockets' buffers hold.
    let e = s
        .send_adu(1, 0, &vec![7u8; 64 << 20])
        .expect_err("the send fails on a receiver that reads nothing");
    assert!(matches!(e, SendError::Stalled { link: 0, .. }), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_sender_fails_with_stalled_when_the_receiver_never_ends_the_link() {
    let (addr, _end) = welcome_then_stall();
    let mut s = Sender::connect(addr, 1)
        .unwrap()
        .with_stall_timeout(Some(Duration::from_secs(1)));
    s.open(open(1, 100, 100)).unwrap();
    s.send_adu(1, 0, &data(2, 100)).unwrap();
    s.close(1, 1).unwrap();
    // The receiver acks nothing and never closes: the finish does not wait for ever.
    let e = s.finish().expect_err("the finish fails");
    assert!(matches!(e, SendError::Stalled { link: 0, .. }), "{e}");
}
