//! A job's stream to one destination, on a connection of its own: the one-stream face of
//! [`StreamConnection`].

use std::net::SocketAddr;

use spools_map::Layout;
use spools_msg::Communicator;
use spools_proto::auth::Secret;

use super::{FrameStyle, StreamConnection, StreamFormat, StreamId, StreamOptions};
use crate::error::StreamError;

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
pub struct StreamWriter {
    conn: StreamConnection,
    id: StreamId,
}

impl StreamWriter {
    /// Opens a stream to `dest` over `format.links` links. Collective over `comm`: rank
    /// `r` opens links `r, r + P, ...`. The links prove no secret (see
    /// [`StreamWriter::open_proving`]).
    ///
    /// # Errors
    /// [`StreamError`]: a bad format (no links, a TU the links do not divide, a window of
    /// 0), the destination unreachable or refusing; an error on any rank fails the call on
    /// every rank.
    pub fn open(
        comm: &Communicator,
        dest: SocketAddr,
        format: StreamFormat,
    ) -> Result<StreamWriter, StreamError> {
        Self::connect(comm, dest, format, None)
    }

    /// [`StreamWriter::open`], each link proving that the job knows `secret` (the job's
    /// secret) if the destination asks for it (as [`StreamConnection::open_proving`]).
    ///
    /// # Errors
    /// As [`StreamWriter::open`]; [`StreamError::Unproven`] on every rank owning a link
    /// when the destination requires another secret.
    pub fn open_proving(
        comm: &Communicator,
        dest: SocketAddr,
        format: StreamFormat,
        secret: &Secret,
    ) -> Result<StreamWriter, StreamError> {
        Self::connect(comm, dest, format, Some(secret))
    }

    fn connect(
        comm: &Communicator,
        dest: SocketAddr,
        format: StreamFormat,
        secret: Option<&Secret>,
    ) -> Result<StreamWriter, StreamError> {
        let opts = StreamOptions {
            tu: format.tu,
            priority: format.priority,
            window: format.window,
            ..StreamOptions::default()
        };
        // Checked before connecting (the same on every rank).
        super::connection::check_options(format.links, &opts)?;
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

    /// Takes this rank's part in a send only to fail with `cause` (a binding's own
    /// argument check failed); as [`StreamConnection::decline_send`].
    pub fn decline_send(&mut self, cause: crate::Cause) -> StreamError {
        self.conn.decline_send(cause)
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
        send::<crate::stream::StreamWriter>();
        send::<crate::stream::StreamConnection>();
        send::<crate::stream::StreamReader>();
        send::<crate::pipe::PipeWriter>();
        send::<crate::pipe::PipeReader>();
    }
}
