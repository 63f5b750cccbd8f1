//! `spools run` under hostile or careless input: absurd rank counts and durations, signals
//! while ranks start, a rank that stays stopped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{spools, wait_bounded};

fn run(args: &[&str], env: &[(&str, &str)]) -> common::Output {
    let args: Vec<&str> = std::iter::once("run").chain(args.iter().copied()).collect();
    common::spools_command(&args, env, Duration::from_secs(60))
}

#[test]
fn absurd_durations_are_refused_not_a_panic() {
    for flag in ["--timeout", "--grace"] {
        for v in ["1e20", "-1", "NaN", "inf"] {
            let o = run(&[flag, v, "-n", "1", "--", "true"], &[]);
            assert_eq!(o.code(), Some(2), "{flag} {v}: {o:?}");
            assert!(o.stderr.contains(flag), "{flag} {v}: {o:?}");
            assert!(!o.stderr.contains("panicked"), "{flag} {v}: {o:?}");
        }
    }
}

#[test]
fn a_huge_rank_count_is_refused_at_once() {
    let o = run(&["-n", "100000", "--", "true"], &[]);
    assert_eq!(o.code(), Some(1), "{o:?}");
    assert!(o.stderr.contains("cannot launch 100000 ranks"), "{o:?}");
}

/// SIGINT arrives while the launcher is still starting 3000 ranks: it stops starting
/// more, kills those it started and exits 130. (Before, it started every rank first.)
#[test]
fn sigint_while_ranks_start_stops_the_launcher() {
    let mut cmd = common::grouped(spools());
    common::without_ambient_spools_env(&mut cmd)
        .args([
            "run",
            "-n",
            "3000",
            "--",
            "sh",
            "-c",
            "echo started; exec sleep 600",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Stopped with its ranks if the test fails before waiting.
    let mut child = common::Spawned::new(cmd.spawn().unwrap());
    // Count the ranks' lines on a thread; the first one (an event) says ranks are starting.
    let out = BufReader::new(child.child().stdout.take().unwrap());
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let counter = std::thread::spawn(move || {
        let mut n = 0;
        for l in out.lines() {
            let Ok(l) = l else { break };
            if n == 0 {
                let _ = first_tx.send(l);
            }
            n += 1;
        }
        n
    });
    let first = first_rx.recv_timeout(Duration::from_secs(60));
    assert_eq!(first.as_deref(), Ok("started"));
    child.signal("-INT");
    let o = child.wait(Duration::from_secs(120));
    let started = counter.join().unwrap();
    assert_eq!(o.code(), Some(130), "{o:?}");
    assert!(
        o.stderr.contains("stopped by SIGINT while starting rank"),
        "{o:?}"
    );
    assert!(started < 3000, "all {started} ranks started despite SIGINT");
}

/// With SPOOLS_LIVENESS_TIMEOUT, a rank that stays stopped fails the job; without it,
/// the job waits (the default: a debugger may be attached).
#[test]
fn a_stopped_rank_fails_the_job_past_the_liveness_timeout() {
    let script = "if [ $SPOOLS_RANK = 1 ]; then kill -STOP $$; fi; exec sleep 60";
    let o = run(
        &["-n", "2", "--", "sh", "-c", script],
        &[("SPOOLS_LIVENESS_TIMEOUT", "1")],
    );
    assert_eq!(o.code(), Some(1), "{o:?}");
    assert!(
        o.stderr
            .contains("rank 1 stayed stopped (SIGSTOP or a debugger)"),
        "{o:?}"
    );
}

#[test]
fn spools_info_prints_the_liveness_timeout() {
    let mut cmd = common::grouped(spools());
    common::without_ambient_spools_env(&mut cmd)
        .arg("info")
        .env("SPOOLS_LIVENESS_TIMEOUT", "7")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = wait_bounded(cmd.spawn().unwrap(), Duration::from_secs(60));
    common::assert_ok(&o);
    assert!(o.stdout.contains("liveness_timeout_s = 7"), "{o:?}");
}

#[test]
fn every_benchmark_refuses_zero_repetitions() {
    for bench in [
        "pingpong", "logp", "rate", "ring", "idle", "coll", "overlap", "matmul",
    ] {
        let mut cmd = common::grouped(spools());
        common::without_ambient_spools_env(&mut cmd)
            .args(["bench", bench, "--reps", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let o = wait_bounded(cmd.spawn().unwrap(), Duration::from_secs(60));
        assert_eq!(o.code(), Some(2), "{bench}: {o:?}");
        assert!(
            o.stderr.contains("invalid value '0' for '--reps"),
            "{bench}: {o:?}"
        );
    }
}
