//! Dynamic processes: `MPI_Comm_spawn`, `MPI_Comm_spawn_multiple`,
//! `MPI_Comm_get_parent` and `MPI_Comm_disconnect`.
//!
//! A spawn makes a new job of the parents (the members of the spawning communicator,
//! ranks 0..P in its order) and their children (ranks P..P+M): the root parent hosts
//! its rendezvous (`spools::HostedJob`, a fresh secret and id), starts the children
//! with that job's variables (`SPOOLS_RANK`, `SPOOLS_BOOTSTRAP`, `SPOOLS_SECRET`, ...)
//! and [`PARENTS_VAR`], and broadcasts the job's ticket; every parent then joins it as a
//! second Spools `World`, and every child as its only one. Both sides make the same
//! communicators of the new job in one order ([`set_up`]): its bridge, the two
//! communicators of the intercommunicator (`inter.rs`), and the children's
//! `MPI_COMM_WORLD` (a split the parents take no part in). The parents' processes keep
//! their labels there, the children get fresh ones (`worlds.rs`).
//!
//! Under `spools run` the root asks the launcher to start the children
//! (`World::launch`): on the job's hosts, spread as its ranks are or where the info key
//! `host` (or `hostfile`) says, their output forwarded and their lives supervised as the
//! ranks' are (one that fails ends the whole job). A singleton, and a spawned job's own
//! spawn, start them here instead (`start_here`), copying their output a whole line at
//! a time to this process's (which `spools run` forwards). Under srun, Open MPI's
//! mpirun or another PMI launcher they go through the launcher's PMIx spawn; where it
//! has none (Slurm's, PMI2) the spawn fails on every parent with `MPI_ERR_SPAWN`,
//! naming why. The job's watchdog is its rendezvous: a child whose process ends before
//! it finalises ends the new job, and the parents' operations on it fail
//! (`MPI_ERR_PROC_ABORTED`, fatal under `MPI_ERRORS_ARE_FATAL`: then the whole job
//! ends); a child that ends before it joins makes every parent's spawn fail with
//! `MPI_ERR_SPAWN`, as does a command that cannot be started (nobody waits).
//!
//! `MPI_Comm_disconnect` of a parent's last communicator of the new job leaves that job
//! (it waits until the children leave it too: their `MPI_Finalize`); `MPI_Finalize`
//! leaves every job not left before the job of `MPI_Init`.

