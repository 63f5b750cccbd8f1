//! How a blocked rank waits: after polling for its hold time it sleeps, so that a rank
//! blocked in a receive on an otherwise idle machine uses almost no CPU (with and without
//! the progress thread, and at thread level single when `scripts/test.sh` runs it so).
//! Real processes over shared memory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use spools_testkit::{assert_ok, e, launch, rank_main};

mod common;
use common::check;

/// CPU time of every thread of process `pid` so far, in nanoseconds (the first field of
/// each thread's `schedstat`: nanosecond resolution, where `/proc/<pid>/stat` counts
/// 10 ms ticks).
fn cpu_ns(pid: u32) -> Result<u64, String> {
    let mut total = 0;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|x| x.to_string())?;
    for t in tasks {
        let path = t.map_err(|x| x.to_string())?.path().join("schedstat");
        // A thread that ended meanwhile has no file any more: it counts no longer.
        let Ok(s) = std::fs::read_to_string(&path) else {
            continue;
        };
        let first = s.split_whitespace().next().unwrap_or("0");
        total += first.parse::<u64>().map_err(|x| format!("{path:?}: {x}"))?;
    }
    Ok(total)
}

/// Rank 1 sends its process id and blocks in a receive from rank 0, on its one thread;
/// rank 0 (same host) lets a second pass, measures rank 1's CPU over the next second from
/// `/proc`, then sends the message rank 1 waits for.
fn idle_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 1 {
        e(w.send(&std::process::id().to_le_bytes(), 0, 2))?;
        let mut release = [0u8; 8];
        e(w.recv(&mut release, 0, 1))?;
        let pct = f64::from_le_bytes(release);
        println!("rank 1: {pct:.3} % of a CPU while blocked");
    } else {
        let mut b = [0u8; 4];
        e(w.recv(&mut b, 1, 2))?;
        let pid = u32::from_le_bytes(b);
        // The windows are what is measured (a rank blocked for a second, over the next
        // second), not a wait for another process.
        std::thread::sleep(Duration::from_secs(1));
        let (t0, c0) = (Instant::now(), cpu_ns(pid)?);
        std::thread::sleep(Duration::from_secs(1));
        // Over the time that passed, which a loaded machine stretches past the second.
        let pct = (cpu_ns(pid)? - c0) as f64 / t0.elapsed().as_nanos() as f64 * 100.0;
        e(w.send(&pct.to_le_bytes(), 1, 1))?;
        check(pct < 1.0, || {
            format!("a rank blocked in a receive used {pct:.3} % of a CPU after a second")
        })?;
    }
    e(w.finalize())
}

#[test]
fn a_blocked_receive_sleeps() {
    rank_main(|_| idle_role());
    for env in [&[][..], &[("SPOOLS_PROGRESS_THREAD", "1")][..]] {
        let o = launch(2, "a_blocked_receive_sleeps", "idle", env);
        assert_ok(&o);
        assert!(
            o.stdout.contains("% of a CPU while blocked"),
            "{}",
            o.stdout
        );
    }
}
