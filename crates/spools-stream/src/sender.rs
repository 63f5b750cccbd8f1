//! A sender of streams from one process: K links to a receiver, ADUs cut into TUs and
//! striped over the links as SUs (what `spools send` does; a job's ranks each own links).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{IoSlice, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use spools_proto::auth::Secret;
use spools_proto::handshake::{Client, HandshakeError, Identity, Purpose, SERVER_HELLO_LEN};
use spools_proto::stream::{
    su_range, tus, Ack, Close, Frame, Hello, Open, Su, HELLO_CAN_MOVE, HELLO_CAN_PROVE, MAX_LINKS,
    MAX_SU, SU_HEADER, VARIABLE, VERSION, WELCOME_ACKS, WELCOME_MOVE, WELCOME_PROVEN,
    WELCOME_REQUIRE_PROOF,
};

use crate::link::{FrameReader, LinkError, Read1};
use crate::timeouts::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT, STALL_TIMEOUT};

/// Why sending failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The destination could not be reached (refused, or no answer within
    /// [`CONNECT_TIMEOUT`]).
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The destination.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A link failed (the receiver closed it or died).
    #[error("link {link}: {source}")]
    Link {
        /// The link.
        link: u16,
        /// What happened.
        source: LinkError,
    },
    /// The receiver did not answer the hello with a welcome.
    #[error("link {link}: the receiver did not welcome the connection")]
    NoWelcome {
        /// The link.
        link: u16,
    },
    /// The receiver requires the job secret's proof, and this sender was given no secret.
    #[error("link {link}: the receiver requires the job secret's proof (give the sender the job's secret)")]
    ProofRequired {
        /// The link.
        link: u16,
    },
    /// The secret handshake failed: the receiver does not know this sender's secret (they
    /// hold different secrets), or its answer was not a handshake message.
    #[error("link {link}: secret handshake with the receiver: {source}")]
    Handshake {
        /// The link.
        link: u16,
        /// What failed.
        source: HandshakeError,
    },
    /// The receiver ended the link instead of accepting the proof of the secret.
    #[error("link {link}: the receiver refused the proof of the secret")]
    NotProven {
        /// The link.
        link: u16,
    },
    /// The receiver closed the link while the sender waited for its acks.
    #[error("link {link}: the receiver closed the link while ADUs were waiting for its acks")]
    Closed {
        /// The link.
        link: u16,
    },
    /// The receiver sent a frame a receiver does not send.
    #[error("link {link}: the receiver sent {got}")]
    Unexpected {
        /// The link.
        link: u16,
        /// What it sent.
        got: &'static str,
    },
    /// The receiver moved the link a second time (a link moves at most once: the
    /// receiver it was moved to must serve it).
    #[error("link {link}: moved again by the receiver at {addr}")]
    MovedAgain {
        /// The link.
        link: u16,
        /// The receiver that moved it again.
        addr: SocketAddr,
    },
    /// The receiver took nothing on the link for the stall timeout (see
    /// [`LinkSender::with_stall_timeout`]): no byte of a write, no ack while the window was
    /// full, or not the link's end while it finished. It welcomed the link and stopped
    /// reading it (or is far slower than the timeout allows).
    #[error("link {link}: the receiver took nothing for {:.1} s (it stopped reading the link)", .after.as_secs_f64())]
    Stalled {
        /// The link.
        link: u16,
        /// The stall timeout.
        after: Duration,
    },
    /// An argument outside what the format allows.
    #[error("{0}")]
    Format(&'static str),
}

/// How a link's handshake with one receiver ended.
enum Handshaken {
    /// Welcomed: the socket, its frames and the last welcome's flags.
    Ready(TcpStream, FrameReader<TcpStream>, u16),
    /// Moved: say hello again there.
    Move(SocketAddr),
}

