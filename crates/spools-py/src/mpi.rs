//! `spools.Comm(mpi4py_comm)`: the `spools` communicator of an mpi4py communicator. The
//! extension carries Spools' MPI library (`libmpi_abi.so.1`, crates/spools-mpi) and has
//! its soname, so mpi4py built against the MPI standard ABI runs on it in the same
//! process (import `spools` first, or start under `spools run`, which gives Python ranks
//! this file as their `libmpi_abi.so.1`): one runtime, one rank, and communicators that
//! are the same on both sides.

use pyo3::prelude::*;

use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::runtime;

#[pymethods]
impl Comm {
    /// `spools.Comm(comm)`: the communicator of an mpi4py communicator (or of its
    /// `handle`, an int): the same ranks and the same context, so that redistribution,
    /// parallel files, pipes and streams take mpi4py's communicators. An
    /// intercommunicator (`MPI.Comm.Get_parent()`, a spawn's or a port's) gives one
    /// whose messages and RPCs go to the other group's ranks (`is_inter`,
    /// `remote_size`); merge it for group operations.
    ///
    /// Raises `InitError` when mpi4py does not run on the MPI library inside this
    /// package, `ValueError` for a handle that is not a live communicator.
    #[new]
    fn from_mpi(py: Python<'_>, comm: &Bound<'_, PyAny>) -> PyResult<Comm> {
        let handle: usize = match comm.getattr("handle") {
            Ok(h) => h.extract()?,
            Err(_) => comm.extract().map_err(|_| {
                errors::type_error(format!(
                    "spools.Comm() takes an mpi4py communicator (or its handle), got {}",
                    comm.get_type()
                        .name()
                        .map_or_else(|_| "?".into(), |n| n.to_string())
                ))
            })?,
        };
        let c = match mpi_abi::embed::communicator(handle) {
            Ok(c) => c,
            Err(e @ mpi_abi::embed::EmbedError::NotHere) => {
                return Err(errors::raise(
                    Kind::Init,
                    format!(
                        "spools.Comm(): {e}; mpi4py must run on the MPI library inside the \
                         spools package: start the program with `spools run`, which gives \
                         Python ranks that library, or import spools before mpi4py.MPI"
                    ),
                ))
            }
            Err(e) => return Err(errors::value_error(format!("spools.Comm(): {e}"))),
        };
        let rt = match runtime::get() {
            Ok(rt) => rt,
            Err(_) => {
                crate::world::init(py)?;
                runtime::get()?
            }
        };
        // A job joined after MPI_Init has a worker of its own: Ctrl-C interrupts its
        // waits too.
        if !c.comm.worker().same(&rt.worker) {
            c.comm
                .worker()
                .set_interrupt(Some(std::sync::Arc::new(crate::interrupt::interrupt_check)));
        }
        Ok(match c.inter {
            None => Comm::new(c.comm, rt),
            Some(shape) => Comm::new_inter(c.comm, rt, shape),
        }
        .holding(c.hold))
    }
}
