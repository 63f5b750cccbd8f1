//! Processes the ranks ask for (MPI's `MPI_Comm_spawn`: `ToServer::Spawn`): started as
//! ranks are (on this host or through the agent, `hosts.rs`), their output forwarded
//! (tagged `[S,I]` with `--tag-output`: the job's S-th request, its I-th process),
//! supervised as ranks are (`supervisor.rs`: one that exits with a failure ends the
//! job), and each one's end told to the rank that asked (`ToRank::SpawnExit`).
//!
//! Placement: a process that names a host runs there (it must be one of the job's, or
//! this host for a job without `--hosts`); the others are spread as the job's ranks are,
//! the i-th process of a request on the host of rank i (modulo the job's size).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::mpsc::Sender;

use rustix::process::Signal;
use spools_proto::boot::SpawnProc;

use crate::hosts::{command_on, Program, RankCommand};
use crate::output::forward_child;
use crate::process::Event;
use crate::spec::LaunchSpec;

/// One started process of a request.
pub(crate) struct Spawned {
    pub(crate) pid: u32,
    /// The rank that asked.
    pub(crate) requester: u32,
    /// Its request's number, and this process's index in it.
    pub(crate) id: u32,
    pub(crate) index: u32,
    /// The program, for messages.
    pub(crate) program: String,
    /// `" on host NAME"` in a multi-host job, else empty.
    pub(crate) place: String,
    pub(crate) exited: bool,
    /// Since when it has been seen stopped (`--liveness`).
    pub(crate) stopped_since: Option<std::time::Instant>,
    /// Started by a request that failed as a whole: killed, its end told to nobody.
    pub(crate) abandoned: bool,
}

/// A request, as the server handed it over.
pub(crate) struct Request {
    pub(crate) requester: u32,
    pub(crate) id: u32,
    /// The how-manieth request of the job (from 1): the first part of the output tag.
    pub(crate) number: u32,
    pub(crate) procs: Vec<SpawnProc>,
}

/// The host process `index` of a request runs on: `None` for this host.
///
/// # Errors
/// The host it names is not one of the job's.
fn host_for(spec: &LaunchSpec, named: &str, index: u32) -> Result<Option<String>, String> {
    match &spec.hosts {
        Some(plan) if named.is_empty() => Ok(plan
            .host_of((u64::from(index) % plan.ranks().max(1)) as u32)
            .map(str::to_owned)),
        Some(plan) => plan
            .hosts
            .iter()
            .find(|h| h.name == named)
            .map(|h| Some(h.name.clone()))
            .ok_or_else(|| {
                format!(
                    "host {named:?} is not one of the job's hosts ({})",
                    plan.hosts
                        .iter()
                        .map(|h| h.name.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }),
        None => {
            let me = spools_boot::host::host_name();
            let short = me.split('.').next().unwrap_or_default();
            if named.is_empty() || named == "localhost" || named == me || named == short {
                Ok(None)
            } else {
                Err(format!(
                    "host {named:?}: this job runs on this host ({me}) only (spools run without --hosts)"
                ))
            }
        }
    }
}

/// Starts the processes of `req`, slots numbered from `first_slot` (for their exit
/// events). Returns those started, and why the rest were not: on an error the caller
/// kills those started.
pub(crate) fn start(
    spec: &LaunchSpec,
    req: &Request,
    first_slot: usize,
    tx: &Sender<Event>,
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> (Vec<Spawned>, Option<String>) {
    let mut started = Vec::new();
    for (index, p) in req.procs.iter().enumerate() {
        let index = index as u32;
        match start_one(
            spec,
            req,
            index,
            p,
            first_slot + started.len(),
            tx,
            forwarders,
        ) {
            Ok(s) => started.push(s),
            Err(e) => return (started, Some(e)),
        }
    }
    (started, None)
}

fn start_one(
    spec: &LaunchSpec,
    req: &Request,
    index: u32,
    p: &SpawnProc,
    slot: usize,
    tx: &Sender<Event>,
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<Spawned, String> {
    let host = host_for(spec, &p.host, index)?;
    let args: Vec<OsString> = p.args.iter().map(OsString::from).collect();
    let wdir = (!p.wdir.is_empty()).then(|| std::path::Path::new(&p.wdir));
    let vars: Vec<(&str, String)> = p.env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let on = spec.hosts.as_ref().zip(host.as_deref());
    let RankCommand { mut cmd, stdin } = command_on(
        on,
        Program {
            program: p.program.as_ref(),
            args: &args,
            wdir,
        },
        &vars,
    );
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    // A group of its own, so that stopping it stops what it started.
    cmd.process_group(0);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
    // an async-signal-safe system call; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            // Die with the launcher, whatever kills it.
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
    let place = host
        .as_deref()
        .map(|h| format!(" on host {h}"))
        .unwrap_or_default();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}{place}: {e}", p.program))?;
    if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
        // A line far below a pipe's capacity: the write cannot block.
        let _ = std::io::Write::write_all(&mut input, &bytes);
    }
    let pid = child.id();
    let tag = spec.tag_output.then(|| format!("{},{index}", req.number));
    forward_child(&mut child, tag, forwarders)
        .map_err(|e| format!("cannot forward the output of {:?}: {e}", p.program))?;
    let tx = tx.clone();
    let waiter = std::thread::Builder::new()
        .name("spools-run-wait".into())
        .spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = tx.send(Event::ChildExited(slot, status));
            }
        });
    if let Err(e) = waiter {
        // Nobody else knows of it: stop it (its group) before saying why.
        crate::process::kill_rank(usize::MAX, pid, libc::SIGKILL);
        return Err(format!("cannot watch {:?}: {e}", p.program));
    }
    Ok(Spawned {
        pid,
        requester: req.requester,
        id: req.id,
        index,
        program: p.program.clone(),
        place,
        exited: false,
        stopped_since: None,
        abandoned: false,
    })
}
