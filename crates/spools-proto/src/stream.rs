//! The stream wire format (sans-IO): how a job's stream reaches a destination outside the
//! job over K TCP connections ("links"), after the iWarp paper's streams.
//!
//! A *logical connection* to one destination is K links, each a TCP connection opened by
//! the sender. On it flow *streams*; a stream is a sequence of Application Data Units
//! (ADUs: the whole dataset of one iteration, as its canonical byte stream), each cut into
//! Transfer Units (TUs, `tu` bytes but the last), each TU striped over the K links as
//! Striping Units (SUs, `ceil(TU / K)` bytes but where a TU ends): SU `s` of a TU travels
//! on link `s` ([`su_range`]). Every frame starts with the magic `"SPS"` and a kind byte; integers are
//! little-endian:
//!
//! ```text
//! hello   := "SPSH" version:u16 flags:u16 links:u16 link:u16 conn:u64             (20 bytes)
//! welcome := "SPSW" version:u16 flags:u16 reserved:u32                            (12 bytes)
//! open    := "SPSO" stream:u32 group:u32 after:u32 flags:u32 tu:u64 adu:u64       (36 bytes)
//! su      := "SPSD" stream:u32 su:u16 link:u16 adu:u64 tu:u64 offset:u64 size:u64
//!            len:u32 crc32c:u32 payload[len]                                      (52 + len)
//! close   := "SPSC" stream:u32 reserved:u32 adus:u64                              (20 bytes)
//! ack     := "SPSA" stream:u32 reserved:u32 adu:u64                               (20 bytes)
//! move    := "SPSM" port:u16 reserved:u16 ip[16]                                  (24 bytes)
//! ```
//!
//! - `hello` is the first frame the sender sends on each link: the protocol version
//!   ([`VERSION`]), which link this is of how many, and a connection id `conn` (random,
//!   the same on the K links of one logical connection). The receiver answers `welcome`.
//! - `open` announces a stream, on every link: its id, the synchronisation group it
//!   belongs to (0: none), the stream it is sequenced after (`u32::MAX`: none), its TU size
//!   and its ADU size (`u64::MAX`: variable, then each ADU is one TU; see [`VARIABLE`]).
//! - `su` carries one SU: stream, SU index in its TU, link, ADU number, TU number, byte
//!   offset of the payload in the ADU, the ADU's size, and the CRC32C of the payload. Every
//!   SU carries the ADU's size, so the receiver can place SUs arriving on K links in any
//!   interleaving. An ADU of 0 bytes is one SU of 0 bytes on link 0. In a stream of
//!   [`VARIABLE`] ADUs, each ADU is a single TU of its own size ([`su_range`] with
//!   `tu = size`).
//! - `close` ends a stream on one link (it is sent on every link), with the number of
//!   ADUs sent; `ack` (receiver to sender, on every link, when the `welcome` announced
//!   [`WELCOME_ACKS`]) says the receiver handed out ADUs `0..=adu` of a stream (it is
//!   cumulative), which gives the sender back-pressure at ADU granularity.
//! - A receiver that requires authentication answers `hello` with [`WELCOME_REQUIRE_PROOF`];
//!   the secret handshake of [`crate::handshake`] then runs on the link, and the receiver
//!   ends it with a second `welcome` carrying [`WELCOME_PROVEN`].
//! - A sender that can take its link to another address says so in its hello
//!   ([`HELLO_CAN_MOVE`]); a receiver that spreads a connection's links over several
//!   processes (a job's ranks) may then answer with a last `welcome` carrying
//!   [`WELCOME_MOVE`], followed by `move`: the address (`ip`, IPv4 as an IPv4-mapped IPv6
//!   address, and `port`) where the sender says hello again for this link. The receiver
//!   then closes the link.
//!
//! Decoders never panic and never allocate from a length field: [`decode`] returns `None`
//! while a frame is incomplete and a [`WireError`] for bytes that are not a frame.
//!
//! ```
//! use spools_proto::stream::{decode, Frame, Su};
//! let su = Su { stream: 1, su: 0, link: 0, adu: 0, tu: 0, offset: 0, size: 5, crc: 0 };
//! let mut wire = Vec::new();
//! Frame::Su(su, b"hello").encode(&mut wire);
//! let (frame, used) = decode(&wire)?.expect("a whole frame");
//! assert_eq!(frame, Frame::Su(su, b"hello"));
//! assert_eq!(used, wire.len());
//! # Ok::<(), spools_proto::WireError>(())
//! ```

