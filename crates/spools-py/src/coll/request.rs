//! The request of a non-blocking collective, `CollRequest`: `wait()` gives the result
//! the blocking form would (the runtime's result vector becomes the numpy array without
//! a copy, or is copied into `out=`), `test()` whether it finished.

use std::sync::Arc;

use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use spools::MsgError;

use super::ops::UserOp;
use super::shapes::{coll_err, result, tuple};
use crate::buffer::{self, Access, View};
use crate::errors::{self, Kind};
use crate::runtime;

/// Makes the finished collective's array (1-D, of the carrier type) with the GIL.
pub(crate) type Finisher = Box<dyn for<'py> FnOnce(Python<'py>) -> Bound<'py, PyAny> + Send>;

/// A runtime request, whatever its element type.
pub(crate) trait Pending: Send + Sync {
    /// Progress once; whether it finished.
    fn test(&self) -> bool;
    /// Waits for it; the result's array maker (`None`: no array).
    fn wait(&mut self) -> Result<Option<Finisher>, MsgError>;
}

/// A collective whose result is a vector.
pub(crate) struct Typed<T: spools::Element>(pub(crate) Option<spools::CollRequest<Vec<T>>>);

impl<T: spools::Element + numpy::Element> Pending for Typed<T> {
    fn test(&self) -> bool {
        self.0.as_ref().is_none_or(|r| r.test())
    }

    fn wait(&mut self) -> Result<Option<Finisher>, MsgError> {
        match self.0.take() {
            Some(r) => {
                let v = r.wait()?;
                Ok(Some(Box::new(move |py| {
                    PyArray1::from_vec(py, v).into_any()
                })))
            }
            None => Ok(None),
        }
    }
}

/// A barrier.
pub(crate) struct Unit(pub(crate) Option<spools::CollRequest<()>>);

impl Pending for Unit {
    fn test(&self) -> bool {
        self.0.as_ref().is_none_or(|r| r.test())
    }

    fn wait(&mut self) -> Result<Option<Finisher>, MsgError> {
        match self.0.take() {
            Some(r) => r.wait().map(|()| None),
            None => Ok(None),
        }
    }
}

/// What `wait` returns.
pub(crate) enum Finish {
    /// `None` (a barrier; a rooted collective on another rank than the root).
    Nothing,
    /// The result as an array of `dtype` and `shape`, or copied into `out`.
    Array {
        dtype: Py<PyArrayDescr>,
        shape: Vec<usize>,
        out: Option<Py<PyAny>>,
    },
    /// The result copied into `target`, which is returned (a broadcast).
    Into(Py<PyAny>),
}

/// A non-blocking collective in flight (returned by `Comm.ibcast`, `Comm.iallreduce`,
/// ...). `wait()` returns its result (as the blocking form would), `test()` whether it
/// finished. A request that is dropped unwaited is finished first (the other ranks
/// depend on it); a Ctrl-C during that wait is raised as `KeyboardInterrupt` right after.
#[pyclass(module = "spools")]
pub(crate) struct CollRequest {
    what: &'static str,
    pending: Option<Box<dyn Pending>>,
    finish: Finish,
    user: Option<Arc<UserOp>>,
    result: Option<Py<PyAny>>,
    failed: bool,
}

impl CollRequest {
    pub(crate) fn new(
        what: &'static str,
        pending: Box<dyn Pending>,
        finish: Finish,
        user: Option<Arc<UserOp>>,
    ) -> CollRequest {
        CollRequest {
            what,
            pending: Some(pending),
            finish,
            user,
            result: None,
            failed: false,
        }
    }

    /// The result from the finished collective's array maker.
    fn finished(&self, py: Python<'_>, made: Option<Finisher>) -> PyResult<Py<PyAny>> {
        let made = made.map(|f| f(py));
        match (&self.finish, made) {
            (Finish::Nothing, _) => Ok(py.None()),
            (Finish::Into(t), Some(m)) => {
                let src = buffer::view(&m, Access::Read, "result")?;
                let dst = buffer::view(t.bind(py), Access::Write, "Ibcast: a")?;
                copy_into(&src, &dst, self.what)?;
                Ok(t.clone_ref(py))
            }
            (
                Finish::Array {
                    dtype,
                    shape,
                    out: Some(o),
                },
                Some(m),
            ) => {
                let src = buffer::view(&m, Access::Read, "result")?;
                let (o, dst) = result(py, Some(o.bind(py)), dtype.bind(py), shape, self.what)?;
                copy_into(&src, &dst, self.what)?;
                Ok(o.unbind())
            }
            (
                Finish::Array {
                    dtype,
                    shape,
                    out: None,
                },
                Some(m),
            ) => {
                // The carrier's own dtype and a 1-D shape need neither a view nor a
                // reshape (the common case of a flat float or integer array).
                let a = m
                    .cast::<PyUntypedArray>()
                    .map_err(|e| errors::type_error(e.to_string()))?;
                if shape.len() == 1 && a.dtype().is_equiv_to(dtype.bind(py)) {
                    return Ok(m.unbind());
                }
                Ok(m.call_method1("view", (dtype.bind(py),))?
                    .call_method1("reshape", (shape.clone(),))?
                    .unbind())
            }
            (_, None) => Err(errors::raise(
                Kind::Spools,
                format!("{}: the request gave no result", self.what),
            )),
        }
    }
}

