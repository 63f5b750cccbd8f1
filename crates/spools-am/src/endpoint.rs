//! [`Endpoint`]: a sender with a lane of its own; short, batched and bulk messages.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use spools_fabric::Priority;
use spools_proto::am::{AmHeader, Bulk, Short, SHORT_LEN};

use crate::core::Core;
use crate::error::AmError;
use crate::message::{Channel, Delivery};
use crate::registry::HandlerId;
use crate::worker::Worker;

impl Worker {
    /// Opens an endpoint with a sending lane of its own (for another thread).
    ///
    /// # Errors
    /// [`AmError::NoLane`] when every lane is taken.
    pub fn endpoint(&self) -> Result<Endpoint, AmError> {
        let lane = self
            .free_lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .ok_or_else(|| AmError::NoLane {
                lanes: usize::from(self.core.cfg.lanes),
            })?;
        Ok(Endpoint::new(self.clone(), lane))
    }
}

/// A sender with a lane of its own: one per thread that sends. Batched messages wait in
/// its queue until the batch is full or [`Endpoint::flush`].
pub struct Endpoint {
    pub(crate) comm: Worker,
    pub(crate) lane: usize,
    batches: Vec<Vec<u8>>,
    batch_count: Vec<u16>,
    pending: Vec<u32>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("lane", &self.lane)
            .finish()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Drop cannot return the error: say it, as the batched messages are lost.
        if let Err(e) = self.flush() {
            spools_boot::logger::error(format_args!(
                "spools: an endpoint dropped with batched messages it could not send: {e}"
            ));
        }
        self.comm
            .free_lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.lane);
    }
}

impl Endpoint {
    pub(crate) fn new(comm: Worker, lane: usize) -> Endpoint {
        let n = comm.size() as usize;
        Endpoint {
            comm,
            lane,
            batches: vec![Vec::new(); n],
            batch_count: vec![0; n],
            pending: Vec::new(),
        }
    }

    /// The worker this endpoint belongs to.
    pub fn worker(&self) -> &Worker {
        &self.comm
    }

    /// The lane it sends on.
    pub fn lane(&self) -> usize {
        self.lane
    }

    pub(crate) fn core(&self) -> &Core {
        &self.comm.core
    }

    #[inline]
    fn check_handler(&self, h: HandlerId) -> Result<(), AmError> {
        if h.0 as usize >= self.core().table_len.load(Ordering::Relaxed) {
            return Err(AmError::UnknownHandlerId(h.0));
        }
        Ok(())
    }

    /// Sends a short active message: handler id and four arguments.
    ///
    /// # Errors
    /// [`AmError::UnknownHandlerId`], [`AmError::BadRank`], transport failures (a
    /// dead peer).
    #[inline]
    pub fn send_short(
        &mut self,
        peer: u32,
        h: HandlerId,
        args: [u64; 4],
        ch: Channel,
        mode: Delivery,
    ) -> Result<(), AmError> {
        self.core().check_rank(peer)?;
        self.check_handler(h)?;
        let s = Short {
            handler: h.0,
            channel: ch.id,
            flags: ch.flags(),
            args,
        };
        let mut b = [0u8; SHORT_LEN];
        s.write(&mut b);
        if mode == Delivery::Batched && !ch.high {
            let p = peer as usize;
            if self.batches[p].is_empty() {
                let mut h = Vec::with_capacity(8);
                AmHeader::Batch { count: 0 }.encode(&mut h);
                self.batches[p].extend_from_slice(&h);
                self.pending.push(peer);
            }
            self.batches[p].extend_from_slice(&b);
            self.batch_count[p] += 1;
            if u32::from(self.batch_count[p]) >= self.core().cfg.batch {
                self.flush_peer(peer)?;
            }
            return Ok(());
        }
        if !self.batches[peer as usize].is_empty() && !ch.high {
            self.flush_peer(peer)?;
        }
        self.core().send_raw(self.lane, ch.priority(), peer, &[&b])
    }

    pub(crate) fn flush_peer(&mut self, peer: u32) -> Result<(), AmError> {
        let p = peer as usize;
        if self.batches[p].is_empty() {
            return Ok(());
        }
        let count = self.batch_count[p];
        let mut buf = std::mem::take(&mut self.batches[p]);
        buf[2..4].copy_from_slice(&count.to_le_bytes());
        self.batch_count[p] = 0;
        self.pending.retain(|&q| q != peer);
        let res = self
            .core()
            .send_raw(self.lane, Priority::Low, peer, &[&buf]);
        buf.clear();
        self.batches[p] = buf;
        res
    }

    /// Hands every batched message over.
    ///
    /// # Errors
    /// Transport failures.
    pub fn flush(&mut self) -> Result<(), AmError> {
        let pending = self.pending.clone();
        for peer in pending {
            self.flush_peer(peer)?;
        }
        Ok(())
    }

    /// Sends a bulk active message: handler id, arguments and a payload up to the bulk
    /// limit, fragmented as needed; the handler sees the whole payload.
    ///
    /// # Errors
    /// [`AmError::TooLarge`] above the bulk limit, and as [`Endpoint::send_short`].
    pub fn send_bulk(
        &mut self,
        peer: u32,
        h: HandlerId,
        args: [u64; 4],
        payload: &[u8],
        ch: Channel,
    ) -> Result<(), AmError> {
        self.core().check_rank(peer)?;
        self.check_handler(h)?;
        let limit = self.core().cfg.bulk_limit as usize;
        if payload.len() > limit {
            return Err(AmError::TooLarge {
                len: payload.len(),
                limit,
            });
        }
        if !ch.high {
            self.flush_peer(peer)?;
        }
        let frag = self.core().fragment_for(peer);
        let mut off = 0;
        loop {
            let n = (payload.len() - off).min(frag);
            let mut hdr = Vec::with_capacity(spools_proto::am::BULK_HEADER_LEN);
            AmHeader::Bulk(Bulk {
                handler: h.0,
                channel: ch.id,
                flags: ch.flags(),
                total: payload.len() as u32,
                offset: off as u32,
                args,
            })
            .encode(&mut hdr);
            self.core().send_raw(
                self.lane,
                ch.priority(),
                peer,
                &[&hdr, &payload[off..off + n]],
            )?;
            off += n;
            if off >= payload.len() {
                return Ok(());
            }
        }
    }
}
