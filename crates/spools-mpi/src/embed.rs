//! The library as a Rust crate, for a front door linked into the same binary: the
//! `spools` Python package carries this library inside its extension (so that mpi4py
//! and `spools` in one program share one runtime, `spools::shared`) and turns an
//! mpi4py communicator into a `spools.Comm` with [`communicator`]: an intracommunicator
//! or an intercommunicator (a spawn's, a port's), of the job of `MPI_Init` or of one
//! joined later (each job's communicators drive that job's own progress).

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
}

/// The two groups of an intercommunicator, as [`Embedded::comm`] holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterShape {
    /// Ranks in this process's group.
    pub local_size: u32,
    /// Ranks in the other group.
    pub remote_size: u32,
    /// This process's rank in its group.
    pub local_rank: u32,
}

/// Keeps a job joined after `MPI_Init` (a spawn's, a port's) joined while held: the
/// process leaves it at `MPI_Finalize` rather than at the `MPI_Comm_disconnect` of its
/// last MPI communicator, so that a `spools.Comm` of it stays usable.
#[derive(Clone)]
pub struct JobHold(#[allow(dead_code)] std::sync::Arc<crate::comm::WorldCtx>);

impl std::fmt::Debug for JobHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHold").finish_non_exhaustive()
    }
}

/// The Spools side of an MPI communicator.
#[derive(Debug, Clone)]
pub struct Embedded {
    /// An intracommunicator's own communicator; an intercommunicator's point-to-point
    /// view: ranks `0..remote_size` are the other group's, in its order (so a message to
    /// or from rank `r` of it is MPI's to or from remote rank `r`), then this group's.
    pub comm: Communicator,
    /// `Some` for an intercommunicator.
    pub inter: Option<InterShape>,
    /// For a communicator of a job joined after `MPI_Init`: what keeps it joined.
    pub hold: Option<JobHold>,
}

/// The Spools communicator behind the MPI communicator `handle` (its value as the
/// standard ABI defines it, mpi4py's `comm.handle`): the same ranks, the same context,
/// so that messages and collectives on either match as on one communicator.
///
/// # Errors
/// [`EmbedError::NotHere`] when MPI is not initialised in this binary,
/// [`EmbedError::Handle`] for a handle that is not a live communicator.
pub fn communicator(handle: usize) -> Result<Embedded, EmbedError> {
    if crate::runtime::runtime().is_none() {
        return Err(EmbedError::NotHere);
    }
    match crate::comm::comm(handle, "spools.Comm") {
        Ok(c) => Ok(Embedded {
            comm: c.comm.clone(),
            inter: c.inter.as_ref().map(|i| InterShape {
                local_size: i.local.len() as u32,
                remote_size: i.remote.len() as u32,
                local_rank: i.local_rank,
            }),
            hold: (!c.ctx.is_own()).then(|| JobHold(c.ctx.clone())),
        }),
        Err(crate::env::error::MpiError::NotInitialized(_)) => Err(EmbedError::NotHere),
        Err(_) => Err(EmbedError::Handle(handle)),
    }
}
