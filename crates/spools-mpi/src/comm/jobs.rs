//! Finding a job this process belongs to: the one a group's processes share
//! ([`holding`]), one by id ([`by_id`]), and any one as a `World` ([`world_of`]).
//! Above `worlds.rs`, which the runtime holds.

use std::sync::Arc;

use spools::World;

use crate::abi::*;
use crate::comm::WorldCtx;
use crate::env::error::MpiError;

/// Job `w` as a `World`, for what needs more than a communicator (windows, files, a
/// new job's configuration): the runtime's own, or another not left.
///
/// # Errors
/// [`MpiError::NotInitialized`] once finalised or left.
pub(crate) fn world_of(w: &WorldCtx, call: &'static str) -> Result<Arc<World>, MpiError> {
    if w.is_own() {
        return crate::runtime::rt(call)?.world(call);
    }
    w.other_world().ok_or(MpiError::NotInitialized(call))
}

/// The job `job` (by id) among this process's: its own or one joined and not left.
pub(crate) fn by_id(job: u64, call: &'static str) -> Result<Arc<WorldCtx>, MpiError> {
    let rt = crate::runtime::rt(call)?;
    if rt.ctx.job == job {
        return Ok(rt.ctx.clone());
    }
    rt.worlds
        .all()
        .into_iter()
        .find(|w| !w.left() && w.job == job)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: job {job:016x} is not one this process belongs to"),
            )
        })
}

/// The job whose members include every process labelled `labels`: the runtime's own
/// if it does, else the oldest other job that does.
///
/// # Errors
/// `MPI_ERR_GROUP` when no job holds them all (processes of two jobs that were never
/// connected together).
pub(crate) fn holding(labels: &[u32], call: &'static str) -> Result<Arc<WorldCtx>, MpiError> {
    let rt = crate::runtime::rt(call)?;
    if rt.ctx.jobs_of(labels).is_some() {
        return Ok(rt.ctx.clone());
    }
    rt.worlds
        .all()
        .into_iter()
        .find(|w| !w.left() && w.jobs_of(labels).is_some())
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_GROUP,
                format!("{call}: the group's processes do not all belong to one job this process shares with them (processes of two different spawns or connections)"),
            )
        })
}
