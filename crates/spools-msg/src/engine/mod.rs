//! The tagged-message engine of one rank: the [`crate::protocol`] state machine under a
//! lock (or, at thread level single and funneled, owned by the rank's one thread: no
//! lock, [`spools_am::RankLock`]), fed by the active-message layer's handlers
//! and by the application, with the I/O done through `spools_am`.
//!
//! - *short*: up to `short_limit` (24 B) inline in one short active message;
//! - *eager*: up to `eager_limit` in one bulk active message, which lands in the
//!   receiver's pre-allocated ring (or socket buffer); the handler copies it straight into
//!   a matching posted receive, or else into a pooled buffer queued as unexpected;
//! - *rendezvous*: a request-to-send (RTS) short message; once matched, the receiver
//!   answers clear-to-send (CTS) and the sender streams the data straight from its buffer,
//!   in one-fragment chunks, into the receiver's buffer (pipelined through the transport);
//!   when the sender's buffer lies in the shared heap and the receiver runs on the same
//!   host, the RTS says where and the receiver copies the data from there itself (one
//!   copy, no chunks), then answers with a CTS that completes the send (`heap`).
//!
//! Short and eager sends, and the RTS of a rendezvous, leave from the caller's thread.
//! Handlers run under the active-message layer's progress lock and never send; what the protocol
//! decides (CTS, data chunks, RPC calls) is sent by the engine's poller
//! ([`Engine::flush_outgoing`]), which runs at the end of every progress round on
//! whichever thread progresses: a Spools call, or the progress thread, which makes the
//! rendezvous asynchronous.
//!
//! Files: `state` (the engine and its lock), `setup` (construction, handler ids), `ops`
//! (the application's operations), `handlers` (wire messages in), `driver` (the poller),
//! `heap` (the single-copy rendezvous within a host),
//! `try_send` (a send that never blocks, for schedules advanced by pollers).

mod driver;
mod handlers;
mod ops;
mod pull;
mod setup;
mod state;
mod try_send;

pub(crate) use ops::SendStart;
pub(crate) use state::Engine;
