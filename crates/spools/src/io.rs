//! Parallel I/O on a [`World`]: redistribution, parallel files (and, through
//! `spools_io::pipe`, parallel pipes), as collective calls on typed slices.

use std::path::Path;

use spools_io::file::{self, FileStats, ReadOptions, WriteOptions};
use spools_io::stream::{StreamConnection, StreamFormat, StreamWriter};
use spools_io::{ExchangeError, ExchangeOptions, ExchangeStats, FileError, StreamError};
use spools_map::Layout;
use spools_msg::{as_bytes, as_bytes_mut, Communicator, Element, MsgError};

use crate::World;

fn check_elem<T: Element>(layouts: &[&Layout]) -> Result<(), ExchangeError> {
    let t = std::mem::size_of::<T>() as u64;
    for l in layouts {
        let e = l.elem_size();
        if e % t != 0 {
            return Err(ExchangeError::ElementSize { elem: t, layout: e });
        }
    }
    Ok(())
}

impl World {
    /// The communicator parallel I/O runs on: a duplicate of the world's (so its messages
    /// never match the application's), made by the first I/O call. Collective the first
    /// time.
    ///
    /// # Errors
    /// [`MsgError`] if the duplicate cannot be made (a dead peer).
    pub fn io_communicator(&self) -> Result<&Communicator, MsgError> {
        if let Some(c) = self.io.get() {
            return Ok(c);
        }
        let c = self.communicator().dup()?;
        let _ = self.io.set(c);
        self.io.get().ok_or(MsgError::NoContext)
    }

    /// Opens a stream to `dest`, a destination outside the job (`spools recv`, or any
    /// program speaking [`spools_proto::stream`]), striped over `format.links` TCP links
    /// (on one host, link `s` owned by rank `s % P`; across hosts, the links go round
    /// the hosts first). Collective; so are the stream's
    /// [`send_adu`](spools_io::stream::StreamWriter::send_adu) (one ADU: this rank's share
    /// of a layout) and [`close`](spools_io::stream::StreamWriter::close). Its links prove
    /// the job's secret to a destination that requires it (`spools recv --secret FILE`).
    ///
    /// ```
    /// use spools::StreamFormat;
    /// use spools_stream::{Event, Limits, Receiver};
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?;
    /// let dest = r.local_addr()?;
    /// let got = std::thread::spawn(move || {
    ///     let mut adus = Vec::new();
    ///     r.serve(1, |d| {
    ///         if let Event::Adu { data, .. } = d.event { adus.push(data) }
    ///         Ok(())
    ///     }).map(|_| adus)
    /// });
    /// let world = spools::init()?;
    /// let frame: spools::Layout = "u8[2,3] *,block on 1x1".parse()?;
    /// let mut s = world.stream_open(dest, StreamFormat { links: 2, tu: 4, ..Default::default() })?;
    /// s.send_adu(&[1, 2, 3, 4, 5, 6], &frame)?;
    /// s.close()?;
    /// assert_eq!(got.join().unwrap()?, vec![vec![1, 2, 3, 4, 5, 6]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`StreamError`]: a bad format, the destination unreachable, or
    /// [`StreamError::Unproven`] when it requires another secret than the job's; an error
    /// on any rank fails the call on every rank.
    pub fn stream_open(
        &self,
        dest: std::net::SocketAddr,
        format: StreamFormat,
    ) -> Result<StreamWriter, StreamError> {
        StreamWriter::open_proving(self.io_communicator()?, dest, format, self.secret())
    }