use std::ffi::{c_char, c_int, CStr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use spools::{HostedJob, JobTicket};

use crate::abi::*;
use crate::comm::newjob::Links;
use crate::comm::{comm, insert, CommObj, WorldCtx, APPNUM_VAR, PARENTS_VAR};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::out::out;
use crate::runtime::rt;

/// The number of parents of this process's job `job` (of `size` processes) if it was
/// spawned ([`PARENTS_VAR`] names this job).
///
/// # Errors
/// `MPI_ERR_SPAWN` when the variable names this job but not a number of parents below
/// its size.
pub(crate) fn parents_of_job(job: u64, size: u32) -> Result<Option<u32>, MpiError> {
    let Ok(v) = std::env::var(PARENTS_VAR) else {
        return Ok(None);
    };
    let Some((j, p)) = v.trim().split_once(':') else {
        return Ok(None);
    };
    if u64::from_str_radix(j, 16) != Ok(job) {
        return Ok(None);
    }
    match p.parse::<u32>() {
        Ok(p) if p > 0 && p < size => Ok(Some(p)),
        _ => Err(MpiError::invalid(
            MPI_ERR_SPAWN,
            format!("MPI_Init: {PARENTS_VAR}={v:?} does not fit a job of {size} processes"),
        )),
    }
}

/// The intercommunicator of a spawned process to its parents (at `MPI_Init`): local
/// group the children (ranks `parents..` of the job), remote group the parents.
///
/// # Errors
/// As `inter::make`.
pub(crate) fn parent_link(
    world_comm: &CommObj,
    ctx: Arc<WorldCtx>,
    links: Links,
    parents: u32,
) -> Result<MPI_Comm, MpiError> {
    let n = links.bridge.size();
    let obj = crate::comm::make_inter(
        world_comm,
        ctx,
        links.union,
        &links.base,
        (parents..n).collect(),
        (0..parents).collect(),
        false,
    )?;
    // MPI's default name for it.
    *obj.name
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = "MPI_COMM_PARENT".into();
    insert(obj)
}

/// One command of a spawn, as the root reads it.
#[derive(Debug, Clone)]
struct App {
    command: String,
    args: Vec<String>,
    count: u32,
    /// `wdir`: the children's working directory.
    wdir: Option<String>,
    /// `path`: directories searched for the command before `PATH`.
    path: Option<String>,
    /// `host` (a comma-separated list) or the names in `hostfile`: the hosts its
    /// children run on, in turn; empty: the launcher places them.
    hosts: Vec<String>,
}

/// # Safety
/// `argv` is NULL or a NULL-terminated array of NUL-terminated strings.
unsafe fn read_argv(argv: *const *mut c_char) -> Vec<String> {
    let mut v = Vec::new();
    if argv.is_null() {
        return v;
    }
    for i in 0.. {
        // SAFETY: NULL-terminated (the caller's contract).
        let p = unsafe { *argv.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: NUL-terminated (the caller's contract).
        v.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    }
    v
}

/// Reads one command's arguments (at the root).
///
/// # Safety
/// As `MPI_Comm_spawn`'s arguments.
unsafe fn read_app(
    command: *const c_char,
    argv: *const *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    call: &'static str,
) -> Result<App, MpiError> {
    if command.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: command is NULL"),
        ));
    }
    // SAFETY: NUL-terminated (the caller's contract).
    let command = unsafe { CStr::from_ptr(command) }
        .to_string_lossy()
        .into_owned();
    if command.trim().is_empty() {
        return Err(MpiError::invalid(
            MPI_ERR_SPAWN,
            format!("{call}: the command is empty"),
        ));
    }
    let count = u32::try_from(maxprocs)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_SPAWN,
                format!("{call}: maxprocs {maxprocs} for {command:?}: at least one process"),
            )
        })?;
    let mut app = App {
        command,
        // SAFETY: the caller's contract.
        args: unsafe { read_argv(argv) },
        count,
        wdir: None,
        path: None,
        hosts: Vec::new(),
    };
    for (k, v) in crate::env::info::entries(info)? {
        match k.as_str() {
            "wdir" => app.wdir = Some(v),
            "path" => app.path = Some(v),
            "host" => app.hosts = host_list(&v),
            "hostfile" => {
                let text = std::fs::read_to_string(&v).map_err(|e| {
                    MpiError::invalid(MPI_ERR_SPAWN, format!("{call}: hostfile {v:?}: {e}"))
                })?;
                app.hosts = hostfile_names(&text);
            }
            // `soft` allows fewer processes (Spools starts them all); `arch`, `file`
            // and unknown keys are ignored, as the standard allows.
            _ => {}
        }
    }
    Ok(app)
}

