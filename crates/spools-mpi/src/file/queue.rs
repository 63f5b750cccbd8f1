//! The non-blocking collective accesses a file holds until they are moved: the data
//! only ([`deferred`](super::deferred) moves them), so that the file object below the
//! access paths can hold its queue.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use spools::CollRequest;

use crate::abi::*;
use crate::error::MpiError;
use crate::file::place::{Dir, Place};

/// The non-blocking collective accesses of a file not yet moved, oldest first.
#[derive(Default)]
pub(crate) struct Queue(pub(super) Mutex<VecDeque<Arc<Access>>>);

/// One queued access: its arguments, its arrival barrier, and once moved its outcome.
pub(crate) struct Access {
    pub(super) fh: MPI_File,
    pub(super) buf: usize,
    pub(super) count: MPI_Count,
    pub(super) dt: MPI_Datatype,
    pub(super) place: Place,
    pub(super) dir: Dir,
    pub(super) call: &'static str,
    pub(super) arrival: Mutex<Option<CollRequest<()>>>,
    pub(super) outcome: Mutex<Option<Result<MPI_Status, MpiError>>>,
}
