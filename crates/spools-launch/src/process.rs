//! The ranks as processes: spawning one (its output piped to `output`), signalling it and
//! describing how it ended (its state in `/proc`: `procfs`).

use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::Sender;

use rustix::process::{Pid, Signal};
use spools_proto::auth::Secret;

use crate::hosts;
use crate::output::forward_child;
use crate::procfs::descendants;
use crate::spec::{LaunchError, LaunchSpec};
use spools_boot::server::ServerEvent;
use spools_boot::BootStep;

/// What the launcher's supervision loop hears about.
pub(crate) enum Event {
    /// A rank's process ended.
    Exited(u32, ExitStatus),
    /// A process a rank asked for ended (its slot in `Supervisor::children`).
    ChildExited(usize, ExitStatus),
    /// The rendezvous server saw something (a lost connection, an abort).
    Server(ServerEvent),
    /// The launcher received a signal.
    Signal(i32),
}

/// Describes an exit status in words.
pub fn describe(status: ExitStatus) -> String {
    if let Some(sig) = status.signal() {
        format!("was killed by signal {sig} ({})", signal_name(sig))
    } else {
        format!("exited with status {}", status.code().unwrap_or(-1))
    }
}

pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

pub(crate) fn code_of(status: ExitStatus) -> i32 {
    status
        .signal()
        .map(|s| 128 + s)
        .or_else(|| status.code())
        .unwrap_or(1)
}

/// Signals a rank: its whole process group (ranks other than 0), or the process itself
/// and its descendants (rank 0, which shares the launcher's group).
pub(crate) fn kill_rank(rank: usize, pid: u32, sig: i32) {
    let Some(sig) = Signal::from_named_raw(sig) else {
        return;
    };
    let to_pid = |p: u32| i32::try_from(p).ok().and_then(Pid::from_raw);
    let Some(target) = to_pid(pid) else {
        return;
    };
    // A rank that is already gone (ESRCH) is what the caller wants; the group was created
    // for this rank (process_group(0)), so a stale id signals nobody else.
    if rank == 0 {
        // Its descendants first: once rank 0 is gone they are orphans no one can find.
        for child in descendants(pid).into_iter().filter_map(to_pid) {
            let _ = rustix::process::kill_process(child, sig);
        }
        let _ = rustix::process::kill_process(target, sig);
    } else {
        let _ = rustix::process::kill_process_group(target, sig);
    }
}

/// Removes what a job may leave in `/dev/shm` (segments are unlinked by the ranks as soon
/// as all have mapped them; this catches a rank killed in between), and what the jobs its
/// ranks made leave (MPI's spawns and ports: their ids share the upper half of `job`'s,
/// `spools_boot::client::HostedJob::host`).
pub fn clean_shm(job: u64) -> usize {
    let prefix = format!("spools-{:08x}", job >> 32);
    let mut n = 0;
    if let Ok(dir) = std::fs::read_dir("/dev/shm") {
        for e in dir.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix)
                && std::fs::remove_file(e.path()).is_ok()
            {
                n += 1;
            }
        }
    }
    n
}

/// Where a rank starts: its number, the rendezvous it joins, the CPUs it is bound to.
pub(crate) struct RankStart<'a> {
    pub(crate) rank: u32,
    pub(crate) rendezvous: SocketAddr,
    pub(crate) cpus: Option<&'a Vec<u32>>,
}

