//! `spools run`: exit statuses, output forwarding, failures, signals, timeouts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{spools, wait_bounded};

fn run(args: &[&str]) -> common::Output {
    let child = common::grouped(spools())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, Duration::from_secs(60))
}

#[test]
fn all_ranks_succeed_and_output_is_tagged() {
    let o = run(&[
        "-n",
        "4",
        "--tag-output",
        "--",
        "sh",
        "-c",
        "echo hello from $SPOOLS_RANK of $SPOOLS_SIZE; echo err $SPOOLS_RANK >&2",
    ]);
    assert_eq!(o.code(), Some(0), "{o:?}");
    for r in 0..4 {
        assert!(
            o.stdout.contains(&format!("[{r}] hello from {r} of 4\n")),
            "{o:?}"
        );
        assert!(o.stderr.contains(&format!("[{r}] err {r}\n")), "{o:?}");
    }
}

#[test]
fn untagged_output_passes_through() {
    let o = run(&["-n", "2", "--", "sh", "-c", "echo rank$SPOOLS_RANK"]);
    assert_eq!(o.code(), Some(0));
    assert!(
        o.stdout.contains("rank0\n") && o.stdout.contains("rank1\n"),
        "{o:?}"
    );
    assert!(!o.stdout.contains('['));
}

#[test]
fn first_failing_rank_sets_the_status_and_the_job_stops() {
    // Rank 2 fails at once; the others would sleep 30 s and then print.
    let o = run(&[
        "-n",
        "4",
        "--",
        "sh",
        "-c",
        "if [ $SPOOLS_RANK = 2 ]; then exit 7; fi; sleep 30; echo survived",
    ]);
    assert_eq!(o.code(), Some(7), "{o:?}");
    assert!(o.stderr.contains("rank 2 exited with status 7"), "{o:?}");
    assert!(!o.stdout.contains("survived"), "{o:?}");
}

#[test]
fn a_rank_killed_by_a_signal_is_named() {
    let o = run(&[
        "-n",
        "3",
        "--",
        "sh",
        "-c",
        "if [ $SPOOLS_RANK = 1 ]; then kill -9 $$; fi; sleep 30",
    ]);
    assert_eq!(o.code(), Some(128 + 9), "{o:?}");
    assert!(
        o.stderr.contains("rank 1 was killed by signal 9 (SIGKILL)"),
        "{o:?}"
    );
}

#[test]
fn timeout_stops_the_job() {
    let o = run(&["-n", "2", "--timeout", "0.5", "--", "sleep", "30"]);
    assert_eq!(o.code(), Some(124), "{o:?}");
    assert!(o.stderr.contains("timeout"), "{o:?}");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let o = run(&["-n", "2", "--", "/nonexistent/program"]);
    assert_eq!(o.code(), Some(127), "{o:?}");
    assert!(
        o.stderr.contains("cannot start") && o.stderr.contains("/nonexistent/program"),
        "{o:?}"
    );
}

#[test]
fn zero_ranks_is_refused() {
    let o = run(&["-n", "0", "--", "true"]);
    assert_ne!(o.code(), Some(0), "{o:?}");
    assert!(o.stderr.contains("cannot launch 0 ranks"), "{o:?}");
}

#[test]
fn sigterm_to_the_launcher_stops_every_rank() {
    let dir = common::tempdir("sigterm");
    let script = format!(
        "echo $$ > {}/pid.$SPOOLS_RANK; exec sleep 30",
        dir.display()
    );
    let child = common::grouped(spools())
        .args(["run", "-n", "3", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    // Wait (bounded) until every rank has written its pid.
    let mut pids = Vec::new();
    for _ in 0..1000 {
        pids = (0..3)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("pid.{r}"))).ok())
            .filter_map(|s| s.trim().parse::<i32>().ok())
            .collect();
        if pids.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(pids.len(), 3, "ranks did not start");
    // SAFETY-free: kill(2) through the shell's kill to avoid unsafe in tests.
    Command::new("kill")
        .args(["-TERM", &launcher.to_string()])
        .status()
        .unwrap();
    let o = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(o.code(), Some(128 + 15), "{o:?}");
    assert!(o.stderr.contains("received SIGTERM"), "{o:?}");
    for pid in pids {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        assert!(!alive, "rank process {pid} survived the launcher's SIGTERM");
    }
}
