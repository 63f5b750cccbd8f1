//! The launcher of `spools run`: start N ranks (on this host or over SSH), forward their
//! output, supervise them, and end the whole job cleanly when one fails, on a signal or at
//! a timeout.
//!
//! A crate of its own so that no rank links it: only the command-line tool and the test
//! kit, which start jobs, depend on it; a rank needs only `spools-boot` to join one.

mod children;
pub mod cpus;
pub mod hosts;
mod output;
mod plan;
mod process;
mod procfs;
mod spec;
mod supervisor;

use std::net::TcpListener;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use spools_boot::random::random;
use spools_boot::server::{RendezvousServer, ServerEvent};
use spools_boot::{BootStep, RandomFor};
use spools_proto::auth::Secret;

use process::{signal_name, spawn_rank, Event};
use supervisor::Supervisor;

pub use plan::MAX_LOCAL_RANKS;
pub use process::{clean_shm, describe};
pub use procfs::descendants;
pub use spec::{LaunchError, LaunchReport, LaunchSpec, GRACE};

/// How long the launcher waits for more of the ranks' output once they are gone, after
/// the last byte came.
const DRAIN_QUIET: Duration = Duration::from_secs(2);
/// The longest it waits for the ranks' output once they are gone.
const DRAIN_MAX: Duration = Duration::from_secs(30);
/// How often `spools run` looks for stopped ranks when a liveness timeout is set.
const LIVENESS_POLL: Duration = Duration::from_millis(100);
/// How long a lost connection waits for the process's exit status (for a better cause)
/// before the launcher looks whether the process is exiting: a rank still running then
/// closed its connection without finalising; one that is exiting is judged by its exit
/// status, whenever that arrives.
const LOST_WAIT: Duration = Duration::from_millis(150);

/// Runs a job to its end. Messages about failures go to standard error, prefixed with
/// `spools run:`.
///
/// # Errors
/// [`LaunchError`] if the job could not be started at all.
pub fn launch(spec: &LaunchSpec) -> Result<LaunchReport, LaunchError> {
    spec.check()?;
    let n = spec.ranks;
    let io = |step: BootStep| move |source| LaunchError::Io { step, source };
    let secret = match &spec.secret {
        Some(s) => s.clone(),
        None => Secret::from_bytes(random().map_err(io(BootStep::Random(RandomFor::JobSecret)))?),
    };
    let job = u64::from_le_bytes(random().map_err(io(BootStep::Random(RandomFor::JobId)))?);
    let (tx, rx) = channel::<Event>();
    let (stx, srx) = channel::<ServerEvent>();
    let listener = TcpListener::bind(hosts::rendezvous_bind(spec))
        .map_err(io(BootStep::BindRendezvous { at: None }))?;
    let server = RendezvousServer::start(
        listener,
        n,
        secret.clone(),
        spec.keepalive,
        job,
        true,
        Some(stx),
    )?;
    let rendezvous = hosts::bootstrap_addrs(spec, server.addr());
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

    let places = match spec.bind {
        cpus::Bind::None => None,
        cpus::Bind::Core => {
            let host = cpus::this_host();
            let plan = cpus::bind_plan(&host, n as usize);
            if plan.is_none() {
                eprintln!(
                    "spools run: --bind core: {n} ranks on {} CPUs, ranks not bound",
                    host.len()
                );
            }
            plan
        }
    };
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
            process::RankStart {
                rank,
                rendezvous: rendezvous[rank as usize],
                cpus: places.as_ref().and_then(|p| p.get(rank as usize)),
            },
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
    // For the processes ranks ask for (the server's event thread keeps its own).
    let child_tx = tx.clone();
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
        places: (0..n).map(|r| hosts::place(spec, r)).collect(),
        children: Vec::new(),
        requests: 0,
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
            Event::ChildExited(slot, status) => sup.on_child_exit(slot, status),
            Event::Server(ServerEvent::Lost(rank)) => sup.lost.push((rank, Instant::now())),
            Event::Server(ServerEvent::Aborted { rank, cause }) => sup.on_abort(rank, &cause),
            Event::Server(ServerEvent::Spawn { rank, id, procs }) => {
                sup.on_spawn(spec, (rank, id, procs), &child_tx, &mut forwarders)
            }
            Event::Server(_) | Event::Signal(_) => {}
        }
    }
    let deadline = spec.timeout.map(|t| started + t);
    while !sup.all_ended() {
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
            Ok(Event::ChildExited(slot, status)) => sup.on_child_exit(slot, status),
            Ok(Event::Server(ServerEvent::Lost(rank))) => sup.lost.push((rank, Instant::now())),
            Ok(Event::Server(ServerEvent::Aborted { rank, cause })) => sup.on_abort(rank, &cause),
            Ok(Event::Server(ServerEvent::Spawn { rank, id, procs })) => {
                sup.on_spawn(spec, (rank, id, procs), &child_tx, &mut forwarders)
            }
            Ok(Event::Server(_)) => {}
            Ok(Event::Signal(sig)) => {
                if sup.failure.is_none() {
                    spools_boot::logger::warn(format_args!(
                        "spools run: received {}; stopping the job's {n} ranks",
                        signal_name(sig)
                    ));
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
                if sup.pids[rank as usize].is_some_and(procfs::is_exiting) {
                    // Dying: its exit status, on its way, tells the cause.
                    continue;
                }
                sup.fail(rank, hosts::lost_cause(spec, rank), 1);
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
                spools_boot::logger::warn(format_args!(
                    "spools run: timeout after {:.1} s; stopping the job",
                    spec.timeout.unwrap_or_default().as_secs_f64()
                ));
                sup.failure = Some((u32::MAX, "timed out".into()));
                sup.exit_code = 124;
                sup.stop_all();
            }
        }
    }
    sig_handle.close();
    clean_shm(job);
    // Let the output of the ranks reach ours (the pipes end when the ranks are gone; a
    // grandchild that keeps one open is waited for 2 s after the last byte came, at most
    // DRAIN_MAX in all).
    let start = Instant::now();
    let mut until = start + DRAIN_QUIET;
    let mut seen = output::forwarded();
    for f in forwarders {
        while !f.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
            let now = output::forwarded();
            if now != seen {
                seen = now;
                until = (Instant::now() + DRAIN_QUIET).min(start + DRAIN_MAX);
            }
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
