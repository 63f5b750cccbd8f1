//! Shared-memory collectives for many cores, sans-IO.
//!
//! A host's ranks talk through *flag lines*: one 64-byte cache line per rank and purpose,
//! written by its owner only, holding a sequence number that only grows and a few cells
//! of inline payload. A collective is a state machine per rank ([`Machine`]) that loads
//! other ranks' lines and stores its own through the [`Lines`] seam; it never blocks, it
//! says what it waits for. Two places run the machines:
//!
//! - [`sim`]: a simulated shared memory that counts cache-line transfers (a load of a
//!   line another core wrote since this core last held it; a store to a line other cores
//!   hold), one at a time per line and per core, on a [`Topology`] of sockets and L3
//!   groups. It gives each algorithm's critical path and total transfers for any rank
//!   count up to 256 on 2 cores, deterministically: the cost model of docs/collectives.md.
//! - the messaging layer's shared-memory engine (a later step: today's engine,
//!   `spools-msg`'s `coll/sm`, is modelled here as [`Shape::Flat`]). What that engine
//!   runs from here already is [`ledger`]: when a member may write over its data slots
//!   and inline cells, which `tests/slots_model.rs` checks under loom; and [`table`]:
//!   where each member finds its block in a package of blocks (its v collectives').
//!
//! ```
//! use spools_coll::{sim, Coll, Shape, Topology};
//! let t = Topology::sockets(64, 2);
//! let tree = sim::measure(&t, Shape::tree(&t, 0, 4), Coll::Bcast, sim::Cost::Transfers);
//! let flat = sim::measure(&t, Shape::flat(0), Coll::Bcast, sim::Cost::Transfers);
//! assert!(tree.critical <= 12.0 && flat.critical >= 63.0);
//! ```

pub mod ledger;
mod machine;
pub mod sim;
pub mod table;
mod topology;
mod tree;

pub use machine::{
    scan_rounds, Coll, Line, Lines, Machine, Poll, Purpose, Shape, Word, CELLS, SCAN_DOUBLING_MIN,
};
pub use topology::{Distance, Place, Topology};
pub use tree::Tree;
