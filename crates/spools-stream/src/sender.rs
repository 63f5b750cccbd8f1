//! A sender of streams from one process: K links to a receiver, ADUs cut into TUs and
//! striped over the links as SUs (what `spools send` does; a job's ranks each own links).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{IoSlice, Write};
use std::net::{SocketAddr, TcpStream};

use spools_proto::stream::{
    su_range, tus, Close, Frame, Hello, Open, Su, MAX_LINKS, MAX_SU, VARIABLE, VERSION,
};

use crate::link::{FrameReader, LinkError, Read1};

/// Why sending failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The destination could not be reached.
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
    /// An argument outside what the format allows.
    #[error("{0}")]
    Format(&'static str),
}

/// One link of a logical connection, owned by this process: what a rank of a job that owns
/// link `link` of `links` uses (the others own the other links, with the same `conn`).
pub struct LinkSender {
    sock: TcpStream,
    link: u16,
    buf: Vec<u8>,
}

impl LinkSender {
    /// Opens link `link` of `links` of connection `conn` to `addr`: hello, then the
    /// receiver's welcome.
    ///
    /// # Errors
    /// [`SendError`] when the link cannot be opened or is not welcomed.
    pub fn connect(
        addr: SocketAddr,
        links: u16,
        link: u16,
        conn: u64,
    ) -> Result<LinkSender, SendError> {
        if links == 0 || links > MAX_LINKS || link >= links {
            return Err(SendError::Format(
                "links must be 1 to 1024, and the link below them",
            ));
        }
        let mut sock =
            TcpStream::connect(addr).map_err(|source| SendError::Connect { addr, source })?;
        let _ = sock.set_nodelay(true);
        let mut b = Vec::new();
        Frame::Hello(Hello {
            version: VERSION,
            flags: 0,
            links,
            link,
            conn,
        })
        .encode(&mut b);
        sock.write_all(&b).map_err(|e| SendError::Link {
            link,
            source: e.into(),
        })?;
        let mut r = FrameReader::new(&sock);
        match r.next() {
            Ok(Read1::Frame(Frame::Welcome(_))) => {}
            Ok(_) => return Err(SendError::NoWelcome { link }),
            Err(source) => return Err(SendError::Link { link, source }),
        }
        Ok(LinkSender {
            sock,
            link,
            buf: Vec::new(),
        })
    }

    /// This link's index.
    pub fn link(&self) -> u16 {
        self.link
    }

    /// Sends a frame without payload (open, close).
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn send(&mut self, f: &Frame<'_>) -> Result<(), SendError> {
        self.buf.clear();
        f.encode(&mut self.buf);
        let link = self.link;
        self.sock.write_all(&self.buf).map_err(|e| SendError::Link {
            link,
            source: e.into(),
        })
    }

    /// Sends one SU: its header and payload, with one vectored write where the socket
    /// takes it.
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn send_su(&mut self, h: &Su, payload: &[u8]) -> Result<(), SendError> {
        let header = h.header(payload.len() as u32);
        let link = self.link;
        write_all_vectored(&mut self.sock, &header, payload).map_err(|e| SendError::Link {
            link,
            source: e.into(),
        })
    }

    /// Ends the link (no more frames).
    ///
    /// # Errors
    /// [`SendError::Link`] when the link fails.
    pub fn finish(self) -> Result<(), SendError> {
        let link = self.link;
        self.sock
            .shutdown(std::net::Shutdown::Write)
            .map_err(|e| SendError::Link {
                link,
                source: e.into(),
            })
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
    /// Opens `links` links to `addr`, says hello on each and waits for each welcome.
    ///
    /// # Errors
    /// [`SendError`] when a link cannot be opened or is not welcomed.
    pub fn connect(addr: SocketAddr, links: u16) -> Result<Sender, SendError> {
        if links == 0 || links > MAX_LINKS {
            return Err(SendError::Format("links must be 1 to 1024"));
        }
        let conn = {
            let mut h = RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            h.finish()
        };
        let links = (0..links)
            .map(|link| LinkSender::connect(addr, links, link, conn))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sender {
            links,
            opened: Vec::new(),
        })
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

    /// Ends the connection: flushes and shuts every link down.
    ///
    /// # Errors
    /// [`SendError`] when a link fails.
    pub fn finish(self) -> Result<(), SendError> {
        self.links.into_iter().try_for_each(LinkSender::finish)
    }

    fn send_su(&mut self, link: u16, h: &Su, payload: &[u8]) -> Result<(), SendError> {
        self.links[usize::from(link)].send_su(h, payload)
    }

    fn on_every_link(&mut self, f: &Frame<'_>) -> Result<(), SendError> {
        self.links.iter_mut().try_for_each(|l| l.send(f))
    }
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