/// The hosts of a `host` info value: names separated by commas or spaces.
fn host_list(v: &str) -> Vec<String> {
    v.split([',', ' '])
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The hosts a hostfile names: the first word of each line that is not blank or a
/// comment (`name slots=N` as MPICH and Open MPI write them; a host listed with slots
/// takes one child in turn like any other).
fn hostfile_names(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .filter_map(|l| l.split_whitespace().next())
        .map(|h| h.split(':').next().unwrap_or(h).to_owned())
        .collect()
}

/// The program to run for `app`: its command found in `path` (the info key) before
/// `PATH`, relative to `wdir` when it names a file there.
fn program(app: &App) -> std::path::PathBuf {
    let cmd = std::path::Path::new(&app.command);
    if app.command.contains('/') {
        return match &app.wdir {
            Some(w) if cmd.is_relative() => std::path::Path::new(w).join(cmd),
            _ => cmd.to_path_buf(),
        };
    }
    if let Some(dirs) = &app.path {
        for d in dirs.split(':').filter(|d| !d.is_empty()) {
            let p = std::path::Path::new(d).join(cmd);
            if p.is_file() {
                return p;
            }
        }
    }
    cmd.to_path_buf()
}

/// The processes of `apps`, as ranks `parents..` of the job of `ticket`: each one's
/// program (a relative path made absolute against its directory, so that it means the
/// same wherever it starts), arguments, variables, directory (the root's own unless
/// `wdir` says) and host.
fn procs_of(apps: &[App], parents: u32, ticket: &JobTicket) -> Vec<spools::SpawnProc> {
    let total: u32 = apps.iter().map(|a| a.count).sum();
    let size = parents + total;
    let here = std::env::current_dir().unwrap_or_default();
    let mut out = Vec::new();
    let mut rank = parents;
    for (appnum, app) in apps.iter().enumerate() {
        let dir = match &app.wdir {
            Some(w) => here.join(w),
            None => here.clone(),
        };
        let prog = program(app);
        let prog = if prog.is_relative() && app.command.contains('/') {
            here.join(prog)
        } else {
            prog
        };
        for i in 0..app.count as usize {
            let mut env: Vec<(String, String)> = ticket
                .vars(rank, size)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            env.push((PARENTS_VAR.into(), format!("{:016x}:{parents}", ticket.job)));
            env.push((APPNUM_VAR.into(), appnum.to_string()));
            out.push(spools::SpawnProc {
                program: prog.to_string_lossy().into_owned(),
                args: app.args.clone(),
                env,
                wdir: dir.to_string_lossy().into_owned(),
                host: app
                    .hosts
                    .get(i % app.hosts.len().max(1))
                    .cloned()
                    .unwrap_or_default(),
            });
            rank += 1;
        }
    }
    out
}

/// Starts `procs` in this process (a job no launcher hosts: a singleton, or a spawned
/// job's own spawn): on this host, with this process's environment; on a failure the
/// ones started are killed.
fn start_here(procs: &[spools::SpawnProc]) -> Result<Vec<Child>, String> {
    let mut started: Vec<Child> = Vec::new();
    for p in procs {
        let mut cmd = Command::new(&p.program);
        cmd.args(&p.args)
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&p.wdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(mut c) => {
                if let Some(o) = c.stdout.take() {
                    forward_lines(o, false);
                }
                if let Some(e) = c.stderr.take() {
                    forward_lines(e, true);
                }
                started.push(c);
            }
            Err(e) => {
                for c in &mut started {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(format!("cannot start {:?}: {e}", p.program));
            }
        }
    }
    Ok(started)
}

/// Copies a child's output to this process's standard output (or error) a whole line
/// at a time (one write each, so lines of several children and of this process never
/// mix), on a thread that ends with the child's end of the pipe.
fn forward_lines(from: impl std::io::Read + Send + 'static, to_err: bool) {
    let r = std::thread::Builder::new()
        .name("spools-spawn-output".into())
        .spawn(move || {
            use std::io::{BufRead, Write};
            let mut from = std::io::BufReader::new(from);
            let mut line = Vec::new();
            loop {
                line.clear();
                match from.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        // A write that fails (a closed output) drops the line, as the
                        // child's own write would have failed.
                        let _ = if to_err {
                            std::io::stderr().lock().write_all(&line)
                        } else {
                            let mut o = std::io::stdout().lock();
                            o.write_all(&line).and_then(|()| o.flush())
                        };
                    }
                }
            }
        });
    if let Err(e) = r {
        spools_log_warn(&format!("cannot forward a spawned process's output: {e}"));
    }
}

/// Watches the children started here (a thread each): each one's end goes to `exits`,
/// as the launcher reports the ends of those it starts.
fn reap(children: Vec<Child>, exits: &spools::Exits) {
    for (index, mut c) in (0u32..).zip(children) {
        let exits = exits.clone();
        let r = std::thread::Builder::new()
            .name("spools-spawn-reaper".into())
            .spawn(move || {
                let (success, how) = match c.wait() {
                    Ok(s) => (s.success(), s.to_string()),
                    Err(e) => (false, format!("could not be waited for ({e})")),
                };
                exits(index, success, &how);
            });
        if let Err(e) = r {
            spools_log_warn(&format!("cannot watch a spawned process: {e}"));
        }
    }
}

fn spools_log_warn(s: &str) {
    eprintln!("spools-mpi: warning: {s}");
}

