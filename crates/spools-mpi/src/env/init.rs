//! Joining and leaving the job (`MPI_Init*`, `MPI_Finalize`, `MPI_Abort`), thread
//! levels, and what the library says about itself and the machine (`MPI_Wtime`,
//! `MPI_Get_version`, `MPI_Get_library_version`, `MPI_Get_processor_name`).

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use spools::ThreadLevel;

use crate::abi::*;
use crate::comm::CommObj;
use crate::env::errhandler::on_self;
use crate::env::error::{put_string, MpiError};
use crate::runtime::{fatal, rt};

static STARTED: AtomicBool = AtomicBool::new(false);
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Joins the job for a session if nothing joined it yet (`MPI_Session_init`).
///
/// # Errors
/// As `MPI_Init`.
pub(crate) fn ensure_started() -> Result<(), MpiError> {
    static JOINING: Mutex<()> = Mutex::new(());
    let _g = JOINING.lock().unwrap_or_else(PoisonError::into_inner);
    if crate::runtime::runtime().is_some() {
        return Ok(());
    }
    join(MPI_THREAD_MULTIPLE).map(drop)
}

/// `MPI_Init*`: the world model starts (the job may have been joined by a session).
fn start(required: c_int) -> Result<c_int, MpiError> {
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(MpiError::invalid(
            MPI_ERR_OTHER,
            "MPI_Init: MPI was already initialized in this process (once per process)",
        ));
    }
    match crate::runtime::runtime() {
        Some(rt) => Ok(rt.thread_level),
        None => join(required),
    }
}

fn join(required: c_int) -> Result<c_int, MpiError> {
    EPOCH.get_or_init(Instant::now);
    // SINGLE and FUNNELED: the rank's one thread owns the engine's state (no lock on
    // the message path; a call from another thread ends the process, naming the level).
    let level = match required {
        MPI_THREAD_SINGLE => ThreadLevel::Single,
        MPI_THREAD_FUNNELED => ThreadLevel::Funneled,
        MPI_THREAD_SERIALIZED => ThreadLevel::Serialized,
        _ => ThreadLevel::Multiple,
    };
    let world = spools::shared::join_at(level).map_err(|e| MpiError::Init(e.to_string()))?;
    let comm = world.communicator().clone();
    let me = comm.rank();
    // A spawned process: its job holds its parents too, and MPI_COMM_WORLD is the
    // children's part of it (`comm/spawn.rs`).
    let spawned = match crate::comm::spawn::parents_of_job(world.job(), comm.size())? {
        Some(parents) => Some((
            parents,
            crate::comm::newjob::set_up(&comm, true, (world.job(), me))?,
        )),
        None => None,
    };
    let (world_c, links) = match spawned {
        Some((parents, mut links)) => {
            let side = links.side.take().ok_or_else(|| {
                MpiError::Init("a spawned process's MPI_COMM_WORLD could not be made".into())
            })?;
            (side, Some((parents, links)))
        }
        None => (comm.clone(), None),
    };
    let selfc = world_c
        .split(Some(world_c.rank()), 0)?
        .ok_or_else(|| MpiError::Init("MPI_COMM_SELF could not be made".into()))?;
    let bridge = match &links {
        Some((_, l)) => l.bridge.clone(),
        None => comm.dup()?,
    };
    let ctx = crate::comm::WorldCtx::own(bridge, me, world.job());
    // The level asked for, or higher where SPOOLS_THREAD_LEVEL or the progress thread
    // raised it: at SERIALIZED and MULTIPLE the rank's state is locked, below it belongs
    // to the thread that initialised.
    let provided = match world.worker().config().thread_level_in_effect() {
        ThreadLevel::Single => MPI_THREAD_SINGLE,
        ThreadLevel::Funneled => MPI_THREAD_FUNNELED,
        ThreadLevel::Serialized => MPI_THREAD_SERIALIZED,
        ThreadLevel::Multiple => MPI_THREAD_MULTIPLE,
    };
    let rt = crate::runtime::Runtime {
        world_comm: CommObj::new(world_c, ctx.clone(), "MPI_COMM_WORLD"),
        self_comm: CommObj::new(selfc, ctx.clone(), "MPI_COMM_SELF"),
        worlds: crate::comm::Worlds::new(comm.size()),
        parent: std::sync::atomic::AtomicUsize::new(MPI_COMM_NULL),
        ctx,
        world: Mutex::new(Some(world)),
        thread_level: provided,
        main_thread: std::thread::current().id(),
        rank: me,
    };
    crate::runtime::install(rt)?;
    if let Some((parents, links)) = links {
        let rt = crate::runtime::rt("MPI_Init")?;
        // The parents are ranks of this job, and keep those labels in later ones.
        for (r, &k) in links.keys.iter().enumerate().take(parents as usize) {
            rt.worlds.know(k, r as u32);
        }
        let h = crate::comm::spawn::parent_link(&rt.world_comm, rt.ctx.clone(), links, parents)?;
        rt.parent.store(h, Ordering::Release);
    }
    Ok(provided)
}

