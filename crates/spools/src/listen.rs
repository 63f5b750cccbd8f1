//! Streams into a [`World`]: ADUs from a sender outside the job, scattered into the
//! ranks' buffers following their layout.

use spools_io::stream::Limits;
use spools_io::stream::StreamReader;
use spools_io::StreamRecvError;

use crate::World;

impl World {
    /// Listens at `addr` (port 0: any free port) for a stream into the job: one logical
    /// connection from a sender outside it (`spools send`, a `spools_stream::Sender`,
    /// any program speaking [`spools_proto::stream`]). Rank 0 moves link `s` of the K
    /// inbound links to rank `s % P` (when the sender can move them; else it keeps them
    /// all), each rank receives its links' pieces of each ADU, and the reader's
    /// [`recv_adu`](StreamReader::recv_adu) (collective) moves the ADU by one exchange into
    /// every rank's share of a layout, and
    /// [`next_adu`](StreamReader::next_adu) says what comes next (its size, for ADUs of
    /// varying size). Collective. ADUs of up to 1 GiB are accepted (see
    /// [`StreamReader::listen`] for other limits).
    ///
    /// ```
    /// use spools_proto::stream::{Open, NOT_SEQUENCED};
    /// use spools_stream::Sender;
    /// let world = spools::init()?;
    /// let mut r = world.stream_listen("127.0.0.1:0".parse()?)?;
    /// let to = r.local_addr();
    /// // A sender outside the job: two ADUs of 6 bytes over 2 links, TUs of 4 bytes.
    /// let sender = std::thread::spawn(move || -> Result<(), spools_stream::SendError> {
    ///     let mut s = Sender::connect(to, 2)?;
    ///     s.open(Open { stream: 1, group: 0, after: NOT_SEQUENCED, flags: 0, tu: 4, adu: 6 })?;
    ///     s.send_adu(1, 0, &[1, 2, 3, 4, 5, 6])?;
    ///     s.send_adu(1, 1, &[7, 8, 9, 10, 11, 12])?;
    ///     s.close(1, 2)?;
    ///     s.finish()
    /// });
    /// // One rank here: its share is the whole ADU (with more ranks, each gets its part).
    /// let frame: spools::Layout = "u8[2,3] block,* on 1x1".parse()?;
    /// let mut mine = [0u8; 6];
    /// let first = r.recv_adu(&mut mine, &frame)?.expect("an ADU");
    /// assert_eq!((first.adu, first.size), (0, 6));
    /// assert_eq!(mine, [1, 2, 3, 4, 5, 6]);
    /// assert!(r.recv_adu(&mut mine, &frame)?.is_some());
    /// assert_eq!(mine, [7, 8, 9, 10, 11, 12]);
    /// assert_eq!(r.recv_adu(&mut mine, &frame)?, None); // the sender closed its stream
    /// sender.join().unwrap()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`StreamRecvError`]: rank 0 cannot listen at `addr` (`Bind`), a dead rank; an error
    /// on any rank fails the call on every rank.
    pub fn stream_listen(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<StreamReader, StreamRecvError> {
        StreamReader::listen(self.io_communicator()?, addr, Limits::default())
    }
}
