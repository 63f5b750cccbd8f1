//! Reads of a local peer's memory with `process_vm_readv` (cross-memory attach): the
//! shared-memory transport's one-sided face ([`Transport::rma`](crate::Transport::rma)),
//! so that a rendezvous within a host moves its bytes with one copy, made by the
//! receiver, instead of two through the rings. Chosen at start-up
//! (`copy_probe.rs`); a read that the kernel refuses or that fails fails at the
//! reader, whose caller then streams the bytes instead.
//!
//! Nothing is registered: `expose` only names the memory, and a peer may read it until
//! the layer above says it is done (the rendezvous completes the send only then).
//! Every read also reads the owner's *cookie*, a random word at an address the owner
//! published in its segment, in the same system call: a process that took the pid of a
//! peer that died has another word there, or none, and the read fails.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{FabricError, IoStep};
use crate::rma::{Access, RemoteRegion, Rma};

/// This process's cookie: random, never 0, set on first use, at a fixed address.
static COOKIE: AtomicU64 = AtomicU64::new(0);

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
}

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
}

impl CmaRma {
    /// Reads of the processes in `peers` (by job rank).
    pub(crate) fn new(peers: Vec<Option<Process>>) -> CmaRma {
        CmaRma {
            peers,
            read: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        }
    }
}

fn failed(peer: u32, source: io::Error) -> FabricError {
    FabricError::Io {
        step: IoStep::CrossMemory { peer },
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
            return Err(failed(
                u32::MAX,
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "shared memory lends memory for reads only",
                ),
            ));
        }
        if self.refused.load(Ordering::Relaxed) {
            return Err(failed(u32::MAX, io::Error::from_raw_os_error(libc::EPERM)));
        }
        Ok(RemoteRegion {
            addr: base as u64,
            key: u64::from(id),
            len: len as u64,
        })
    }

    fn withdraw(&self, _id: u32) {}

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
                "shared memory lends memory for reads only",
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
        let mut cookie = 0u64;
        let local = [
            libc::iovec {
                iov_base: (&mut cookie as *mut u64).cast(),
                iov_len: 8,
            },
            libc::iovec {
                iov_base: dst.as_mut_ptr().cast(),
                iov_len: dst.len(),
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
        ];
        // SAFETY: the local iovecs describe `cookie` and `dst`, live and writable for
        // their lengths; the remote ones are only read, in the peer's address space
        // (the kernel checks them there).
        let n = unsafe {
            libc::process_vm_readv(
                p.pid as libc::pid_t,
                local.as_ptr(),
                2,
                remote.as_ptr(),
                2,
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
        if n as usize != 8 + dst.len() {
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
        self.read.fetch_add(dst.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn moved(&self) -> (u64, u64) {
        (0, self.read.load(Ordering::Relaxed))
    }
}