/// `MPI_Init`: joins the job this process belongs to (started by `spools run`,
/// `mpirun`, `srun`, or alone as a job of one rank).
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let _ = (argc, argv);
    on_self(start(MPI_THREAD_SINGLE).map(drop))
}

/// `MPI_Init_thread`: as `MPI_Init`, with the thread level asked for; every level up to
/// `MPI_THREAD_MULTIPLE` is provided, raised where `SPOOLS_THREAD_LEVEL` or the progress
/// thread asks for more (at single and funneled the rank's state belongs to this thread).
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let _ = (argc, argv);
    on_self(start(required).map(|p| {
        if !provided.is_null() {
            // SAFETY: non-NULL, writable (the caller's contract).
            unsafe { *provided = p };
        }
    }))
}

/// `MPI_Finalize`: leaves the job once every rank has finalised.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    let r = (|| {
        let rt = rt("MPI_Finalize")?;
        // MPI frees MPI_COMM_SELF first: its attributes' delete callbacks run here,
        // while every MPI call still works (libraries hook their own finalisation so).
        // A callback's error is reported, and the job is still left (a rank that
        // stayed would be taken for a dead one).
        let me = crate::comm::comm(MPI_COMM_SELF, "MPI_Finalize")?;
        let deleted = crate::comm::attr::delete_all(MPI_COMM_SELF, &me.attrs);
        let left = leave(rt);
        deleted.and(left)
    })();
    on_self(r)
}

/// The end of this process's part in the job: buffered sends out, requests freed
/// before completion finished, the job left.
fn leave(rt: &crate::runtime::Runtime) -> Result<(), MpiError> {
    crate::p2p::buffer::flush()?;
    crate::p2p::request::finish_detached();
    // The jobs joined by spawns and ports first, newest first: this process leaves each
    // without waiting for its other members, then waits for those whose rendezvous it
    // hosts (their members still need it), then leaves its own job.
    let joined = rt.worlds.take_all();
    let mut others = Ok(());
    for w in joined.iter().rev() {
        // Every job is left, whatever an earlier one said; the first failure is told.
        let r = w.depart();
        if others.is_ok() {
            others = r;
        }
    }
    for w in &joined {
        w.wait_hosted();
    }
    let w = rt
        .world
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    crate::runtime::mark_finalized();
    crate::file::release_pages();
    if let Some(w) = w {
        spools::shared::leave(w)
            .map_err(|e| MpiError::invalid(MPI_ERR_PROC_ABORTED, e.to_string()))?;
    }
    others
}

/// A program of sessions only, at its exit with every session finalised: leaves the
/// job (nothing, when the world model started or the job was left already).
pub(crate) fn leave_sessions_only() {
    if STARTED.load(Ordering::Acquire) || crate::runtime::is_finalized() {
        return;
    }
    if let Some(rt) = crate::runtime::runtime() {
        if let Err(e) = leave(rt) {
            eprintln!("spools-mpi: leaving the job at exit: {e}");
        }
    }
}

/// `MPI_Initialized`: whether `MPI_Init` was called (the world model; a session alone
/// does not count).
#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    if !flag.is_null() {
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *flag = c_int::from(STARTED.load(Ordering::Acquire)) };
    }
    MPI_SUCCESS
}

