//! `spools run`: start N ranks on this host, forward their output, supervise them, and end
//! the whole job cleanly when one fails, on a signal or at a timeout.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use spools_proto::auth::Secret;
use thiserror::Error;

use crate::error::{BootStep, RandomFor};
use crate::random::random;
use crate::server::{RendezvousServer, ServerEvent};

/// How long ranks are given by default to report an abort before they are killed.
pub const GRACE: Duration = Duration::from_millis(500);
/// Most ranks `spools run` starts on one host: far more than any host has cores, and few
/// enough that the processes, their output pipes and their supervision stay within what
/// a host gives one user.
pub const MAX_LOCAL_RANKS: u32 = 4096;
/// How often `spools run` looks for stopped ranks when a liveness timeout is set.
const LIVENESS_POLL: Duration = Duration::from_millis(100);
/// How long a lost connection waits for the process's exit status (for a better cause).
const LOST_WAIT: Duration = Duration::from_millis(150);

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// Number of ranks.
    pub ranks: u32,
    /// Program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Prefix each output line with `[rank]`.
    pub tag_output: bool,
    /// Stop the job after this long.
    pub timeout: Option<Duration>,
    /// How long ranks get to report a failure before they are killed ([`GRACE`]).
    pub grace: Duration,
    /// Fail a rank that stays stopped (SIGSTOP, a debugger) this long; `None`: wait.
    pub liveness: Option<Duration>,
}

impl LaunchSpec {
    /// Checks what can be checked before anything starts.
    ///
    /// # Errors
    /// [`LaunchError::BadCount`] for no ranks or more than [`MAX_LOCAL_RANKS`].
    pub fn check(&self) -> Result<(), LaunchError> {
        let n = self.ranks;
        if n == 0 || n > MAX_LOCAL_RANKS.min(spools_proto::boot::MAX_RANKS) {
            return Err(LaunchError::BadCount(n));
        }
        Ok(())
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchReport {
    /// The exit status `spools run` returns: 0, the first failing rank's exit code,
    /// 128 + signal number, 124 on timeout.
    pub exit_code: i32,
    /// The first failure: rank and description.
    pub failure: Option<(u32, String)>,
}

/// The job could not be launched.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// Zero ranks, or more than one host should run.
    #[error("cannot launch {0} ranks on this host (1 to {MAX_LOCAL_RANKS}); for more, use a cluster launcher (srun, mpirun)")]
    BadCount(u32),
    /// A signal asked the launcher to stop while it was still starting ranks.
    #[error(
        "stopped by {signal} while starting rank {started} of {ranks}; no rank was left running"
    )]
    Interrupted {
        /// The signal's name.
        signal: &'static str,
        /// Its number.
        number: i32,
        /// How many ranks had been started.
        started: u32,
        /// How many were to be.
        ranks: u32,
    },
    /// A system call failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done.
        step: BootStep,
        /// The error.
        source: std::io::Error,
    },
    /// The launcher's signal handlers could not be installed.
    #[error("installing signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// The program could not be started.
    #[error("cannot start {program:?} for rank {rank}: {source}")]
    Spawn {
        /// The program.
        program: OsString,
        /// The rank being started.
        rank: u32,
        /// The error.
        source: std::io::Error,
    },
    /// The rendezvous could not start.
    #[error(transparent)]
    Boot(#[from] crate::error::BootError),
}

enum Event {
    Exited(u32, ExitStatus),
    Server(ServerEvent),
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

fn signal_name(sig: i32) -> &'static str {
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

fn code_of(status: ExitStatus) -> i32 {
    status
        .signal()
        .map(|s| 128 + s)
        .or(status.code())
        .unwrap_or(1)
}

/// Signals a rank: its whole process group (ranks other than 0), or the process itself
/// (rank 0, which shares the launcher's group).
fn kill_rank(rank: usize, pid: u32, sig: i32) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    let (Some(pid), Some(sig)) = (pid, Signal::from_named_raw(sig)) else {
        return;
    };
    // A rank that is already gone (ESRCH) is what the caller wants; the group was created
    // for this rank (process_group(0)), so a stale id signals nobody else.
    let _ = if rank == 0 {
        rustix::process::kill_process(pid, sig)
    } else {
        rustix::process::kill_process_group(pid, sig)
    };
}

