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
//!   ([`spools_proto::frame`]), a header in front of each frame of a 2-D image or field.

use std::net::SocketAddr;
use std::time::Duration;

use spools_map::Layout;
use spools_msg::Communicator;
use spools_proto::auth::Secret;

mod connection;
mod distribution;
mod frames;
mod link;
mod reader;

pub use connection::StreamConnection;
pub use frames::{frame_header, FrameStyle};
pub use reader::{AduInfo, Limits, StreamReader};

use crate::error::StreamError;

/// How often, at least, a wait of a stream end on something of its own (room in a link's
/// window, a link's last sends, the next ADU on rank 0) asks the process's interrupt
/// check ([`Communicator::check_interrupt`]), as messaging's waits do before they sleep:
/// a wait it ends fails with [`StreamError::Msg`] or
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
    /// [`StreamError::UnknownStream`] on every rank, as for a closed stream's id.
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

/// A stream from this job to one destination, open on every rank of a communicator: one
/// stream on a [`StreamConnection`] of its own.
///
/// ```no_run
/// use spools_io::stream::{StreamFormat, StreamWriter};
/// let world = spools::init()?;
/// let frame: spools_map::Layout = "u8[1080,1920,3] block,*,* on 4x1x1".parse()?;
/// let mine = vec![0u8; frame.local_bytes(u64::from(world.rank()))? as usize];
/// let dest = "127.0.0.1:5000".parse()?;
/// let fmt = StreamFormat { links: 2, tu: 1 << 20, ..Default::default() };
/// let mut s = StreamWriter::open(world.communicator(), dest, fmt)?;
/// s.send_adu(&mine, &frame)?; // one ADU: the whole frame
/// s.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StreamWriter<'c> {
    conn: StreamConnection<'c>,
    id: StreamId,
}

impl<'c> StreamWriter<'c> {
    /// Opens a stream to `dest` over `format.links` links. Collective over `comm`: rank
    /// `r` opens links `r, r + P, ...`. The links prove no secret (see
    /// [`StreamWriter::open_proving`]).
    ///
    /// # Errors
    /// [`StreamError`]: a bad format (no links, a TU the links do not divide, a window of
    /// 0), the destination unreachable or refusing; an error on any rank fails the call on
    /// every rank.
    pub fn open(
        comm: &'c Communicator,
        dest: SocketAddr,
        format: StreamFormat,
    ) -> Result<StreamWriter<'c>, StreamError> {
        Self::connect(comm, dest, format, None)
    }

    /// [`StreamWriter::open`], each link proving that the job knows `secret` (the job's
    /// secret) if the destination asks for it (as [`StreamConnection::open_proving`]).
    ///
    /// # Errors
    /// As [`StreamWriter::open`]; [`StreamError::Unproven`] on every rank owning a link
    /// when the destination requires another secret.
    pub fn open_proving(
        comm: &'c Communicator,
        dest: SocketAddr,
        format: StreamFormat,
        secret: &Secret,
    ) -> Result<StreamWriter<'c>, StreamError> {
        Self::connect(comm, dest, format, Some(secret))
    }

    fn connect(
        comm: &'c Communicator,
        dest: SocketAddr,
        format: StreamFormat,
        secret: Option<&Secret>,
    ) -> Result<StreamWriter<'c>, StreamError> {
        let opts = StreamOptions {
            tu: format.tu,
            priority: format.priority,
            window: format.window,
            ..StreamOptions::default()
        };
        // Checked before connecting (the same on every rank).
        connection::check_options(format.links, &opts)?;
        let mut conn = StreamConnection::connect(comm, dest, format.links, secret)?;
        let id = conn.open_stream(opts)?;
        Ok(StreamWriter { conn, id })
    }

    /// The ADUs sent so far.
    pub fn adus(&self) -> u64 {
        self.conn.adus(self.id)
    }

    /// Sends one ADU: `data` is this rank's share of `layout` (any layout of the stream's
    /// ADU size: it may change from one ADU to the next). Collective. Returns once the ADU
    /// is reshuffled and queued on the link owners' sending threads (each holds at most
    /// `window` ADUs of the stream: the next ADU is computed and reshuffled while this one
    /// is on the wire); a link's failure is reported by a later `send_adu` or
    /// [`close`](StreamWriter::close).
    ///
    /// # Errors
    /// [`StreamError`]: a buffer of the wrong size, an ADU of another size than the first,
    /// a dead rank, a link that fails; an error on any rank fails the call on every rank.
    pub fn send_adu(&mut self, data: &[u8], layout: &Layout) -> Result<(), StreamError> {
        self.conn.send_adu(self.id, data, layout)
    }

    /// Sends one frame (the framebuffer protocol): `data` is this rank's share of `layout`,
    /// a 2-D image or field, shown as `style`; as [`StreamConnection::send_frame`].
    ///
    /// # Errors
    /// As [`StreamConnection::send_frame`].
    pub fn send_frame(
        &mut self,
        style: &FrameStyle,
        data: &[u8],
        layout: &Layout,
    ) -> Result<(), StreamError> {
        self.conn.send_frame(self.id, style, data, layout)
    }

    /// Ends the stream (with the ADUs sent) and the connection. Collective.
    ///
    /// # Errors
    /// [`StreamError`] when a link fails, on every rank.
    pub fn close(self) -> Result<(), StreamError> {
        self.conn.close()
    }
}

#[cfg(test)]
mod tests {
    /// The ends of streams and pipes may move to another thread (a binding that
    /// releases its interpreter's lock while they wait, a worker thread).
    #[test]
    fn stream_and_pipe_ends_are_send() {
        fn send<T: Send>() {}
        send::<super::StreamWriter<'static>>();
        send::<super::StreamConnection<'static>>();
        send::<super::StreamReader<'static>>();
        send::<crate::pipe::PipeWriter<'static>>();
        send::<crate::pipe::PipeReader<'static>>();
    }
}
