//! The stop sequence for a process tree, shared by [`Spawned`](crate::Spawned) and
//! [`wait_bounded`](crate::wait_bounded): SIGTERM to its group, then SIGKILL to whatever is
//! left and the shared memory of its jobs removed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopped launcher gets after SIGTERM to stop its ranks and remove the job's
/// shared memory before everything left is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// Sends `signal` (a name like `-TERM`) to the process group `pgid`.
pub(crate) fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Sends `signal` to process `pid` (not its group).
pub(crate) fn signal_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The job ids (`SPOOLS_JOB`) in the environments of `pids`.
fn job_ids(pids: &[u32]) -> Vec<u64> {
    let mut jobs: Vec<u64> = pids
        .iter()
        .filter_map(|p| std::fs::read(format!("/proc/{p}/environ")).ok())
        .filter_map(|env| {
            env.split(|&b| b == 0)
                .find_map(|kv| kv.strip_prefix(b"SPOOLS_JOB="))
                .and_then(|v| u64::from_str_radix(std::str::from_utf8(v).ok()?, 16).ok())
        })
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    jobs
}

/// Stops `child` (started in a process group of its own, see [`grouped`](crate::grouped))
/// and everything it started: SIGTERM to its group first, so that a launcher stops its
/// ranks and removes the job's shared memory by itself; then, for whatever is left after
/// [`STOP_GRACE`] (a launcher that did not end), SIGKILL to the group and to every
/// descendant (ranks run in process groups of their own), and the `/dev/shm` objects of
/// the jobs they belonged to are removed. Returns how `child` ended.
pub(crate) fn stop_tree(child: &mut Child) -> Option<std::process::ExitStatus> {
    let pid = child.id();
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    signal_group(pid, "-TERM");
    let asked = Instant::now();
    while asked.elapsed() < STOP_GRACE {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The launcher did not end: kill it and what it started, and clean up after them.
    let left = spools_launch::descendants(pid);
    let jobs = job_ids(&left);
    signal_group(pid, "-KILL");
    for p in &left {
        signal_pid(*p, "-KILL");
    }
    let _ = child.kill();
    let status = child.wait().ok();
    for job in jobs {
        spools_launch::clean_shm(job);
    }
    status
}
