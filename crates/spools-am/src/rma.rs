//! Remote memory access: [`Endpoint::put`] and [`Endpoint::get`] on a registered region
//! of the target, packetised automatically, completed when the target has answered. A
//! region of a rank of this host that lies in the shared heap
//! ([`Worker::shared_region`](crate::Worker::shared_region)) is mapped here instead and
//! copied into or out of directly: one copy, no message. A region of a rank reached
//! through a network transport with remote memory access (libfabric) is written and read
//! one-sidedly when the transfer takes more than one message: the initiator asks for the
//! region's network key ([`RmaAsk`]), writes or reads, and says it is done ([`RmaDone`]).

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use spools_fabric::{FabricError, Priority, RemoteRegion, Rma};
use spools_heap::{HeapError, HeapName, HeapRef, PeerBytes};
use spools_proto::am::{AmHeader, Get, Put, RmaAsk, RmaDone, StatusCode, FLAG_LAST};

use crate::core::{Core, OpState, Route};
use crate::endpoint::Endpoint;
use crate::error::AmError;
use crate::region::RegionKey;

/// Forgets a put or get when its caller returns, also on error.
struct OpGuard<'a> {
    core: &'a Core,
    token: u32,
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        self.core
            .ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

impl Endpoint {
    /// Bytes `[offset, offset + len)` of region `key` of `peer`, mapped here, when `peer`
    /// runs on this host and the region lies in the shared heap (`None`: go through the
    /// transport). A region withdrawn or a range outside it is the error the target
    /// would have answered.
    fn peer_region(
        &self,
        peer: u32,
        key: RegionKey,
        offset: u64,
        len: usize,
        op: &'static str,
    ) -> Option<Result<PeerBytes, AmError>> {
        if self.core().routes.get(peer as usize) != Some(&Route::Shm) {
            return None;
        }
        let name = HeapName::region(self.core().boot.job(), peer, key);
        match self.core().heaps.bytes(&HeapRef { name, offset }, len) {
            Ok(b) => Some(Ok(b)),
            Err(HeapError::Freed { .. }) => Some(Err(AmError::UnknownRegion { peer, key })),
            Err(HeapError::OutOfRange { .. }) => Some(Err(AmError::OutOfBounds {
                op,
                peer,
                key,
                offset,
                len: len as u64,
            })),
            Err(_) => None,
        }
    }

    /// A direct copy with `peer`'s region is over: it counts only if `peer` was alive
    /// (else its bytes went nowhere, or came from a dead rank).
    fn direct_done(&self, peer: u32) -> Result<(), AmError> {
        match self.core().boot.state().failure_of(peer) {
            Some(f) => Err(AmError::Fabric(FabricError::PeerFailed(f))),
            None => Ok(()),
        }
    }