/// The root's part before the broadcast: the new job hosted and its children started,
/// as `OK TICKET TOTAL` (or `ERR MESSAGE`) for the other parents.
fn root_start(
    apps: Result<Vec<App>, MpiError>,
    parents: u32,
    cfg: &spools::Config,
    own: &spools::World,
) -> (String, Option<HostedJob>) {
    let apps = match apps {
        Ok(a) => a,
        Err(e) => return (format!("ERR {e}"), None),
    };
    let total: u32 = apps.iter().map(|a| a.count).sum();
    let job = match HostedJob::host(parents + total, cfg, own.job()) {
        Ok(j) => j,
        Err(e) => {
            return (
                format!("ERR cannot host the new job's rendezvous: {e}"),
                None,
            )
        }
    };
    let procs = procs_of(&apps, parents, job.ticket());
    let ok = format!("OK {} {total}", job.ticket().to_line());
    let names: Vec<String> = procs.iter().map(|p| p.program.clone()).collect();
    let server = job.server().clone();
    // A child that ends before it joined ends the new job at once, so that nobody waits
    // for it (one that fails under a launcher ends the whole job: the launcher sees to
    // that).
    let exits: spools::Exits = Arc::new(move |index, _success, how: &str| {
        let rank = parents + index;
        if !server.joined(rank) {
            server.mark_gone(rank);
            let name = names.get(index as usize).map_or("", String::as_str);
            server.abort(
                rank,
                &format!("spawned process {rank} ({name}) ended before it joined: it {how}"),
            );
        }
    });
    match own.launch(procs.clone(), exits.clone()) {
        Ok(()) => return (ok, Some(job)),
        Err(spools::LaunchRefused::NoLauncher) => {}
        Err(e) => return (format!("ERR {e}"), None),
    }
    match start_here(&procs) {
        Ok(children) => {
            reap(children, &exits);
            (ok, Some(job))
        }
        Err(e) => (format!("ERR {e}"), None),
    }
}

/// Both spawn calls: `apps` is read at the root only.
fn spawn(
    apps: impl FnOnce() -> Result<Vec<App>, MpiError>,
    root: c_int,
    comm_h: MPI_Comm,
    intercomm: *mut MPI_Comm,
    errcodes: *mut c_int,
    call: &'static str,
) -> Result<(), MpiError> {
    rt(call)?;
    let c = comm(comm_h, call)?;
    if c.inter.is_some() {
        return Err(MpiError::invalid(
            MPI_ERR_COMM,
            format!("{call}: the spawning communicator is an intercommunicator"),
        ));
    }
    if intercomm.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: intercomm is NULL"),
        ));
    }
    let p = c.comm.size();
    let root = u32::try_from(root).ok().filter(|&r| r < p).ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_ROOT,
            format!("{call}: root {root} is not a rank of the communicator of {p}"),
        )
    })?;
    let cfg = crate::comm::world_of(&c.ctx, call)?
        .worker()
        .config()
        .clone();
    let (msg, hosted) = if c.comm.rank() == root {
        let own = crate::comm::world_of(&rt(call)?.ctx, call)?;
        root_start(apps(), p, &cfg, &own)
    } else {
        (String::new(), None)
    };
    let got = c.comm.bcast_bytes(root, msg.as_bytes())?;
    let got = String::from_utf8_lossy(&got).into_owned();
    let fields: Vec<&str> = got.splitn(5, ' ').collect();
    let (ticket, total) = match fields.as_slice() {
        ["OK", addr, secret, job, total] => {
            match (
                JobTicket::from_line(&format!("{addr} {secret} {job}")),
                total.parse::<u32>(),
            ) {
                (Some(t), Ok(n)) => (t, n),
                _ => {
                    return Err(MpiError::invalid(
                        MPI_ERR_INTERN,
                        format!("{call}: the root sent a malformed job ticket"),
                    ))
                }
            }
        }
        _ => {
            let why = got.strip_prefix("ERR ").unwrap_or(&got);
            return Err(MpiError::invalid(MPI_ERR_SPAWN, format!("{call}: {why}")));
        }
    };
    let h = crate::comm::newjob::join(
        &c,
        &ticket,
        crate::comm::newjob::Sides {
            local: 0..p,
            remote: p..p + total,
        },
        hosted,
        MPI_ERR_SPAWN,
        call,
    )?;
    if !errcodes.is_null() {
        for i in 0..total as usize {
            // SAFETY: one code per process started (the caller's contract).
            unsafe { *errcodes.add(i) = MPI_SUCCESS };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { out(intercomm, h, call) }
}

/// `MPI_Comm_spawn`: collective over `comm`; starts `maxprocs` processes of `command`
/// (read at `root`) and returns an intercommunicator to them (see the module
/// documentation). Info keys read: `wdir`, `path`, `host`, `hostfile`; `soft` is
/// accepted (every process asked for is started).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_spawn(
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let call = "MPI_Comm_spawn";
    // SAFETY: the caller's contract (read at the root only).
    let apps = || unsafe { read_app(command, argv, maxprocs, info, call) }.map(|a| vec![a]);
    let r = spawn(apps, root, comm, intercomm, array_of_errcodes, call);
    on_comm(comm, r)
}

