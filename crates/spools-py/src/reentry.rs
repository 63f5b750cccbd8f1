//! Python run from inside Spools (a signal handler, a reduction function, an RPC
//! function): [`reentering`] runs it with the GIL and no exception set, and a Spools call
//! from inside an RPC function is refused ([`in_rpc`], [`refuse_in_rpc`]).

use std::cell::Cell;

use pyo3::prelude::*;

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

thread_local! {
    /// Whether this thread runs a Python RPC function now.
    pub(crate) static IN_RPC: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread runs a Python RPC function (then it may not wait in Spools).
pub(crate) fn in_rpc() -> bool {
    IN_RPC.with(Cell::get)
}

/// Refuses a Spools call made from inside an RPC function.
pub(crate) fn refuse_in_rpc(what: &str) -> PyResult<()> {
    if in_rpc() {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{what} inside an RPC function: the function runs inside the runtime's progress \
             and may not wait for Spools (compute and return instead)"
        )));
    }
    Ok(())
}
