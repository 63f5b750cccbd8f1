//! The process's one runtime: `spools.init()`, finalisation, abort, and the two rules of
//! every blocking call (the GIL is released, Ctrl-C interrupts it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyModule;
use spools::{Communicator, Worker};

use crate::comm::{Comm, World};
use crate::errors::{self, Kind};

/// What every object of the interface shares: the rank's `spools::World` (until it is
/// finalised or aborted), its worker and its first communicator. The world is the
/// process's shared one (`spools::shared`): the MPI library inside this extension, which
/// mpi4py may load, is the same rank of the same job.
pub(crate) struct Runtime {
    world: Mutex<Option<Arc<spools::World>>>,
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
    io: OnceLock<Communicator>,
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
static RUNTIME: Mutex<Option<Arc<Runtime>>> = Mutex::new(None);
/// Whether `finalize` or `abort` ran (then `init` may not run again).
static ENDED: Mutex<bool> = Mutex::new(false);
/// The World object `init` returned (so that a second `init` returns the same one).
static WORLD_OBJ: Mutex<Option<Py<World>>> = Mutex::new(None);
thread_local! {
    /// The exception the interrupt check took from Python's signal handlers (Ctrl-C), for
    /// the failed call to raise instead of the error the interrupt caused. Per thread:
    /// the check runs on the waiting thread, and that thread raises the call's error
    /// (another thread's unrelated error never takes it).
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// Whether the runtime runs (set by `init`, cleared by `finalize`/`abort`): the check
/// of every call, without a lock.
static LIVE: AtomicBool = AtomicBool::new(false);

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
    redeliver_interrupt();
    py.detach(f)
}

/// The exception of an interrupt that ended a wait, if one did.
pub(crate) fn take_interrupt() -> Option<PyErr> {
    PENDING.with(|p| p.borrow_mut().take())
}

/// The interrupt check: runs Python's pending signal handlers (a wait asks only before
/// it sleeps, so this costs nothing while messages flow).
fn interrupt_check() -> bool {
    reentering(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// Runs `f`, which calls Python (a signal handler, a reduction function, an RPC
/// function), with the GIL and no exception set, and puts back the exception that was
/// set before. A wait may run while one propagates: a request dropped during the
/// unwinding finishes its collective. Python code may not run with an exception set
/// (CPython then loses the propagating one, or crashes), and `f`'s own outcome must not
/// replace it.
pub(crate) fn reentering<T>(f: impl FnOnce(Python<'_>) -> T) -> T {
    Python::attach(|py| {
        let in_flight = PyErr::take(py);
        let r = f(py);
        if let Some(e) = in_flight {
            e.restore(py);
        }
        r
    })
}

/// Starts this rank (collective: every rank of the job calls it) and returns the
/// `World`. Run alone, the job has one rank. A second call returns the same `World`.
///
/// Raises `InitError` when the rank cannot join its job, `FinalizedError` after
/// `finalize()`.
#[pyfunction]
pub(crate) fn init(py: Python<'_>) -> PyResult<Py<World>> {
    if let Some(w) = WORLD_OBJ
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
    {
        return Ok(w.clone_ref(py));
    }
    if *ENDED.lock().unwrap_or_else(PoisonError::into_inner) {
        return Err(errors::raise(
            Kind::Finalized,
            "the runtime was finalised; it cannot start again in this process",
        ));
    }
    let world = py
        .detach(spools::shared::join)
        .map_err(|e| errors::raise(Kind::Init, e.to_string()))?;
    let worker = world.worker().clone();
    worker.set_interrupt(Some(Arc::new(interrupt_check)));
    let eager_limit = worker.config().eager_limit as usize;
    let rt = Arc::new(Runtime {
        comm: world.communicator().clone(),
        eager_limit,
        io: OnceLock::new(),
        secret: world.secret().clone(),
        worker,
        world: Mutex::new(Some(world)),
    });
    *RUNTIME.lock().unwrap_or_else(PoisonError::into_inner) = Some(rt.clone());
    LIVE.store(true, Ordering::Release);
    let obj = Py::new(
        py,
        PyClassInitializer::from(Comm::new(rt.comm.clone(), rt)).add_subclass(World),
    )?;
    *WORLD_OBJ.lock().unwrap_or_else(PoisonError::into_inner) = Some(obj.clone_ref(py));
    Ok(obj)
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

/// Takes the world out for its end; `None` if it already ended.
fn take_world() -> Option<Arc<spools::World>> {
    let rt = RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    *ENDED.lock().unwrap_or_else(PoisonError::into_inner) = true;
    LIVE.store(false, Ordering::Release);
    WORLD_OBJ
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let rt = rt?;
    rt.worker.set_interrupt(None);
    let w = rt
        .world
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    w
}

/// Ends this rank's part of the job: waits until every rank finalised (collective).
/// Also run at interpreter exit; a second call does nothing.
pub(crate) fn finalize(py: Python<'_>) -> PyResult<()> {
    match take_world() {
        Some(w) => py
            .detach(|| spools::shared::leave(w))
            .map_err(errors::from_boot),
        None => Ok(()),
    }
}

/// Ends the whole job because of a failure on this rank: the other ranks' operations
/// fail with `PeerGoneError` naming this rank and `cause`. Does not exit the process.
pub(crate) fn abort(cause: &str) {
    if let Some(w) = take_world() {
        spools::shared::abort(&w, cause);
    }
}

#[pyfunction(name = "finalize")]
fn finalize_fn(py: Python<'_>) -> PyResult<()> {
    finalize(py)
}

/// Ends the job because of this rank (without exiting: `World.abort` also exits).
#[pyfunction(name = "_abort_job")]
fn abort_job(cause: &str) {
    abort(cause)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(initialized, m)?)?;
    m.add_function(wrap_pyfunction!(finalized, m)?)?;
    m.add_function(wrap_pyfunction!(finalize_fn, m)?)?;
    m.add_function(wrap_pyfunction!(abort_job, m)?)?;
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

/// Re-delivers this thread's interrupt that no call raised (a wait in a `Drop` that
/// swallowed its error): Python raises `KeyboardInterrupt` at its next check, instead of
/// a later unrelated error turning into it. Run by every [`blocking`] call first; a
/// `Drop` that waits may call it after its wait.
pub(crate) fn redeliver_interrupt() {
    if take_interrupt().is_some() {
        // SAFETY: a plain C call of the limited API, documented as callable from any
        // thread, with or without the GIL.
        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
    }
}
