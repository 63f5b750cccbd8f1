//! This process's MPI state from `MPI_Init` on ([`Runtime`]), how a call reaches it
//! ([`rt`]), and ending the whole job ([`fatal`]). Below every object table and error
//! handler; `init.rs` makes the runtime and installs it here.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::ThreadId;

use spools::World;

use crate::comm::CommObj;
use crate::env::error::MpiError;

/// This process's MPI state, from `MPI_Init` on.
pub(crate) struct Runtime {
    /// The job (shared with the `spools` Python package when both live in its
    /// extension: `spools::shared`); `None` once finalised or aborted.
    pub(crate) world: Mutex<Option<Arc<World>>>,
    /// `MPI_COMM_WORLD`.
    pub(crate) world_comm: Arc<CommObj>,
    /// `MPI_COMM_SELF`.
    pub(crate) self_comm: Arc<CommObj>,
    /// The job of `MPI_Init` as communicators see it: its bridge (a private duplicate
    /// of the whole job, on which ranks that share no communicator yet agree on a new
    /// one's context: `comm/context.rs`) and this process's labels (`comm/worlds.rs`).
    pub(crate) ctx: Arc<crate::comm::WorldCtx>,
    /// The jobs joined since (`MPI_Comm_spawn`: `comm/spawn.rs`).
    pub(crate) worlds: crate::comm::Worlds,
    /// For a spawned process, the intercommunicator to its parents until it is freed
    /// or disconnected (`MPI_Comm_get_parent`); `MPI_COMM_NULL` otherwise.
    pub(crate) parent: std::sync::atomic::AtomicUsize,
    /// The thread level provided.
    pub(crate) thread_level: c_int,
    /// The thread that called `MPI_Init`.
    pub(crate) main_thread: ThreadId,
    /// This rank in the job of `MPI_Init` (its label: `comm/worlds.rs`).
    pub(crate) rank: u32,
}

impl Runtime {
    /// The job, for what needs more than a communicator (the shared heap, progress).
    ///
    /// # Errors
    /// [`MpiError::NotInitialized`] once finalised.
    pub(crate) fn world(&self, call: &'static str) -> Result<Arc<World>, MpiError> {
        self.world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(MpiError::NotInitialized(call))
    }
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

static FINALIZED: AtomicBool = AtomicBool::new(false);

/// The runtime of an initialised, not finalised process.
///
/// # Errors
/// [`MpiError::NotInitialized`] naming `call`.
pub(crate) fn rt(call: &'static str) -> Result<&'static Runtime, MpiError> {
    match RUNTIME.get() {
        Some(r) if !FINALIZED.load(Ordering::Acquire) => Ok(r),
        _ => Err(MpiError::NotInitialized(call)),
    }
}

/// The runtime, if `MPI_Init` was called (finalised or not).
pub(crate) fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// Ends the whole job because of `cause` on this rank (as `spools run` does for a
/// failing rank: the other ranks' calls fail and the launcher stops them), then exits
/// this process with `code` (1 when `code` is not a valid exit status).
pub(crate) fn fatal(cause: &str, code: c_int) -> ! {
    let rank = RUNTIME.get().map(|r| r.rank);
    match rank {
        Some(r) => eprintln!("spools-mpi: rank {r}: {cause}; ending the job"),
        None => eprintln!("spools-mpi: {cause}; ending the job"),
    }
    if let Some(rt) = RUNTIME.get() {
        // The jobs shared with spawned processes end too, so that they stop at once.
        for o in rt.worlds.take_all() {
            o.abort(cause);
        }
        let w = rt
            .world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = w {
            spools::shared::abort(&w, cause);
        }
    }
    let status = if (1..=255).contains(&code) { code } else { 1 };
    std::process::exit(status)
}

/// Installs the runtime (once per process).
///
/// # Errors
/// [`MpiError::Init`] if one was installed already.
pub(crate) fn install(rt: Runtime) -> Result<(), MpiError> {
    RUNTIME
        .set(rt)
        .map_err(|_| MpiError::Init("initialised twice".into()))
}

/// Marks the runtime finalised: [`rt`] fails from now on.
pub(crate) fn mark_finalized() {
    FINALIZED.store(true, Ordering::Release);
}

/// Whether `MPI_Finalize` has run.
pub(crate) fn is_finalized() -> bool {
    FINALIZED.load(Ordering::Acquire)
}
