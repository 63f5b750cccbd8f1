//! Floods of connections on every listening port of a job: hundreds of idle connections
//! and connections that send garbage, held open on the rendezvous (hosted by rank 0) while
//! a rank joins, and on a rank's TCP listener while the ranks connect to each other. The
//! ranks' threads stay bounded, and the job still joins, communicates and ends cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spools_testkit::{e, rank_main, Spawned};

const IDLE: usize = 300;
const GARBAGE: usize = 50;
/// Fewest connections that make a flood (well past `admission::MAX_PENDING`).
const MIN_FLOOD: usize = 2 * spools_boot::admission::MAX_PENDING;
/// Threads a rank may start besides its handshakes (its own, the rendezvous, the fabric).
const OWN_THREADS: usize = 16;

/// Waits (bounded, polling for an event) until `path` exists.
fn wait_for_file(path: &Path) -> Result<(), String> {
    spools_testkit::wait_for_file(path, Duration::from_secs(60))
}

fn role(dir: PathBuf) -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    let tcp = w.worker().bootstrap().endpoints()[me as usize].tcp.clone();
    spools_testkit::signal_file(&dir.join(format!("tcp.{me}")), tcp.as_bytes())?;
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
/// the address it listens at: no port is chosen in advance, so none can be taken); stopped
/// when dropped unless waited for.
fn spawn_rank(rank: u32, dir: &Path) -> Spawned {
    Spawned::new(spools_testkit::foreign_rank(
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
    ))
}

#[test]
fn floods_of_connections_do_not_stop_a_job() {
    rank_main(|_| role(PathBuf::from(std::env::var("FLOOD_DIR").unwrap())));
    let dir = spools_testkit::tempdir("flood");
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
                let o0 = rank0.wait(Duration::from_secs(30));
                let o1 = rank1.wait(Duration::from_secs(30));
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
    spools_testkit::signal_file(&dir.path().join("flooded"), b"").unwrap();
    let o0 = rank0.wait(Duration::from_secs(90));
    let o1 = rank1.wait(Duration::from_secs(90));
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
