//! Bounded waits: for a process (capturing its output), for a file another process
//! writes, and writing such a file atomically.

use std::io::Read;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use crate::stop::stop_tree;

/// What a finished process or job produced.
#[derive(Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error.
    pub stderr: String,
}

impl Output {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The launcher's own report lines (those of standard error that start with
    /// `spools run: `), in order.
    pub fn reports(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("spools run: "))
            .collect()
    }
}

/// Waits for `child` (started in a process group of its own, see [`grouped`](crate::grouped)) at most
/// `limit`, capturing its piped output; at the limit stops it with everything it started
/// (SIGTERM to its group, which makes a launcher stop its ranks and remove the job's shared
/// memory; after [`STOP_GRACE`](crate::STOP_GRACE), SIGKILL to whatever is left, the
/// ranks included, and their jobs' `/dev/shm` objects removed) and panics with what it
/// printed.
///
/// # Panics
/// At the limit, or when the process cannot be waited for.
#[allow(clippy::panic, clippy::expect_used)]
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let (t_out, t_err) = (reader(child.stdout.take()), reader(child.stderr.take()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let s = stop_tree(&mut child);
            let stdout = collect(&t_out, Duration::from_secs(5));
            let stderr = collect(&t_err, Duration::from_secs(5));
            panic!("process did not end within {limit:?}; stopped it.\nstdout:\n{stdout}\nstderr:\n{stderr}\nstatus {s:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A process the child left behind may still hold its pipes: wait for their end within
    // what is left of the limit, then take what was read.
    let left = limit
        .saturating_sub(start.elapsed())
        .max(Duration::from_secs(5));
    Output {
        status,
        stdout: collect(&t_out, left),
        stderr: collect(&t_err, left),
    }
}

/// Reads a pipe to its end on a thread, sending what it read.
fn reader(pipe: Option<impl Read + Send + 'static>) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        let _ = tx.send(String::from_utf8_lossy(&s).into_owned());
    });
    rx
}

/// What a [`reader`] read, waiting at most `limit` for the pipe's end.
fn collect(rx: &Receiver<String>, limit: Duration) -> String {
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        "(the output pipe was still open: a process the job left behind holds it)".into()
    })
}

/// Waits until `path` exists (an event another process controls), polling; the limit is a
/// safety net, not a verdict.
///
/// # Errors
/// When `path` did not appear within `limit`.
pub fn wait_for_file(path: &Path, limit: Duration) -> Result<(), String> {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() > limit {
            return Err(format!(
                "{} never appeared (waited {limit:?})",
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Waits until `path` exists ([`wait_for_file`]), then kills with SIGKILL the process whose
/// pid it holds (written by that process with [`signal_file`]): how a test kills a rank at
/// a moment the rank chose.
///
/// # Errors
/// When `path` never appeared, holds no pid, or `kill` failed (the process was gone).
pub fn kill_when_signalled(path: &Path, limit: Duration) -> Result<(), String> {
    wait_for_file(path, limit)?;
    let pid = std::fs::read_to_string(path).map_err(|x| format!("{}: {x}", path.display()))?;
    let pid = pid.trim();
    let ok = std::process::Command::new("kill")
        .args(["-KILL", pid])
        .status()
        .map_err(|x| format!("kill: {x}"))?
        .success();
    if ok {
        Ok(())
    } else {
        Err(format!("kill -KILL {pid} failed"))
    }
}

/// Writes `contents` to `path` atomically (a temporary file renamed into place), so that
/// a process waiting for `path` ([`wait_for_file`]) never reads it half written.
///
/// # Errors
/// The file system's.
pub fn signal_file(path: &Path, contents: &[u8]) -> Result<(), String> {
    // Beside `path`, named after it whole, this process and a counter: writers of `pid.0`
    // and `pid.1` at once must not share a temporary file (as `with_extension` made them).
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".{}-{}.tmp-signal",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = path.with_file_name(name);
    std::fs::write(&tmp, contents).map_err(|x| format!("{}: {x}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|x| format!("{}: {x}", path.display()))
}

/// Computes (busy arithmetic: no call into Spools, no sleep, no system call but the
/// check) until `stop` exists, or at most `limit` (a safety net, then `false`): what a rank
/// does to show that progress happens, or does not, while the application computes.
pub fn compute_until(stop: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    let mut x = 1u64;
    while !stop.exists() {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        if start.elapsed() > limit {
            return false;
        }
    }
    true
}
