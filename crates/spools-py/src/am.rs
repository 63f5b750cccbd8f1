//! Remote procedure calls of Python functions: `register_rpc`/`@rpc`, `call`,
//! `call_async` and its [`RpcRequest`]. Arguments and results travel pickled
//! (`spools/_am.py` packs and unpacks them) through `spools_msg`'s RPC.
//!
//! Where a Python function runs, and why it cannot deadlock: `spools_msg` runs an RPC
//! function in the engine's poller, at the end of a progress round, on whichever thread
//! progresses (a Spools call that waits, or the progress thread), while that thread holds
//! the active-message layer's progress lock but no engine lock (the poller takes the
//! calls out under the engine's state lock, releases it, then runs them). The function
//! here takes the GIL ([`reentering`]) for the call. The thread holding the GIL never
//! waits for the progress lock: every Spools call that waits releases the GIL first
//! ([`runtime::blocking`]), and progress only ever *tries* the progress lock (a thread
//! that finds it taken carries on without progressing). So the progressing thread waits
//! for the GIL only behind Python code that will release it (at its next Spools call or
//! the interpreter's switch interval), and nothing waits for it while it holds the GIL.
//! Likewise, every lock this area holds across a wait (an `RpcRequest`'s state, a pipe's
//! or a stream's end) is taken with the GIL released: a thread holding the GIL never
//! waits for a thread that waits for the GIL.
//! A Python function that called Spools would wait for the progress that runs it: the
//! docs forbid it, and the calls of this area (RPC, pipes, streams) refuse it
//! ([`in_rpc`]).

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyModule, PyString, PyTuple};
use spools::{RpcError, RpcHandle};

use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::reentry::{in_rpc, reentering, refuse_in_rpc, IN_RPC};
use crate::runtime;

/// An attribute of `spools._am`, looked up once.
fn am_attr<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("spools._am")?.getattr(name)?.unbind())
    })
    .map(|f| f.bind(py))
}

fn serve_fn(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    am_attr(py, &F, "_serve")
}

fn pack_fn(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    am_attr(py, &F, "_pack_call")
}

fn unpack_fn(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    am_attr(py, &F, "_unpack_reply")
}

/// Runs the Python function `f` for one call (on the progressing thread, see the file's
/// docs): the reply bytes, or the message of a failure of the machinery itself (the
/// function's own exceptions are part of the reply).
fn run_python(f: &Py<PyAny>, args: &[u8]) -> Result<Vec<u8>, String> {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_RPC.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(IN_RPC.with(|c| c.replace(true)));
    reentering(|py| {
        let (reply, interrupted): (Bound<'_, PyBytes>, bool) = serve_fn(py)?
            .call1((f.bind(py), PyBytes::new(py, args)))?
            .extract()?;
        if interrupted {
            // The function took this rank's Ctrl-C: hand it on to the rank's program,
            // whose next check (the wait this call is served in) raises it.
            // SAFETY: a plain C call of the limited API, with the GIL held.
            unsafe { pyo3::ffi::PyErr_SetInterrupt() };
        }
        Ok::<_, PyErr>(reply.as_bytes().to_vec())
    })
    .map_err(|e| format!("the RPC machinery failed: {e}"))
}

/// The exception of a failed call.
fn rpc_error(e: RpcError) -> PyErr {
    match e {
        RpcError::Msg(m) => errors::from_msg(m),
        RpcError::UnknownFunction { rank, name } => {
            if let Some(e) = crate::interrupt::take_interrupt() {
                return e;
            }
            let msg = format!(
                "rank {rank} has no RPC function named {name:?} (register it there with \
                 register_rpc or @rpc before other ranks call it)"
            );
            Python::attach(|py| {
                match py
                    .import("spools._am")
                    .and_then(|m| m.getattr("UnknownRpcError"))
                    .and_then(|c| c.call1((msg,)))
                {
                    Ok(v) => PyErr::from_value(v),
                    Err(e) => e,
                }
            })
        }
        RpcError::BadName(n) => errors::value_error(format!(
            "RPC name must be 1 to 255 bytes and registered once per rank, got {n:?}"
        )),
        e @ (RpcError::Remote { .. } | RpcError::Panicked { .. }) => {
            errors::raise(Kind::Remote, e.to_string())
        }
        e => errors::raise(Kind::Spools, e.to_string()),
    }
}

/// Checks an RPC name before the runtime does (a clearer message).
fn check_name(name: &str) -> PyResult<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(errors::value_error(format!(
            "RPC name must be 1 to 255 bytes (UTF-8), got {} bytes: {name:?}",
            name.len()
        )));
    }
    Ok(())
}