pub(crate) fn spawn_rank(
    spec: &LaunchSpec,
    start: RankStart<'_>,
    secret: &Secret,
    job: u64,
    tx: Sender<Event>,
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<u32, LaunchError> {
    let RankStart {
        rank,
        rendezvous,
        cpus,
    } = start;
    let vars = [
        ("SPOOLS_RANK", rank.to_string()),
        ("SPOOLS_SIZE", spec.ranks.to_string()),
        ("SPOOLS_BOOTSTRAP", rendezvous.to_string()),
        ("SPOOLS_SECRET", secret.to_hex()),
        ("SPOOLS_JOB", format!("{job:016x}")),
    ];
    // The program itself, or the agent that starts it on its host (launcher/hosts.rs).
    let hosts::RankCommand { mut cmd, stdin } = hosts::rank_command(spec, rank, &vars);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else if rank == 0 {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    // Ranks other than 0 get process groups of their own, so that stopping one stops what
    // it started. Rank 0 stays in the launcher's (foreground) group: it owns the
    // terminal's standard input, and reading it from a background group would stop it.
    if rank != 0 {
        cmd.process_group(0);
    }
    // Always through the launcher, which writes whole lines (see `output`).
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // The CPUs it is bound to (`--bind core`), as the kernel takes them; built here, so
    // that the child only makes the system call.
    let affinity = cpus.map(|cpus| {
        let mut set = rustix::thread::CpuSet::new();
        for &c in cpus {
            set.set(c as usize);
        }
        set
    });
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl
    // and sched_setaffinity, which are async-signal-safe system calls; it allocates
    // nothing (the CPU set was built before the fork and is copied in).
    unsafe {
        cmd.pre_exec(move || {
            // Die with the launcher, whatever kills it.
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if let Some(set) = &affinity {
                rustix::thread::sched_setaffinity(None, set)?;
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: spec.program.clone(),
        rank,
        source,
    })?;
    if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
        // A line far below a pipe's capacity: the write cannot block. A failure means
        // the agent is already gone, which its exit status reports.
        let _ = std::io::Write::write_all(&mut input, &bytes);
    }
    let pid = child.id();
    let tag = spec.tag_output.then(|| rank.to_string());
    forward_child(&mut child, tag, forwarders).map_err(|source| LaunchError::Io {
        step: BootStep::Thread {
            name: "output forwarder",
        },
        source,
    })?;
    std::thread::Builder::new()
        .name("spools-run-wait".into())
        .spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = tx.send(Event::Exited(rank, status));
            }
        })
        .map_err(|source| LaunchError::Io {
            step: BootStep::Thread {
                name: "rank waiter",
            },
            source,
        })?;
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use crate::procfs::{descendants, is_busy, is_exiting, state_in};

    /// A shell running `script`, once it has printed `started` (its child is forked).
    fn started_shell(script: &str) -> std::process::Child {
        let mut outer = std::process::Command::new("sh")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sh: {e}"));
        let mut line = String::new();
        if let Some(out) = outer.stdout.take() {
            use std::io::BufRead;
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        assert_eq!(line.trim(), "started");
        outer
    }

    #[test]
    fn descendants_are_found_through_every_generation() {
        // sh -> sh -> sleep: both shells and the sleep descend from the outer shell.
        let mut outer = started_shell("sh -c 'sleep 60; true' & echo started; wait");
        let start = std::time::Instant::now();
        let mut found = descendants(outer.id());
        // The inner shell may not have started its sleep yet: wait for the grandchild.
        while found.len() < 2 && start.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::yield_now();
            found = descendants(outer.id());
        }
        super::kill_rank(0, outer.id(), libc::SIGKILL);
        let _ = outer.wait();
        assert_eq!(found.len(), 2, "inner shell and sleep: {found:?}");
        for p in found {
            let start = std::time::Instant::now();
            // Killed: gone or a zombie (reaped by init) soon; bounded.
            while !is_exiting(p) {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(60),
                    "descendant {p} survived"
                );
                std::thread::yield_now();
            }
        }
    }

    #[test]
    fn a_process_whose_child_spins_is_busy_and_a_sleeping_one_is_not() {
        // The outer shell waits; its child spins (always running or runnable).
        let mut outer = started_shell("sh -c 'while :; do :; done' & echo started; wait");
        // Once the outer shell itself sleeps (in `wait`; bounded), only its child runs.
        let stat = format!("/proc/{}/stat", outer.id());
        let start = std::time::Instant::now();
        while state_in(&stat).as_deref() != Some("S")
            && start.elapsed() < std::time::Duration::from_secs(60)
        {
            std::thread::yield_now();
        }
        let spinning = is_busy(outer.id());
        super::kill_rank(0, outer.id(), libc::SIGKILL);
        let _ = outer.wait();
        assert!(spinning, "a spinning child makes its parent busy");
        let mut sleeper = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sleep: {e}"));
        // Running while it starts (and briefly asleep in between, while fork and exec
        // wait on the kernel: a moment seen once under load), then blocked in its sleep
        // system call for good: wait for that (bounded), as the kernel reports it.
        let in_sleep = |pid: u32| {
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            wchan.contains("nanosleep")
                || (cfg!(target_arch = "x86_64")
                    && (call.starts_with("35 ") || call.starts_with("230 ")))
        };
        let start = std::time::Instant::now();
        while !in_sleep(sleeper.id()) && start.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::yield_now();
        }
        let busy = is_busy(sleeper.id());
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(!busy, "sleep 600 never slept");
    }
}
