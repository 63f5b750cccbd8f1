//! One-sided access to a target on another host: memory messages, as remote procedure
//! calls (`Communicator::rpc`, StarT-X's JAM RPC) that the target's progress engine runs
//! by itself: a put carries the runs and their bytes, a get brings them back, and the
//! control block's words (the passive-target lock, the accumulate lock) are taken and
//! released by calls of their own. An accumulate is then the origin's: it takes the
//! target's accumulate lock, gets, combines and puts, so any operator the origin knows
//! works. The target serves calls whenever it drives progress: inside any MPI call, or
//! all the time with the progress thread (`SPOOLS_PROGRESS_THREAD=1`).
//!
//! `SPOOLS_MPI_WIN_MESSAGES=1` sends every access to another rank this way, also within
//! a host (the tests' way to run this path on one machine).

use std::sync::OnceLock;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::win::ask::{encode, Ask, NAME};
use crate::win::ctl::LockKind;
use crate::win::mem::{Mem, Run};

/// Whether every access to another rank goes by message (`SPOOLS_MPI_WIN_MESSAGES=1`).
pub(crate) fn forced() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| std::env::var("SPOOLS_MPI_WIN_MESSAGES").is_ok_and(|v| v == "1"))
}

/// A call to the target `mem` names (a [`Mem::Remote`]); the reply.
fn call(
    mem: &Mem,
    ask: Ask,
    arg: u8,
    runs: &[Run],
    data: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, MpiError> {
    let Mem::Remote { comm, rank, id } = mem else {
        return Err(MpiError::invalid(
            MPI_ERR_INTERN,
            format!("{what}: not a remote target"),
        ));
    };
    let args = encode(ask, *id, arg, runs, data);
    comm.rpc(*rank, NAME, &args)
        .and_then(|h| h.wait())
        .map_err(|e| MpiError::invalid(MPI_ERR_RMA_RANGE, format!("{what}: rank {rank}: {e}")))
}

/// Writes `data` into the runs of a remote target.
pub(crate) fn put(
    mem: &Mem,
    runs: &[Run],
    data: &[u8],
    what: &'static str,
) -> Result<(), MpiError> {
    call(mem, Ask::Put, 0, runs, data, what).map(|_| ())
}

/// Reads the runs of a remote target into `out`.
pub(crate) fn get(
    mem: &Mem,
    runs: &[Run],
    out: &mut [u8],
    what: &'static str,
) -> Result<(), MpiError> {
    let got = call(mem, Ask::Get, 0, runs, &[], what)?;
    if got.len() != out.len() {
        return Err(MpiError::invalid(
            MPI_ERR_INTERN,
            format!(
                "{what}: the target sent {} bytes for {}",
                got.len(),
                out.len()
            ),
        ));
    }
    out.copy_from_slice(&got);
    Ok(())
}

/// Tries to take a remote target's passive-target lock.
pub(crate) fn try_lock(mem: &Mem, kind: LockKind) -> Result<bool, MpiError> {
    let arg = u8::from(kind == LockKind::Exclusive);
    Ok(call(mem, Ask::TryLock, arg, &[], &[], "MPI_Win_lock")?.first() == Some(&1))
}

/// Releases a remote target's passive-target lock.
pub(crate) fn unlock(mem: &Mem, kind: LockKind) -> Result<(), MpiError> {
    let arg = u8::from(kind == LockKind::Exclusive);
    call(mem, Ask::Unlock, arg, &[], &[], "MPI_Win_unlock").map(|_| ())
}

/// Tries to take a remote target's accumulate lock.
pub(crate) fn try_acc(mem: &Mem) -> Result<bool, MpiError> {
    Ok(call(mem, Ask::TryAcc, 0, &[], &[], "an accumulate")?.first() == Some(&1))
}

/// Releases a remote target's accumulate lock.
pub(crate) fn release_acc(mem: &Mem) -> Result<(), MpiError> {
    call(mem, Ask::ReleaseAcc, 0, &[], &[], "an accumulate").map(|_| ())
}
