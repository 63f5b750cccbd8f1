//! Stopping what a test started, whatever happens: [`Spawned`] (a child process killed
//! with its whole process tree when dropped unless waited for) and the stop sequence
//! [`wait_bounded`](crate::wait_bounded) uses at its limit.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::wait::{wait_bounded, Output};

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
fn signal_pid(pid: u32, signal: &str) {
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
    let left = spools_boot::launcher::descendants(pid);
    let jobs = job_ids(&left);
    signal_group(pid, "-KILL");
    for p in &left {
        signal_pid(*p, "-KILL");
    }
    let _ = child.kill();
    let status = child.wait().ok();
    for job in jobs {
        spools_boot::launcher::clean_shm(job);
    }
    status
}

/// A child process (a job's launcher, a rank, a pipe end) that is stopped with everything
/// it started when dropped, unless it was waited for with [`Spawned::wait`]: a test that
/// panics before waiting leaves nothing running. The child must have been started in a
/// process group of its own ([`grouped`](crate::grouped); [`Job::start`](crate::Job::start),
/// [`foreign_rank`](crate::foreign_rank) and [`pipe_end`](crate::pipe_end) do so).
#[derive(Debug)]
pub struct Spawned(Option<Child>);

impl Spawned {
    /// Guards `child`.
    pub fn new(child: Child) -> Spawned {
        Spawned(Some(child))
    }

    /// The child's process id (also its process group's).
    ///
    /// # Panics
    /// Never: the child is there until waited for, which consumes the guard.
    #[allow(clippy::expect_used)]
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("a child").id()
    }

    /// The child (to take its output pipes, say).
    ///
    /// # Panics
    /// Never (see [`Spawned::id`]).
    #[allow(clippy::expect_used)]
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }

    /// Sends `signal` (a name, like `"-INT"`) to the child alone.
    pub fn signal(&self, signal: &str) {
        signal_pid(self.id(), signal);
    }

    /// Waits for the child at most `limit`, as [`wait_bounded`] does (which stops it with
    /// everything it started at the limit and panics).
    ///
    /// # Panics
    /// At the limit (see [`wait_bounded`]).
    #[allow(clippy::expect_used)]
    pub fn wait(mut self, limit: Duration) -> Output {
        wait_bounded(self.0.take().expect("a child"), limit)
    }
}

impl From<Child> for Spawned {
    fn from(child: Child) -> Spawned {
        Spawned::new(child)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            stop_tree(&mut c);
        }
    }
}
