//! Spools messaging: communicators, MPI-style tagged point-to-point messages, collectives
//! and remote procedure calls, built on the active-message layer's active messages.
//!
//! - **Communicators.** The `World` is one; [`Communicator::dup`] and
//!   [`Communicator::split`] make others. Ranks are communicator-relative; every
//!   communicator has contexts of its own, so its messages never match another's.
//! - **Tagged point-to-point** with MPI's semantics: [`Communicator::send`] /
//!   [`Communicator::recv`] with tags, [`ANY_SOURCE`] and [`ANY_TAG`], non-overtaking
//!   order, a [`Status`], [`Communicator::probe`] / [`Communicator::iprobe`], truncation
//!   reported as [`MsgError::Truncated`] (never an overrun), non-blocking
//!   [`Communicator::isend`] / [`Communicator::irecv`] with [`Request::test`],
//!   [`Request::wait`], [`wait_all`], [`wait_any`] and [`Request::cancel`]; also on
//!   memory the caller owns, in place ([`Communicator::isend_pinned`],
//!   [`Communicator::irecv_pinned`], [`PinnedBuf`]).
//! - **Protocols by size** (`short_limit`, `eager_limit` in the configuration): *short*
//!   (inline in one control message), *eager* (into the receiver's pre-allocated
//!   buffers; unexpected messages queued), *rendezvous* (RTS, CTS, then the data straight
//!   from the sender's buffer into the receiver's, pipelined in chunks).
//! - **Asynchronous progress.** With `progress_thread = true`, the progress thread
//!   answers rendezvous requests and streams the data while the application computes;
//!   without it, progress happens inside Spools calls.
//! - **Collectives**, blocking and non-blocking, chosen by size and rank count and aware
//!   of hosts (see the `coll` module docs).
//! - **RPC**: [`Communicator::rpc`] runs a function registered with
//!   [`Communicator::register_rpc`] on another rank and returns its result.
//!
//! ```
//! use spools::{Op, ANY_SOURCE, ANY_TAG};
//! let world = spools::init().unwrap();
//! let (me, n) = (world.rank(), world.size());
//! world.send(&[me as u64], (me + 1) % n, 5).unwrap();
//! let mut got = [0u64];
//! let st = world.recv(&mut got, ANY_SOURCE, ANY_TAG).unwrap();
//! assert_eq!((got[0] as u32, st.source, st.tag), ((me + n - 1) % n, (me + n - 1) % n, 5));
//! let mut total = [0u64];
//! world.allreduce(&[1u64], &mut total, &Op::Sum).unwrap();
//! assert_eq!(total[0], n as u64);
//! ```

mod buffer;
mod coll;
mod comm_core;
mod communicator;
mod create;
mod element;
mod engine;
mod error;
mod gather_buf;
mod idhash;
mod idup;
mod kernel;
mod op_guard;
mod pinned;
mod pinned_buf;
mod protocol;
mod recv_start;
mod request;
mod rpc;
mod scatter_buf;
mod status;

pub use coll::{CollRequest, InterRoot, Sides, INTER_FLAT_PAIRS};
pub use comm_core::MAX_LIVE_COMMUNICATORS;
pub use communicator::Communicator;
pub use create::start;
pub use element::{as_bytes, as_bytes_mut, Element, Op, SliceFn, UserFn, Verdict};
pub use error::{MsgError, RpcError};
pub use gather_buf::GatherBuf;
pub use idup::DupRequest;
pub use kernel::zip_with;
pub use pinned_buf::PinnedBuf;
pub use recv_start::PendingRecv;
pub use request::{wait_all, wait_any, wait_any_at, Request};
pub use rpc::{RpcFn, RpcHandle};
pub use scatter_buf::ScatterBuf;
pub use status::{Completion, Source, Status, Tag, ANY_SOURCE, ANY_TAG};

/// Feeds untrusted bytes to the decoders of the message protocol's own wire format
/// (`protocol/wire.rs`: a request-to-send's payload, which names where the receiver may
/// take the data, and the fixed argument words of every message kind), for the fuzz
/// target `msg` and the garbage tests. Any input gives a value or nothing, never a panic;
/// returns 1 when the request-to-send payload names a place to take the data from.
///
/// ```
/// assert_eq!(spools_msg::decode_untrusted(&[]), 0);
/// assert_eq!(spools_msg::decode_untrusted(&[0xff; 3]), 0);
/// ```
pub fn decode_untrusted(data: &[u8]) -> usize {
    protocol::decode_any(data)
}