impl Comm {
    /// Packs the arguments and sends the call.
    fn start_call(
        &self,
        py: Python<'_>,
        rank: i64,
        name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RpcHandle> {
        refuse_in_rpc("call")?;
        // FinalizedError after finalize() or abort().
        runtime::get()?;
        check_name(name)?;
        let r = self.check_rank(rank, "rank")?;
        let kwargs = match kwargs {
            Some(k) => k.clone().into_any(),
            None => PyDict::new(py).into_any(),
        };
        let payload = pack_fn(py)?.call1((args, kwargs))?;
        let payload = payload
            .cast::<PyBytes>()
            .map_err(|_| errors::type_error("spools._am._pack_call did not return bytes"))?;
        let bytes = payload.as_bytes();
        // Sending may wait for room on the transport: without the GIL.
        runtime::blocking(py, || self.comm.rpc(r, name, bytes)).map_err(rpc_error)
    }
}

/// Decodes a reply: the function's result, or its exception as `RemoteError`.
fn decode(
    py: Python<'_>,
    reply: Result<Vec<u8>, RpcError>,
    rank: u32,
    name: &str,
) -> PyResult<Py<PyAny>> {
    let bytes = reply.map_err(rpc_error)?;
    Ok(unpack_fn(py)?
        .call1((PyBytes::new(py, &bytes), rank, name))?
        .unbind())
}

#[pymethods]
impl Comm {
    /// Registers the Python function `fn` as RPC function `name` on this rank: other
    /// ranks (and this one) then run it with `call(rank, name, *args, **kwargs)`.
    /// Register before others call it (for instance before a `barrier`): a call to a name
    /// the target does not know raises `UnknownRpcError`. Names are per process (every
    /// communicator of the rank shares them), 1 to 255 bytes, registered once.
    ///
    /// The function runs on this rank inside the runtime's progress (a Spools call of this
    /// rank that waits, `finalize` included, or the progress thread), holding the GIL; it
    /// must be short and must not call Spools. Its exceptions go back to the caller as
    /// `RemoteError`.
    #[pyo3(name = "register_rpc")]
    fn py_register_rpc(&self, name: &str, r#fn: Bound<'_, PyAny>) -> PyResult<()> {
        check_name(name)?;
        if !r#fn.is_callable() {
            return Err(errors::type_error(format!(
                "register_rpc needs a callable, got {}",
                crate::buffer::type_name(&r#fn)
            )));
        }
        let f = r#fn.unbind();
        runtime::note_python_in_progress();
        self.comm
            .register_rpc(name, move |args| run_python(&f, args))
            .map_err(|e| match e {
                RpcError::BadName(n) => errors::value_error(format!(
                    "an RPC function named {n:?} is already registered on this rank"
                )),
                e => rpc_error(e),
            })
    }

    /// Decorator registering a function as an RPC: `@world.rpc` (under the function's
    /// `__name__`) or `@world.rpc("name")`. Returns the function unchanged.
    #[pyo3(signature = (name_or_fn))]
    fn rpc<'py>(
        slf: &Bound<'py, Self>,
        name_or_fn: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Ok(name) = name_or_fn.cast::<PyString>() {
            static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
            return am_attr(py, &F, "_decorator")?.call1((slf, name));
        }
        if !name_or_fn.is_callable() {
            return Err(errors::type_error(format!(
                "rpc is used as @comm.rpc or @comm.rpc(\"name\"), got {}",
                crate::buffer::type_name(name_or_fn)
            )));
        }
        let name: String = name_or_fn.getattr("__name__")?.extract()?;
        slf.get().py_register_rpc(&name, name_or_fn.clone())?;
        Ok(name_or_fn.clone())
    }