    /// Registers a put or get; the guard forgets it when dropped (on return or error).
    fn new_op(&self, is_get: bool, dest: usize, len: usize) -> OpGuard<'_> {
        let token = self.core().next_token.fetch_add(1, Ordering::Relaxed);
        self.core()
            .ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                token,
                OpState {
                    is_get,
                    done: false,
                    code: StatusCode::Ok,
                    dest,
                    len,
                    remote: None,
                },
            );
        OpGuard {
            core: self.core(),
            token,
        }
    }

    /// Waits for the target's answer to the operation of `guard` and turns it into a
    /// result (for a request for a region's network key: the key, if exposed).
    fn finish_op(
        &self,
        guard: OpGuard<'_>,
        peer: u32,
        op: &'static str,
        key: RegionKey,
        offset: u64,
        len: u64,
    ) -> Result<Option<RemoteRegion>, AmError> {
        let token = guard.token;
        let core = self.core();
        core.wait_until(
            || {
                core.ops
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&token)
                    .is_none_or(|o| o.done)
            },
            Some(peer),
            false,
        )?;
        let (code, remote) = core
            .ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&token)
            .map_or((StatusCode::Malformed, None), |o| (o.code, o.remote));
        match code {
            StatusCode::Ok => Ok(remote),
            StatusCode::UnknownRegion => Err(AmError::UnknownRegion { peer, key }),
            StatusCode::OutOfBounds => Err(AmError::OutOfBounds {
                op,
                peer,
                key,
                offset,
                len,
            }),
            StatusCode::UnknownHandler | StatusCode::Malformed => {
                Err(AmError::BadReply { peer, op, code })
            }
        }
    }

    /// Puts `data` into region `key` of `peer` at `offset`, packetised automatically;
    /// returns when the target has placed it (or refused it: out of bounds or unknown
    /// region, touching nothing).
    ///
    /// # Errors
    /// [`AmError::OutOfBounds`], [`AmError::UnknownRegion`], transport failures.
    pub fn put(
        &mut self,
        peer: u32,
        key: RegionKey,
        offset: u64,
        data: &[u8],
    ) -> Result<(), AmError> {
        self.core().check_rank(peer)?;
        self.flush_peer(peer)?;
        if let Some(region) = self.peer_region(peer, key, offset, data.len(), "put") {
            // In range: `peer_region` mapped exactly `data.len()` bytes.
            // SAFETY: the region is another process's (`peer_region` maps only peers on
            // the shared-memory route, never this rank), so nothing here borrows it.
            let _ = unsafe { region?.copy_from(0, data) };
            return self.direct_done(peer);
        }
        let one_sided = |rma: &dyn Rma, at| rma.write(peer, at, offset, data);
        if self.one_sided(peer, key, offset, data.len(), "put", one_sided)? {
            return Ok(());
        }
        let guard = self.new_op(false, 0, 0);
        let token = guard.token;
        let frag = self.core().fragment_for(peer);
        let total = data.len() as u64;
        let mut off = 0usize;
        loop {
            let n = (data.len() - off).min(frag);
            let last = off + n == data.len();
            let mut hdr = Vec::with_capacity(40);
            AmHeader::Put(Put {
                token,
                key,
                offset,
                total,
                chunk: off as u64,
                flags: if last { FLAG_LAST } else { 0 },
            })
            .encode(&mut hdr);
            self.core()
                .send_raw(self.lane, Priority::Low, peer, &[&hdr, &data[off..off + n]])?;
            off += n;
            if last {
                break;
            }
        }
        self.finish_op(guard, peer, "put", key, offset, total)
            .map(drop)
    }

    /// Gets `buf.len()` bytes from region `key` of `peer` at `offset` into `buf`.
    ///
    /// # Errors
    /// As [`Endpoint::put`].
    pub fn get(
        &mut self,
        peer: u32,
        key: RegionKey,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), AmError> {
        self.core().check_rank(peer)?;
        self.flush_peer(peer)?;
        if let Some(region) = self.peer_region(peer, key, offset, buf.len(), "get") {
            // In range: `peer_region` mapped exactly `buf.len()` bytes.
            let _ = region?.copy_to(0, buf);
            return self.direct_done(peer);
        }
        let len = buf.len();
        let one_sided = |rma: &dyn Rma, at| rma.read(peer, at, offset, buf);
        if self.one_sided(peer, key, offset, len, "get", one_sided)? {
            return Ok(());
        }
        let guard = self.new_op(true, buf.as_mut_ptr() as usize, buf.len());
        let mut hdr = Vec::with_capacity(32);
        AmHeader::Get(Get {
            token: guard.token,
            key,
            offset,
            len: buf.len() as u64,
        })
        .encode(&mut hdr);
        self.core()
            .send_raw(self.lane, Priority::Low, peer, &[&hdr])?;
        let len = buf.len() as u64;
        self.finish_op(guard, peer, "get", key, offset, len)
            .map(drop)
    }

    /// Puts or gets (`op`, done by `f`) one-sidedly when `peer` is reached through a
    /// network transport with remote memory access, the transfer takes more than one
    /// message, and `peer` exposed region `key` to the network; `Ok(false)` when the
    /// caller must use messages. The target keeps the region from its answer to the
    /// ask until this rank's [`RmaDone`], so a region withdrawn meanwhile is still
    /// valid memory. A range outside the region is refused here, touching nothing.
    fn one_sided(
        &self,
        peer: u32,
        key: RegionKey,
        offset: u64,
        len: usize,
        op: &'static str,
        f: impl FnOnce(&dyn Rma, RemoteRegion) -> Result<(), FabricError>,
    ) -> Result<bool, AmError> {
        let core = self.core();
        if core.routes.get(peer as usize) != Some(&Route::Net) || len <= core.fragment_for(peer) {
            return Ok(false);
        }
        let Some(rma) = core.net.as_ref().and_then(|t| t.rma()) else {
            return Ok(false);
        };
        let (token, remote) = self.ask_region(peer, key)?;
        let Some(remote) = remote else {
            return Ok(false);
        };
        let done = if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > remote.len)
        {
            Err(AmError::OutOfBounds {
                op,
                peer,
                key,
                offset,
                len: len as u64,
            })
        } else {
            f(rma, remote).map_err(AmError::Fabric)
        };
        let mut hdr = Vec::with_capacity(8);
        AmHeader::RmaDone(RmaDone { token }).encode(&mut hdr);
        let released = self
            .core()
            .send_raw(self.lane, Priority::Low, peer, &[&hdr]);
        done?;
        released?;
        Ok(true)
    }

    /// Asks `peer` for the network address and key of its region `key` (`None`: not
    /// exposed to the network); returns the ask's token with it.
    fn ask_region(
        &self,
        peer: u32,
        key: RegionKey,
    ) -> Result<(u32, Option<RemoteRegion>), AmError> {
        let guard = self.new_op(false, 0, 0);
        let token = guard.token;
        let mut hdr = Vec::with_capacity(16);
        AmHeader::RmaAsk(RmaAsk {
            token: guard.token,
            key,
        })
        .encode(&mut hdr);
        self.core()
            .send_raw(self.lane, Priority::Low, peer, &[&hdr])?;
        let remote = self.finish_op(guard, peer, "region key request", key, 0, 0)?;
        Ok((token, remote))
    }
}