use crate::codec::Reader;
use crate::WireError;

/// The stream protocol version this build speaks.
pub const VERSION: u16 = 1;
/// The ADU size of a stream whose ADUs vary in size (each ADU is then one TU).
pub const VARIABLE: u64 = u64::MAX;
/// No stream to be sequenced after.
pub const NOT_SEQUENCED: u32 = u32::MAX;
/// The largest SU payload a frame may carry (64 MiB).
pub const MAX_SU: u32 = 64 << 20;
/// The most links of one logical connection.
pub const MAX_LINKS: u16 = 1024;
/// Bytes of an SU frame's header (before its payload).
pub const SU_HEADER: usize = 52;
/// `hello` flag: the sender can prove the job secret, should the receiver ask.
pub const HELLO_CAN_PROVE: u16 = 1;
/// `welcome` flag: the receiver requires the job secret's proof before any stream: the
/// secret handshake ([`crate::handshake`]) follows on this link, then a second `welcome`
/// with [`WELCOME_PROVEN`].
pub const WELCOME_REQUIRE_PROOF: u16 = 1;
/// `welcome` flag: the receiver sends `ack`s on every link of the connection, so that a
/// sender may bound the ADUs it has in flight (back-pressure at ADU granularity).
pub const WELCOME_ACKS: u16 = 2;
/// `welcome` flag: the second `welcome`, after the sender proved the secret.
pub const WELCOME_PROVEN: u16 = 4;
/// `hello` flag: the sender follows a `welcome` with [`WELCOME_MOVE`] (it takes the link to
/// the address of the [`Move`] frame that follows).
pub const HELLO_CAN_MOVE: u16 = 2;
/// `welcome` flag (only to a hello with [`HELLO_CAN_MOVE`], in the last `welcome` of the
/// link): a [`Move`] frame follows, and the receiver closes the link; the sender connects
/// to the address it names and says the same hello there.
pub const WELCOME_MOVE: u16 = 8;
/// Bytes of a `move` frame.
pub const MOVE_LEN: usize = 24;

/// The first frame on a link, from the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Protocol version ([`VERSION`]).
    pub version: u16,
    /// [`HELLO_CAN_PROVE`] or 0.
    pub flags: u16,
    /// Links of the logical connection (1 to [`MAX_LINKS`]).
    pub links: u16,
    /// This link's index, below `links`.
    pub link: u16,
    /// The logical connection's id, the same on its links.
    pub conn: u64,
}

/// The receiver's answer to a [`Hello`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// Protocol version ([`VERSION`]).
    pub version: u16,
    /// [`WELCOME_REQUIRE_PROOF`], [`WELCOME_ACKS`], [`WELCOME_PROVEN`] or'ed (0: none).
    pub flags: u16,
}

/// A stream announced on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    /// The stream's id on its logical connection.
    pub stream: u32,
    /// Its synchronisation group (0: none): streams of a group progress in lock step at
    /// ADU boundaries.
    pub group: u32,
    /// The stream it is sequenced after ([`NOT_SEQUENCED`]: none).
    pub after: u32,
    /// Reserved, 0.
    pub flags: u32,
    /// Bytes of a TU (at least 1).
    pub tu: u64,
    /// Bytes of an ADU, or [`VARIABLE`].
    pub adu: u64,
}