/// `MPI_Comm_spawn_multiple`: as `MPI_Comm_spawn` for `count` commands; the children
/// of command i have `MPI_APPNUM` i and ranks in command order.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let call = "MPI_Comm_spawn_multiple";
    let apps = || -> Result<Vec<App>, MpiError> {
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("{call}: count {count}: at least one command"),
                )
            })?;
        if array_of_commands.is_null() || array_of_maxprocs.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: array_of_commands or array_of_maxprocs is NULL"),
            ));
        }
        (0..n)
            .map(|i| {
                // SAFETY: arrays of `count` entries (the caller's contract);
                // array_of_argv and array_of_info may be NULL (MPI_ARGVS_NULL, none).
                unsafe {
                    let argv = if array_of_argv.is_null() {
                        std::ptr::null()
                    } else {
                        *array_of_argv.add(i) as *const *mut c_char
                    };
                    let info = if array_of_info.is_null() {
                        MPI_INFO_NULL
                    } else {
                        *array_of_info.add(i)
                    };
                    read_app(
                        *array_of_commands.add(i),
                        argv,
                        *array_of_maxprocs.add(i),
                        info,
                        call,
                    )
                }
            })
            .collect()
    };
    let r = spawn(apps, root, comm, intercomm, array_of_errcodes, call);
    on_comm(comm, r)
}

/// `MPI_Comm_get_parent`: the intercommunicator to this process's parents if it was
/// spawned and has not freed or disconnected it, else `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    let call = "MPI_Comm_get_parent";
    let r = rt(call).and_then(|rt| {
        // SAFETY: the caller's contract.
        unsafe { out(parent, rt.parent.load(Ordering::Acquire), call) }
    });
    crate::env::errhandler::on_self(r)
}

/// `MPI_Comm_disconnect`: collective over the communicator (both groups of an
/// intercommunicator): a barrier, so that every member is done with it, then frees it;
/// for the last communicator of a job joined by a spawn or at a port, this process then
/// leaves that job without waiting for its other members (`WorldCtx::depart`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_disconnect(comm_p: *mut MPI_Comm) -> c_int {
    let call = "MPI_Comm_disconnect";
    let h = if comm_p.is_null() {
        MPI_COMM_NULL
    } else {
        // SAFETY: non-NULL (the caller's contract).
        unsafe { *comm_p }
    };
    let r = (|| {
        rt(call)?;
        if matches!(h, MPI_COMM_WORLD | MPI_COMM_SELF) {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected"),
            ));
        }
        let c = crate::comm::table::made(h)?;
        match &c.inter {
            Some(i) => i.union.barrier()?,
            None => c.comm.barrier()?,
        }
        Ok(c.ctx.clone())
    })();
    let ctx = match r {
        Ok(ctx) => ctx,
        Err(e) => return on_comm(h, Err(e)),
    };
    // SAFETY: the caller's contract.
    let rc = unsafe { crate::comm::MPI_Comm_free(comm_p) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    // The job's record and this call's hold it; anything more is a communicator or a
    // request still alive, as is a window or file that holds the job's `World`: the job
    // is then left at MPI_Finalize.
    let r = if !ctx.is_own() && Arc::strong_count(&ctx) == 2 && !ctx.world_in_use() {
        ctx.depart()
    } else {
        Ok(())
    };
    crate::env::errhandler::on_self(r)
}
