//! Reading frames from one link (a TCP connection): a buffer that grows to hold one frame
//! at most, refilled from the socket.

use std::io::Read;

use spools_proto::stream::{decode, decode_head, Frame, Head, MAX_SU, SU_HEADER};
use spools_proto::WireError;

/// What reading the next frame gave.
pub(crate) enum Read1<'a> {
    /// A frame.
    Frame(Frame<'a>),
    /// The peer closed the connection between frames.
    End,
}

/// What reading the start of the next frame gave.
pub(crate) enum Read1Head<'a> {
    /// A frame without payload.
    Frame(Frame<'a>),
    /// An SU's header and the length of its payload, which is to be read next
    /// ([`FrameReader::read_payload`] or [`FrameReader::skip_payload`]).
    Su(spools_proto::stream::Su, u32),
    /// The peer closed the connection between frames.
    End,
}

/// Why a link's frames stopped.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Reading or writing the socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not frames of the stream protocol.
    #[error("not a Spools stream: {0}")]
    Wire(#[from] WireError),
    /// The peer closed the connection in the middle of a frame.
    #[error("the connection ended in the middle of a frame ({have} of {need} bytes)")]
    Truncated {
        /// Bytes of the frame received.
        have: usize,
        /// Bytes it needs at least.
        need: usize,
    },
}

/// A link's incoming frames.
pub(crate) struct FrameReader<R> {
    src: R,
    buf: Vec<u8>,
    /// Bytes of `buf` holding data; the frame handed out last is `..used`.
    len: usize,
    used: usize,
}

impl<R: Read> FrameReader<R> {
    pub(crate) fn new(src: R) -> FrameReader<R> {
        FrameReader {
            src,
            buf: vec![0; 64 << 10],
            len: 0,
            used: 0,
        }
    }

    /// Drops the frame handed out last.
    fn consume(&mut self) {
        self.buf.copy_within(self.used..self.len, 0);
        self.len -= self.used;
        self.used = 0;
    }

    /// Fills `out` with the next bytes of the link, which are not frames of the stream
    /// protocol (the secret handshake's messages).
    pub(crate) fn read_raw(&mut self, out: &mut [u8]) -> Result<(), LinkError> {
        self.consume();
        let n = out.len().min(self.len);
        out[..n].copy_from_slice(&self.buf[..n]);
        self.used = n;
        self.consume();
        if n < out.len() {
            self.src.read_exact(&mut out[n..]).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    LinkError::Truncated {
                        have: n,
                        need: out.len(),
                    }
                } else {
                    e.into()
                }
            })?;
        }
        Ok(())
    }

    /// The start of the next frame: a frame without payload, or an SU's header (its
    /// payload is read next, straight to where it goes).
    pub(crate) fn next_head(&mut self) -> Result<Read1Head<'_>, LinkError> {
        self.consume();
        loop {
            match decode_head(&self.buf[..self.len])? {
                Some(Head::Su(s, len)) => {
                    self.used = SU_HEADER;
                    return Ok(Read1Head::Su(s, len));
                }
                Some(Head::Frame(_, n)) => {
                    self.used = n;
                    let (frame, _) =
                        decode(&self.buf[..n])?.ok_or(WireError::Truncated { need: n, have: n })?;
                    return Ok(Read1Head::Frame(frame));
                }
                None => {
                    // Frames without payload and SU headers fit the buffer.
                    if !self.fill()? {
                        return if self.len == 0 {
                            Ok(Read1Head::End)
                        } else {
                            Err(LinkError::Truncated {
                                have: self.len,
                                need: self.len + 1,
                            })
                        };
                    }
                }
            }
        }
    }

    /// Reads more bytes into the buffer: false at the end of the connection.
    fn fill(&mut self) -> Result<bool, LinkError> {
        let n = self.src.read(&mut self.buf[self.len..])?;
        self.len += n;
        Ok(n > 0)
    }

    /// Reads the payload of the SU whose header [`FrameReader::next_head`] gave into
    /// `dest` (its length), and returns its CRC32C, computed as the bytes arrive.
    pub(crate) fn read_payload(&mut self, dest: &mut [u8]) -> Result<u32, LinkError> {
        self.consume();
        let n = dest.len().min(self.len);
        dest[..n].copy_from_slice(&self.buf[..n]);
        let mut crc = crc32c::crc32c(&dest[..n]);
        self.used = n;
        self.consume();
        let mut at = n;
        while at < dest.len() {
            let got = self.src.read(&mut dest[at..])?;
            if got == 0 {
                return Err(LinkError::Truncated {
                    have: at,
                    need: dest.len(),
                });
            }
            crc = crc32c::crc32c_append(crc, &dest[at..at + got]);
            at += got;
        }
        Ok(crc)
    }

    /// Reads and drops the payload (`len` bytes) of the SU whose header
    /// [`FrameReader::next_head`] gave.
    pub(crate) fn skip_payload(&mut self, len: u32) -> Result<(), LinkError> {
        let mut left = len as usize;
        loop {
            self.consume();
            let n = left.min(self.len);
            self.used = n;
            left -= n;
            if left == 0 {
                return Ok(());
            }
            self.consume();
            if !self.fill()? {
                return Err(LinkError::Truncated {
                    have: len as usize - left,
                    need: len as usize,
                });
            }
        }
    }

    /// The next frame (borrowing the reader's buffer until the next call).
    pub(crate) fn next(&mut self) -> Result<Read1<'_>, LinkError> {
        self.consume();
        loop {
            // Decoding twice (to learn the length, then to borrow) keeps the borrow simple.
            match decode(&self.buf[..self.len])? {
                Some((_, n)) => {
                    self.used = n;
                    let (frame, _) =
                        decode(&self.buf[..n])?.ok_or(WireError::Truncated { need: n, have: n })?;
                    return Ok(Read1::Frame(frame));
                }
                None => {
                    if self.len == self.buf.len() {
                        // A frame longer than the buffer: an SU; grow to hold it whole
                        // (bounded by MAX_SU, which the decoder checked).
                        let want = (self.buf.len() * 2).min(SU_HEADER + MAX_SU as usize);
                        if want <= self.buf.len() {
                            return Err(LinkError::Truncated {
                                have: self.len,
                                need: self.len + 1,
                            });
                        }
                        self.buf.resize(want, 0);
                    }
                    let n = self.src.read(&mut self.buf[self.len..])?;
                    if n == 0 {
                        return if self.len == 0 {
                            Ok(Read1::End)
                        } else {
                            Err(LinkError::Truncated {
                                have: self.len,
                                need: self.len + 1,
                            })
                        };
                    }
                    self.len += n;
                }
            }
        }
    }
}