/// The header of a Striping Unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Su {
    /// The stream.
    pub stream: u32,
    /// The SU's index in its TU (the link it belongs to).
    pub su: u16,
    /// The link it travels on.
    pub link: u16,
    /// The ADU's number in its stream (from 0).
    pub adu: u64,
    /// The TU's number in its ADU (from 0).
    pub tu: u64,
    /// Byte offset of the payload in the ADU.
    pub offset: u64,
    /// Bytes of the whole ADU.
    pub size: u64,
    /// CRC32C of the payload.
    pub crc: u32,
}

/// A stream ends on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    /// The stream.
    pub stream: u32,
    /// ADUs the stream sent.
    pub adus: u64,
}

/// The receiver handed out ADUs `0..=adu` of a stream (cumulative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The stream.
    pub stream: u32,
    /// The last ADU handed out: every ADU up to it was.
    pub adu: u64,
}

/// Where a link goes on (receiver to sender, after a `welcome` with [`WELCOME_MOVE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The address to say hello at (an IPv4 address travels as an IPv4-mapped IPv6
    /// address; a scope id or flow label does not travel).
    pub addr: std::net::SocketAddr,
}

/// One frame of the stream protocol; an SU borrows its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// See [`Hello`].
    Hello(Hello),
    /// See [`Welcome`].
    Welcome(Welcome),
    /// See [`Open`].
    Open(Open),
    /// An SU and its payload.
    Su(Su, &'a [u8]),
    /// See [`Close`].
    Close(Close),
    /// See [`Ack`].
    Ack(Ack),
    /// See [`Move`].
    Move(Move),
}

impl Frame<'_> {
    /// Appends the frame's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Hello(h) => {
                out.extend_from_slice(b"SPSH");
                out.extend_from_slice(&h.version.to_le_bytes());
                out.extend_from_slice(&h.flags.to_le_bytes());
                out.extend_from_slice(&h.links.to_le_bytes());
                out.extend_from_slice(&h.link.to_le_bytes());
                out.extend_from_slice(&h.conn.to_le_bytes());
            }
            Frame::Welcome(w) => {
                out.extend_from_slice(b"SPSW");
                out.extend_from_slice(&w.version.to_le_bytes());
                out.extend_from_slice(&w.flags.to_le_bytes());
                out.extend_from_slice(&0u32.to_le_bytes());
            }
            Frame::Open(o) => {
                out.extend_from_slice(b"SPSO");
                for v in [o.stream, o.group, o.after, o.flags] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&o.tu.to_le_bytes());
                out.extend_from_slice(&o.adu.to_le_bytes());
            }
            Frame::Su(s, payload) => {
                out.extend_from_slice(&s.header(payload.len() as u32));
                out.extend_from_slice(payload);
            }
            Frame::Close(c) => {
                out.extend_from_slice(b"SPSC");
                out.extend_from_slice(&c.stream.to_le_bytes());
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&c.adus.to_le_bytes());
            }
            Frame::Ack(a) => {
                out.extend_from_slice(b"SPSA");
                out.extend_from_slice(&a.stream.to_le_bytes());
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&a.adu.to_le_bytes());
            }
            Frame::Move(m) => {
                out.extend_from_slice(b"SPSM");
                out.extend_from_slice(&m.addr.port().to_le_bytes());
                out.extend_from_slice(&0u16.to_le_bytes());
                let ip = match m.addr.ip() {
                    std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    std::net::IpAddr::V6(v6) => v6,
                };
                out.extend_from_slice(&ip.octets());
            }
        }
    }
}

