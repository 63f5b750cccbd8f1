//! One-sided operations of the libfabric transport ([`crate::Rma`]): memory exposed by
//! registration (`FI_REMOTE_WRITE | FI_REMOTE_READ`), and writes and reads
//! (`fi_writemsg` with `FI_DELIVERY_COMPLETE`, `fi_readmsg`) cut into chunks of
//! [`RMA_CHUNK`] bytes, [`RMA_SLOTS`] in flight at once (128 KiB x 16: measured faster
//! than 256 KiB x 8, 64 KiB x 16 and 1 MiB x 8 over `tcp;ofi_rxm`).
//!
//! The local side of a write goes through a registered buffer of this transport's own
//! (one copy at the initiator): the caller's memory is never handed to the provider, so
//! a write abandoned because its peer failed can leave its buffers in flight safely
//! (they are freed when the provider completes them). A read does the same on hardware
//! providers, and where the provider needs local registration or moves data on its own;
//! elsewhere (`tcp;ofi_rxm`, `shm`: software, no `FI_MR_LOCAL`, manual data progress) it
//! lands straight in the caller's memory, and if it must be abandoned in flight the
//! transport is fenced: it never calls the provider again, so nothing can land after the
//! call returned. The target's side is the exposed memory itself.

use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::slot::Slot;
use super::{call, close, ffi, EpState, OfiTransport, RMA_CHUNK, RMA_SLOTS};
use crate::error::FabricError;
use crate::rma::{Access, RemoteRegion, Rma};
use crate::transport::Transport;

/// Keys of exposed memory start here (the pools' registrations take the keys below).
const EXPOSED_KEY_BASE: u64 = 16;

impl OfiTransport {
    /// Buffer `b`'s operation completed (`err`: how it failed).
    pub(super) fn rma_done(&self, st: &mut EpState, b: u32, err: Option<(i64, String)>) {
        let slot = &mut st.rma[b as usize];
        if slot.abandoned {
            *slot = Slot::default();
            st.rma_free.push(b);
            return;
        }
        slot.done = true;
        slot.err = err;
    }

    /// Posts one chunk of a write (`write`) or read with buffer `b`'s context: `n` bytes
    /// at `remote` of `peer`, from or into `local` (buffer `b` itself, or the caller's
    /// memory for a direct read). Returns the provider's code.
    #[allow(clippy::too_many_arguments)]
    fn post_rma(
        &self,
        b: u32,
        write: bool,
        peer: u32,
        remote: u64,
        key: u64,
        local: *mut u8,
        n: usize,
    ) -> isize {
        let iov = libc::iovec {
            iov_base: local as *mut c_void,
            iov_len: n,
        };
        // Direct reads need no descriptor (`direct_reads`: no FI_MR_LOCAL).
        let mut desc = if local == self.rma_pool.slot(b) {
            self.rma_desc
        } else {
            std::ptr::null_mut()
        };
        let rma_iov = ffi::fi_rma_iov {
            addr: remote,
            len: n,
            key,
        };
        let msg = ffi::fi_msg_rma {
            msg_iov: &iov,
            desc: &mut desc,
            iov_count: 1,
            addr: u64::from(peer),
            rma_iov: &rma_iov,
            rma_iov_count: 1,
            context: self.rma_pool.context(b),
            data: 0,
        };
        // SAFETY: the endpoint is enabled and has FI_RMA; buffer `b` is this operation's
        // (taken from `rma_free` under the lock) and, with its context, stays untouched
        // by anyone else until its completion, as does `local` (the caller of
        // `one_sided` waits for it, or fences the transport); `msg` and what it points
        // to live across the call (the provider copies the descriptors).
        unsafe {
            let ep = self.h.eps[0];
            if write {
                ((*(*ep).rma).writemsg)(ep, &msg, ffi::FI_COMPLETION | ffi::FI_DELIVERY_COMPLETE)
            } else {
                ((*(*ep).rma).readmsg)(ep, &msg, ffi::FI_COMPLETION)
            }
        }
    }