/// `MPI_Finalized`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    if !flag.is_null() {
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *flag = c_int::from(crate::runtime::is_finalized()) };
    }
    MPI_SUCCESS
}

/// `MPI_Query_thread`: the level `MPI_Init_thread` provided.
#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    let r = rt("MPI_Query_thread").map(|rt| {
        if !provided.is_null() {
            // SAFETY: non-NULL, writable (the caller's contract).
            unsafe { *provided = rt.thread_level };
        }
    });
    on_self(r)
}

/// `MPI_Is_thread_main`: whether this is the thread that initialised MPI.
#[no_mangle]
pub unsafe extern "C" fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    let r = rt("MPI_Is_thread_main").map(|rt| {
        if !flag.is_null() {
            // SAFETY: non-NULL, writable (the caller's contract).
            unsafe { *flag = c_int::from(std::thread::current().id() == rt.main_thread) };
        }
    });
    on_self(r)
}

/// `MPI_Abort`: ends the whole job with `errorcode` as this process's exit status.
#[no_mangle]
pub unsafe extern "C" fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let _ = comm;
    fatal(
        &format!("MPI_Abort was called with error code {errorcode}"),
        errorcode,
    )
}

/// `MPI_Wtime`: seconds since an arbitrary time in the past (this process's
/// `MPI_Init`), from a monotonic clock.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wtime() -> f64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// `MPI_Wtick`: the resolution of `MPI_Wtime` (the monotonic clock's nanosecond).
#[no_mangle]
pub unsafe extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

/// `MPI_Get_version`: the MPI standard version this library implements (5.0).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    if version.is_null() || subversion.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Get_version: NULL output",
        )));
    }
    // SAFETY: non-NULL, writable (the caller's contract).
    unsafe {
        *version = MPI_VERSION;
        *subversion = MPI_SUBVERSION;
    }
    MPI_SUCCESS
}

/// `MPI_Abi_get_version`: the standard ABI's version (1.0).
#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_version(
    abi_major: *mut c_int,
    abi_minor: *mut c_int,
) -> c_int {
    if abi_major.is_null() || abi_minor.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Abi_get_version: NULL output",
        )));
    }
    // SAFETY: non-NULL, writable (the caller's contract).
    unsafe {
        *abi_major = MPI_ABI_VERSION;
        *abi_minor = MPI_ABI_SUBVERSION;
    }
    MPI_SUCCESS
}

/// The file this library was loaded from (the line of /proc/self/maps that holds
/// this function's code).
fn own_path() -> Option<String> {
    let me = library_version as *const () as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (lo, hi) = f.next()?.split_once('-')?;
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).ok()?,
            usize::from_str_radix(hi, 16).ok()?,
        );
        let path = f.nth(4)?;
        (lo <= me && me < hi).then(|| path.to_string())
    })
}

/// The library's version string: names Spools and the file it was loaded from.
pub(crate) fn library_version() -> String {
    format!(
        "Spools {} (MPI {MPI_VERSION}.{MPI_SUBVERSION} standard ABI {MPI_ABI_VERSION}.{MPI_ABI_SUBVERSION}, {})",
        env!("CARGO_PKG_VERSION"),
        own_path().unwrap_or_else(|| "libmpi_abi.so.1".into())
    )
}

/// `MPI_Get_library_version`: "Spools VERSION (libmpi_abi.so.1, MPI 5.0 standard ABI
/// 1.0)".
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    // SAFETY: the standard's contract: MPI_MAX_LIBRARY_VERSION_STRING bytes.
    unsafe {
        put_string(
            &library_version(),
            version,
            MPI_MAX_LIBRARY_VERSION_STRING as usize,
            resultlen,
        );
    }
    MPI_SUCCESS
}

/// `MPI_Get_processor_name`: this host's name.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    // SAFETY: the standard's contract: MPI_MAX_PROCESSOR_NAME bytes.
    unsafe { put_string(&host, name, MPI_MAX_PROCESSOR_NAME as usize, resultlen) };
    MPI_SUCCESS
}
