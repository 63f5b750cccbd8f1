//! The sending side of one TCP connection.

use std::io::{ErrorKind, IoSlice, Write};
use std::net::TcpStream;

/// Parts (with the length prefix) whose slices fit on the stack in [`TxConn::send`].
const SLICES: usize = 8;

pub(crate) struct TxConn {
    stream: TcpStream,
    queue: Vec<u8>,
    start: usize,
}

impl TxConn {
    pub(crate) fn new(stream: TcpStream) -> std::io::Result<TxConn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(TxConn {
            stream,
            queue: Vec::new(),
            start: 0,
        })
    }

    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.stream.as_raw_fd()
    }

    pub(crate) fn has_queued(&self) -> bool {
        self.queued() > 0
    }

    fn queued(&self) -> usize {
        self.queue.len() - self.start
    }

    /// Writes what is queued; returns whether bytes remain queued.
    pub(crate) fn flush(&mut self) -> std::io::Result<bool> {
        while self.start < self.queue.len() {
            match self.stream.write(&self.queue[self.start..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.start += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.start == self.queue.len() {
            self.queue.clear();
            self.start = 0;
            return Ok(false);
        }
        if self.start > self.queue.len() / 2 {
            self.queue.drain(..self.start);
            self.start = 0;
        }
        Ok(true)
    }

    /// Sends one framed message; `false` (nothing sent) when too much is queued already.
    pub(crate) fn send(
        &mut self,
        parts: &[&[u8]],
        len: usize,
        limit: usize,
    ) -> std::io::Result<bool> {
        let prefix = (len as u32).to_le_bytes();
        if self.queued() > 0 && self.flush()? {
            if self.queued() >= limit {
                return Ok(false);
            }
            self.queue.extend_from_slice(&prefix);
            for p in parts {
                self.queue.extend_from_slice(p);
            }
            return Ok(true);
        }
        // Nothing queued: write straight from the caller's buffers.
        let total = 4 + len;
        let mut done = 0usize;
        // The slices live on the stack for the usual few parts (no allocation per send).
        let mut few = [IoSlice::new(&[]); SLICES];
        let mut many = Vec::new();
        loop {
            let mut k = 0;
            let mut skip = done;
            for p in std::iter::once(&prefix[..]).chain(parts.iter().copied()) {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                let slice = IoSlice::new(&p[skip..]);
                if parts.len() < SLICES {
                    few[k] = slice;
                } else {
                    many.push(slice);
                }
                k += 1;
                skip = 0;
            }
            let slices = if parts.len() < SLICES {
                &few[..k]
            } else {
                &many[..]
            };
            match self.stream.write_vectored(slices) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    done += n;
                    if done == total {
                        return Ok(true);
                    }
                    many.clear();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // The kernel took `done` bytes: queue the rest.
        let mut skip = done;
        for p in std::iter::once(&prefix[..]).chain(parts.iter().copied()) {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            self.queue.extend_from_slice(&p[skip..]);
            skip = 0;
        }
        Ok(true)
    }
}
