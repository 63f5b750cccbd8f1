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
    let tcp = w.comm().bootstrap().endpoints()[me as usize].tcp.clone();
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

/// Opens `IDLE` idle and `GARBAGE` garbage-sending connections to `addr`.
fn flood(addr: &str) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for i in 0..IDLE + GARBAGE {
        let Ok(mut s) = TcpStream::connect(addr) else {
            continue;
        };
        if i >= IDLE {
            let junk: Vec<u8> = (0..512u32).map(|k| (k * 131 + i as u32) as u8).collect();
            let _ = s.write_all(&junk);
        }
        held.push(s);
    }
    held
}

fn spawn_rank(rank: u32, port: u16, dir: &Path) -> Child {
    let secret = spools_proto::auth::Secret::from_bytes([9; 16]).to_hex();
    common::foreign_rank(
        "floods_of_connections_do_not_stop_a_job",
        rank,
        2,
        &[
            ("SPOOLS_BOOTSTRAP", format!("127.0.0.1:{port}")),
            ("SPOOLS_SECRET", secret),
            ("SPOOLS_TRANSPORT", "tcp".into()),
            ("FLOOD_DIR", dir.display().to_string()),
        ],
    )
}

#[test]
fn floods_of_connections_do_not_stop_a_job() {
    rank_main(|_| role(PathBuf::from(std::env::var("FLOOD_DIR").unwrap())));
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rank0 = spawn_rank(0, port, dir.path());
    let pid0 = rank0.id();
    let rdv = format!("127.0.0.1:{port}");
    // Rank 0 hosts the rendezvous: wait until it listens (an event: a connection).
    let mut up = false;
    for _ in 0..30_000 {
        if TcpStream::connect(&rdv).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(up, "rank 0 never listened");
    let base = threads(pid0);
    let held_rdv = flood(&rdv);
    assert!(held_rdv.len() > IDLE / 2, "the flood could not connect");
    let during = threads(pid0);
    assert!(
        during <= base + spools_boot::admission::MAX_PENDING + 4,
        "rank 0 runs {during} threads during a flood of {} connections (before: {base})",
        held_rdv.len()
    );
    // Rank 1 joins while the flood holds its connections.
    let rank1 = spawn_rank(1, port, dir.path());
    for r in 0..2 {
        wait_for_file(&dir.path().join(format!("tcp.{r}"))).unwrap();
    }
    let tcp0 = std::fs::read_to_string(dir.path().join("tcp.0")).unwrap();
    let held_tcp = flood(&tcp0);
    let during = threads(pid0);
    assert!(
        during <= base + 2 * spools_boot::admission::MAX_PENDING + 16,
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
