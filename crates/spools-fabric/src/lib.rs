//! The fabric layer of Spools: how bytes cross between ranks.
//!
//! One trait, [`Transport`], and two backends: [`shm::ShmTransport`] (rings in shared
//! memory between processes of one host) and [`tcp::TcpTransport`] (sockets, between
//! hosts, or on one host with `SPOOLS_TRANSPORT=tcp`). A transport moves *messages*: byte
//! strings of at most [`Caps::max_message`] bytes, delivered in order per
//! (sender, lane, priority), with back-pressure instead of loss. Each backend states its
//! [`Caps`]; the active-message layer queries them rather than assuming.
//!
//! Sending lanes: every rank has [`Caps::lanes`] lanes; a lane is used by one thread at a
//! time (the active-message layer gives each endpoint its own), so senders on different lanes never
//! contend. Lane 0 belongs to the progress engine.
//!
//! Remote memory access ([`Rma`]): a transport whose network offers it (libfabric's)
//! exposes registered memory to peers, which write and read it one-sidedly
//! ([`Transport::rma`]).
//!
//! The shared heap is a layer below this one (`spools-heap`); the rings' segments are
//! POSIX shared-memory objects made with its [`spools_heap::shm`] calls.
//!
//! The conformance suite in `tests/conformance.rs` runs every backend through the same
//! tests with real processes.

mod caps;
mod error;
pub mod lock;
pub mod ofi;
mod rma;
pub mod shm;
pub mod tcp;
mod transport;
mod wait;

pub use caps::{Caps, Priority, SingleCopy};
pub use error::{Defect, FabricError, IoStep};
pub use rma::{Access, RemoteRegion, Rma};
pub use transport::{Incoming, Transport};
pub use wait::{cpu_count, Awake, Backoff, Pace};
