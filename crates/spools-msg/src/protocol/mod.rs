//! The MPI messaging protocol of one rank as a pure state machine (sans-IO, in the
//! spirit of quinn-proto): no locks, no transport, no clock, no threads. The engine
//! (`crate::engine`) holds it under a lock, feeds it and does the I/O.
//!
//! **Inputs.** The application posts rendezvous sends (short and eager ones leave at once
//! and never enter the protocol), receives (a pattern of context, source or any, tag or
//! any; a fixed or self-sizing buffer), cancels, detaches (dropped requests) and
//! releases operations; the wire delivers whole messages (short, eager), requests to
//! send (RTS), clears to send (CTS) and rendezvous data chunks.
//!
//! **States.** A receive is *posted*, then *streaming* (matched an RTS, data arriving),
//! then *complete* with an outcome: received, truncated or cancelled. A rendezvous send
//! *awaits its CTS*, then *streams*, then is *complete*. Unmatched arrivals wait in the
//! unexpected queue of their context, in arrival order; posted receives wait in the
//! posted queue of theirs, in posting order; first match in both gives MPI's
//! non-overtaking rule (the transport's channels are FIFO per sender).
//!
//! **Outputs.** CTS messages and data chunks to transmit, RPC calls to run, and the
//! number of operations completed (whose outcomes the engine then reads). A wire message
//! that names no operation, or the wrong peer, or lies out of bounds, is a typed
//! [`events::ProtocolError`], never a panic.

mod events;
mod machine;
mod matching;
mod recv;
mod send;
mod slab;
pub(crate) mod wire;

#[cfg(test)]
mod drain_tests;
#[cfg(test)]
mod matching_tests;
#[cfg(test)]
mod pull_tests;
#[cfg(test)]
mod tests;

pub(crate) use events::{DataAt, Incoming, Limits, MessageInfo, RecvOutcome, SendProtocol};
pub(crate) use machine::Protocol;
pub(crate) use matching::{Envelope, Pattern};
pub(crate) use wire::decode_any;
