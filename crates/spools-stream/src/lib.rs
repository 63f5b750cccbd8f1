//! Spools streams: a distributed dataset out of the job (and into it) over K TCP links, in
//! the iWarp paper's format of Application Data Units, Transfer Units and Striping Units.
//!
//! The wire format is [`spools_proto::stream`]. This crate holds what does not depend on
//! the runtime, so that a plain Rust program can receive a job's streams or send into one:
//! - [`Reassembler`]: the sans-IO reassembly of one logical connection (SUs from K links
//!   in any interleaving become whole ADUs, handed out in order, after the stream they are
//!   sequenced behind, and in lock step within a synchronisation group);
//! - [`Receiver`]: a TCP port that serves many senders' connections (`spools recv`);
//! - [`Sender`]: K links from one process (`spools send`);
//! - [`Share`]: the links one receiver holds of a connection spread over several (a job's
//!   ranks), and where their SUs go.

mod acks;
mod admission;
mod adubuf;
mod connection;
mod control;
mod error;
mod link;
mod random;
mod reassembly;
mod receiver;
mod recycler;
mod sender;
mod serve_link;
mod share;
mod timeouts;

pub use admission::{Admission, HELLO_TIMEOUT, MAX_OPEN_LINKS, MAX_PENDING};
pub use control::{Acker, Admit, Stopper};
pub use error::ReassemblyError;
pub use link::LinkError;
pub use reassembly::{Event, Limits, Reassembler};
pub use receiver::{Delivery, Receiver, RecvError, Summary, MAX_REPORTED};
pub use recycler::Recycler;
pub use sender::{AckReader, LinkSender, SendError, Sender};
pub use share::{link_bytes, Share};
pub use timeouts::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT, STALL_TIMEOUT};