    /// Calls RPC function `name` on `rank` with `*args, **kwargs` (pickled) and returns
    /// its result (unpickled). Waits with the GIL released, serving calls to this rank
    /// meanwhile; a call to this rank itself is fine.
    ///
    /// Raises `RemoteError` (attributes `rank`, `name`, `remote_type`, `remote_message`,
    /// `remote_traceback`) when the function raised, `UnknownRpcError` when `rank` has no
    /// function `name`, `PeerGoneError` when `rank` is gone.
    #[pyo3(signature = (rank, name, /, *args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        rank: i64,
        name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let h = self.start_call(py, rank, name, args, kwargs)?;
        let r = h_rank(rank);
        let reply = runtime::blocking(py, || h.wait());
        decode(py, reply, r, name)
    }

    /// As `call`, without waiting: returns an `RpcRequest` whose `wait()`/`result()` give
    /// the result (or raise the remote exception) and `done()` says whether it arrived.
    /// Many calls may be in flight at once, to any ranks.
    #[pyo3(signature = (rank, name, /, *args, **kwargs))]
    fn call_async(
        &self,
        py: Python<'_>,
        rank: i64,
        name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RpcRequest> {
        let h = self.start_call(py, rank, name, args, kwargs)?;
        Ok(RpcRequest {
            state: Mutex::new(State::Pending(h)),
            rank: h_rank(rank),
            name: name.to_string(),
            worker: self.comm.worker().clone(),
        })
    }
}

/// A rank already checked by `check_rank`.
fn h_rank(rank: i64) -> u32 {
    u32::try_from(rank).unwrap_or(u32::MAX)
}

enum State {
    /// Sent; the reply not taken yet.
    Pending(RpcHandle),
    /// The reply (or the failure) arrived, not decoded yet.
    Arrived(Result<Vec<u8>, RpcError>),
    /// Decoded: what every later `result()` returns.
    Done(Result<Py<PyAny>, PyErr>),
    /// Taken out by a wait that failed to put it back (not reached).
    Gone,
}

/// A call in flight (`call_async`): `wait()`/`result()` return the function's result or
/// raise its exception (`RemoteError`), `done()` says whether the reply arrived.
#[pyclass(frozen, module = "spools")]
pub(crate) struct RpcRequest {
    state: Mutex<State>,
    rank: u32,
    name: String,
    /// The worker of the communicator's job, whose progress brings the reply.
    worker: spools::Worker,
}

impl RpcRequest {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl RpcRequest {
    /// Waits for the reply (GIL released, serving calls to this rank meanwhile) and
    /// returns the function's result; raises the remote exception as `RemoteError`.
    /// Later calls return the same result. A wait interrupted by Ctrl-C abandons the call.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        refuse_in_rpc("RpcRequest.result")?;
        // The lock is taken without the GIL: another thread may hold it while it waits.
        runtime::blocking(py, || {
            let mut g = self.lock();
            if let State::Pending(_) = &*g {
                if let State::Pending(h) = std::mem::replace(&mut *g, State::Gone) {
                    *g = State::Arrived(h.wait());
                }
            }
        });
        let mut g = self.lock();
        if let State::Arrived(_) = &*g {
            if let State::Arrived(r) = std::mem::replace(&mut *g, State::Gone) {
                *g = State::Done(decode(py, r, self.rank, &self.name));
            }
        }
        match &*g {
            State::Done(Ok(v)) => Ok(v.clone_ref(py)),
            State::Done(Err(e)) => Err(e.clone_ref(py)),
            _ => Err(errors::raise(Kind::Spools, "the RPC's reply was lost")),
        }
    }

    /// The same as `result()` (mpi4py's name).
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.result(py)
    }

    /// Whether the reply has arrived (drives progress once; never waits).
    fn done(&self, py: Python<'_>) -> bool {
        if !in_rpc() {
            let worker = self.worker.clone();
            let _ = runtime::blocking(py, || worker.progress());
        }
        match self.state.try_lock() {
            Ok(g) => match &*g {
                State::Pending(h) => h.is_complete(),
                _ => true,
            },
            // Another thread waits for it.
            Err(_) => false,
        }
    }

    /// The rank the call went to.
    #[getter]
    fn rank(&self) -> u32 {
        self.rank
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    fn __repr__(&self) -> String {
        format!("<spools.RpcRequest {:?} on rank {}>", self.name, self.rank)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RpcRequest>()?;
    Ok(())
}
