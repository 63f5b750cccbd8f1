//! Copies out of another process's memory with `process_vm_readv` (cross-memory attach),
//! many runs per system call.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::descriptor::Cookie;

/// Most iovecs one call takes (Linux's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// Set once the kernel refused `process_vm_readv` to this process (a ptrace policy, a
/// seccomp filter): later streams go through the rings without trying again.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// This process's cookie: random, never 0, set on first use, at a fixed address.
static COOKIE: AtomicU64 = AtomicU64::new(0);

/// This process's cookie, for the descriptors it sends.
pub(super) fn cookie() -> Cookie {
    if COOKIE.load(Ordering::Acquire) == 0 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let _ = COOKIE.compare_exchange(0, h.finish() | 1, Ordering::AcqRel, Ordering::Acquire);
    }
    Cookie {
        addr: COOKIE.as_ptr() as u64,
        value: COOKIE.load(Ordering::Acquire),
    }
}

/// Whether this process has been refused cross-memory reads.
pub(super) fn refused() -> bool {
    REFUSED.load(Ordering::Relaxed)
}

/// Why a read out of the peer failed.
#[derive(Debug)]
pub(super) enum CmaError {
    /// The kernel does not allow this process to read the peer's memory.
    Refused,
    /// The read failed (the peer is gone, or the address is not mapped there).
    Failed(io::Error),
}

/// Pieces queued for reading out of one peer process; read when the list is full or at
/// [`CmaReader::flush`].
pub(super) struct CmaReader {
    pid: libc::pid_t,
    local: Vec<libc::iovec>,
    remote: Vec<libc::iovec>,
}

impl CmaReader {
    /// A reader of process `pid`.
    pub(super) fn new(pid: u32) -> Self {
        CmaReader {
            pid: pid as libc::pid_t,
            local: Vec::with_capacity(MAX_IOV),
            remote: Vec::with_capacity(MAX_IOV),
        }
    }

    /// Whether the peer process holds `cookie` (so is the process that sent it): any
    /// failure to read it is a no.
    pub(super) fn is_the_sender(&mut self, cookie: &Cookie) -> bool {
        let mut got = [0u8; 8];
        let read = self.push(&mut got, cookie.addr).and_then(|()| self.flush());
        read.is_ok() && u64::from_le_bytes(got) == cookie.value
    }

    /// Queues reading `to.len()` bytes at the peer's address `from` into `to`. The bytes
    /// arrive at the latest at the next [`CmaReader::flush`], which must run while `to`
    /// is still alive and not otherwise accessed.
    pub(super) fn push(&mut self, to: &mut [u8], from: u64) -> Result<(), CmaError> {
        self.local.push(libc::iovec {
            iov_base: to.as_mut_ptr().cast(),
            iov_len: to.len(),
        });
        self.remote.push(libc::iovec {
            iov_base: from as usize as *mut libc::c_void,
            iov_len: to.len(),
        });
        if self.local.len() == MAX_IOV {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads every queued piece.
    pub(super) fn flush(&mut self) -> Result<(), CmaError> {
        let mut at = 0;
        while at < self.local.len() {
            let (l, r) = (&self.local[at..], &self.remote[at..]);
            // SAFETY: every local iovec describes a live, writable destination run that no
            // reference touches until this call returns (`push`'s contract); the remote
            // iovecs are only read, in the peer process, by the kernel, which checks them.
            let n = unsafe {
                libc::process_vm_readv(
                    self.pid,
                    l.as_ptr(),
                    l.len() as libc::c_ulong,
                    r.as_ptr(),
                    r.len() as libc::c_ulong,
                    0,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::EPERM | libc::ENOSYS) => {
                        REFUSED.store(true, Ordering::Relaxed);
                        CmaError::Refused
                    }
                    _ => CmaError::Failed(e),
                });
            }
            if n == 0 {
                return Err(CmaError::Failed(io::Error::from(
                    io::ErrorKind::UnexpectedEof,
                )));
            }
            at = self.advance(at, n as usize);
        }
        self.local.clear();
        self.remote.clear();
        Ok(())
    }

    /// Skips `n` bytes read from piece `at` on: the index of the first piece not fully
    /// read, the partly read one trimmed.
    fn advance(&mut self, mut at: usize, mut n: usize) -> usize {
        while n > 0 && at < self.local.len() {
            let len = self.local[at].iov_len;
            if n < len {
                for v in [&mut self.local[at], &mut self.remote[at]] {
                    v.iov_base = (v.iov_base as usize + n) as *mut libc::c_void;
                    v.iov_len -= n;
                }
                return at;
            }
            n -= len;
            at += 1;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn many_pieces_of_this_process_are_read_in_batches() {
        let src: Vec<u8> = (0..3000 * 7).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let mut r = CmaReader::new(std::process::id());
        // 3000 pieces of 7 bytes, in reverse order: more than one call's worth.
        let mut res = Ok(());
        for (k, to) in dst.chunks_mut(7).enumerate().rev() {
            res = res.and_then(|()| r.push(to, src.as_ptr() as u64 + 7 * k as u64));
        }
        match res.and_then(|()| r.flush()) {
            Ok(()) => assert_eq!(dst, src),
            // A ptrace policy forbids it here: nothing to check.
            Err(CmaError::Refused) => assert!(refused()),
            Err(CmaError::Failed(e)) => panic!("{e}"),
        }
    }

    #[test]
    fn only_the_process_holding_the_cookie_is_the_sender() {
        let c = cookie();
        assert_ne!(c.value, 0);
        assert_eq!(cookie(), c);
        let mut me = CmaReader::new(std::process::id());
        assert_eq!(me.is_the_sender(&c), !refused());
        let wrong = Cookie {
            value: c.value ^ 1,
            ..c
        };
        assert!(!me.is_the_sender(&wrong));
        // pid 1 is never this test, and cannot be read (or holds another value).
        assert!(!CmaReader::new(1).is_the_sender(&c));
    }

    #[test]
    fn an_unmapped_address_is_an_error() {
        let mut dst = [0u8; 16];
        let mut r = CmaReader::new(std::process::id());
        let res = r.push(&mut dst, 8).and_then(|()| r.flush());
        assert!(
            matches!(res, Err(CmaError::Failed(_)) | Err(CmaError::Refused)),
            "{res:?}"
        );
    }
}
