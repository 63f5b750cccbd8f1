//! Spools wire formats, pure and sans-IO.
//!
//! Everything that crosses a socket or a shared-memory ring between Spools processes is
//! encoded and decoded here, with no I/O, clocks or threads, so that every decoder can be
//! tested in memory and fuzzed:
//!
//! - [`auth`]: the job secret and the keyed proofs that every connection exchanges;
//! - [`handshake`]: the mutual challenge-response that opens every TCP connection;
//! - [`boot`]: the bootstrap protocol between ranks and the rendezvous server;
//! - [`am`]: the active-message headers that the active-message layer puts in front of payloads;
//! - [`stream`]: streams to destinations outside the job, striped over several TCP links;
//! - [`framebuffer`]: the framebuffer protocol, one frame of an image or a field as a stream's ADU.
//!
//! Decoders never panic: bytes from a peer that do not parse give a [`WireError`].
//!
//! ```
//! use spools_proto::am::{AmHeader, Short};
//! let msg = AmHeader::Short(Short { handler: 7, channel: 1, flags: 0, args: [1, 2, 3, 4] });
//! let mut buf = Vec::new();
//! msg.encode(&mut buf);
//! let (back, payload) = AmHeader::decode(&buf).unwrap();
//! assert_eq!(back, msg);
//! assert!(payload.is_empty());
//! ```

pub mod am;
pub mod auth;
pub mod boot;
mod codec;
mod error;
pub mod framebuffer;
pub mod handshake;
mod spawn;
pub mod stream;

pub use error::WireError;