fn forward(
    mut from: impl Read + Send + 'static,
    to_stderr: bool,
    tag: Option<u32>,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("spools-run-output".into())
        .spawn(move || {
            let mut reader = BufReader::new(&mut from);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let prefix = tag.map(|r| format!("[{r}] ")).unwrap_or_default();
                let res = if to_stderr {
                    let mut e = std::io::stderr().lock();
                    e.write_all(prefix.as_bytes())
                        .and_then(|_| e.write_all(&line))
                } else {
                    let mut o = std::io::stdout().lock();
                    o.write_all(prefix.as_bytes())
                        .and_then(|_| o.write_all(&line))
                        .and_then(|_| o.flush())
                };
                if res.is_err() {
                    // Our output is closed (`| head`): keep draining so ranks don't block.
                    let mut sink = Vec::new();
                    let _ = reader.read_to_end(&mut sink);
                    return;
                }
            }
        })
        .ok()
}

/// Removes what a job may leave in `/dev/shm` (segments are unlinked by the ranks as soon
/// as all have mapped them; this catches a rank killed in between).
pub fn clean_shm(job: u64) -> usize {
    let prefix = format!("spools-{job:016x}-");
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

/// Runs a job to its end. Messages about failures go to standard error, prefixed with
/// `spools run:`.
///
/// # Errors
/// [`LaunchError`] if the job could not be started at all.
pub fn launch(spec: &LaunchSpec) -> Result<LaunchReport, LaunchError> {
    spec.check()?;
    let n = spec.ranks;
    let io = |step: BootStep| move |source| LaunchError::Io { step, source };
    let secret = Secret::from_bytes(random().map_err(io(BootStep::Random(RandomFor::JobSecret)))?);
    let job = u64::from_le_bytes(random().map_err(io(BootStep::Random(RandomFor::JobId)))?);
    let (tx, rx) = channel::<Event>();
    let (stx, srx) = channel::<ServerEvent>();
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(io(BootStep::BindRendezvous { at: None }))?;
    let server = RendezvousServer::start(listener, n, secret.clone(), job, true, Some(stx))?;
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("spools-run-events".into())
            .spawn(move || {
                for e in srx {
                    if tx.send(Event::Server(e)).is_err() {
                        return;
                    }
                }
            })
            .map_err(io(BootStep::Thread {
                name: "launcher event",
            }))?;
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(LaunchError::Signals)?;
    let sig_handle = signals.handle();
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("spools-run-signals".into())
            .spawn(move || {
                for s in signals.forever() {
                    if tx.send(Event::Signal(s)).is_err() {
                        return;
                    }
                }
            })
            .map_err(io(BootStep::Thread {
                name: "launcher signal",
            }))?;
    }

    let mut pids: Vec<Option<u32>> = vec![None; n as usize];
    let mut forwarders = Vec::new();
    let started = Instant::now();
    let mut spawn_error = None;
    let mut held = Vec::new();
    for rank in 0..n {
        // Signals are honoured while ranks start, and other events kept for later.
        while let Ok(ev) = rx.try_recv() {
            match ev {
                Event::Signal(sig) => {
                    spawn_error = Some(LaunchError::Interrupted {
                        signal: signal_name(sig),
                        number: sig,
                        started: rank,
                        ranks: n,
                    });
                }
                other => held.push(other),
            }
        }
        if spawn_error.is_some() {
            break;
        }
        match spawn_rank(
            spec,
            rank,
            &server,
            &secret,
            job,
            tx.clone(),
            &mut forwarders,
        ) {
            Ok(pid) => pids[rank as usize] = Some(pid),
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
    }
    drop(tx);
    let mut sup = Supervisor {
        grace: spec.grace,
        stopped_since: vec![None; n as usize],
        aborter: None,
        pids,
        exited: vec![false; n as usize],
        failure: None,
        exit_code: 0,
        kill_at: None,
        lost: Vec::new(),
        server,
    };
    if let Some(e) = spawn_error {
        sup.stop_all();
        sup.reap(&rx, held);
        sig_handle.close();
        clean_shm(job);
        return Err(e);
    }
    for ev in held {
        match ev {
            Event::Exited(rank, status) => sup.on_exit(rank, status),
            Event::Server(ServerEvent::Lost(rank)) => sup.lost.push((rank, Instant::now())),
            Event::Server(ServerEvent::Aborted { rank, cause }) => sup.on_abort(rank, &cause),
            Event::Server(_) | Event::Signal(_) => {}
        }
    }
    let deadline = spec.timeout.map(|t| started + t);
    while sup.exited.iter().any(|e| !e) {
        let now = Instant::now();
        let mut wake = now + Duration::from_secs(3600);
        if let Some(k) = sup.kill_at {
            wake = wake.min(k);
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        if let Some(&(_, t)) = sup.lost.first() {
            wake = wake.min(t + LOST_WAIT);
        }
        if spec.liveness.is_some() && sup.failure.is_none() {
            wake = wake.min(now + LIVENESS_POLL);
        }
        match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(Event::Exited(rank, status)) => sup.on_exit(rank, status),
            Ok(Event::Server(ServerEvent::Lost(rank))) => sup.lost.push((rank, Instant::now())),
            Ok(Event::Server(ServerEvent::Aborted { rank, cause })) => sup.on_abort(rank, &cause),
            Ok(Event::Server(_)) => {}
            Ok(Event::Signal(sig)) => {
                if sup.failure.is_none() {
                    log::warn!(
                        "spools run: received {}; stopping the job's {n} ranks",
                        signal_name(sig)
                    );
                    sup.failure = Some((u32::MAX, format!("stopped by {}", signal_name(sig))));
                    sup.exit_code = 128 + sig;
                }
                sup.stop_all();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        while let Some(&(rank, t)) = sup.lost.first() {
            if sup.exited[rank as usize] {
                sup.lost.remove(0);
            } else if now >= t + LOST_WAIT {
                sup.lost.remove(0);
                sup.fail(
                    rank,
                    "closed its connection to the job without finalising".into(),
                    1,
                );
            } else {
                break;
            }
        }
        if let Some(limit) = spec.liveness {
            sup.check_liveness(now, limit);
        }
        if let Some(k) = sup.kill_at {
            if now >= k {
                sup.stop_all();
                sup.kill_at = None;
            }
        }
        if let Some(d) = deadline {
            if now >= d && sup.failure.is_none() {
                log::warn!(
                    "spools run: timeout after {:.1} s; stopping the job",
                    spec.timeout.unwrap_or_default().as_secs_f64()
                );
                sup.failure = Some((u32::MAX, "timed out".into()));
                sup.exit_code = 124;
                sup.stop_all();
            }
        }
    }
    sig_handle.close();
    clean_shm(job);
    // Let the output of the ranks reach ours (the pipes end when the ranks are gone;
    // a grandchild that keeps one open is not waited for beyond 2 s).
    let until = Instant::now() + Duration::from_secs(2);
    for f in forwarders {
        while !f.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        if f.is_finished() {
            let _ = f.join();
        }
    }
    Ok(LaunchReport {
        exit_code: sup.exit_code,
        failure: sup.failure.filter(|(r, _)| *r != u32::MAX),
    })
}

struct Supervisor {
    grace: Duration,
    /// Since when each rank has been seen stopped.
    stopped_since: Vec<Option<Instant>>,
    /// A rank that ended the job and whose exit status becomes the job's.
    aborter: Option<u32>,
    pids: Vec<Option<u32>>,
    exited: Vec<bool>,
    failure: Option<(u32, String)>,
    exit_code: i32,
    kill_at: Option<Instant>,
    lost: Vec<(u32, Instant)>,
    server: RendezvousServer,
}

impl Supervisor {
    fn on_exit(&mut self, rank: u32, status: ExitStatus) {
        self.exited[rank as usize] = true;
        if self.failure.is_none() {
            // A rank that gave up is told to the others first: their exits (with the
            // errors it caused) can reach us before the server's event does.
            if let Some((r, cause)) = self.server.abort_record() {
                self.on_abort(r, &cause);
            }
        }
        if self.aborter == Some(rank) && !status.success() {
            self.exit_code = code_of(status);
        }
        if self.failure.is_some() {
            return;
        }
        if !status.success() {
            self.fail(rank, describe(status), code_of(status));
        } else if self.server.joined(rank) && !self.server.finalized(rank) {
            self.fail(
                rank,
                "exited with status 0 without finalising (the job object was not dropped or finalised)".into(),
                1,
            );
        } else if self.server.joined(rank) && !self.server.job_finalized() {
            self.fail(
                rank,
                "exited after finalising but before every rank had (it left the job early)".into(),
                1,
            );
        } else if !self.server.joined(rank) && self.server.mark_gone(rank) {
            self.fail(rank, "exited before joining the job".into(), 1);
        }
    }

    /// A rank ended the job itself (an error it returned, a panic, an explicit abort):
    /// the job's exit status becomes that rank's, once it has exited.
    fn on_abort(&mut self, rank: u32, cause: &str) {
        if self.failure.is_some() {
            return;
        }
        self.aborter = Some(rank);
        log::warn!("spools run: rank {rank} ended the job ({cause}); stopping the job");
        self.failure = Some((rank, cause.to_string()));
        self.exit_code = 1;
        self.kill_at = Some(Instant::now() + self.grace);
    }

    fn fail(&mut self, rank: u32, cause: String, code: i32) {
        if self.failure.is_some() {
            return;
        }
        log::warn!("spools run: rank {rank} {cause}; stopping the job");
        self.server.abort(rank, &cause);
        self.failure = Some((rank, cause));
        self.exit_code = code;
        self.kill_at = Some(Instant::now() + self.grace);
    }

    /// Fails the job when a rank has stayed stopped (state `T` or `t` in
    /// `/proc/PID/stat`: SIGSTOP, SIGTSTP, a debugger) for `limit`.
    fn check_liveness(&mut self, now: Instant, limit: Duration) {
        if self.failure.is_some() {
            return;
        }
        for r in 0..self.pids.len() {
            let stopped = match (self.pids[r], self.exited[r]) {
                (Some(pid), false) => is_stopped(pid),
                _ => false,
            };
            if !stopped {
                self.stopped_since[r] = None;
                continue;
            }
            let since = *self.stopped_since[r].get_or_insert(now);
            if now.duration_since(since) >= limit {
                self.fail(
                    r as u32,
                    format!(
                        "stayed stopped (SIGSTOP or a debugger) for {:.1} s, past the liveness timeout (SPOOLS_LIVENESS_TIMEOUT)",
                        limit.as_secs_f64()
                    ),
                    1,
                );
                return;
            }
        }
    }

    fn stop_all(&mut self) {
        for (r, pid) in self.pids.iter().enumerate() {
            if let (Some(pid), false) = (pid, self.exited[r]) {
                kill_rank(r, *pid, libc::SIGKILL);
            }
        }
    }

    fn reap(&mut self, rx: &std::sync::mpsc::Receiver<Event>, held: Vec<Event>) {
        let spawned = self.pids.iter().filter(|p| p.is_some()).count();
        let mut seen = held
            .iter()
            .filter(|e| matches!(e, Event::Exited(..)))
            .count();
        while seen < spawned {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Event::Exited(..)) => seen += 1,
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }
}

/// Whether process `pid` is stopped (by a signal or a tracer).
fn is_stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T" || state == "t")
}

fn spawn_rank(
    spec: &LaunchSpec,
    rank: u32,
    server: &RendezvousServer,
    secret: &Secret,
    job: u64,
    tx: Sender<Event>,
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<u32, LaunchError> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env("SPOOLS_RANK", rank.to_string())
        .env("SPOOLS_SIZE", spec.ranks.to_string())
        .env("SPOOLS_BOOTSTRAP", server.addr().to_string())
        .env("SPOOLS_SECRET", secret.to_hex())
        .env("SPOOLS_JOB", format!("{job:016x}"))
        .stdin(if rank == 0 {
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
    if spec.tag_output {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
    // which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            // Die with the launcher, whatever kills it.
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: spec.program.clone(),
        rank,
        source,
    })?;
    if spec.tag_output {
        if let Some(o) = child.stdout.take() {
            forwarders.extend(forward(o, false, Some(rank)));
        }
        if let Some(e) = child.stderr.take() {
            forwarders.extend(forward(e, true, Some(rank)));
        }
    }
    let pid = child.id();
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
