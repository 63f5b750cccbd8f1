//! Reads of a local peer's memory with `process_vm_readv` (cross-memory attach): the
//! shared-memory transport's one-sided face ([`Transport::rma`](crate::Transport::rma)),
//! so that a rendezvous within a host moves its bytes with one copy, made by the
//! receiver, instead of two through the rings. Chosen at start-up
//! (`copy_probe.rs`); a read that the kernel refuses or that fails fails at the
//! reader, whose caller then streams the bytes instead.
//!
//! Nothing is registered with the kernel: `expose` gives the memory a *loan word* in this
//! process (a static table whose address the segment header publishes) holding a fresh
//! token, and `withdraw` clears it before the memory may be reused. Every read reads, in
//! one system call and in this order, the owner's *cookie* (a random word at an address
//! the owner published: a process that took the pid of a peer that died has another word
//! there, or none), the bytes, and the loan's word: a read whose word no longer holds its
//! token may have read reused memory, and fails. (The kernel copies the pieces in order;
//! the owner clears the word before it reuses the memory, and x86-64 keeps both processes'
//! loads, and stores, in program order.)

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{FabricError, IoStep};
use crate::rma::{Access, RemoteRegion, Rma};

/// This process's cookie: random, never 0, set on first use, at a fixed address.
static COOKIE: AtomicU64 = AtomicU64::new(0);

/// Loans one process may have out at once; more stream.
const LOAN_WORDS: usize = 16384;

/// The loans' words: a live loan's holds its token, a free one 0. Static, so that a
/// reader's late read of a word always reads this table.
static LOANS: [AtomicU64; LOAN_WORDS] = [const { AtomicU64::new(0) }; LOAN_WORDS];

/// Most bytes one loan lends: one `process_vm_readv` moves at most about 2 GiB.
const MAX_LOAN: usize = 1 << 30;

/// Where this process's loan words lie, for its segment header.
pub(crate) fn loans_addr() -> u64 {
    LOANS.as_ptr() as u64
}

/// This process's cookie: its address and value, for this rank's segment header.
pub(crate) fn cookie() -> (u64, u64) {
    if COOKIE.load(Ordering::Acquire) == 0 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let _ = COOKIE.compare_exchange(0, h.finish() | 1, Ordering::AcqRel, Ordering::Acquire);
    }
    (COOKIE.as_ptr() as u64, COOKIE.load(Ordering::Acquire))
}

/// A local peer's process, as its segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Process {
    /// Its process id.
    pub(crate) pid: u32,
    /// Where its cookie lies in its memory.
    pub(crate) cookie_addr: u64,
    /// The cookie's value.
    pub(crate) cookie: u64,
    /// Where its loan words lie in its memory.
    pub(crate) loans_addr: u64,
}

/// The process's loan words in use: every transport of the process (a program may make
/// more than one) takes its words from the one table, with tokens from one counter.
struct Words {
    /// Words never used yet start here.
    unused: u32,
    /// Words given back.
    free: Vec<u32>,
    /// The last token given (tokens are never 0).
    token: u32,
}

static WORDS: std::sync::Mutex<Words> = std::sync::Mutex::new(Words {
    unused: 0,
    free: Vec::new(),
    token: 0,
});

/// One-sided reads of local peers' memory.
pub(crate) struct CmaRma {
    /// By job rank: the peer's process, for the ranks on this host but this one.
    peers: Vec<Option<Process>>,
    /// Bytes read so far.
    read: AtomicU64,
    /// Set once the kernel refused this process a read (a ptrace policy stricter than
    /// the probe's read of its own memory could see): it neither reads nor lends any
    /// more, so later transfers stream without trying. Such policies hold for every
    /// rank alike, so each learns it at its first read.
    refused: AtomicBool,
    /// The loan word of each of this transport's loans, by id.
    words: std::sync::Mutex<std::collections::HashMap<u32, u32>>,
}

impl CmaRma {
    /// Reads of the processes in `peers` (by job rank).
    pub(crate) fn new(peers: Vec<Option<Process>>) -> CmaRma {
        CmaRma {
            peers,
            read: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            words: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Whether this process may read `peer`'s memory (one read of its cookie): the
    /// probe's read of this process's own memory cannot see a ptrace policy that refuses
    /// other processes.
    pub(crate) fn can_read(p: Process) -> io::Result<()> {
        let mut cookie = [0u8; 8];
        read_one(p.pid, p.cookie_addr, &mut cookie)?;
        if u64::from_ne_bytes(cookie) != p.cookie {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {} holds another cookie", p.pid),
            ));
        }
        Ok(())
    }
}

