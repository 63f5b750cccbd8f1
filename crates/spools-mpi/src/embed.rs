//! The library as a Rust crate, for a front door linked into the same binary: the
//! `spools` Python package carries this library inside its extension (so that mpi4py
//! and `spools` in one program share one runtime, `spools::shared`) and turns an
//! mpi4py communicator into a `spools.Comm` with [`communicator`].

use spools_msg::Communicator;
use thiserror::Error;

/// Why [`communicator`] has no communicator for a handle.
#[derive(Debug, Error)]
pub enum EmbedError {
    /// MPI is not initialised in this binary: the MPI library that answers the program
    /// (mpi4py's) is another file, or `MPI_Init` has not run, or `MPI_Finalize` has.
    #[error("MPI is not initialized in this copy of Spools' MPI library (mpi4py loaded another libmpi_abi.so.1, or MPI is not initialized or already finalized)")]
    NotHere,
    /// The handle names no communicator of this library (freed, or `MPI_COMM_NULL`).
    #[error("{0:#x} is not a communicator of Spools' MPI library")]
    Handle(usize),
    /// The handle is an intercommunicator, which has no `spools.Comm` (merge it first).
    #[error("{0:#x} is an intercommunicator: merge it into an intracommunicator first")]
    Inter(usize),
    /// The communicator lives in a job this process joined after `MPI_Init` (a spawn's
    /// or a port's: `comm/worlds.rs`), whose progress the package does not drive.
    #[error("{0:#x} belongs to a job joined by MPI_Comm_spawn, accept, connect or join after MPI_Init: the spools package has communicators of its own job only (a spawned process's MPI_COMM_WORLD is one)")]
    OtherJob(usize),
}

/// The Spools communicator behind the MPI communicator `handle` (its value as the
/// standard ABI defines it, mpi4py's `comm.handle`): the same ranks, the same context,
/// so that messages and collectives on either match as on one communicator.
///
/// # Errors
/// [`EmbedError::NotHere`] when MPI is not initialised in this binary,
/// [`EmbedError::Handle`] for a handle that is not a live communicator,
/// [`EmbedError::Inter`] for an intercommunicator, [`EmbedError::OtherJob`] for a
/// communicator of a job joined later.
pub fn communicator(handle: usize) -> Result<Communicator, EmbedError> {
    if crate::runtime::runtime().is_none() {
        return Err(EmbedError::NotHere);
    }
    match crate::comm::comm(handle, "spools.Comm") {
        // An intercommunicator's view orders its ranks differently on each side: no
        // Spools collective could run on it.
        Ok(c) if c.inter.is_some() => Err(EmbedError::Inter(handle)),
        Ok(c) if !c.ctx.is_own() => Err(EmbedError::OtherJob(handle)),
        Ok(c) => Ok(c.comm.clone()),
        Err(crate::env::error::MpiError::NotInitialized(_)) => Err(EmbedError::NotHere),
        Err(_) => Err(EmbedError::Handle(handle)),
    }
}