impl Su {
    /// The frame header of this SU with a payload of `len` bytes (to send header and
    /// payload with one vectored write, without copying the payload).
    pub fn header(&self, len: u32) -> [u8; SU_HEADER] {
        let mut b = [0u8; SU_HEADER];
        b[..4].copy_from_slice(b"SPSD");
        b[4..8].copy_from_slice(&self.stream.to_le_bytes());
        b[8..10].copy_from_slice(&self.su.to_le_bytes());
        b[10..12].copy_from_slice(&self.link.to_le_bytes());
        b[12..20].copy_from_slice(&self.adu.to_le_bytes());
        b[20..28].copy_from_slice(&self.tu.to_le_bytes());
        b[28..36].copy_from_slice(&self.offset.to_le_bytes());
        b[36..44].copy_from_slice(&self.size.to_le_bytes());
        b[44..48].copy_from_slice(&len.to_le_bytes());
        b[48..52].copy_from_slice(&self.crc.to_le_bytes());
        b
    }
}

/// Bytes of a frame of kind `kind` without its payload.
fn fixed_len(kind: u8) -> Result<usize, WireError> {
    Ok(match kind {
        b'H' | b'C' | b'A' => 20,
        b'W' => 12,
        b'O' => 36,
        b'D' => SU_HEADER,
        b'M' => MOVE_LEN,
        k => return Err(WireError::UnknownKind(k)),
    })
}

/// Decodes the frame at the start of `buf`: `Ok(None)` while it is incomplete, else the
/// frame and the bytes it used. Checks what one frame can tell: the magic, a known kind,
/// lengths within [`MAX_SU`], an SU inside its ADU, a link inside its connection.
///
/// # Errors
/// [`WireError`] when the bytes are not a frame of this version.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, WireError> {
    match decode_head(buf)? {
        None => Ok(None),
        Some(Head::Frame(f, used)) => Ok(Some((f, used))),
        Some(Head::Su(s, len)) => {
            let total = SU_HEADER + len as usize;
            Ok(buf
                .get(SU_HEADER..total)
                .map(|payload| (Frame::Su(s, payload), total)))
        }
    }
}

/// The start of a frame: a whole frame without payload, or the header of an SU whose
/// payload follows (so that a receiver can read the payload straight to where it goes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head<'a> {
    /// A frame other than an SU, and the bytes it used.
    Frame(Frame<'a>, usize),
    /// An SU's header ([`SU_HEADER`] bytes) and the length of the payload that follows it.
    Su(Su, u32),
}