    /// Writes `len` bytes from `local` to (`write`), or reads them from, `at` of `peer` at
    /// `offset`, and waits until every chunk completed.
    fn one_sided(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        local: *mut u8,
        len: usize,
        write: bool,
    ) -> Result<(), FabricError> {
        if !self.reaches(peer) {
            return Err(FabricError::Unreachable(peer));
        }
        let chunk = self.rma_pool.slot_len().min(RMA_CHUNK);
        let direct = !write && self.direct_reads;
        let base = at.addr.wrapping_add(offset);
        let mut posted = 0usize;
        // (buffer, offset in the caller's memory, bytes) of the chunks in flight.
        let mut mine: Vec<(u32, usize, usize)> = Vec::with_capacity(RMA_SLOTS);
        let mut failed: Option<FabricError> = None;
        // The provider's error for a chunk, turned into the error after the lock is let go
        // (that waits for the watchdog's verdict).
        let mut chunk_error: Option<(i64, String)> = None;
        loop {
            let mut st = self.ep.lock();
            // Fenced by another operation: chunks of this one in flight (direct reads,
            // since only they fence) are left with the provider for good.
            st.usable()?;
            while posted < len && failed.is_none() && chunk_error.is_none() {
                let Some(b) = st.rma_free.pop() else { break };
                let n = (len - posted).min(chunk);
                if write {
                    // SAFETY: `local` has `len` bytes (the caller's slice); buffer `b`
                    // has `chunk` >= n bytes and is this operation's.
                    unsafe {
                        std::ptr::copy_nonoverlapping(local.add(posted), self.rma_pool.slot(b), n)
                    };
                }
                st.rma[b as usize] = Slot::default();
                let into = if direct {
                    // SAFETY: `posted + n <= len`, inside the caller's `len` bytes.
                    unsafe { local.add(posted) }
                } else {
                    self.rma_pool.slot(b)
                };
                let remote = base.wrapping_add(posted as u64);
                let rc = self.post_rma(b, write, peer, remote, at.key, into, n);
                if rc == -ffi::FI_EAGAIN {
                    st.rma_free.push(b);
                    break;
                }
                if let Err(e) = call(
                    self.lib,
                    if write { "fi_writemsg" } else { "fi_readmsg" },
                    rc,
                ) {
                    st.rma_free.push(b);
                    failed = Some(e.into());
                    break;
                }
                mine.push((b, posted, n));
                posted += n;
            }
            self.reap_sends(&mut st);
            let mut k = 0;
            while k < mine.len() {
                let (b, at_local, n) = mine[k];
                if !st.rma[b as usize].done {
                    k += 1;
                    continue;
                }
                let err = st.rma[b as usize].err.take();
                match err {
                    Some(e) => {
                        chunk_error.get_or_insert(e);
                    }
                    None if !write && !direct => {
                        // SAFETY: the read into buffer `b` completed; `local` has `len`
                        // bytes, of which this chunk's `n` at `at_local` are its.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.rma_pool.slot(b),
                                local.add(at_local),
                                n,
                            )
                        };
                    }
                    None => {}
                }
                st.rma[b as usize] = Slot::default();
                st.rma_free.push(b);
                mine.swap_remove(k);
            }
            if mine.is_empty() && (posted == len || failed.is_some() || chunk_error.is_some()) {
                break;
            }
            // A peer's death, or any other: the job ends (the peer may be cut off with
            // a host whose first death was another rank's, and its reads then never
            // complete).
            if let Some(f) = self
                .state
                .failure_of(peer)
                .or_else(|| self.state.any_failure())
            {
                if direct && !mine.is_empty() {
                    // Their bytes would land in the caller's memory whenever the provider
                    // is next called: never call it again.
                    st.fenced = Some(f.clone());
                    return Err(FabricError::PeerFailed(f));
                }
                // The chunks still in flight finish (or fail) in the provider's time:
                // their buffers are freed then; the caller's memory is not theirs.
                for &(b, _, _) in &mine {
                    st.rma[b as usize].abandoned = true;
                }
                return Err(FabricError::PeerFailed(f));
            }
            drop(st);
            self.sleep(None, Duration::from_millis(1));
        }
        if let Some(e) = chunk_error {
            failed.get_or_insert_with(|| self.failure(peer, "one-sided operation", e));
        }
        match failed {
            Some(e) => Err(e),
            None => {
                self.rma_moved[usize::from(!write)].fetch_add(len as u64, Ordering::Relaxed);
                Ok(())
            }
        }
    }
}

impl Rma for OfiTransport {
    unsafe fn expose(
        &self,
        id: u32,
        base: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<RemoteRegion, FabricError> {
        let key = EXPOSED_KEY_BASE + u64::from(id);
        if len == 0 {
            // Nothing to register: every access of a byte is out of bounds.
            return Ok(RemoteRegion {
                addr: 0,
                key,
                len: 0,
            });
        }
        let flags = match access {
            Access::Read => ffi::FI_REMOTE_READ,
            Access::ReadWrite => ffi::FI_REMOTE_WRITE | ffi::FI_REMOTE_READ,
        };
        let mut st = self.ep.lock();
        st.usable()?;
        // SAFETY: the caller keeps the memory until `withdraw` (this trait's contract).
        let mr = unsafe { self.reg(base, len, flags, key, 0)? };
        if let Some(old) = st.exposed.insert(id, mr) {
            // SAFETY: a registration of ours, replaced (ids are unique: a caller's bug),
            // closed once.
            unsafe { close(&mut (*old).fid) };
        }
        // SAFETY: a live registration.
        let prov_key = unsafe { (*mr).key };
        Ok(RemoteRegion {
            addr: if self.mr_mode & ffi::FI_MR_VIRT_ADDR != 0 {
                base as u64
            } else {
                0
            },
            key: if self.mr_mode & ffi::FI_MR_PROV_KEY != 0 {
                prov_key
            } else {
                key
            },
            len: len as u64,
        })
    }

    fn withdraw(&self, id: u32) {
        let mut st = self.ep.lock();
        let mr = st.exposed.remove(&id);
        if st.fenced.is_some() {
            // Never call the provider again (kept for the life of the process).
            return;
        }
        if let Some(mr) = mr {
            // SAFETY: a registration of ours, removed from the table: closed once.
            unsafe { close(&mut (*mr).fid) };
        }
    }

    fn write(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        src: &[u8],
    ) -> Result<(), FabricError> {
        // Only read from: `one_sided` copies out of `local` for a write.
        self.one_sided(peer, at, offset, src.as_ptr() as *mut u8, src.len(), true)
    }

    fn read(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), FabricError> {
        self.one_sided(peer, at, offset, dst.as_mut_ptr(), dst.len(), false)
    }

    fn moved(&self) -> (u64, u64) {
        (
            self.rma_moved[0].load(Ordering::Relaxed),
            self.rma_moved[1].load(Ordering::Relaxed),
        )
    }
}
