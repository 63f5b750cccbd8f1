//! Floods of connections on every listening port of a job: hundreds of idle connections
//! and connections that send garbage, held open on the rendezvous (hosted by rank 0) while
//! a rank joins, and on a rank's TCP listener while the ranks connect to each other. The
//! ranks' threads stay bounded, and the job still joins, communicates and ends cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use common::{e, rank_main, wait_bounded};

const IDLE: usize = 300;
const GARBAGE: usize = 50;
/// Fewest connections that make a flood (well past `admission::MAX_PENDING`).
const MIN_FLOOD: usize = 2 * spools_boot::admission::MAX_PENDING;
/// Threads a rank may start besides its handshakes (its own, the rendezvous, the fabric).
const OWN_THREADS: usize = 16;

/// Waits (bounded, polling for an event) until `path` exists.
fn wait_for_file(path: &Path) -> Result<(), String> {
    for _ in 0..30_000 {
        if path.exists() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(format!("{} never appeared", path.display()))
}

fn role(dir: PathBuf) -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    let tcp = w.worker().bootstrap().endpoints()[me as usize].tcp.clone();
    let tmp = dir.join(format!("tcp.{me}.tmp"));
    std::fs::write(&tmp, &tcp).map_err(|x| x.to_string())?;
    std::fs::rename(&tmp, dir.join(format!("tcp.{me}"))).map_err(|x| x.to_string())?;
    wait_for_file(&dir.join("flooded"))?;
    // The first messages open the ranks' connections, through the flooded listeners.
    let peer = 1 - me;
    let out: Vec<u64> = (0..1000).map(|i| i * 3 + u64::from(me)).collect();
    let mut back = vec![0u64; 1000];
    if me == 1 {
        e(w.send(&out, peer, 5))?;
        e(w.recv(&mut back, peer, 5))?;
    } else {
        e(w.recv(&mut back, peer, 5))?;
        e(w.send(&out, peer, 5))?;
    }
    let want: Vec<u64> = (0..1000).map(|i| i * 3 + u64::from(peer)).collect();
    if back != want {
        return Err("wrong data".into());
    }
    println!("rank {me} exchanged through the flood");
    e(w.finalize())
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Opens `IDLE` idle and `GARBAGE` garbage-sending connections to `addr` (connections the
/// listener cuts off count too: they were made).
fn flood(addr: &str) -> Vec<TcpStream> {
    let mut held = Vec::new();
    let mut failed = Vec::new();
    for i in 0..IDLE + GARBAGE {
        let mut s = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                failed.push(e.kind());
                continue;
            }
        };
        if i >= IDLE {
            let junk: Vec<u8> = (0..512u32).map(|k| (k * 131 + i as u32) as u8).collect();
            let _ = s.write_all(&junk);
        }
        held.push(s);
    }
    // A starved listener's backlog overflows and the kernel refuses some: still a flood,
    // as long as it holds more connections than a listener may handshake at once (so
    // that a thread per connection would show).
    assert!(
        held.len() >= MIN_FLOOD,
        "only {} of {} connections to {addr}; failures: {failed:?}",
        held.len(),
        IDLE + GARBAGE
    );
    held
}

/// Rank `rank` of 2, meeting through a rendezvous file in `dir` that rank 0 writes (with
/// the address it listens at: no port is chosen in advance, so none can be taken).
fn spawn_rank(rank: u32, dir: &Path) -> Child {
    common::foreign_rank(
        "floods_of_connections_do_not_stop_a_job",
        rank,
        2,
        &[
            (
                "SPOOLS_BOOTSTRAP",
                format!("file:{}", dir.join("rdv").display()),
            ),
            ("SPOOLS_BOOTSTRAP_IP", "127.0.0.1".into()),
            ("SPOOLS_TRANSPORT", "tcp".into()),
            ("FLOOD_DIR", dir.display().to_string()),
        ],
    )
}