/// Reads `dst.len()` bytes at `addr` in process `pid` (which may be this one) with one
/// `process_vm_readv` of one iovec each side.
///
/// # Errors
/// The call's error (`EPERM` where the ptrace policy refuses, `EFAULT` for an address
/// not mapped there), or [`io::ErrorKind::UnexpectedEof`] for a short read.
pub(crate) fn read_one(pid: u32, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: dst.len(),
    };
    // SAFETY: the local iovec describes `dst`, live and writable for its length; the
    // remote one is only read, in `pid`'s address space (the kernel checks it there).
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != dst.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("process {pid}: {n} of {} bytes read", dst.len()),
        ));
    }
    Ok(())
}

fn failed(peer: u32, source: io::Error) -> FabricError {
    FabricError::Io {
        step: IoStep::CrossMemory { peer },
        source,
    }
}

fn refused_loan(source: io::Error) -> FabricError {
    FabricError::Io {
        step: IoStep::CrossMemoryLoan,
        source,
    }
}

impl Rma for CmaRma {
    unsafe fn expose(
        &self,
        id: u32,
        base: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<RemoteRegion, FabricError> {
        if access != Access::Read {
            return Err(refused_loan(io::Error::new(
                io::ErrorKind::Unsupported,
                "shared memory lends memory for reads only",
            )));
        }
        if self.refused.load(Ordering::Relaxed) {
            return Err(refused_loan(io::Error::from_raw_os_error(libc::EPERM)));
        }
        if len > MAX_LOAN {
            return Err(refused_loan(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{len} bytes: one read moves at most {MAX_LOAN}"),
            )));
        }
        let (slot, token) = {
            let mut w = WORDS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let slot = match w.free.pop() {
                Some(slot) => slot,
                None if (w.unused as usize) < LOAN_WORDS => {
                    w.unused += 1;
                    w.unused - 1
                }
                None => {
                    return Err(refused_loan(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        format!("{LOAN_WORDS} loans are out"),
                    )))
                }
            };
            w.token = w.token.checked_add(1).unwrap_or(1);
            (slot, w.token)
        };
        LOANS[slot as usize].store(u64::from(token), Ordering::SeqCst);
        self.words
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, slot);
        Ok(RemoteRegion {
            addr: base as u64,
            key: (u64::from(slot) << 32) | u64::from(token),
            len: len as u64,
        })
    }

    fn withdraw(&self, id: u32) {
        let slot = self
            .words
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
        if let Some(slot) = slot {
            // Before the memory may be reused: a read that ends after this fails.
            LOANS[slot as usize].store(0, Ordering::SeqCst);
            WORDS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .free
                .push(slot);
        }
    }

    fn write(
        &self,
        peer: u32,
        _at: RemoteRegion,
        _offset: u64,
        _src: &[u8],
    ) -> Result<(), FabricError> {
        Err(failed(
            peer,
            io::Error::new(
                io::ErrorKind::Unsupported,
                "shared memory's loans are read, never written",
            ),
        ))
    }

    fn read(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), FabricError> {
        let Some(p) = self.peers.get(peer as usize).copied().flatten() else {
            return Err(FabricError::Unreachable(peer));
        };
        if self.refused.load(Ordering::Relaxed) {
            return Err(failed(peer, io::Error::from_raw_os_error(libc::EPERM)));
        }
        let (slot, token) = ((at.key >> 32) as usize, at.key & 0xffff_ffff);
        if slot >= LOAN_WORDS || token == 0 || dst.len() > MAX_LOAN {
            return Err(failed(
                peer,
                io::Error::new(io::ErrorKind::InvalidInput, "not a loan of shared memory"),
            ));
        }
        let (mut cookie, mut word) = (0u64, 0u64);
        let local = [
            libc::iovec {
                iov_base: (&mut cookie as *mut u64).cast(),
                iov_len: 8,
            },
            libc::iovec {
                iov_base: dst.as_mut_ptr().cast(),
                iov_len: dst.len(),
            },
            libc::iovec {
                iov_base: (&mut word as *mut u64).cast(),
                iov_len: 8,
            },
        ];
        let remote = [
            libc::iovec {
                iov_base: p.cookie_addr as *mut libc::c_void,
                iov_len: 8,
            },
            libc::iovec {
                iov_base: at.addr.wrapping_add(offset) as *mut libc::c_void,
                iov_len: dst.len(),
            },
            libc::iovec {
                iov_base: p.loans_addr.wrapping_add(8 * slot as u64) as *mut libc::c_void,
                iov_len: 8,
            },
        ];
        // SAFETY: the local iovecs describe `cookie`, `dst` and `word`, live and writable
        // for their lengths; the remote ones are only read, in the peer's address space
        // (the kernel checks them there).
        let n = unsafe {
            libc::process_vm_readv(
                p.pid as libc::pid_t,
                local.as_ptr(),
                3,
                remote.as_ptr(),
                3,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) {
                self.refused.store(true, Ordering::Relaxed);
            }
            return Err(failed(peer, e));
        }
        if cookie != p.cookie {
            return Err(failed(
                peer,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("process {} is not rank {peer} any more", p.pid),
                ),
            ));
        }
        if n as usize != 16 + dst.len() {
            return Err(failed(
                peer,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read {} of {} bytes",
                        (n as usize).saturating_sub(8),
                        dst.len()
                    ),
                ),
            ));
        }
        if word != token {
            return Err(failed(
                peer,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "the loan ended before the read did (the sender gave its send up)",
                ),
            ));
        }
        self.read.fetch_add(dst.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn moved(&self) -> (u64, u64) {
        (0, self.read.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process as a peer (reading one's own memory needs no ptrace permission).
    fn me() -> Process {
        let (cookie_addr, cookie) = cookie();
        Process {
            pid: std::process::id(),
            cookie_addr,
            cookie,
            loans_addr: loans_addr(),
        }
    }

    #[test]
    fn a_loan_reads_until_withdrawn_and_only_from_its_process() {
        let rma = CmaRma::new(vec![Some(me())]);
        assert!(CmaRma::can_read(me()).is_ok());
        let mut src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        // SAFETY: `src` outlives the loan, which is withdrawn below.
        let at = unsafe { rma.expose(1, src.as_mut_ptr(), src.len(), Access::Read) }.unwrap();
        let mut dst = vec![0u8; 5000];
        rma.read(0, at, 300, &mut dst).unwrap();
        assert_eq!(dst[..], src[300..5300]);
        assert_eq!(rma.moved(), (0, 5000));
        // Withdrawn: the memory may be reused, and a read fails.
        rma.withdraw(1);
        assert!(rma.read(0, at, 0, &mut dst).is_err());
        // Another loan takes the word again, with another token: the old one stays dead.
        // SAFETY: as above.
        let again = unsafe { rma.expose(2, src.as_mut_ptr(), src.len(), Access::Read) }.unwrap();
        assert_ne!(again.key, at.key);
        assert!(rma.read(0, at, 0, &mut dst).is_err());
        rma.read(0, again, 0, &mut dst).unwrap();
        rma.withdraw(2);
        // A process whose cookie differs (a pid taken by another process) is not read.
        let stranger = CmaRma::new(vec![Some(Process {
            cookie: me().cookie ^ 1,
            ..me()
        })]);
        // SAFETY: as above.
        let lent = unsafe { rma.expose(3, src.as_mut_ptr(), src.len(), Access::Read) }.unwrap();
        assert!(stranger.read(0, lent, 0, &mut dst).is_err());
        let not_it = CmaRma::can_read(Process {
            cookie: me().cookie ^ 1,
            ..me()
        });
        assert_eq!(not_it.unwrap_err().kind(), io::ErrorKind::NotFound);
        rma.withdraw(3);
        // The one-iovec read: a copy of this process's bytes, an error for an address
        // not mapped (the first page is never).
        let mut word = [0u8; 4];
        read_one(std::process::id(), src.as_ptr() as u64 + 10, &mut word).unwrap();
        assert_eq!(word[..], src[10..14]);
        assert!(read_one(std::process::id(), 16, &mut word).is_err());
        // Writes, and exposures for writes, are refused; so is a rank with no process.
        assert!(rma.write(0, again, 0, &dst).is_err());
        // SAFETY: refused, nothing is lent.
        assert!(unsafe { rma.expose(4, src.as_mut_ptr(), 8, Access::ReadWrite) }.is_err());
        assert!(matches!(
            rma.read(1, again, 0, &mut dst),
            Err(FabricError::Unreachable(1))
        ));
    }
}
