//! Spools active messages: the GRIM handler registry and the three StarT-X mechanisms.
//!
//! - A **handler registry**: handlers are registered locally by name;
//!   [`Worker::sync_handlers`] (collective) merges every rank's names at rank 0 and gives all
//!   ranks the same name-to-id table. A message for an id in the table that the target has
//!   no handler for is dropped there and reported back to the sender as
//!   [`AmError::NoHandlerAtTarget`]; a message for an id beyond the target's table (it
//!   has not installed the table yet) is held until it has, up to 64 MiB.
//! - **Message kinds**: *short* (handler id and four `u64` arguments), *bulk* (the same
//!   plus a payload up to the bulk limit, fragmented and reassembled transparently) and
//!   *memory* ([`Endpoint::put`] / [`Endpoint::get`] on a registered [`Region`] of the
//!   target, bounds-checked there; no handler runs).
//! - **Modes**: [`Delivery::Immediate`] hands each message to the transport at once;
//!   [`Delivery::Batched`] collects short messages in a host-memory queue and hands them over
//!   together; memory transfers of any size are packetised automatically (remote memory
//!   transfer).
//! - **Channels and priorities**: an [`Endpoint`] owns a sending lane, so endpoints never
//!   contend; messages of one [`Channel`] arrive in order; high-priority channels have
//!   rings and connections of their own and are served first.
//! - **Flow control**: buffers are bounded; a sender facing a full receiver serves its own
//!   incoming traffic while it waits. **Progress**: [`Worker::poll`] runs handlers on the
//!   calling thread; with `progress_thread = true` a background thread runs them.

mod core;
mod dispatch;
mod endpoint;
mod error;
mod inbox;
mod keys;
mod lend;
mod message;
mod poller;
mod progress;
mod region;
mod registry;
mod rma;
mod worker;

pub use crate::core::{Interrupt, Route};
pub use endpoint::Endpoint;
pub use error::AmError;
pub use lend::Loan;
pub use message::{ActiveMessage, Channel, Delivery};
pub use poller::Poller;
pub use region::{Region, RegionKey};
pub use registry::{Handler, HandlerId};
/// The rank lock (by thread level) the layers above guard their state with.
pub use spools_fabric::lock::{bump, RankGuard, RankLock};
/// Shared areas within a host (for the collectives' flags and slots in shared memory).
pub use spools_fabric::shm::SharedArea;
/// Where a peer's exposed bytes are, as the layers above name them in their protocols.
pub use spools_fabric::RemoteRegion;
pub use worker::Worker;