#[test]
fn floods_of_connections_do_not_stop_a_job() {
    rank_main(|_| role(PathBuf::from(std::env::var("FLOOD_DIR").unwrap())));
    let dir = tempfile::tempdir().unwrap();
    let rank0 = spawn_rank(0, dir.path());
    let pid0 = rank0.id();
    // Rank 0 hosts the rendezvous and writes its address (an event: the file appears).
    wait_for_file(&dir.path().join("rdv")).unwrap();
    let text = std::fs::read_to_string(dir.path().join("rdv")).unwrap();
    let rdv = text.lines().nth(1).unwrap().to_string();
    let base = threads(pid0);
    let held_rdv = flood(&rdv);
    let during = threads(pid0);
    assert!(
        during <= base + spools_boot::admission::MAX_PENDING + OWN_THREADS,
        "rank 0 runs {during} threads during a flood of {} connections (before: {base})",
        held_rdv.len()
    );
    // Rank 1 joins while the flood holds its connections.
    let rank1 = spawn_rank(1, dir.path());
    let (rank0, rank1) =
        match (0..2).try_for_each(|r| wait_for_file(&dir.path().join(format!("tcp.{r}")))) {
            Ok(()) => (rank0, rank1),
            Err(why) => {
                // Stop both (their process groups) and show what they said.
                for c in [&rank0, &rank1] {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", "--", &format!("-{}", c.id())])
                        .status();
                }
                let o0 = wait_bounded(rank0, Duration::from_secs(30));
                let o1 = wait_bounded(rank1, Duration::from_secs(30));
                panic!("{why}\nrank 0: {o0:?}\nrank 1: {o1:?}");
            }
        };
    let tcp0 = std::fs::read_to_string(dir.path().join("tcp.0")).unwrap();
    let held_tcp = flood(&tcp0);
    let during = threads(pid0);
    assert!(
        during <= base + 2 * spools_boot::admission::MAX_PENDING + OWN_THREADS,
        "rank 0 runs {during} threads during floods of both ports (before: {base})"
    );
    std::fs::write(dir.path().join("flooded"), b"").unwrap();
    let o0 = wait_bounded(rank0, Duration::from_secs(90));
    let o1 = wait_bounded(rank1, Duration::from_secs(90));
    drop((held_rdv, held_tcp));
    for (r, o) in [(0, &o0), (1, &o1)] {
        assert_eq!(o.code(), Some(0), "rank {r}: {o:?}");
        assert!(
            o.stdout
                .contains(&format!("rank {r} exchanged through the flood")),
            "rank {r}: {o:?}"
        );
    }
}

/// The consumer ranks of a parallel pipe listen for the producer's ranks: idle and garbage
/// connections held on those ports while the producer connects neither stall the
/// consumer nor keep the producer out; the records arrive verified.
#[test]
fn a_flood_on_a_pipe_consumers_ports_does_not_stop_the_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let consumer = common::pipe_end(
        2,
        "consumer",
        "u8[256,256] block,* on 2x1",
        Some("pipe:flood"),
        3,
        dir.path(),
    );
    // The consumer's meeting file names its ranks' listening addresses.
    let meeting = dir.path().join("flood.consumer");
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
    let producer = common::pipe_end(
        2,
        "producer",
        "u8[256,256] *,block on 1x2",
        Some("pipe:flood"),
        3,
        dir.path(),
    );
    let p = wait_bounded(producer, Duration::from_secs(120));
    let c = wait_bounded(consumer, Duration::from_secs(120));
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
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port(7);
    let name = format!("tcp:127.0.0.1:{port}");
    let layout = "u8[256,256] block,* on 2x1";
    let consumer = common::pipe_end(2, "consumer", layout, Some(&name), 3, dir.path());
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
        assert!(
            got.is_ok() && answer.is_empty(),
            "a connection that sent {bytes:?} got {:?} ({got:?})",
            String::from_utf8_lossy(&answer)
        );
    }
    drop(idle);
    let producer = common::pipe_end(2, "producer", layout, Some(&name), 3, dir.path());
    let p = wait_bounded(producer, Duration::from_secs(120));
    let c = wait_bounded(consumer, Duration::from_secs(120));
    assert!(
        p.status.success() && c.status.success(),
        "producer {p:?}\nconsumer {c:?}"
    );
    assert!(c.stderr.contains("verified"), "{c:?}");
}
