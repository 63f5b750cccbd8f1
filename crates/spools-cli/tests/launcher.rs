//! `spools run`: exit statuses, output forwarding, failures, signals, timeouts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{assert_ok, e, rank_main, spools, wait_bounded, Job};

fn run(args: &[&str]) -> common::Output {
    let mut cmd = common::grouped(spools());
    let child = common::without_ambient_spools_env(&mut cmd)
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
    // Rank 2 fails at once; the others would sleep 600 s, far past the test's bound: the
    // job ends only if the launcher stops them. (`exec`: the rank is the sleep itself. A
    // child of rank 0 would survive the job, holding its output open: rank 0 is killed
    // alone, not as a process group.)
    let o = run(&[
        "-n",
        "4",
        "--",
        "sh",
        "-c",
        "if [ $SPOOLS_RANK = 2 ]; then exit 7; fi; exec sleep 600",
    ]);
    assert_eq!(o.code(), Some(7), "{o:?}");
    assert!(o.stderr.contains("rank 2 exited with status 7"), "{o:?}");
}

#[test]
fn a_rank_killed_by_a_signal_is_named() {
    let o = run(&[
        "-n",
        "3",
        "--",
        "sh",
        "-c",
        "if [ $SPOOLS_RANK = 1 ]; then kill -9 $$; fi; exec sleep 600",
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

/// Whether process `pid` is alive (a zombie is not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Removes, when dropped (also when the test fails), the `/dev/shm` objects of the job
/// it names that the test's ranks made.
struct ShmMarkers(String);

impl Drop for ShmMarkers {
    fn drop(&mut self) {
        for name in common::shm_leftovers(&self.0) {
            if name.contains("-test-") {
                let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(name));
            }
        }
    }
}

/// Starts a 3-rank job whose ranks each leave an object of the job in `/dev/shm` (as a
/// shared-memory segment not unlinked yet would be), write their pid to a file
/// (atomically) and then sleep far longer than any bound of the test; once every rank has
/// said it runs, sends `signal` to the launcher: it must exit with `code`, say which
/// signal stopped it, and leave no rank running and nothing of the job in `/dev/shm`.
fn signal_stops_every_rank(signal: &str, code: i32) {
    let dir = common::tempdir("signal");
    let script = format!(
        "touch /dev/shm/spools-$SPOOLS_JOB-test-$SPOOLS_RANK && echo $SPOOLS_JOB > {d}/job && \
         echo $$ > {d}/pid.$SPOOLS_RANK.tmp && mv {d}/pid.$SPOOLS_RANK.tmp {d}/pid.$SPOOLS_RANK; \
         exec sleep 600",
        d = dir.display()
    );
    let mut cmd = common::grouped(spools());
    common::without_ambient_spools_env(&mut cmd)
        .args(["run", "-n", "3", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let job = common::Spawned::new(cmd.spawn().unwrap());
    // Every rank says it runs (an event), bounded.
    let pids: Vec<i32> = (0..3)
        .map(|r| {
            let f = dir.join(format!("pid.{r}"));
            common::wait_for_file(&f, Duration::from_secs(60)).unwrap();
            std::fs::read_to_string(&f).unwrap().trim().parse().unwrap()
        })
        .collect();
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    let job_id = std::fs::read_to_string(dir.join("job")).unwrap();
    let job_id = job_id.trim();
    let _markers = ShmMarkers(job_id.to_string());
    assert_eq!(common::shm_leftovers(job_id).len(), 3, "{job_id}");
    job.signal(&format!("-{signal}"));
    let o = job.wait(Duration::from_secs(60));
    assert_eq!(o.code(), Some(code), "{signal}: {o:?}");
    assert!(o.stderr.contains(&format!("received SIG{signal}")), "{o:?}");
    // The launcher has returned: its ranks are gone (bounded wait for the kernel to
    // finish with them; they would sleep 600 s otherwise).
    for pid in pids {
        let mut waited = 0;
        while alive(pid) && waited < 3000 {
            std::thread::sleep(Duration::from_millis(10));
            waited += 1;
        }
        assert!(
            !alive(pid),
            "rank process {pid} survived the launcher's SIG{signal}"
        );
    }
    assert_eq!(
        common::shm_leftovers(job_id),
        Vec::<String>::new(),
        "SIG{signal} left the job's objects in /dev/shm"
    );
}

#[test]
fn sigterm_to_the_launcher_stops_every_rank() {
    signal_stops_every_rank("TERM", 128 + 15);
}

#[test]
fn sigint_to_the_launcher_stops_every_rank_with_status_130() {
    signal_stops_every_rank("INT", 130);
}

#[test]
fn sighup_to_the_launcher_stops_every_rank_with_status_129() {
    signal_stops_every_rank("HUP", 129);
}

/// Several ranks fail: the job's status is the first failing rank's. Rank 1 fails at once;
/// the others (rank 3 with another status) fail only after the launcher has reported rank
/// 1's failure (the test reads its report and then writes the file they wait for), so
/// which failure came first is decided by events, not by the scheduler. The grace is long
/// so that they exit by themselves rather than being killed.
#[test]
fn with_several_failing_ranks_the_first_sets_the_status() {
    let dir = common::tempdir("several");
    let go = dir.join("go");
    let script = format!(
        "case $SPOOLS_RANK in 1) exit 5;; 3) s=9;; *) s=11;; esac; \
         while [ ! -e {go} ]; do sleep 0.01; done; exit $s",
        go = go.display()
    );
    let mut cmd = common::grouped(spools());
    common::without_ambient_spools_env(&mut cmd)
        .args(["run", "-n", "4", "--grace", "600", "--timeout", "600", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut job = common::Spawned::new(cmd.spawn().unwrap());
    let mut err = std::io::BufReader::new(job.child().stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(n > 0, "the launcher ended without reporting rank 1: {seen}");
        seen.push_str(&line);
        if line.contains("rank 1 exited with status 5") {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    common::signal_file(&go, b"").unwrap();
    let o = job.wait(Duration::from_secs(60));
    let rest = rest.join().unwrap();
    assert_eq!(o.code(), Some(5), "{seen}{rest}{o:?}");
    // The others' failures came later and are not reported as the job's.
    assert!(
        !rest.contains("rank 3") && !rest.contains("status 9"),
        "{seen}{rest}{o:?}"
    );
}

/// The CPUs of a list such as `0-3,8` (as /proc writes `Cpus_allowed_list`).
fn cpu_list(list: &str) -> Vec<u32> {
    spools_launch::cpus::parse_cpu_list(list).unwrap()
}

/// Each rank's `Cpus_allowed_list`, by rank, from a job of `n` ranks run with `extra`.
fn allowed_cpus(n: usize, extra: &[&str]) -> (Vec<Vec<u32>>, common::Output) {
    let ranks = n.to_string();
    let mut args = vec!["-n", ranks.as_str(), "--tag-output"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--",
        "sh",
        "-c",
        "grep Cpus_allowed_list: /proc/self/status",
    ]);
    let o = run(&args);
    assert_eq!(o.code(), Some(0), "{o:?}");
    let per_rank = (0..n)
        .map(|r| {
            let prefix = format!("[{r}] Cpus_allowed_list:");
            let line = o
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()));
            cpu_list(line.unwrap_or_else(|| panic!("rank {r}: {o:?}")))
        })
        .collect();
    (per_rank, o)
}

#[test]
fn bind_core_gives_each_rank_cpus_of_its_own_and_oversubscribed_ranks_none() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    // The launcher inherits this process's mask, and binds within it.
    let mine = cpu_list(line);
    let n = mine.len().min(4);
    let (per_rank, _) = allowed_cpus(n, &["--bind", "core"]);
    let mut seen = std::collections::BTreeSet::new();
    for (r, cpus) in per_rank.iter().enumerate() {
        assert!(!cpus.is_empty(), "rank {r} may run nowhere");
        for c in cpus {
            assert!(mine.contains(c), "rank {r} on CPU {c}, outside {mine:?}");
            assert!(seen.insert(*c), "CPU {c} given to two ranks: {per_rank:?}");
        }
    }
    if n > 1 {
        assert!(per_rank[0] != mine, "rank 0 not bound: {per_rank:?}");
    }
    // Without --bind, and with more ranks than CPUs, every rank may run anywhere.
    let (free, _) = allowed_cpus(2, &[]);
    assert!(free.iter().all(|c| *c == mine), "{free:?} vs {mine:?}");
    // (Not on a host of many CPUs: that many shells are not worth it.)
    if mine.len() <= 16 {
        let (over, o) = allowed_cpus(mine.len() + 1, &["--bind", "core"]);
        assert!(over.iter().all(|c| *c == mine), "{over:?} vs {mine:?}");
        assert!(o.stderr.contains("ranks not bound"), "{o:?}");
    }
}

/// A rank of a job bound with `--bind core`: looks at the machine (which records the
/// CPU it runs on), meets the other (so both looked), and looks again: ranks bound to
/// CPUs of their own do not compete, so its waits poll instead of yielding, although the
/// rank itself may run on one CPU only. (They yielded, as if oversubscribed: 2 ranks on
/// the 1 CPU of its mask.)
fn bound_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let _ = w.worker().oversubscribed();
    e(w.barrier())?;
    let crowded = w.worker().oversubscribed();
    println!("rank {} bound, crowded {crowded}", w.rank());
    e(w.barrier())?;
    e(w.finalize())
}

#[test]
fn ranks_bound_to_cpus_of_their_own_do_not_yield() {
    rank_main(|_| bound_role());
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    if cpu_list(line).len() < 2 {
        eprintln!("skipped: this process may run on one CPU only");
        return;
    }
    let o = Job::new(2, "ranks_bound_to_cpus_of_their_own_do_not_yield")
        .via_cli(spools())
        .cli_args(&["--bind", "core"])
        .run();
    assert_ok(&o);
    for r in 0..2 {
        assert!(
            o.stdout
                .contains(&format!("rank {r} bound, crowded false\n")),
            "rank {r}: {}\n{}",
            o.stdout,
            o.stderr
        );
    }
}
