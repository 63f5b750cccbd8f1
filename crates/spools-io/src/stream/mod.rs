//! Streams out of and into the job (the iWarp paper's streams device).
//!
//! Out: each ADU, distributed over the ranks by any layout, is reshuffled by the exchange
//! engine into the *I/O distribution* — `stripe(unit=SU, count=K)` of its byte stream, link
//! `s`'s unit on a rank chosen round the hosts (on one host, rank `s % P`) — and each link
//! owner sends its SUs over its link of the logical connection. In: rank 0 moves link `s`
//! to rank `s % P` (a sender that can move; another is served whole by rank 0), each rank
//! reassembles its links' pieces, and one exchange moves each ADU from the links' stripes
//! into the ranks' layout. The plan is M1⁻¹∘M2, as for every device;
//! the wire format is [`spools_proto::stream`].
//!
//! - [`StreamWriter`]: one stream on a connection of its own ([`StreamFormat`]).
//! - [`StreamConnection`]: one connection, several streams ([`StreamOptions`]): sequenced
//!   (`after`), synchronised in lock-step groups, of variable-size ADUs, with priorities.
//! - [`StreamReader`]: a connection into the job, ADUs received into any layout.
//! - Frames ([`StreamConnection::send_frame`], [`FrameStyle`]): the framebuffer protocol
//!   ([`spools_proto::framebuffer`]), a header in front of each frame of a 2-D image or field.

use std::time::Duration;

mod connection;
mod distribution;
mod frames;
mod link;
mod reader;
mod writer;

pub use connection::StreamConnection;
pub use frames::{frame_header, FrameStyle};
pub use reader::{AduInfo, Limits, StreamReader};
pub use writer::StreamWriter;

/// How often, at least, a wait of a stream end on something of its own (room in a link's
/// window, a link's last sends, the next ADU on rank 0) asks the process's interrupt
/// check ([`Communicator::check_interrupt`](spools_msg::Communicator::check_interrupt)), as messaging's waits do before they sleep:
/// a wait it ends fails with [`StreamError::Msg`](crate::StreamError::Msg) or
/// [`StreamRecvError::Msg`](crate::StreamRecvError::Msg) holding the interruption
/// (`AmError::Interrupted`), and leaves the end unusable (every later call fails).
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(50);

/// How a [`StreamWriter`] cuts and stripes its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFormat {
    /// Links (TCP connections) to stripe over; on one host link `s` is owned by
    /// rank `s % P`; across hosts, the links go round the hosts first.
    pub links: u16,
    /// Bytes of a Transfer Unit; a multiple of `links` (each SU is `tu / links` bytes).
    pub tu: u64,
    /// ADUs the stream holds on each link (queued on its owner's sending thread or on the
    /// wire) before `send_adu` waits: 2 is double buffering. It bounds what the job
    /// buffers, not what the receiver has acknowledged: back-pressure from a slow receiver
    /// reaches the job through TCP (the receiver stops reading its links while it holds
    /// its bound of ready ADUs; the links' sends then block, and the window fills).
    pub window: u32,
    /// Priority over the other streams on the same links (higher first).
    pub priority: u8,
}

impl Default for StreamFormat {
    /// One link, TUs of 1 MiB, a window of 2 ADUs, priority 0.
    fn default() -> Self {
        StreamFormat {
            links: 1,
            tu: 1 << 20,
            window: 2,
            priority: 0,
        }
    }
}

/// A stream's id on its [`StreamConnection`] (from 1, in the order streams were opened).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub(crate) u32);

impl StreamId {
    /// The id on the wire.
    pub fn get(self) -> u32 {
        self.0
    }

    /// The stream named `id` on the wire: for a binding that names streams by number (the
    /// Python and C interfaces). A number no open stream has is
    /// [`StreamError::UnknownStream`](crate::StreamError::UnknownStream) on every rank, as for a closed stream's id.
    ///
    /// ```
    /// use spools_io::stream::StreamId;
    /// assert_eq!(StreamId::new(3).get(), 3);
    /// ```
    pub fn new(id: u32) -> StreamId {
        StreamId(id)
    }
}

/// How a stream of a [`StreamConnection`] is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOptions {
    /// Bytes of a Transfer Unit: a multiple of the connection's links, unless `variable`.
    pub tu: u64,
    /// Its lock-step group (0: none): no stream of a group sends ADU n+1 before every
    /// open stream of the group has sent ADU n, and the receiver hands ADU n of the group
    /// out together.
    pub group: u32,
    /// The stream it is sequenced after: the receiver hands out none of its ADUs before
    /// that stream has ended.
    pub after: Option<StreamId>,
    /// Priority over the other streams on the same links (higher first).
    pub priority: u8,
    /// ADUs the stream holds on each link (queued on its owner's sending thread or on the
    /// wire) before a send waits. It bounds what the job buffers, not what the receiver
    /// has acknowledged: back-pressure from a slow receiver reaches the job through TCP
    /// (the receiver stops reading its links while it holds its bound of ready ADUs).
    pub window: u32,
    /// ADUs of varying size ([`StreamConnection::send_var`]); each ADU is then one TU.
    pub variable: bool,
}

impl Default for StreamOptions {
    /// TUs of 1 MiB, no group, not sequenced, priority 0, a window of 2, fixed size.
    fn default() -> Self {
        StreamOptions {
            tu: 1 << 20,
            group: 0,
            after: None,
            priority: 0,
            window: 2,
            variable: false,
        }
    }
}
