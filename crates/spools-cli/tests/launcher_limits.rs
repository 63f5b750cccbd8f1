//! `spools run` under hostile or careless input: absurd rank counts and durations, signals
//! while ranks start, a rank that stays stopped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{spools, wait_bounded};

fn run(args: &[&str], env: &[(&str, &str)]) -> common::Output {
    let mut c = common::grouped(spools());
    c.arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    wait_bounded(c.spawn().unwrap(), Duration::from_secs(60))
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
    let mut child = common::grouped(spools())
        .args([
            "run",
            "-n",
            "3000",
            "--",
            "sh",
            "-c",
            "echo started; exec sleep 60",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first rank's line (an event), then interrupt.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let counter = std::thread::spawn(move || {
        let mut n = 1;
        let mut l = String::new();
        while out.read_line(&mut l).map(|k| k > 0).unwrap_or(false) {
            n += 1;
            l.clear();
        }
        n
    });
    let o = wait_bounded(child, Duration::from_secs(120));
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
    let o = wait_bounded(
        common::grouped(spools())
            .arg("info")
            .env("SPOOLS_LIVENESS_TIMEOUT", "7")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert!(o.stdout.contains("liveness_timeout_s = 7"), "{o:?}");
}

#[test]
fn every_benchmark_refuses_zero_repetitions() {
    for bench in [
        "pingpong", "logp", "rate", "ring", "idle", "coll", "overlap", "matmul",
    ] {
        let o = wait_bounded(
            common::grouped(spools())
                .args(["bench", bench, "--reps", "0"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            Duration::from_secs(60),
        );
        assert_eq!(o.code(), Some(2), "{bench}: {o:?}");
        assert!(
            o.stderr.contains("invalid value '0' for '--reps"),
            "{bench}: {o:?}"
        );
    }
}
