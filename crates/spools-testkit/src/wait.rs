//! Bounded waits: for a process (capturing its output), for a file another process
//! writes, and writing such a file atomically.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
}

/// Sends `signal` to the process group `pgid`.
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits for `child` (started in a process group of its own, see [`grouped`](crate::grouped)) at most
/// `limit`, capturing its piped output; at the limit stops its whole process group
/// (SIGTERM, which makes a launcher stop its ranks, then SIGKILL) and panics with what it
/// printed.
///
/// # Panics
/// At the limit, or when the process cannot be waited for.
#[allow(clippy::panic, clippy::expect_used)]
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            // Ask first: a launcher stops its ranks (in process groups of their own) on
            // SIGTERM. Then kill whatever is left of the group.
            signal_group(child.id(), "-TERM");
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            signal_group(child.id(), "-KILL");
            let _ = child.kill();
            let s = child.wait().expect("wait after kill");
            let stdout = t_out.join().unwrap_or_default();
            let stderr = t_err.join().unwrap_or_default();
            panic!("process did not end within {limit:?}; stopped it.\nstdout:\n{stdout}\nstderr:\n{stderr}\nstatus {s:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
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

/// Writes `contents` to `path` atomically (a temporary file renamed into place), so that
/// a process waiting for `path` ([`wait_for_file`]) never reads it half written.
///
/// # Errors
/// The file system's.
pub fn signal_file(path: &Path, contents: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp-signal");
    std::fs::write(&tmp, contents).map_err(|x| format!("{}: {x}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|x| format!("{}: {x}", path.display()))
}
