//! Non-blocking sends and receives on memory the caller owns, without a copy: the
//! engine reads or writes the caller's memory in place and keeps its owner alive until it
//! is done with it, also when the [`Request`] is dropped before it completes. A language
//! binding posts a foreign array this way (Python's `irecv` fills a numpy array in place),
//! and an MPI receive into a non-contiguous datatype takes the message piece by piece
//! ([`Communicator::irecv_scatter`]).

use crate::buffer::{Buf, RecvBuf};
use crate::communicator::Communicator;
use crate::error::MsgError;
use crate::gather_buf::GatherBuf;
use crate::pinned_buf::PinnedBuf;
use crate::request::Request;
use crate::scatter_buf::ScatterBuf;
use crate::status::{Source, Tag};

impl Communicator {
    /// Starts sending the memory of `data` in place (no copy before it leaves: short
    /// and eager messages are copied to the transport at once, a rendezvous streams
    /// straight from it). `data` is dropped once the engine is done with it: at once
    /// for a short or eager message, else when the receiver has taken the data (also if
    /// the request is dropped before). [`Request::wait`]'s completion has an empty
    /// `buf`.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let s = world.isend_pinned(vec![7u8; 100_000], 0, 3).unwrap();
    /// let (got, st) = world.recv_vec(0, 3).unwrap();
    /// assert_eq!((got.len(), got[99_999], st.len), (100_000, 7, 100_000));
    /// assert!(s.wait().unwrap().buf.is_empty());
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn isend_pinned(
        &self,
        data: impl PinnedBuf,
        dest: u32,
        tag: i32,
    ) -> Result<Request, MsgError> {
        self.send_request(Buf::pinned(Box::new(data)), dest, tag, false)
    }

    /// Starts receiving into the memory of `buf` in place: the message is written
    /// straight into it (a longer one is truncated: [`MsgError::Truncated`] from
    /// `wait`, nothing past the end written). `buf` is dropped when the operation is
    /// released; a request dropped before completion cancels a receive that has not
    /// matched, and lets a matched one finish into `buf` first. [`Request::wait`]'s
    /// completion has an empty `buf`: read the memory through another handle of it.
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`].
    pub fn irecv_pinned(
        &self,
        buf: impl PinnedBuf,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Request, MsgError> {
        self.recv_request(
            RecvBuf::Fixed(Buf::pinned(Box::new(buf))),
            src.into(),
            tag.into(),
        )
    }

    /// Starts receiving into scattered memory: `buf` puts each piece of the message in
    /// place as it arrives ([`ScatterBuf`]), with no packed copy of the whole message
    /// made first. A message longer than its capacity is truncated
    /// ([`MsgError::Truncated`] from `wait`, nothing written). `buf` is dropped when
    /// the operation is released, as [`Communicator::irecv_pinned`]'s.
    ///
    /// ```
    /// use spools::ScatterBuf;
    /// // Every other byte of 8.
    /// struct Odd(std::sync::Arc<std::sync::Mutex<[u8; 8]>>);
    /// impl ScatterBuf for Odd {
    ///     fn capacity(&self) -> usize { 4 }
    ///     fn write_at(&mut self, offset: usize, data: &[u8]) {
    ///         let mut m = self.0.lock().unwrap();
    ///         for (i, b) in data.iter().enumerate() { m[2 * (offset + i) + 1] = *b; }
    ///     }
    /// }
    /// let world = spools::init().unwrap();
    /// let mem = std::sync::Arc::new(std::sync::Mutex::new([0u8; 8]));
    /// let r = world.irecv_scatter(Odd(mem.clone()), 0, 4).unwrap();
    /// world.send(&[1u8, 2, 3, 4], 0, 4).unwrap();
    /// assert_eq!(r.wait().unwrap().status.len, 4);
    /// assert_eq!(*mem.lock().unwrap(), [0, 1, 0, 2, 0, 3, 0, 4]);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`].
    pub fn irecv_scatter(
        &self,
        buf: impl ScatterBuf,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Request, MsgError> {
        self.recv_request(RecvBuf::Scatter(Box::new(buf)), src.into(), tag.into())
    }

    /// Starts sending memory that is not one run: `data` packs each piece of the
    /// message as it leaves ([`GatherBuf`]). A message that streams (a rendezvous) is
    /// never packed whole; a short or eager one is packed whole at once, as it leaves.
    /// `data` is dropped when the operation is released, as
    /// [`Communicator::isend_pinned`]'s. [`Request::wait`]'s completion has an empty
    /// `buf`.
    ///
    /// ```
    /// use spools::GatherBuf;
    /// // Every other byte of 8.
    /// struct Odd([u8; 8]);
    /// impl GatherBuf for Odd {
    ///     fn len(&self) -> usize { 4 }
    ///     fn read_at(&mut self, offset: usize, out: &mut [u8]) {
    ///         for (i, b) in out.iter_mut().enumerate() { *b = self.0[2 * (offset + i) + 1]; }
    ///     }
    /// }
    /// let world = spools::init().unwrap();
    /// let s = world.isend_gather(Odd([0, 1, 0, 2, 0, 3, 0, 4]), 0, 5).unwrap();
    /// let (got, _) = world.recv_vec(0, 5).unwrap();
    /// s.wait().unwrap();
    /// assert_eq!(got, [1, 2, 3, 4]);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn isend_gather(
        &self,
        data: impl GatherBuf,
        dest: u32,
        tag: i32,
    ) -> Result<Request, MsgError> {
        self.isend_gather_mode(data, dest, tag, false)
    }

    /// [`Communicator::isend_gather`] in synchronous mode: the request completes only
    /// once a receive on `dest` matched the message (MPI's `MPI_Issend`).
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn issend_gather(
        &self,
        data: impl GatherBuf,
        dest: u32,
        tag: i32,
    ) -> Result<Request, MsgError> {
        self.isend_gather_mode(data, dest, tag, true)
    }

    fn isend_gather_mode(
        &self,
        data: impl GatherBuf,
        dest: u32,
        tag: i32,
        synchronous: bool,
    ) -> Result<Request, MsgError> {
        self.send_request(Buf::gathered(Box::new(data)), dest, tag, synchronous)
    }

    /// Receives into scattered memory ([`Communicator::irecv_scatter`]) and waits. When
    /// the wait fails (an interrupt, a dead rank), the receive is removed from the
    /// engine before the call returns: `buf` is never written after it.
    ///
    /// # Errors
    /// As [`Communicator::recv`].
    pub fn recv_scatter(
        &self,
        buf: impl ScatterBuf,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<crate::Status, MsgError> {
        let r = self.irecv_scatter(buf, src, tag)?;
        r.wait_or_release().map(|c| c.status)
    }

    /// Sends memory that is not one run ([`Communicator::isend_gather`]) and waits,
    /// synchronously (MPI's `MPI_Ssend`) when asked. When the wait fails (an interrupt,
    /// a dead rank), the send is removed from the engine before the call returns:
    /// `data` is never read after it.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn send_gather(
        &self,
        data: impl GatherBuf,
        dest: u32,
        tag: i32,
        synchronous: bool,
    ) -> Result<(), MsgError> {
        let r = self.isend_gather_mode(data, dest, tag, synchronous)?;
        r.wait_or_release().map(|_| ())
    }
}
