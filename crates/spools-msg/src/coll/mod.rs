//! Collectives over the communicator's collective context. Each call takes a base tag
//! from the communicator's call counter (every rank calls collectives in the same order,
//! so the tags agree) and uses its low 8 bits for its steps; messages of one step between
//! two ranks match in order.
//!
//! Algorithms (chosen by size, rank count and op):
//! - barrier: dissemination;
//! - broadcast: binomial tree up to 16 KiB, pipelined chain in chunks beyond;
//! - reduce: binomial tree (in rank order for non-commutative operators);
//! - allreduce: recursive doubling (any rank count, order-preserving) up to 64 KiB or
//!   fewer elements than ranks, ring reduce-scatter plus ring allgather beyond;
//! - gather and scatter: direct; allgather: ring; alltoall: all at once up to 256 B per
//!   pair, pairwise exchange beyond; reduce-scatter: ring (from the input into the
//!   output, two blocks of scratch at most); scan: recursive doubling, or a chain of
//!   messages between 2 members and where the segment's creator chose the messages.
//!
//! When a communicator spans several hosts, barrier, broadcast and allreduce (with a
//! commutative operator) go in three phases: within each host to a leader, between the
//! leaders, and back within each host, so each host's data crosses the network once (the
//! StarT-X broadcast lesson).
//!
//! Up to `coll_sm_limit` bytes (configuration, 4 KiB by default), the blocking barrier,
//! broadcast, reduce and allreduce go instead through a shared segment per communicator
//! and host, with flags and per-rank slots (`sm`), where at least 2 ranks share the host;
//! across hosts it serves the phases within each host. The non-blocking ones never do: MPI
//! orders them apart from the blocking ones, so they go through the messages in a
//! collective context and count of their own (`CommCore::nonblocking`). Ranks whose lengths fall on both sides of the limit fail with
//! `MsgError::Mismatch` instead of waiting for each other (see `sm`).

mod args;
mod barrier;
mod bcast;
mod exchange;
mod flat;
mod gather;
mod group;
mod nonblocking;
mod plans;
mod poller;
mod reduce;
mod ring;
mod schedule;
mod sm;
mod verdict;

pub use nonblocking::{CollRequest, InterRoot, Sides, INTER_FLAT_PAIRS};
pub(crate) use sm::SmSlot;
