//! How a blocked rank waits: after polling for its hold time it sleeps, so that a rank
//! blocked in a receive on an otherwise idle machine uses almost no CPU (with and without
//! the progress thread, and at thread level single when `scripts/test.sh` runs it so).
//! Real processes over shared memory.
//!
//! What is asserted is what the design fixes, not how fast this machine runs a debug
//! build: a sleeping thread wakes once per nap (50 ms) to look at the job's health, so the
//! rank's threads go to sleep (voluntary context switches) a bounded number of times per
//! second, where a polling rank would never sleep or would sleep a thousand times a
//! second; and its CPU is a small fraction of a polling rank's whole CPU (the cost of each
//! wake, about 0.3 ms in a debug build here, grows on a loaded machine: 1 % was once
//! exceeded in CI at 1.4 %).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use spools_testkit::{assert_ok, e, launch, rank_main};

mod common;
use common::check;

/// Most times a second the threads of a blocked rank may go to sleep: twenty per
/// sleeping thread (one per 50 ms nap), two sleeping threads with the progress thread,
/// and room for the wake-ups of the job's own bookkeeping. A wait that slept 1 ms at a
/// time would sleep about 1000 times a second.
const MAX_SLEEPS_PER_S: f64 = 200.0;

/// Most of a CPU a blocked rank may use, in percent: a polling rank uses all of one.
const MAX_CPU_PCT: f64 = 10.0;

/// Per-thread counters of process `pid`, summed over its threads: CPU time so far in
/// nanoseconds (the first field of each thread's `schedstat`: nanosecond resolution,
/// where `/proc/<pid>/stat` counts 10 ms ticks), and voluntary context switches (each a
/// time a thread went to sleep).
fn counters(pid: u32) -> Result<(u64, u64), String> {
    let (mut cpu, mut sleeps) = (0, 0);
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|x| x.to_string())?;
    for t in tasks {
        let dir = t.map_err(|x| x.to_string())?.path();
        // A thread that ended meanwhile has no files any more: it counts no longer.
        let (Ok(stat), Ok(status)) = (
            std::fs::read_to_string(dir.join("schedstat")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        let first = stat.split_whitespace().next().unwrap_or("0");
        cpu += first.parse::<u64>().map_err(|x| format!("{dir:?}: {x}"))?;
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .ok_or_else(|| format!("{dir:?}/status: no voluntary_ctxt_switches"))?;
        sleeps += line
            .trim()
            .parse::<u64>()
            .map_err(|x| format!("{dir:?}/status: {x}"))?;
    }
    Ok((cpu, sleeps))
}

/// Rank 1 sends its process id and blocks in a receive from rank 0, on its one thread;
/// rank 0 (same host) lets a second pass, measures rank 1's CPU and sleeps over the next
/// second from `/proc`, then sends the message rank 1 waits for.
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
        let (t0, (c0, s0)) = (Instant::now(), counters(pid)?);
        std::thread::sleep(Duration::from_secs(1));
        let (c1, s1) = counters(pid)?;
        // Over the time that passed, which a loaded machine stretches past the second.
        let secs = t0.elapsed().as_secs_f64();
        let pct = (c1 - c0) as f64 / 1e9 / secs * 100.0;
        let rate = (s1 - s0) as f64 / secs;
        e(w.send(&pct.to_le_bytes(), 1, 1))?;
        check(s1 > s0, || {
            format!("a rank blocked in a receive never went to sleep over {secs:.2} s")
        })?;
        check(rate <= MAX_SLEEPS_PER_S, || {
            format!(
                "a rank blocked in a receive went to sleep {rate:.0} times a second (at most {MAX_SLEEPS_PER_S})"
            )
        })?;
        check(pct < MAX_CPU_PCT, || {
            format!(
                "a rank blocked in a receive used {pct:.3} % of a CPU after a second (less than {MAX_CPU_PCT} %)"
            )
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
