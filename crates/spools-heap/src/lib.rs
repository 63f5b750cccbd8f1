//! The shared heap, a layer of its own between the bootstrap and the transports: memory a rank allocates through Spools lives in a named shared-memory
//! segment (`/dev/shm/spools-<job>-heap-<rank>-<seq>`, mode 0600, stamped with a tag
//! derived from the job secret) that the ranks of the same host can map, so a peer copies
//! straight out of (or into) it: one copy, no ring.
//!
//! - The owner creates a [`HeapSegment`] per buffer; [`lookup`] says whether a slice of
//!   this process lies in one and where ([`HeapRef`]: the segment's [`HeapName`] and an
//!   offset, what a peer needs, in a fixed wire form).
//! - A peer maps it through [`PeerHeaps`] (cached by name) and copies with
//!   [`PeerBytes`]. A job's cache belongs to its world (`spools::World` makes one and
//!   the active-message layer hands it to the layers above), so two worlds in one
//!   process never share one.
//! - What is process-wide is the address space's map of live segments ([`lookup`]): a
//!   buffer belongs to the process, and whichever world sends it finds it there. A
//!   sender names only its own job's blocks (a block of another world's heap is moved as
//!   any process memory), and a peer's cache refuses another job's name
//!   ([`HeapError::ForeignJob`]).
//! - A segment's pages are allocated when it is created, so a full `/dev/shm` is an
//!   error of the allocation, never a SIGBUS at a later write; a segment is never resized.
//! - Buffers take the names [`HeapName::new`] numbers in order; active-message regions in
//!   the shared heap are named after their key ([`HeapName::region`]), so a peer that
//!   knows a key maps the region without asking its owner.
//!
//! The layers above use it by rule: the message protocol names heap blocks
//! ([`HeapRef`]) and its engine copies out of them; the redistribution engine
//! (`spools-io`) and the active-message layer's one-sided copies read peers' blocks.
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
#[cfg(test)]
mod segment_model;
pub mod shm;

pub use error::HeapError;
pub use name::{HeapName, HeapNameError, HeapRef};
pub use peer::{PeerBytes, PeerHeaps};
pub use registry::lookup;
pub use segment::HeapSegment;