/// Decodes the start of the frame at the start of `buf`, as [`decode`] but without waiting
/// for an SU's payload: `Ok(None)` while the frame (or the SU's header) is incomplete.
///
/// # Errors
/// [`WireError`] when the bytes are not a frame of this version (with the same checks as
/// [`decode`]).
pub fn decode_head(buf: &[u8]) -> Result<Option<Head<'_>>, WireError> {
    if buf.len() < 4 {
        // A wrong magic is refused as soon as it shows.
        if !b"SPS".starts_with(&buf[..buf.len().min(3)]) {
            return Err(bad_magic(buf));
        }
        return Ok(None);
    }
    if &buf[..3] != b"SPS" {
        return Err(bad_magic(buf));
    }
    let kind = buf[3];
    let fixed = fixed_len(kind)?;
    if buf.len() < fixed {
        return Ok(None);
    }
    let mut r = Reader::new(&buf[4..fixed]);
    let frame = match kind {
        b'H' => {
            let h = Hello {
                version: r.u16()?,
                flags: r.u16()?,
                links: r.u16()?,
                link: r.u16()?,
                conn: r.u64()?,
            };
            if h.links == 0 || h.links > MAX_LINKS {
                return Err(invalid("links", h.links.into()));
            }
            if h.link >= h.links {
                return Err(invalid("link", h.link.into()));
            }
            Frame::Hello(h)
        }
        b'W' => {
            let w = Welcome {
                version: r.u16()?,
                flags: r.u16()?,
            };
            reserved(r.u32()?)?;
            Frame::Welcome(w)
        }
        b'O' => {
            let o = Open {
                stream: r.u32()?,
                group: r.u32()?,
                after: r.u32()?,
                flags: r.u32()?,
                tu: r.u64()?,
                adu: r.u64()?,
            };
            if o.tu == 0 {
                return Err(invalid("TU size", 0));
            }
            if o.flags != 0 {
                return Err(invalid("open flags", o.flags.into()));
            }
            Frame::Open(o)
        }
        b'D' => {
            let s = Su {
                stream: r.u32()?,
                su: r.u16()?,
                link: r.u16()?,
                adu: r.u64()?,
                tu: r.u64()?,
                offset: r.u64()?,
                size: r.u64()?,
                crc: 0,
            };
            let len = r.u32()?;
            let s = Su { crc: r.u32()?, ..s };
            if len > MAX_SU {
                return Err(WireError::TooLong {
                    what: "SU payload",
                    len: len.into(),
                    max: MAX_SU.into(),
                });
            }
            if s.offset
                .checked_add(len.into())
                .is_none_or(|end| end > s.size)
            {
                return Err(invalid("SU offset", s.offset));
            }
            if s.link >= MAX_LINKS || s.su >= MAX_LINKS {
                return Err(invalid("SU link", s.link.max(s.su).into()));
            }
            return Ok(Some(Head::Su(s, len)));
        }
        b'C' => {
            let stream = r.u32()?;
            reserved(r.u32()?)?;
            Frame::Close(Close {
                stream,
                adus: r.u64()?,
            })
        }
        b'A' => {
            let stream = r.u32()?;
            reserved(r.u32()?)?;
            Frame::Ack(Ack {
                stream,
                adu: r.u64()?,
            })
        }
        b'M' => {
            let port = r.u16()?;
            reserved(r.u16()?.into())?;
            let mut ip = [0u8; 16];
            for b in &mut ip {
                *b = r.u8()?;
            }
            if port == 0 {
                return Err(invalid("move port", 0));
            }
            let ip = std::net::Ipv6Addr::from(ip).to_canonical();
            Frame::Move(Move {
                addr: std::net::SocketAddr::new(ip, port),
            })
        }
        k => return Err(WireError::UnknownKind(k)),
    };
    r.finish()?;
    Ok(Some(Head::Frame(frame, fixed)))
}

fn bad_magic(buf: &[u8]) -> WireError {
    let mut m = [0u8; 4];
    let n = buf.len().min(4);
    m[..n].copy_from_slice(&buf[..n]);
    WireError::BadMagic(u32::from_be_bytes(m))
}

fn invalid(what: &'static str, value: u64) -> WireError {
    WireError::Invalid { what, value }
}

fn reserved(v: u32) -> Result<(), WireError> {
    if v == 0 {
        Ok(())
    } else {
        Err(invalid("reserved field", v.into()))
    }
}

/// Where the bytes of one SU lie: SU `s` of TU `t` of an ADU of `size` bytes cut in TUs of
/// `tu` bytes over `links` links, as (offset in the ADU, length); `None` when that SU is
/// empty. Every SU of a stream is `ceil(tu / links)` bytes, but where a TU ends first (its
/// last SU, and those of a short last TU): so when `links` divides `tu`, an ADU is exactly
/// the stripe layout `stripe(unit=tu/links, count=links)` of its byte stream, SU `s` on
/// link `s`.
pub fn su_range(size: u64, tu: u64, links: u16, t: u64, s: u16) -> Option<(u64, u64)> {
    if tu == 0 || links == 0 || s >= links {
        return None;
    }
    let start = t.checked_mul(tu)?;
    if start >= size {
        return None;
    }
    let this_tu = tu.min(size - start);
    let su = tu.div_ceil(u64::from(links));
    let from = su.checked_mul(u64::from(s))?;
    if from >= this_tu {
        return None;
    }
    Some((start + from, su.min(this_tu - from)))
}

/// TUs of an ADU of `size` bytes cut in TUs of `tu` bytes (0 for an empty ADU).
pub fn tus(size: u64, tu: u64) -> u64 {
    if tu == 0 {
        0
    } else {
        size.div_ceil(tu)
    }
}
