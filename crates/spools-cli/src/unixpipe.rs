//! Unix pipes between two launchers, the nCUBE way: in `spools run -n 4 -- a | spools run
//! -n 3 -- b` each launcher sees that the other end of its pipe is held by another `spools
//! run`, and both give their ranks the same parallel-pipe name (`pipe:fifo-INODE`), so the
//! data goes rank to rank and bypasses the Unix pipe. When the other end is any other
//! program (`| head`, `cat f |`) or a plain file, the ranks get `stdout` / `stdin` and
//! the canonical byte stream flows through the pipe or file instead.
//!
//! Whether a process is `spools run` is read from `/proc`: its executable is this one and
//! its first argument is `run`. A process still running the shell's executable (forked by
//! the shell but not yet exec'd) is waited for, up to a few seconds.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::fs::FileType;

/// How long to wait for the other end of the pipe to become recognisable.
const DECIDE: Duration = Duration::from_secs(5);

/// How long a parent shell holding only the end we ask about is waited for: in `a | b`,
/// the shell forks `a`, closes its copy of the write end, and only then forks `b` and
/// closes the read end, so for a moment it alone holds the read end `a` asks about (under
/// load, long enough for `a` to look). A shell that still holds it after this is reading
/// our output itself (`x=$(spools run ...)`).
const SHELL_GRACE: Duration = Duration::from_secs(1);

/// The inode of the pipe on `fd`, if it is a pipe.
fn pipe_inode(fd: BorrowedFd<'_>) -> Option<u64> {
    let st = rustix::fs::fstat(fd).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::Fifo).then_some(st.st_ino)
}

#[derive(Debug, PartialEq, Eq)]
enum Peer {
    Spools,
    Other,
    /// Still the shell (or our parent): not exec'd yet.
    Pending,
    /// Our parent, a shell, holding only the end asked about: about to fork the other side
    /// of a pipeline, or reading our output itself ([`SHELL_GRACE`]).
    ShellParent,
}

/// Whether the executable `exe` is a POSIX-style shell (by its file name).
fn is_shell(exe: Option<&std::path::Path>) -> bool {
    const SHELLS: [&str; 10] = [
        "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "yash", "posh", "busybox",
    ];
    exe.and_then(|e| e.file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|n| SHELLS.contains(&n))
}

/// What a process holding the pipe is: `spools` says whether it is `spools run`;
/// `parent` whether it is our parent, `holds_other` whether it holds the other end too,
/// `like_us` whether it still runs our parent's or our own executable (or none we can
/// read): a child not yet exec'd.
fn classify(spools: bool, parent: bool, holds_other: bool, like_us: bool, shell: bool) -> Peer {
    if spools {
        Peer::Spools
    } else if parent && holds_other {
        // A shell still setting up the pipeline (it has not forked the other side yet,
        // and closes its copies once it has).
        Peer::Pending
    } else if parent && shell {
        Peer::ShellParent
    } else if !parent && like_us {
        Peer::Pending
    } else {
        Peer::Other
    }
}

/// The decision after `waited`, from the holders seen: `Some(true)` for `spools run`,
/// `Some(false)` for anything else, `None` to look again.
fn decide(h: &[Peer], waited: Duration) -> Option<bool> {
    if h.contains(&Peer::Spools) {
        return Some(true);
    }
    if waited > DECIDE {
        return Some(false);
    }
    let waiting =
        h.contains(&Peer::Pending) || (h.contains(&Peer::ShellParent) && waited < SHELL_GRACE);
    if h.is_empty() || waiting {
        None
    } else {
        Some(false)
    }
}