/// Copies the bytes of `src` into `dst` (the same length).
fn copy_into(src: &View, dst: &View, what: &str) -> PyResult<()> {
    if src.len() != dst.len() {
        return Err(errors::value_error(format!(
            "{what}: the result has {} bytes, its destination {} (shape {})",
            src.len(),
            dst.len(),
            tuple(&dst.shape)
        )));
    }
    // SAFETY: a writable view used by this call alone; `src` is another array.
    unsafe { dst.bytes_mut() }.copy_from_slice(src.bytes());
    Ok(())
}

#[pymethods]
impl CollRequest {
    /// Waits for the collective and returns its result: the array the blocking form
    /// returns (`None` for `ibarrier` and on non-root ranks of `Ireduce`/`Igather`).
    /// Further calls return the same result. Releases the GIL while it waits.
    fn wait(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        runtime::check_live()?;
        if let Some(r) = &self.result {
            return Ok(r.clone_ref(py));
        }
        if self.failed {
            return Err(errors::raise(
                Kind::Spools,
                format!(
                    "{}: this request already failed (see the first wait)",
                    self.what
                ),
            ));
        }
        let Some(mut p) = self.pending.take() else {
            return Err(errors::raise(
                Kind::Spools,
                format!("{}: the request has no collective", self.what),
            ));
        };
        let got = runtime::blocking(py, move || p.wait());
        let user = self.user.as_ref().and_then(|u| u.take_error());
        // Another rank's function raised: the collective's agreement said so.
        let spoiled = self.user.as_ref().and_then(|u| u.take_spoiled());
        let made = match (user, got, spoiled) {
            (Some(e), _, _) => Err(e),
            (None, Err(e), _) => Err(coll_err(e)),
            (None, Ok(_), Some(rank)) => Err(errors::raise(
                Kind::Spools,
                format!(
                    "{}: rank {rank}'s reduction function raised (that rank raises its \
                     exception): this rank's result is not valid",
                    self.what
                ),
            )),
            (None, Ok(m), None) => self.finished(py, m),
        };
        match made {
            Ok(r) => {
                self.result = Some(r.clone_ref(py));
                Ok(r)
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Whether the collective finished (then `wait` returns at once). Runs one round of
    /// the rank's progress, so polling `test` drives the collective.
    fn test(&self, py: Python<'_>) -> PyResult<bool> {
        runtime::check_live()?;
        Ok(match &self.pending {
            None => true,
            Some(p) => runtime::blocking(py, || p.test()),
        })
    }

    fn __repr__(&self) -> String {
        let state = if self.result.is_some() {
            "done"
        } else if self.failed {
            "failed"
        } else {
            "in flight"
        };
        format!("<spools.CollRequest {} ({state})>", self.what)
    }
}

impl Drop for CollRequest {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            // Dropping the runtime's request finishes the collective: without the GIL,
            // which a Python reduction function may need meanwhile. An exception may be
            // propagating (the request was a temporary of the statement that raised): it
            // is set aside during the wait, in which Python code may run (the interrupt
            // check, a reduction function), then put back.
            Python::attach(|py| {
                let in_flight = PyErr::take(py);
                let unwinding_interrupt = in_flight
                    .as_ref()
                    .is_some_and(|e| e.is_instance_of::<PyKeyboardInterrupt>(py));
                py.detach(move || drop(p));
                if let Some(e) = in_flight {
                    e.restore(py);
                }
                // A Ctrl-C during that wait ended it: Drop cannot raise, so the
                // interrupt is delivered again, for the next bytecode to raise, unless
                // a KeyboardInterrupt already propagates (the Ctrl-C is that one).
                if crate::interrupt::take_interrupt().is_some() && !unwinding_interrupt {
                    // SAFETY: PyErr_SetInterrupt only flags SIGINT as pending for the
                    // interpreter (async-signal-safe); called with the GIL held here.
                    unsafe { pyo3::ffi::PyErr_SetInterrupt() };
                }
            });
        }
    }
}