    /// Opens a logical connection of `links` TCP links to `dest` (owned as
    /// [`World::stream_open`]'s), for several streams: sequenced, in lock-step groups, of
    /// variable-size ADUs (see [`StreamConnection`]). Collective. Its links prove the job's secret to a
    /// destination that requires it (`spools recv --secret FILE`).
    ///
    /// ```
    /// use spools::StreamOptions;
    /// use spools_stream::{Event, Limits, Receiver};
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?;
    /// let dest = r.local_addr()?;
    /// let got = std::thread::spawn(move || {
    ///     let mut adus = Vec::new();
    ///     r.serve(1, |d| {
    ///         if let Event::Adu { stream, data, .. } = d.event { adus.push((stream, data)) }
    ///         Ok(())
    ///     }).map(|_| adus)
    /// });
    /// let world = spools::init()?;
    /// let mut c = world.stream_connect(dest, 3)?;
    /// let first = c.open_stream(StreamOptions { tu: 3, ..Default::default() })?;
    /// // Handed out only once the first has ended; its ADUs vary in size.
    /// let then = c.open_stream(StreamOptions { after: Some(first), variable: true, ..Default::default() })?;
    /// c.send_var(then, b"late")?;
    /// c.send_adu(first, b"early", &"u8[5] block on 1".parse()?)?;
    /// c.close()?;
    /// assert_eq!(got.join().unwrap()?, vec![(1, b"early".to_vec()), (2, b"late".to_vec())]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`StreamError`]: 0 or over 1024 links, the destination unreachable, or
    /// [`StreamError::Unproven`] when it requires another secret than the job's; an error
    /// on any rank fails the call on every rank.
    pub fn stream_connect(
        &self,
        dest: std::net::SocketAddr,
        links: u16,
    ) -> Result<StreamConnection, StreamError> {
        StreamConnection::open_proving(self.io_communicator()?, dest, links, self.secret())
    }

    /// Moves a distributed dataset from layout `from` to layout `to` (rank `r` holds unit
    /// `r` of each). Collective. See [`spools_io::redistribute`].
    ///
    /// ```
    /// let world = spools::init()?;
    /// let rows: spools::Layout = "f64[2,2] block,* on 1x1".parse()?;
    /// let cols: spools::Layout = "f64[2,2] *,block on 1x1 order=F".parse()?;
    /// let mut t = [0.0f64; 4];
    /// world.redistribute(&[1.0, 2.0, 3.0, 4.0], &rows, &mut t, &cols)?;
    /// assert_eq!(t, [1.0, 3.0, 2.0, 4.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ExchangeError`]: element type not matching the layouts, layouts of different
    /// datasets, buffers smaller than their share, a dead peer.
    pub fn redistribute<T: Element>(
        &self,
        src: &[T],
        from: &Layout,
        dst: &mut [T],
        to: &Layout,
    ) -> Result<ExchangeStats, ExchangeError> {
        check_elem::<T>(&[from, to])?;
        spools_io::redistribute(
            self.io_communicator()?,
            as_bytes(src),
            from,
            as_bytes_mut(dst),
            to,
            &ExchangeOptions::default(),
        )
    }

    /// Writes this rank's part (unit `rank` of `layout`) of a dataset to the parallel file
    /// `path`. Collective. See [`spools_io::file`] for formats and durability.
    ///
    /// ```
    /// use spools::{WriteOptions, ReadOptions};
    /// let world = spools::init()?;
    /// let path = std::env::temp_dir().join(format!("spools-doc-{}.npy", std::process::id()));
    /// let l: spools::Layout = "i32[2,3] block,* on 1x1".parse()?;
    /// let opts = WriteOptions { format: spools::Format::Npy, ..Default::default() };
    /// world.write_file(&path, &[1i32, 2, 3, 4, 5, 6], &l, &opts)?;
    /// let mut back = [0i32; 6];
    /// world.read_file(&path, &mut back, &l, &ReadOptions::default())?;
    /// assert_eq!(back, [1, 2, 3, 4, 5, 6]);
    /// # std::fs::remove_file(path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`FileError`] (see [`spools_io::file::write`]).
    pub fn write_file<T: Element>(
        &self,
        path: impl AsRef<Path>,
        data: &[T],
        layout: &Layout,
        opts: &WriteOptions,
    ) -> Result<FileStats, FileError> {
        check_elem::<T>(&[layout])?;
        file::write(
            self.io_communicator()?,
            path.as_ref(),
            as_bytes(data),
            layout,
            opts,
        )
    }

    /// Reads the parallel file `path` into this rank's part of `layout`, with any number
    /// of ranks and any distribution. Collective.
    ///
    /// # Errors
    /// [`FileError`] (see [`spools_io::file::read`]).
    pub fn read_file<T: Element>(
        &self,
        path: impl AsRef<Path>,
        data: &mut [T],
        layout: &Layout,
        opts: &ReadOptions,
    ) -> Result<FileStats, FileError> {
        check_elem::<T>(&[layout])?;
        file::read(
            self.io_communicator()?,
            path.as_ref(),
            as_bytes_mut(data),
            layout,
            opts,
        )
    }
}