/// One link of a logical connection, owned by this process: what a rank of a job that owns
/// link `link` of `links` uses (the others own the other links, with the same `conn`).
///
/// With a window ([`LinkSender::with_window`]) and a receiver that sends acks, the link
/// holds the first SU of ADU `n` of a stream until the receiver acknowledged ADU `n - w`:
/// at most `w` ADUs of a stream are in flight beyond what the receiver handed out.
pub struct LinkSender {
    sock: TcpStream,
    link: u16,
    buf: Vec<u8>,
    /// The receiver's frames (its acks); `None` once [`LinkSender::take_acks`] handed them
    /// to a reader of their own.
    frames: Option<FrameReader<TcpStream>>,
    /// Whether the receiver announced acks.
    acks: bool,
    /// ADUs in flight per stream (0: no window).
    window: u32,
    /// Per stream, ADUs the receiver acknowledged (`0..acked`).
    acked: HashMap<u32, u64>,
    /// How long a write, or a wait for the receiver's acks or end, may take nothing.
    stall: Option<Duration>,
}

impl LinkSender {
    /// Opens link `link` of `links` of connection `conn` to `addr`: hello, then the
    /// receiver's welcome. The hello says the link can move (`HELLO_CAN_MOVE`): a receiver
    /// that spreads its links (a job) may answer with the address of another receiver of
    /// the connection, where the link says the same hello again (once).
    ///
    /// # Errors
    /// [`SendError::Connect`] when the receiver refuses the connection or does not answer
    /// within [`CONNECT_TIMEOUT`]; [`SendError`] when the link is not welcomed;
    /// [`SendError::ProofRequired`] when the receiver requires the job secret's proof (see
    /// [`LinkSender::connect_proving`]); [`SendError::MovedAgain`] when the receiver the
    /// link was moved to moves it again.
    pub fn connect(
        addr: SocketAddr,
        links: u16,
        link: u16,
        conn: u64,
    ) -> Result<LinkSender, SendError> {
        Self::open(addr, links, link, conn, None)
    }

    /// [`LinkSender::connect`], proving `secret` (the job's secret) if the receiver
    /// requires it.
    ///
    /// # Errors
    /// As [`LinkSender::connect`]; [`SendError::Handshake`] when the receiver does not
    /// know this secret, [`SendError::NotProven`] when it refuses the proof.
    pub fn connect_proving(
        addr: SocketAddr,
        links: u16,
        link: u16,
        conn: u64,
        secret: &Secret,
    ) -> Result<LinkSender, SendError> {
        Self::open(addr, links, link, conn, Some(secret))
    }

    fn open(
        addr: SocketAddr,
        links: u16,
        link: u16,
        conn: u64,
        secret: Option<&Secret>,
    ) -> Result<LinkSender, SendError> {
        if links == 0 || links > MAX_LINKS || link >= links {
            return Err(SendError::Format(
                "links must be 1 to 1024, and the link below them",
            ));
        }
        let hello = Hello {
            version: VERSION,
            flags: HELLO_CAN_MOVE | if secret.is_some() { HELLO_CAN_PROVE } else { 0 },
            links,
            link,
            conn,
        };
        let (sock, frames, flags) = match handshake(addr, &hello, secret)? {
            Handshaken::Ready(sock, frames, flags) => (sock, frames, flags),
            Handshaken::Move(to) => match handshake(to, &hello, secret)? {
                Handshaken::Ready(sock, frames, flags) => (sock, frames, flags),
                Handshaken::Move(_) => return Err(SendError::MovedAgain { link, addr: to }),
            },
        };
        Ok(LinkSender {
            sock,
            link,
            buf: Vec::new(),
            frames: Some(frames),
            acks: flags & WELCOME_ACKS != 0,
            window: 0,
            acked: HashMap::new(),
            stall: None,
        })
    }

