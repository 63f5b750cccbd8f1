//! The process's one runtime ([`Runtime`], which `spools.init()` starts and `finalize` and
//! `abort` end: `world.rs`), and the two rules of every blocking call (the GIL is
//! released, Ctrl-C interrupts it: `interrupt.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyModule;
use spools::{Communicator, Worker};

use crate::errors::{self, Kind};

/// What every object of the interface shares: the rank's `spools::World` (until it is
/// finalised or aborted), its worker and its first communicator. The world is the
/// process's shared one (`spools::shared`): the MPI library inside this extension, which
/// mpi4py may load, is the same rank of the same job.
pub(crate) struct Runtime {
    pub(crate) world: Mutex<Option<Arc<spools::World>>>,
    /// The rank's active-message worker (waits, handlers, the interrupt check).
    pub(crate) worker: Worker,
    /// The world's communicator (every rank of the job).
    pub(crate) comm: Communicator,
    /// Messages up to this size leave at once (short or eager): a send of one does
    /// not wait for the receiver.
    pub(crate) eager_limit: usize,
    /// The job's secret, which streams prove to a receiver that requires it.
    pub(crate) secret: spools_proto::auth::Secret,
    /// The communicator parallel I/O runs on, once made (see `io_comm`).
    pub(crate) io: OnceLock<Communicator>,
}

impl Runtime {
    /// Runs `f` on the rank's `spools::World`, under the lock that `finalize` takes:
    /// `f` must not wait (a wait that releases the GIL could need it back, for the
    /// interrupt check or an RPC function, while another thread holds the GIL and waits
    /// for this lock).
    ///
    /// # Errors
    /// `FinalizedError` once the world is finalised or aborted.
    pub(crate) fn with_world<R>(&self, f: impl FnOnce(&spools::World) -> R) -> PyResult<R> {
        let g = self.world.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_ref() {
            Some(w) => Ok(f(w)),
            None => Err(errors::raise(
                Kind::Finalized,
                "the runtime is finalised: no call may follow finalize() or abort()",
            )),
        }
    }

    /// The communicator parallel I/O runs on (a duplicate of the world's, made by the
    /// first call on every rank: collective the first time).
    ///
    /// # Errors
    /// `FinalizedError`, or the duplicate failing (a dead peer).
    pub(crate) fn io_comm(&self, py: Python<'_>) -> PyResult<Communicator> {
        if let Some(c) = self.io.get() {
            return Ok(c.clone());
        }
        // The duplicate is made outside the world's lock (see `with_world`).
        let world = self.with_world(|w| w.communicator().clone())?;
        let dup = py.detach(|| world.dup()).map_err(errors::from_msg)?;
        Ok(self.io.get_or_init(|| dup).clone())
    }
}

/// The runtime, once `init` ran; `None` again after finalisation.
pub(crate) static RUNTIME: Mutex<Option<Arc<Runtime>>> = Mutex::new(None);
/// Whether `finalize` or `abort` ran (then `init` may not run again).
pub(crate) static ENDED: Mutex<bool> = Mutex::new(false);
/// Whether the runtime runs (set by `init`, cleared by `finalize`/`abort`): the check
/// of every call, without a lock.
pub(crate) static LIVE: AtomicBool = AtomicBool::new(false);

/// `FinalizedError` once `finalize()` or `abort()` ran (calls on objects made before).
///
/// # Errors
/// As said.
pub(crate) fn check_live() -> PyResult<()> {
    if LIVE.load(Ordering::Acquire) {
        Ok(())
    } else {
        get().map(|_| ())
    }
}

/// The runtime every call uses.
///
/// # Errors
/// `FinalizedError` after `finalize()`/`abort()`; `InitError` before `init()`.
pub(crate) fn get() -> PyResult<Arc<Runtime>> {
    if let Some(rt) = RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
    {
        return Ok(rt.clone());
    }
    if *ENDED.lock().unwrap_or_else(PoisonError::into_inner) {
        Err(errors::raise(
            Kind::Finalized,
            "the runtime is finalised: no call may follow finalize() or abort()",
        ))
    } else {
        Err(errors::raise(Kind::Init, "spools.init() has not run"))
    }
}

/// Runs a call that may wait with the GIL released, so that other Python threads run
/// meanwhile. The wait asks the interrupt check before it sleeps: Ctrl-C ends it, and the
/// error it then returns is raised as the `KeyboardInterrupt` (see [`errors::raise`]).
pub(crate) fn blocking<T, F>(py: Python<'_>, f: F) -> T
where
    F: pyo3::marker::Ungil + FnOnce() -> T,
    T: pyo3::marker::Ungil,
{
    crate::interrupt::redeliver_interrupt();
    py.detach(f)
}

/// Whether `init` ran and the runtime is not finalised.
#[pyfunction]
fn initialized() -> bool {
    RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some()
}

/// Whether `finalize` or `abort` ran.
#[pyfunction]
fn finalized() -> bool {
    *ENDED.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(initialized, m)?)?;
    m.add_function(wrap_pyfunction!(finalized, m)?)?;
    m.add("ANY_SOURCE", -1)?;
    m.add("ANY_TAG", -1)?;
    Ok(())
}

/// Whether a Python function may run inside progress (an RPC function was registered,
/// or a Python reduction operator set up): from then on, every call that may spin in
/// progress (an eager send waiting for ring room) releases the GIL, which that function
/// needs on the progressing thread.
static PYTHON_IN_PROGRESS: AtomicBool = AtomicBool::new(false);

/// Notes that a Python function may now run inside progress (see
/// [`python_in_progress`]); called where one is registered or set up.
pub(crate) fn note_python_in_progress() {
    PYTHON_IN_PROGRESS.store(true, Ordering::Release);
}

/// Whether a Python function may run inside progress: then a send may not keep the GIL
/// while it waits for room (the progressing thread, maybe another one, may wait for it).
pub(crate) fn python_in_progress() -> bool {
    PYTHON_IN_PROGRESS.load(Ordering::Acquire)
}
