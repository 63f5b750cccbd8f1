//! `World` (the communicator of every rank) and the job's start and end: `spools.init()`
//! makes the one `World` object, `finalize` and `abort` end the job.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::interrupt::interrupt_check;
use crate::runtime::{Runtime, ENDED, LIVE, RUNTIME};

/// The World object `init` returned (so that a second `init` returns the same one).
static WORLD_OBJ: Mutex<Option<Py<World>>> = Mutex::new(None);

/// The communicator of every rank of the job, and the job's end: `finalize` and `abort`.
/// `spools.init()` returns it.
#[pyclass(extends = Comm, frozen, module = "spools")]
pub(crate) struct World;

#[pymethods]
impl World {
    /// Ends this rank's part of the job: waits until every rank has finalised.
    /// Collective. `spools` also runs it at interpreter exit; later calls do nothing.
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        finalize(py)
    }

    /// Ends the whole job because of a failure on this rank and exits this process with
    /// `code`: the other ranks' pending and later calls raise `PeerGoneError` naming
    /// this rank and `message`.
    #[pyo3(signature = (code = 1, message = None))]
    fn abort(&self, py: Python<'_>, code: i32, message: Option<String>) -> PyResult<()> {
        let cause = message.unwrap_or_else(|| format!("abort({code})"));
        // Flush what the program printed: the process exits without Python's shutdown.
        for stream in ["stdout", "stderr"] {
            if let Ok(s) = py.import("sys").and_then(|sys| sys.getattr(stream)) {
                let _ = s.call_method0("flush");
            }
        }
        abort(&cause);
        std::process::exit(code)
    }

    /// The job's identifier (the same on every rank).
    #[getter]
    fn job(self_: PyRef<'_, Self>) -> PyResult<u64> {
        self_.as_super().rt.with_world(|w| w.job())
    }

    fn __repr__(self_: PyRef<'_, Self>) -> String {
        let c = &self_.as_super().comm;
        format!("<spools.World rank {} of {}>", c.rank(), c.size())
    }
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
    m.add_class::<World>()?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(finalize_fn, m)?)?;
    m.add_function(wrap_pyfunction!(abort_job, m)?)?;
    Ok(())
}
