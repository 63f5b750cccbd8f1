//! The shared heap: memory a rank allocates through Spools lives in a named shared-memory
//! segment (`/dev/shm/spools-<job>-heap-<rank>-<seq>`, mode 0600, stamped with a tag
//! derived from the job secret) that the ranks of the same host can map, so a peer copies
//! straight out of (or into) it: one copy, no ring.
//!
//! - The owner creates a [`HeapSegment`] per buffer; [`lookup`] says whether a slice of
//!   this process lies in one and where ([`HeapRef`]: the segment's [`HeapName`] and an
//!   offset, what a peer needs, in a fixed wire form).
//! - A peer maps it through [`PeerHeaps`] (cached by name) and copies with
//!   [`PeerBytes`].
//! - A segment's pages are allocated when it is created, so a full `/dev/shm` is an
//!   error of the allocation, never a SIGBUS at a later write; a segment is never resized.
//! - Buffers take the names [`HeapName::new`] numbers in order; active-message regions in
//!   the shared heap are named after their key ([`HeapName::region`]), so a peer that
//!   knows a key maps the region without asking its owner.
//!
//! Contract when the owner frees a buffer or dies while a peer copies from it: the peer's
//! mapping stays valid (a segment is never shrunk, so no access faults): the copy in
//! flight gives stale bytes, and the next [`PeerHeaps::bytes`] for that buffer fails with
//! [`HeapError::Freed`] (freed) or [`HeapError::Open`] (freed before it was ever mapped
//! here). A dead owner's segments stay until the launcher removes the job's
//! `/dev/shm/spools-<job>-*` objects; the peer learns of the death from the job's health,
//! as for any other operation.

mod error;
mod name;
mod peer;
mod registry;
mod segment;

use std::sync::{Arc, PoisonError, RwLock};

use spools_proto::auth::Secret;

pub use error::HeapError;
pub use name::{HeapName, HeapNameError, HeapRef};
pub use peer::{PeerBytes, PeerHeaps};
pub use registry::lookup;
pub use segment::HeapSegment;

/// This process's cache of peers' segments, set when it joins a job.
static PEERS: RwLock<Option<Arc<PeerHeaps>>> = RwLock::new(None);

/// Makes this process's peer cache the one of `job` (called by `spools::init`; a later
/// job replaces an earlier one).
pub fn join(job: u64, secret: Secret) {
    let mut p = PEERS.write().unwrap_or_else(PoisonError::into_inner);
    if p.as_ref().is_none_or(|p| p.job() != job) {
        *p = Some(Arc::new(PeerHeaps::new(job, secret)));
    }
}

/// This process's cache of peers' segments.
///
/// # Errors
/// [`HeapError::NoJob`] before the process joined a job ([`join`]).
pub fn peers() -> Result<Arc<PeerHeaps>, HeapError> {
    PEERS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or(HeapError::NoJob)
}