fn exe(pid: &str) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The processes other than this one holding the pipe `ino` open for reading (`read`) or
/// writing, classified.
fn holders(ino: u64, read: bool) -> Vec<Peer> {
    let me = std::process::id().to_string();
    let my_exe = exe("self");
    let parent = rustix::process::getppid()
        .map_or(0, |p| p.as_raw_pid())
        .to_string();
    let parent_exe = exe(&parent);
    let target = format!("pipe:[{ino}]");
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        // Which ends of the pipe the process holds: (the end we ask about, the other).
        let (mut holds, mut holds_other) = (false, false);
        for fd in fds.flatten() {
            if !std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == target) {
                continue;
            }
            let reads = std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("flags:").map(|f| f.trim().to_string()))
            })
            .and_then(|f| u32::from_str_radix(&f, 8).ok())
            .map(|flags| (flags & 3) == 0);
            match reads {
                Some(r) if r == read => holds = true,
                Some(_) => holds_other = true,
                None => {}
            }
        }
        if !holds {
            continue;
        }
        let e = exe(&pid);
        let args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let arg1 = args.split(|&b| b == 0).nth(1).map(|a| a.to_vec());
        // Our parent itself (a harness reading our output) is what it is, unless it holds
        // both ends: then it is a shell still setting up the pipeline (it has not forked
        // the other side yet, and closes its copies once it has). A sibling still running
        // the parent's executable has not exec'd its program yet.
        out.push(classify(
            e.is_some() && e == my_exe && arg1.as_deref() == Some(b"run"),
            pid == parent,
            holds_other,
            e.is_none() || e == parent_exe || e == my_exe,
            is_shell(e.as_deref()),
        ));
    }
    out
}

/// Waits until the other end of pipe `ino` is recognisable: `Some(true)` when it is
/// `spools run`, `Some(false)` for anything else.
fn other_end_is_spools(ino: u64, read: bool) -> bool {
    let t = Instant::now();
    loop {
        if let Some(d) = decide(&holders(ino, read), t.elapsed()) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The parallel-pipe variables for this job's ranks, from what its standard input and
/// output are connected to (variables already set are left alone).
pub(crate) fn env() -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if std::env::var_os("SPOOLS_PIPE_OUT").is_none() {
        if let Some(ino) = pipe_inode(std::io::stdout().as_fd()) {
            let name = if other_end_is_spools(ino, true) {
                format!("pipe:fifo-{ino}")
            } else {
                "stdout".into()
            };
            v.push(("SPOOLS_PIPE_OUT", name));
        }
    }
    if std::env::var_os("SPOOLS_PIPE_IN").is_none() {
        if let Some(ino) = pipe_inode(std::io::stdin().as_fd()) {
            let name = if other_end_is_spools(ino, false) {
                format!("pipe:fifo-{ino}")
            } else {
                "stdin".into()
            };
            v.push(("SPOOLS_PIPE_IN", name));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_between_the_two_forks_of_a_pipeline_is_waited_for() {
        // `a | b`: the shell has forked `a` and closed the write end, not yet forked `b`.
        let shell_alone = [classify(false, true, false, false, true)];
        assert_eq!(shell_alone, [Peer::ShellParent]);
        assert_eq!(decide(&shell_alone, Duration::from_millis(10)), None);
        // Then `b` (forked, not yet exec'd), then `spools run`.
        let forked = [classify(false, false, false, true, true)];
        assert_eq!(decide(&forked, Duration::from_millis(20)), None);
        let b = [classify(true, false, false, false, false)];
        assert_eq!(decide(&b, Duration::from_millis(30)), Some(true));
        // A shell reading our output itself (`$(...)`) is decided after the grace.
        assert_eq!(decide(&shell_alone, SHELL_GRACE * 2), Some(false));
    }

    #[test]
    fn other_holders_are_decided_at_once_and_pending_ones_within_the_limit() {
        // A harness (not a shell) reading our output: stdout at once.
        let harness = [classify(false, true, false, false, false)];
        assert_eq!(harness, [Peer::Other]);
        assert_eq!(decide(&harness, Duration::ZERO), Some(false));
        // A shell holding both ends is still setting up; `| head` is another program.
        assert_eq!(classify(false, true, true, false, true), Peer::Pending);
        assert_eq!(classify(false, false, false, false, false), Peer::Other);
        assert_eq!(decide(&[Peer::Pending], DECIDE / 2), None);
        assert_eq!(decide(&[Peer::Pending], DECIDE * 2), Some(false));
        assert_eq!(decide(&[], Duration::ZERO), None);
        assert_eq!(
            decide(&[Peer::Other, Peer::Spools], Duration::ZERO),
            Some(true)
        );
        assert!(is_shell(Some(std::path::Path::new("/usr/bin/bash"))));
        assert!(!is_shell(Some(std::path::Path::new("/usr/bin/python3"))));
        assert!(!is_shell(None));
    }
}
