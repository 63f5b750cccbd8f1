//! The non-blocking collective accesses of a file whose outcome the group has not
//! agreed yet: the data only ([`deferred`](super::deferred) makes and settles them), so
//! that the file object below the access paths can hold its queue.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use spools::CollRequest;

use crate::abi::*;
use crate::env::error::MpiError;

/// The non-blocking collective accesses of a file not settled yet, oldest first.
#[derive(Default)]
pub(crate) struct Queue(pub(super) Mutex<VecDeque<Arc<Access>>>);

/// One non-blocking collective access, its bytes already moved by this rank.
pub(crate) struct Access {
    /// The call that made it (its errors name it).
    pub(super) call: &'static str,
    pub(super) stage: Mutex<Stage>,
}

/// Where an access's outcome is.
pub(crate) enum Stage {
    /// Being agreed: this rank's own outcome, and the group's agreement (an allreduce of
    /// every rank's `outcome_word`).
    Agreeing(Result<MPI_Status, MpiError>, CollRequest<Vec<u64>>),
    /// The group's outcome, until the request takes it.
    Agreed(Result<MPI_Status, MpiError>),
    /// Taken by the request.
    Taken,
}
