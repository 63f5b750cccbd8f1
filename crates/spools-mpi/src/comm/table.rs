//! The communicators programs made, by handle: looking one up ([`comm`]), storing a new
//! one ([`insert`]), and the error handler a handle's errors go to ([`errhandler_of`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use spools::Communicator;

use crate::abi::*;
use crate::comm::obj::CommObj;
use crate::env::error::MpiError;
use crate::handles::{Kind, ObjRef, Table};
use crate::runtime::rt;

/// The communicators made by programs.
static COMMS: Table<CommObj> = Table::new(Kind::Comm);

/// A communicator as a call holds it ([`ObjRef`]): `MPI_COMM_WORLD` and `MPI_COMM_SELF`
/// borrowed from the runtime.
pub(crate) type CommRef = ObjRef<CommObj>;

/// The communicator of handle `h`, held for the call ([`CommRef`]).
///
/// # Errors
/// As [`comm`].
pub(crate) fn comm_ref(h: MPI_Comm, call: &'static str) -> Result<CommRef, MpiError> {
    let rt = rt(call)?;
    match h {
        MPI_COMM_WORLD => Ok(ObjRef::Named(&rt.world_comm)),
        MPI_COMM_SELF => Ok(ObjRef::Named(&rt.self_comm)),
        _ => made(h).map(ObjRef::Made),
    }
}

/// The communicator of handle `h`.
///
/// # Errors
/// [`MpiError::NotInitialized`], [`MpiError::Handle`] with `MPI_ERR_COMM`.
pub(crate) fn comm(h: MPI_Comm, call: &'static str) -> Result<Arc<CommObj>, MpiError> {
    let rt = rt(call)?;
    match h {
        MPI_COMM_WORLD => Ok(rt.world_comm.clone()),
        MPI_COMM_SELF => Ok(rt.self_comm.clone()),
        _ => made(h),
    }
}

/// The error handler errors on `h` go to (`MPI_COMM_WORLD`'s for an invalid handle;
/// `MPI_ERRORS_ARE_FATAL` before `MPI_Init`).
pub(crate) fn errhandler_of(h: MPI_Comm) -> MPI_Errhandler {
    let Some(rt) = crate::runtime::runtime() else {
        return MPI_ERRORS_ARE_FATAL;
    };
    let obj = match h {
        MPI_COMM_SELF => Some(rt.self_comm.clone()),
        MPI_COMM_WORLD => Some(rt.world_comm.clone()),
        _ => COMMS.get(h),
    };
    obj.unwrap_or_else(|| rt.world_comm.clone())
        .errhandler
        .load(Ordering::Relaxed)
}

/// Stores a communicator made from `parent` (inheriting its error handler).
pub(crate) fn insert_child(parent: &CommObj, c: Communicator) -> Result<MPI_Comm, MpiError> {
    insert(parent.child(c))
}

pub(crate) fn insert(obj: CommObj) -> Result<MPI_Comm, MpiError> {
    COMMS
        .insert(obj)
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many communicators"))
}

/// A communicator a program made (not `MPI_COMM_WORLD` nor `MPI_COMM_SELF`).
///
/// # Errors
/// [`MpiError::Handle`] with `MPI_ERR_COMM`.
pub(crate) fn made(h: MPI_Comm) -> Result<Arc<CommObj>, MpiError> {
    COMMS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_COMM,
        what: "communicator",
        handle: h,
    })
}

/// Forgets communicator `h` (`MPI_Comm_free`).
pub(crate) fn remove(h: MPI_Comm) {
    COMMS.remove(h);
}
