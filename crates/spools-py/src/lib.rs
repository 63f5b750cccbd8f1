//! The Python interface of Spools: the extension module `spools._spools`, wrapped by the
//! pure-Python package `spools` (`python/spools/`). Each file adds one area's classes
//! and methods; `Comm`'s methods are spread over the areas' files (`#[pymethods]` blocks
//! of `multiple-pymethods`).
//!
//! Rules every file keeps:
//! - every call that waits releases the GIL (`runtime::blocking`) and is interrupted by
//!   Ctrl-C (the interrupt check of `interrupt.rs` raises `KeyboardInterrupt`); the one
//!   exception is a send that leaves at once (short or eager), which keeps the GIL
//!   through its brief wait for ring room while no Python function can run inside
//!   progress (no RPC function registered, no Python reduction operator used: see
//!   `runtime::python_in_progress`);
//! - buffers are used in place through `buffer::View`, never copied through Python
//!   objects;
//! - every Rust error becomes one of the exceptions of `spools.errors` (`errors.rs`).

mod am;
mod buffer;
mod coll;
mod comm;
mod errors;
mod files;
mod heap;
mod interrupt;
mod layout;
mod mpi;
mod p2p;
mod pipes;
mod reentry;
mod runtime;
mod streams;
mod world;

use pyo3::prelude::*;

/// The extension module; `spools/__init__.py` re-exports what users see.
#[pymodule]
fn _spools(m: &Bound<'_, PyModule>) -> PyResult<()> {
    runtime::register(m)?;
    comm::register(m)?;
    world::register(m)?;
    p2p::register(m)?;
    coll::register(m)?;
    am::register(m)?;
    layout::register(m)?;
    files::register(m)?;
    heap::register(m)?;
    pipes::register(m)?;
    streams::register(m)?;
    Ok(())
}