    /// Fails the link with [`SendError::Stalled`] when the receiver takes nothing for
    /// `after` (`None`, or zero: waits as long as it takes, the default of a
    /// `LinkSender`): a write that moves no byte, a wait for an ack while the window is
    /// full, a wait for the receiver's end of the link while it finishes. A receiver
    /// holding the sender back (a slow consumer) for longer fails it too.
    #[must_use]
    pub fn with_stall_timeout(self, after: Option<Duration>) -> LinkSender {
        let after = after.filter(|d| !d.is_zero());
        // Setting a socket timeout fails only for a zero duration, filtered out above;
        // a failure would leave the link without a bound, as before.
        let _ = self.sock.set_write_timeout(after);
        let _ = self.sock.set_read_timeout(after);
        LinkSender {
            stall: after,
            ..self
        }
    }

    /// The link's error for `e`, met writing or reading: [`SendError::Stalled`] when it is
    /// the stall timeout's.
    fn failed(&self, source: LinkError) -> SendError {
        match (&source, self.stall) {
            (LinkError::Io(e), Some(after))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                SendError::Stalled {
                    link: self.link,
                    after,
                }
            }
            _ => SendError::Link {
                link: self.link,
                source,
            },
        }
    }

    /// Holds at most `adus` ADUs of each stream in flight beyond those the receiver
    /// acknowledged (0: no window). Without acks from the receiver (a receiver that does
    /// not announce them), there is no window.
    ///
    /// A window on a stream that the receiver holds back (sequenced after a stream still
    /// open, or in a group whose other streams do not progress) waits for them.
    #[must_use]
    pub fn with_window(self, adus: u32) -> LinkSender {
        LinkSender {
            window: adus,
            ..self
        }
    }

    /// This link's index.
    pub fn link(&self) -> u16 {
        self.link
    }

    /// Whether the receiver sends acks (a window holds the sender back).
    pub fn acks(&self) -> bool {
        self.acks
    }

    /// ADUs of `stream` the receiver acknowledged so far, as far as this link read
    /// (ADUs `0..acked`).
    pub fn acked(&self, stream: u32) -> u64 {
        self.acked.get(&stream).copied().unwrap_or(0)
    }

    /// Sends a frame without payload (open, close).
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn send(&mut self, f: &Frame<'_>) -> Result<(), SendError> {
        self.buf.clear();
        f.encode(&mut self.buf);
        let written = self.sock.write_all(&self.buf);
        written.map_err(|e| self.failed(e.into()))
    }

    /// Sends one SU: its header and payload, with one vectored write where the socket
    /// takes it. With a window, waits first until the receiver acknowledged ADU
    /// `h.adu - window` of the stream.
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails, [`SendError::Closed`] when the receiver
    /// closes it while the sender waits for acks.
    pub fn send_su(&mut self, h: &Su, payload: &[u8]) -> Result<(), SendError> {
        self.wait_window(h.stream, h.adu)?;
        let header = h.header(payload.len() as u32);
        let written = write_all_vectored(&mut self.sock, &header, payload);
        written.map_err(|e| self.failed(e.into()))
    }

    /// Sends several SUs, each `(header, payload)`, gathered into as few vectored writes
    /// as the socket takes (headers and payloads straight from where they lie). With a
    /// window, waits first as [`LinkSender::send_su`] does for each SU's ADU.
    ///
    /// # Errors
    /// As [`LinkSender::send_su`].
    pub fn send_sus(&mut self, sus: &[(Su, &[u8])]) -> Result<(), SendError> {
        for batch in sus.chunks(GATHER) {
            for (h, _) in batch {
                self.wait_window(h.stream, h.adu)?;
            }
            let heads: Vec<[u8; SU_HEADER]> = batch
                .iter()
                .map(|(h, p)| h.header(p.len() as u32))
                .collect();
            let mut slices: Vec<IoSlice<'_>> = heads
                .iter()
                .zip(batch)
                .flat_map(|(h, (_, p))| [IoSlice::new(h), IoSlice::new(p)])
                .collect();
            let written = write_all_slices(&mut self.sock, &mut slices);
            written.map_err(|e| self.failed(e.into()))?;
        }
        Ok(())
    }

    /// Waits until ADU `adu` of `stream` fits in the window.
    fn wait_window(&mut self, stream: u32, adu: u64) -> Result<(), SendError> {
        let w = u64::from(self.window);
        if !self.acks || w == 0 || adu < w {
            return Ok(());
        }
        // ADU `adu - w` acknowledged: `adu - w + 1` ADUs.
        while self.acked(stream) < adu - w + 1 {
            self.read_ack()?;
        }
        Ok(())
    }

    /// Reads one frame from the receiver: an ack.
    fn read_ack(&mut self) -> Result<(), SendError> {
        let link = self.link;
        let Some(frames) = self.frames.as_mut() else {
            return Err(SendError::Format(
                "the link's acks were handed to an AckReader",
            ));
        };
        let got = match read_ack(frames, link) {
            Err(SendError::Link { source, .. }) => return Err(self.failed(source)),
            other => other?,
        };
        match got {
            Some(a) => {
                let n = self.acked.entry(a.stream).or_insert(0);
                *n = (*n).max(a.adu.saturating_add(1));
                Ok(())
            }
            None => Err(SendError::Closed { link }),
        }
    }

    /// Hands the receiver's acks to a reader of their own (a thread that reads them while
    /// this link sends), when the receiver sends acks: the link then keeps no window of
    /// its own ([`LinkSender::with_window`] no longer applies), and
    /// [`LinkSender::finish`] only ends the sending side: the reader sees the receiver
    /// close the link. `None` when the receiver sends no acks or they were taken before.
    pub fn take_acks(&mut self) -> Option<AckReader> {
        if !self.acks {
            return None;
        }
        self.window = 0;
        // The reader waits for acks as long as the receiver takes: no stall timeout there.
        if self.stall.is_some() {
            let _ = self.sock.set_read_timeout(None);
        }
        self.frames.take().map(|frames| AckReader {
            link: self.link,
            frames,
        })
    }

    /// Stops the link at once in both directions, without ending it in order: an
    /// [`AckReader`] blocked on it returns, and the receiver sees the link cut (what an
    /// abandoned connection does).
    pub fn abort(&self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// Ends the link (no more frames). When the receiver sends acks, reads them until it
    /// closes its side, so that no unread ack turns the close into a reset that could cut
    /// off the last frames: the link ends once the receiver has read all of it.
    ///
    /// A receiver may close its links only once every link of the connection ended, so a
    /// process holding several links finishes them concurrently (as [`Sender::finish`]
    /// does; a job's links each finish on their own thread), never one after another.
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn finish(self) -> Result<(), SendError> {
        self.shutdown()?;
        self.drain()
    }

    /// Ends the sender's side of the link (no more frames), without reading anything: the
    /// receiver reads the end of the link after the last frame. What
    /// [`LinkSender::finish`] is once the acks were [taken](LinkSender::take_acks), whose
    /// reader then sees the receiver close the link.
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn shutdown(&self) -> Result<(), SendError> {
        let link = self.link;
        self.sock
            .shutdown(Shutdown::Write)
            .map_err(|e| SendError::Link {
                link,
                source: e.into(),
            })
    }

    /// After [`LinkSender::shutdown`]: when the receiver sends acks, reads them until it
    /// closes the link.
    fn drain(mut self) -> Result<(), SendError> {
        if self.acks && self.frames.is_some() {
            loop {
                match self.read_ack() {
                    Ok(()) => {}
                    Err(SendError::Closed { .. }) => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// The receiver's side of a link, read on its own: the acks of the ADUs it handed out
/// (see [`LinkSender::take_acks`]).
pub struct AckReader {
    link: u16,
    frames: FrameReader<TcpStream>,
}

impl AckReader {
    /// The link's index.
    pub fn link(&self) -> u16 {
        self.link
    }

    /// Waits for the receiver's next ack: `Some` ack, or `None` once the receiver closed
    /// the link (or the link was [aborted](LinkSender::abort)).
    ///
    /// # Errors
    /// [`SendError::Link`] when reading fails or the bytes are not frames;
    /// [`SendError::Unexpected`] for a frame other than an ack.
    pub fn next_ack(&mut self) -> Result<Option<Ack>, SendError> {
        read_ack(&mut self.frames, self.link)
    }
}

/// Reads the receiver's next frame on link `link`: an ack, or `None` at the link's end.
fn read_ack(frames: &mut FrameReader<TcpStream>, link: u16) -> Result<Option<Ack>, SendError> {
    match frames.next() {
        Ok(Read1::Frame(Frame::Ack(a))) => Ok(Some(a)),
        Ok(Read1::Frame(_)) => Err(SendError::Unexpected {
            link,
            got: "a frame other than an ack",
        }),
        Ok(Read1::End) => Ok(None),
        Err(source) => Err(SendError::Link { link, source }),
    }
}

/// Ends a link the receiver refused, once the receiver closed it too: the receiver has
/// then noted the refusal (within the socket's read timeout).
fn hang_up(sock: &TcpStream, frames: &mut FrameReader<TcpStream>) {
    let _ = sock.shutdown(Shutdown::Write);
    // Nothing more is expected from it: a few bytes at most, then its end.
    let mut rest = [0u8; 256];
    for _ in 0..64 {
        if frames.read_raw(&mut rest).is_err() {
            return;
        }
    }
}

/// One receiver's handshake of a link: hello, welcome, the proof when asked, and where the
/// link goes on when the last welcome moves it.
fn handshake(
    addr: SocketAddr,
    hello: &Hello,
    secret: Option<&Secret>,
) -> Result<Handshaken, SendError> {
    let link = hello.link;
    let io = |e: std::io::Error| SendError::Link {
        link,
        source: e.into(),
    };
    let mut sock = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|source| SendError::Connect { addr, source })?;
    // SUs and control frames go out as they are written (no Nagle delay on the last
    // segment of a frame).
    let _ = sock.set_nodelay(true);
    // The receiver answers at once: a bound on the wait, lifted once welcomed.
    sock.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).map_err(io)?;
    let mut b = Vec::new();
    Frame::Hello(*hello).encode(&mut b);
    sock.write_all(&b).map_err(io)?;
    let mut frames = FrameReader::new(sock.try_clone().map_err(io)?);
    let mut flags = match frames.next() {
        Ok(Read1::Frame(Frame::Welcome(w))) => w.flags,
        Ok(_) => return Err(SendError::NoWelcome { link }),
        Err(source) => return Err(SendError::Link { link, source }),
    };
    if flags & WELCOME_REQUIRE_PROOF != 0 {
        let proven = match secret {
            Some(secret) => prove(&mut sock, &mut frames, secret, link),
            None => Err(SendError::ProofRequired { link }),
        };
        flags = match proven {
            Ok(flags) => flags,
            Err(e) => {
                hang_up(&sock, &mut frames);
                return Err(e);
            }
        };
    }
    if flags & WELCOME_MOVE != 0 {
        let to = match frames.next() {
            Ok(Read1::Frame(Frame::Move(m))) => Ok(m.addr),
            Ok(_) => Err(SendError::Unexpected {
                link,
                got: "a frame other than move after a welcome that moves the link",
            }),
            Err(source) => Err(SendError::Link { link, source }),
        };
        hang_up(&sock, &mut frames);
        return to.map(Handshaken::Move);
    }
    sock.set_read_timeout(None).map_err(io)?;
    Ok(Handshaken::Ready(sock, frames, flags))
}

/// The sender's side of the secret handshake on a link, after a welcome that requires it:
/// the flags of the receiver's second welcome.
fn prove(
    sock: &mut TcpStream,
    frames: &mut FrameReader<TcpStream>,
    secret: &Secret,
    link: u16,
) -> Result<u16, SendError> {
    let io = |e: std::io::Error| SendError::Link {
        link,
        source: e.into(),
    };
    let nonce = crate::random::nonce().map_err(io)?;
    let client = Client::new(
        secret.clone(),
        nonce,
        Purpose::Data,
        Identity {
            rank: 0,
            lane: link,
            priority: 0,
        },
    );
    sock.write_all(&client.hello()).map_err(io)?;
    let mut reply = [0u8; SERVER_HELLO_LEN];
    frames
        .read_raw(&mut reply)
        .map_err(|source| SendError::Link { link, source })?;
    let auth = client
        .on_server_hello(&reply)
        .map_err(|source| SendError::Handshake { link, source })?;
    sock.write_all(&auth).map_err(io)?;
    match frames.next() {
        Ok(Read1::Frame(Frame::Welcome(w))) if w.flags & WELCOME_PROVEN != 0 => Ok(w.flags),
        Ok(Read1::Frame(_)) => Err(SendError::Unexpected {
            link,
            got: "a frame other than the welcome after the proof",
        }),
        Ok(Read1::End) | Err(_) => Err(SendError::NotProven { link }),
    }
}

/// A logical connection's K links, written by this thread.
///
/// ```no_run
/// use spools_proto::stream::{Open, NOT_SEQUENCED};
/// use spools_stream::Sender;
/// let mut s = Sender::connect("127.0.0.1:5000".parse()?, 3)?;
/// let data = vec![7u8; 1 << 20];
/// s.open(Open { stream: 1, group: 0, after: NOT_SEQUENCED, flags: 0, tu: 96 << 10, adu: data.len() as u64 })?;
/// s.send_adu(1, 0, &data)?;
/// s.close(1, 1)?;
/// s.finish()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Sender {
    links: Vec<LinkSender>,
    opened: Vec<Open>,
}

impl Sender {
    /// Opens `links` links to `addr`, says hello on each and waits for each welcome. A
    /// link then fails once the receiver takes nothing on it for [`STALL_TIMEOUT`] (see
    /// [`Sender::with_stall_timeout`]).
    ///
    /// # Errors
    /// [`SendError`] when a link cannot be opened or is not welcomed;
    /// [`SendError::ProofRequired`] when the receiver requires the job secret's proof (see
    /// [`Sender::connect_proving`]).
    pub fn connect(addr: SocketAddr, links: u16) -> Result<Sender, SendError> {
        Self::open_links(addr, links, None)
    }

    /// [`Sender::connect`], proving `secret` on every link if the receiver requires it.
    ///
    /// # Errors
    /// As [`LinkSender::connect_proving`].
    pub fn connect_proving(
        addr: SocketAddr,
        links: u16,
        secret: &Secret,
    ) -> Result<Sender, SendError> {
        Self::open_links(addr, links, Some(secret))
    }

    fn open_links(
        addr: SocketAddr,
        links: u16,
        secret: Option<&Secret>,
    ) -> Result<Sender, SendError> {
        if links == 0 || links > MAX_LINKS {
            return Err(SendError::Format("links must be 1 to 1024"));
        }
        let conn = {
            let mut h = RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            h.finish()
        };
        let links = (0..links)
            .map(|link| {
                LinkSender::open(addr, links, link, conn, secret)
                    .map(|l| l.with_stall_timeout(Some(STALL_TIMEOUT)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sender {
            links,
            opened: Vec::new(),
        })
    }

    /// Holds at most `adus` ADUs of each stream in flight beyond those the receiver
    /// acknowledged, on every link (see [`LinkSender::with_window`]; 0: no window).
    #[must_use]
    pub fn with_window(self, adus: u32) -> Sender {
        Sender {
            links: self
                .links
                .into_iter()
                .map(|l| l.with_window(adus))
                .collect(),
            ..self
        }
    }

    /// Fails a link with [`SendError::Stalled`] when the receiver takes nothing on it for
    /// `after` (see [`LinkSender::with_stall_timeout`]; `None` or zero: no bound). A
    /// `Sender` starts with [`STALL_TIMEOUT`].
    #[must_use]
    pub fn with_stall_timeout(self, after: Option<Duration>) -> Sender {
        Sender {
            links: self
                .links
                .into_iter()
                .map(|l| l.with_stall_timeout(after))
                .collect(),
            ..self
        }
    }

    /// ADUs of `stream` the receiver acknowledged so far, as far as the links read.
    pub fn acked(&self, stream: u32) -> u64 {
        self.links
            .iter()
            .map(|l| l.acked(stream))
            .max()
            .unwrap_or(0)
    }

    /// Announces a stream on every link.
    ///
    /// # Errors
    /// [`SendError`] when a link fails, or the format cannot be sent (a TU whose SUs would
    /// exceed the frame limit).
    pub fn open(&mut self, open: Open) -> Result<(), SendError> {
        if open.tu == 0 {
            return Err(SendError::Format("the TU must be at least 1 byte"));
        }
        if open.adu != VARIABLE && su_bytes(open.tu, self.links.len()) > u64::from(MAX_SU) {
            return Err(SendError::Format("SUs (TU / links) must be at most 64 MiB"));
        }
        self.opened.retain(|o| o.stream != open.stream);
        self.opened.push(open);
        self.on_every_link(&Frame::Open(open))
    }

    /// Sends ADU number `adu` of stream `stream`: its TUs in order, each striped over the
    /// links (SU `s` on link `s`), every SU with its CRC32C.
    ///
    /// # Errors
    /// [`SendError`] when a link fails, the stream was not opened, or the ADU's size is not
    /// the stream's.
    pub fn send_adu(&mut self, stream: u32, adu: u64, data: &[u8]) -> Result<(), SendError> {
        let open = *self
            .opened
            .iter()
            .find(|o| o.stream == stream)
            .ok_or(SendError::Format("the stream was not opened"))?;
        let size = data.len() as u64;
        if open.adu != VARIABLE && size != open.adu {
            return Err(SendError::Format("the ADU's size is not the stream's"));
        }
        let k = self.links.len() as u16;
        let tu = if open.adu == VARIABLE {
            size.max(1)
        } else {
            open.tu
        };
        if open.adu == VARIABLE && su_bytes(tu, self.links.len()) > u64::from(MAX_SU) {
            return Err(SendError::Format(
                "a variable-size ADU is one TU: its SUs must be at most 64 MiB",
            ));
        }
        if size == 0 {
            return self.send_su(0, &su(stream, 0, adu, 0, 0, 0, &[]), &[]);
        }
        if k > 1 && size >= PARALLEL_FROM {
            // Each link from a thread of its own: its SUs of every TU, CRCs computed there.
            return std::thread::scope(|scope| {
                let sending: Vec<_> = self
                    .links
                    .iter_mut()
                    .map(|l| scope.spawn(move || send_link_sus(l, k, stream, adu, tu, data)))
                    .collect();
                sending
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or(Err(SendError::Format("a link's sending thread panicked")))
                    })
                    .collect::<Result<Vec<()>, _>>()
                    .map(drop)
            });
        }
        for t in 0..tus(size, tu) {
            for s in 0..k {
                let Some((off, len)) = su_range(size, tu, k, t, s) else {
                    break;
                };
                let p = &data[off as usize..(off + len) as usize];
                self.send_su(s, &su(stream, s, adu, t, off, size, p), p)?;
            }
        }
        Ok(())
    }

    /// Ends stream `stream` on every link, after `adus` ADUs.
    ///
    /// # Errors
    /// [`SendError`] when a link fails.
    pub fn close(&mut self, stream: u32, adus: u64) -> Result<(), SendError> {
        self.on_every_link(&Frame::Close(Close { stream, adus }))
    }

    /// Ends the connection: shuts every link's sending side down, then waits on every
    /// link at once until the receiver closed it (reading its acks meanwhile).
    ///
    /// Every link is shut down before any is waited on, and the links are waited on
    /// concurrently, so that a receiver that closes its links only once every link of the
    /// connection ended costs the time it takes, never a hang.
    ///
    /// # Errors
    /// [`SendError`] when a link fails (the first link's error, by link index).
    pub fn finish(self) -> Result<(), SendError> {
        let shut: Vec<Result<(), SendError>> =
            self.links.iter().map(LinkSender::shutdown).collect();
        let drained: Vec<Result<(), SendError>> = if self.links.len() == 1 {
            self.links.into_iter().map(LinkSender::drain).collect()
        } else {
            std::thread::scope(|scope| {
                let waiting: Vec<_> = self
                    .links
                    .into_iter()
                    .map(|l| scope.spawn(move || l.drain()))
                    .collect();
                waiting
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or(Err(SendError::Format("a link's closing thread panicked")))
                    })
                    .collect()
            })
        };
        shut.into_iter()
            .zip(drained)
            .try_for_each(|(shut, drained)| shut.and(drained))
    }

    fn send_su(&mut self, link: u16, h: &Su, payload: &[u8]) -> Result<(), SendError> {
        self.links[usize::from(link)].send_su(h, payload)
    }

    fn on_every_link(&mut self, f: &Frame<'_>) -> Result<(), SendError> {
        self.links.iter_mut().try_for_each(|l| l.send(f))
    }
}

/// ADUs from this size on are sent from a thread per link (smaller ones, from the caller's
/// thread, TU after TU).
const PARALLEL_FROM: u64 = 1 << 20;

/// Sends link `l`'s SUs of ADU `adu` (`data`, TUs of `tu` bytes over `k` links).
fn send_link_sus(
    l: &mut LinkSender,
    k: u16,
    stream: u32,
    adu: u64,
    tu: u64,
    data: &[u8],
) -> Result<(), SendError> {
    let s = l.link();
    let size = data.len() as u64;
    for t in 0..tus(size, tu) {
        if let Some((off, len)) = su_range(size, tu, k, t, s) {
            let p = &data[off as usize..(off + len) as usize];
            l.send_su(&su(stream, s, adu, t, off, size, p), p)?;
        }
    }
    Ok(())
}

/// Bytes of the largest SU of a TU of `tu` bytes over `links` links.
fn su_bytes(tu: u64, links: usize) -> u64 {
    tu.div_ceil(links.max(1) as u64)
}

fn su(stream: u32, s: u16, adu: u64, tu: u64, offset: u64, size: u64, p: &[u8]) -> Su {
    Su {
        stream,
        su: s,
        link: s,
        adu,
        tu,
        offset,
        size,
        crc: crc32c::crc32c(p),
    }
}

/// SUs gathered into one vectored write at most (two slices each, within the system's
/// `IOV_MAX` of 1024).
const GATHER: usize = 64;

/// Writes every slice, in order, with as few system calls as the socket allows.
fn write_all_slices(w: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !slices.is_empty() {
        let n = w.write_vectored(slices)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

/// Writes `head` then `body` with as few system calls as the socket allows.
fn write_all_vectored(w: &mut impl Write, head: &[u8], body: &[u8]) -> std::io::Result<()> {
    let (mut h, mut b) = (head, body);
    while !h.is_empty() {
        let n = w.write_vectored(&[IoSlice::new(h), IoSlice::new(b)])?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        if n < h.len() {
            h = &h[n..];
        } else {
            b = &b[n - h.len()..];
            h = &[];
        }
    }
    w.write_all(b)
}
