//! Copies out of another process's memory with `process_vm_readv` (cross-memory attach),
//! many runs per system call.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::descriptor::Cookie;

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

    /// Queues reading `count` runs of `len` bytes that lie one after the other at the
    /// peer's address `from` into `to`, run `i` at `to[i * stride..]`: one contiguous
    /// piece of the peer's memory spread here, which the kernel reads (pinning its pages)
    /// as one, however short the runs. `to` must hold the runs (at least
    /// `(count - 1) * stride + len` bytes); as for [`CmaReader::push`], the bytes arrive
    /// at the latest at the next [`CmaReader::flush`].
    pub(super) fn push_spread(
        &mut self,
        to: &mut [u8],
        (stride, len, count): (usize, usize, usize),
        from: u64,
    ) -> Result<(), CmaError> {
        let mut done = 0usize;
        while done < count {
            if self.local.len() == MAX_IOV || self.remote.len() == MAX_IOV {
                self.flush()?;
            }
            let n = (count - done).min(MAX_IOV - self.local.len());
            for i in done..done + n {
                let run = to
                    .get_mut(i * stride..i * stride + len)
                    .ok_or_else(|| CmaError::Failed(io::ErrorKind::InvalidInput.into()))?;
                self.local.push(libc::iovec {
                    iov_base: run.as_mut_ptr().cast(),
                    iov_len: len,
                });
            }
            self.remote.push(libc::iovec {
                iov_base: (from as usize + done * len) as *mut libc::c_void,
                iov_len: n * len,
            });
            done += n;
        }
        Ok(())
    }

    /// Reads every queued piece.
    pub(super) fn flush(&mut self) -> Result<(), CmaError> {
        // The local and the remote iovecs are two byte streams of one length, cut
        // differently (a spread piece is one remote iovec and many local ones): a short
        // read moves each on by what it read.
        let (mut li, mut ri) = (0, 0);
        while li < self.local.len() {
            if ri >= self.remote.len() {
                return Err(CmaError::Failed(io::ErrorKind::InvalidInput.into()));
            }
            let (l, r) = (&self.local[li..], &self.remote[ri..]);
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
            li = skip(&mut self.local, li, n as usize);
            ri = skip(&mut self.remote, ri, n as usize);
        }
        self.local.clear();
        self.remote.clear();
        Ok(())
    }
}

/// Skips `n` bytes of the iovecs `v` from `at` on: the index of the first one not fully
/// read, the partly read one trimmed.
fn skip(v: &mut [libc::iovec], mut at: usize, mut n: usize) -> usize {
    while n > 0 && at < v.len() {
        let len = v[at].iov_len;
        if n < len {
            v[at].iov_base = (v[at].iov_base as usize + n) as *mut libc::c_void;
            v[at].iov_len -= n;
            return at;
        }
        n -= len;
        at += 1;
    }
    at
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
    fn spread_pieces_mixed_with_runs_land_where_they_belong() {
        // Pieces of 2500 runs of 3 bytes (one contiguous piece here, every 5th byte
        // there: more than one call's worth of local iovecs), between single runs.
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let base = src.as_ptr() as u64;
        let (len, stride, count) = (3usize, 5usize, 2500usize);
        let mut spread = vec![0u8; stride * count];
        let mut single = vec![0u8; 11];
        let mut tail = vec![0u8; 4];
        let mut r = CmaReader::new(std::process::id());
        let res = r
            .push(&mut single, base + 100)
            .and_then(|()| r.push_spread(&mut spread, (stride, len, count), base + 7000))
            .and_then(|()| r.push(&mut tail, base + 19_990))
            .and_then(|()| r.flush());
        match res {
            Ok(()) => {
                assert_eq!(single, src[100..111]);
                assert_eq!(tail, src[19_990..19_994]);
                for i in 0..count {
                    let want = &src[7000 + i * len..7000 + (i + 1) * len];
                    assert_eq!(&spread[i * stride..i * stride + len], want, "run {i}");
                    assert!(spread[i * stride + len..(i + 1) * stride]
                        .iter()
                        .all(|&b| b == 0));
                }
            }
            Err(CmaError::Refused) => assert!(refused()),
            Err(CmaError::Failed(e)) => panic!("{e}"),
        }
        // A destination too short for its runs is an error, not a write beyond it.
        let mut short = vec![0u8; 8];
        let res = r.push_spread(&mut short, (stride, len, 3), base);
        assert!(matches!(res, Err(CmaError::Failed(_))), "{res:?}");
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
