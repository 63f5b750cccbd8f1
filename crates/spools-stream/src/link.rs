//! Reading frames from one link (a TCP connection): a buffer that grows to hold one frame
//! at most, refilled from the socket.

use std::io::Read;

use spools_proto::stream::{decode, Frame, MAX_SU, SU_HEADER};
use spools_proto::WireError;

/// What reading the next frame gave.
pub(crate) enum Read1<'a> {
    /// A frame.
    Frame(Frame<'a>),
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

    /// The underlying reader.
    pub(crate) fn get_ref(&self) -> &R {
        &self.src
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
