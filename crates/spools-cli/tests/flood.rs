//! Floods of connections on the ports of a parallel pipe's meeting (`spools bench pipe`
//! jobs): idle and garbage connections neither stall the pipe nor learn its token. (The
//! floods on a job's own ports are in spools-fabric's tests.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::Spawned;

/// Waits (bounded, polling for an event) until `path` exists.
fn wait_for_file(path: &Path) -> Result<(), String> {
    common::wait_for_file(path, Duration::from_secs(60))
}

/// The consumer ranks of a parallel pipe listen for the producer's ranks: idle and garbage
/// connections held on those ports while the producer connects neither stall the
/// consumer nor keep the producer out; the records arrive verified.
#[test]
fn a_flood_on_a_pipe_consumers_ports_does_not_stop_the_pipe() {
    let dir = common::tempdir("flood");
    let consumer = Spawned::new(common::pipe_end(
        2,
        "consumer",
        "u8[256,256] block,* on 2x1",
        Some("pipe:flood"),
        3,
        &dir,
    ));
    // The consumer's meeting file names its ranks' listening addresses.
    let meeting = dir.join("flood.consumer");
    wait_for_file(&meeting).unwrap();
    let desc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meeting).unwrap()).unwrap();
    let addrs: Vec<String> = desc["addrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(addrs.len(), 2, "{desc}");
    // Fill each listener's backlog with idle and garbage connections (those past the
    // backlog give up quickly).
    let mut held = Vec::new();
    for a in &addrs {
        let sa: std::net::SocketAddr = a.parse().unwrap();
        for i in 0..140 {
            if let Ok(mut s) = TcpStream::connect_timeout(&sa, Duration::from_millis(100)) {
                if i % 4 == 0 {
                    let _ = s.write_all(&[0xee; 40]);
                }
                held.push(s);
            }
        }
    }
    assert!(held.len() >= 100, "only {} connections", held.len());
    let producer = Spawned::new(common::pipe_end(
        2,
        "producer",
        "u8[256,256] *,block on 1x2",
        Some("pipe:flood"),
        3,
        &dir,
    ));
    let p = producer.wait(Duration::from_secs(120));
    let c = consumer.wait(Duration::from_secs(120));
    drop(held);
    assert!(
        p.status.success() && c.status.success(),
        "producer {p:?}\nconsumer {c:?}"
    );
    assert!(c.stderr.contains("verified"), "{c:?}");
}

/// A consumer that meets its producer at `tcp:HOST:PORT` answers only a producer's
/// description: a stray idle connection, garbage and a forged consumer's description to
/// its port are dropped unanswered (they learn nothing, not its token) and the meeting
/// goes on; the records then arrive verified.
#[test]
fn garbage_on_a_tcp_pipe_meeting_port_neither_ends_the_meeting_nor_learns_the_token() {
    let dir = common::tempdir("flood");
    let port = common::free_port(7);
    let name = format!("tcp:127.0.0.1:{port}");
    let layout = "u8[256,256] block,* on 2x1";
    let consumer = Spawned::new(common::pipe_end(
        2,
        "consumer",
        layout,
        Some(&name),
        3,
        &dir,
    ));
    // Wait until the consumer listens (an event: a connection), and leave that one idle.
    let mut idle = None;
    for _ in 0..30_000 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            idle = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(idle.is_some(), "the consumer never listened");
    let forged = serde_json::json!({
        "layout": layout, "ranks": 2, "addrs": ["127.0.0.1:9"], "token": "00ff", "pid": 1
    })
    .to_string();
    let mut framed = (forged.len() as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(forged.as_bytes());
    let junk = [&[10u8, 0, 0, 0][..], b"not json!!"].concat();
    for bytes in [junk, framed] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(&bytes).unwrap();
        let mut answer = Vec::new();
        let got = std::io::Read::read_to_end(&mut s, &mut answer);
        // Dropped unanswered: an end of stream, or a reset when the consumer closed with
        // bytes of ours still unread (the kernel's choice, not the consumer's).
        let dropped = match &got {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(
            dropped && answer.is_empty(),
            "a connection that sent {bytes:?} got {:?} ({got:?})",
            String::from_utf8_lossy(&answer)
        );
    }
    drop(idle);
    let producer = Spawned::new(common::pipe_end(
        2,
        "producer",
        layout,
        Some(&name),
        3,
        &dir,
    ));
    let p = producer.wait(Duration::from_secs(120));
    let c = consumer.wait(Duration::from_secs(120));
    assert!(
        p.status.success() && c.status.success(),
        "producer {p:?}\nconsumer {c:?}"
    );
    assert!(c.stderr.contains("verified"), "{c:?}");
}
