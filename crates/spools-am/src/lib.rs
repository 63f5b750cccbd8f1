//! The comm layer of Spools: active messages (GRIM) and the three StarT-X mechanisms.
//!
//! - A **handler registry**: handlers are registered locally by name;
//!   [`Worker::sync_handlers`] (collective) merges every rank's names at rank 0 and gives all
//!   ranks the same name-to-id table. A message for an id in the table that the target has
//!   no handler for is dropped there and reported back to the sender as
//!   [`AmError::NoHandlerAtTarget`]; a message for an id beyond the target's table (it
//!   has not installed the table yet) is held until it has, up to 64 MiB.
//! - **Message kinds**: *short* (handler id and four `u64` arguments), *bulk* (the same
//!   plus a payload up to the bulk limit, fragmented and reassembled transparently) and
//!   *memory* ([`Endpoint::put`] / [`Endpoint::get`] on a registered [`Region`] of the
//!   target, bounds-checked there; no handler runs).
//! - **Modes**: [`Delivery::Immediate`] hands each message to the transport at once;
//!   [`Delivery::Batched`] collects short messages in a host-memory queue and hands them over
//!   together; memory transfers of any size are packetised automatically (remote memory
//!   transfer).
//! - **Channels and priorities**: an [`Endpoint`] owns a sending lane, so endpoints never
//!   contend; messages of one [`Channel`] arrive in order; high-priority channels have
//!   rings and connections of their own and are served first.
//! - **Flow control**: buffers are bounded; a sender facing a full receiver serves its own
//!   incoming traffic while it waits. **Progress**: [`Worker::poll`] runs handlers on the
//!   calling thread; with `progress_thread = true` a background thread runs them.

mod core;
mod error;
mod region;
mod registry;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_fabric::{Backoff, Priority, Transport};
use spools_proto::am::{
    AmHeader, Bulk, Get, Put, Short, StatusCode, FLAG_LAST, FLAG_UNORDERED, SHORT_LEN,
};

use crate::core::{Core, OpState, NAP};
pub use crate::core::{Poller, Route};

/// Chunk size of fragmented transfers over TCP.
const TCP_FRAGMENT: usize = 1 << 20;
pub use error::AmError;
pub use region::{Region, RegionKey};
pub use registry::{Handler, HandlerId};

/// A message as a handler sees it.
#[derive(Debug)]
pub struct ActiveMessage<'a> {
    /// Sending rank.
    pub from: u32,
    /// Channel it travelled on.
    pub channel: u16,
    /// The four arguments.
    pub args: [u64; 4],
    /// The payload (empty for short messages), borrowed until the handler returns.
    pub payload: &'a [u8],
}

/// How a short message is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// Now: lowest latency.
    #[default]
    Immediate,
    /// Queued in host memory and handed over with others (at the batch size, or at
    /// [`Endpoint::flush`]): highest message rate.
    Batched,
}

/// A logical channel: an id the handler sees, a priority, and whether order matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channel {
    /// Channel id.
    pub id: u16,
    /// High priority: never stuck behind low-priority traffic.
    pub high: bool,
    /// Unordered: the runtime may deliver out of order (currently it never does).
    pub unordered: bool,
}

impl Channel {
    /// Channel `id`, low priority, ordered.
    pub fn new(id: u16) -> Channel {
        Channel {
            id,
            high: false,
            unordered: false,
        }
    }

    /// The same channel at high priority.
    pub fn high(mut self) -> Channel {
        self.high = true;
        self
    }

    /// The same channel, unordered.
    pub fn unordered(mut self) -> Channel {
        self.unordered = true;
        self
    }

    fn priority(self) -> Priority {
        if self.high {
            Priority::High
        } else {
            Priority::Low
        }
    }

    fn flags(self) -> u8 {
        if self.unordered {
            FLAG_UNORDERED
        } else {
            0
        }
    }
}

/// The comm layer of one rank. Cheap to clone (shared).
#[derive(Clone)]
pub struct Worker {
    core: Arc<Core>,
    free_lanes: Arc<Mutex<Vec<usize>>>,
    /// Held for its `Drop`, which stops the progress thread when the last clone goes.
    _progress: Arc<ProgressThread>,
}

struct ProgressThread {
    stop: Arc<AtomicBool>,
    core: Arc<Core>,
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.core.wake_waiters();
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("rank", &self.core.rank)
            .field("size", &self.core.size)
            .field("routes", &self.core.routes)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Builds the comm layer over the job's transports; `routes[r]` says which one
    /// reaches rank `r`.
    pub fn new(
        boot: Arc<Bootstrap>,
        cfg: Config,
        shm: Option<Arc<dyn Transport>>,
        tcp: Option<Arc<dyn Transport>>,
        routes: Vec<Route>,
        local_ranks: usize,
    ) -> Worker {
        // Chunks of fragmented transfers: the configured size through shared memory
        // (pipelined through the rings); larger through TCP, where each chunk costs a
        // system call.
        let header = spools_proto::am::BULK_HEADER_LEN;
        let fragment = shm.as_ref().map_or(cfg.fragment_size as usize, |t| {
            (cfg.fragment_size as usize).min(t.caps().max_message - header)
        });
        let fragment_tcp = tcp.as_ref().map_or(fragment, |t| {
            TCP_FRAGMENT
                .max(cfg.fragment_size as usize)
                .min(t.caps().max_message - header)
        });
        let lanes = usize::from(cfg.lanes);
        let uses_shm = routes.contains(&Route::Shm);
        let uses_tcp = routes.contains(&Route::Tcp);
        let mut active = Vec::new();
        if let (Some(s), true) = (&shm, uses_shm) {
            active.push(s.clone());
        }
        if let (Some(t), true) = (&tcp, uses_tcp) {
            active.push(t.clone());
        }
        let core = Arc::new(Core {
            active,
            uses_tcp,
            rank: boot.rank(),
            size: boot.size(),
            spin: Duration::from_micros(cfg.spin_us),
            oversubscribed: local_ranks > spools_fabric::cpu_count(),
            fragment,
            fragment_tcp,
            cfg,
            boot,
            shm,
            tcp,
            routes,
            registry: RwLock::new(registry::Registry::default()),
            regions: Arc::new(RwLock::new(Default::default())),
            next_key: AtomicU32::new(1),
            ops: Mutex::new(Default::default()),
            next_token: AtomicU32::new(1),
            errors: Mutex::new(Default::default()),
            poll: Mutex::new(Default::default()),
            self_queue: Mutex::new(Default::default()),
            self_pending: AtomicUsize::new(0),
            error_count: AtomicUsize::new(0),
            table_len: AtomicUsize::new(0),
            registry_gen: AtomicUsize::new(1),
            pollers: RwLock::new(Vec::new()),
            has_pollers: AtomicBool::new(false),
        });
        let stop = Arc::new(AtomicBool::new(false));
        if core.cfg.progress_thread {
            let (c, s) = (core.clone(), stop.clone());
            let _ = std::thread::Builder::new()
                .name("spools-progress".into())
                .spawn(move || {
                    let mut backoff = Backoff::new(c.spin, c.oversubscribed);
                    while !s.load(Ordering::SeqCst) {
                        match c.progress() {
                            Ok(n) if n > 0 => backoff.reset(),
                            Ok(_) => {
                                if !backoff.spin() {
                                    c.sleep(NAP);
                                    backoff.reset();
                                }
                            }
                            Err(e) => {
                                c.push_error(e);
                                if c.boot.state().troubled() {
                                    return;
                                }
                                // Do not spin on an error that repeats.
                                c.sleep(NAP);
                            }
                        }
                    }
                });
        }
        // Lane 0 belongs to the progress engine; with a single lane, endpoints share it
        // (the transports serialise a lane's senders).
        let free_lanes = if lanes > 1 {
            (1..lanes).rev().collect()
        } else {
            vec![0]
        };
        Worker {
            _progress: Arc::new(ProgressThread {
                stop,
                core: core.clone(),
            }),
            core,
            free_lanes: Arc::new(Mutex::new(free_lanes)),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.core.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.core.size
    }

    /// How this rank reaches `peer`.
    ///
    /// # Errors
    /// [`AmError::BadRank`].
    pub fn route(&self, peer: u32) -> Result<Route, AmError> {
        self.core.check_rank(peer)?;
        Ok(self.core.routes[peer as usize])
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.core.cfg
    }

    /// Registers a handler under `name` on this rank. Call [`Worker::sync_handlers`]
    /// afterwards (on every rank) to give it a global id.
    ///
    /// # Errors
    /// [`AmError::DuplicateHandler`].
    pub fn register(
        &self,
        name: &str,
        h: impl Fn(&ActiveMessage<'_>) + Send + Sync + 'static,
    ) -> Result<(), AmError> {
        let r = self
            .core
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .register(name, Arc::new(h));
        self.core.registry_gen.fetch_add(1, Ordering::Release);
        r
    }

    /// Collective: merges every rank's handler names at rank 0 and installs the same
    /// global name-to-id table on every rank. Names already in the table keep their ids;
    /// new ones are appended.
    ///
    /// # Errors
    /// [`AmError::Boot`] if a rank died.
    pub fn sync_handlers(&self) -> Result<(), AmError> {
        let mine = self
            .core
            .registry
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .local_names();
        let all = self.core.boot.allgather(&mine)?;
        let merged = if self.core.rank == 0 {
            self.core
                .registry
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .merge(&all)
        } else {
            Vec::new()
        };
        let table = self.core.boot.broadcast(0, &merged)?;
        let mut reg = self
            .core
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        reg.install(&table);
        self.core
            .table_len
            .store(reg.table().len(), Ordering::Release);
        self.core.registry_gen.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The global id of a handler name.
    ///
    /// # Errors
    /// [`AmError::UnknownHandlerName`].
    pub fn handler_id(&self, name: &str) -> Result<HandlerId, AmError> {
        self.core
            .registry
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .id(name)
    }

    /// The global handler table (index = id).
    pub fn handler_table(&self) -> Vec<String> {
        self.core
            .registry
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .table()
            .to_vec()
    }

    /// Registers a zero-filled memory region of `len` bytes.
    ///
    /// # Errors
    /// [`AmError::BadArgument`] if it cannot be allocated.
    pub fn region(&self, len: usize) -> Result<Region, AmError> {
        let key = self.core.next_key.fetch_add(1, Ordering::Relaxed);
        Region::new(key, len, self.core.regions.clone())
    }

    /// Runs handlers for the messages that have arrived; returns how many were handled.
    ///
    /// # Errors
    /// Errors reported back by targets ([`AmError::NoHandlerAtTarget`]), transport
    /// failures, malformed messages.
    pub fn poll(&self) -> Result<usize, AmError> {
        let n = self.core.progress()?;
        if let Some(e) = self.core.take_error() {
            return Err(e);
        }
        Ok(n)
    }

    /// One round of progress, like [`Worker::poll`], but errors that targets reported back
    /// stay queued for `poll` (for upper layers that drive progress on their own behalf).
    ///
    /// # Errors
    /// Transport failures and malformed messages.
    pub fn progress(&self) -> Result<usize, AmError> {
        self.core.progress()
    }

    /// Adds work to every progress round, on whichever thread progresses (the caller of
    /// `poll` or a wait, or the progress thread). Upper layers use it to send what their
    /// handlers decided (handlers must not send: they run under the progress lock). The
    /// poller must not block; it sends with [`Worker::try_send_short_now`] and
    /// [`Worker::try_send_bulk_now`].
    pub fn add_poller(&self, p: Poller) {
        self.core
            .pollers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(p);
        self.core.has_pollers.store(true, Ordering::Release);
    }

    /// The largest payload a bulk message to `peer` carries in one fragment (what
    /// [`Worker::try_send_bulk_now`] accepts).
    pub fn max_fragment(&self, peer: u32) -> usize {
        self.core
            .fragment_for(peer)
            .min(self.core.cfg.bulk_limit as usize)
    }

    /// Tries to send a short message on the progress engine's lane without waiting;
    /// `Ok(false)` if the peer has no room now. A dead peer counts as sent (its failure
    /// is reported by every wait).
    ///
    /// # Errors
    /// [`AmError::UnknownHandlerId`], [`AmError::BadRank`], transport failures.
    pub fn try_send_short_now(
        &self,
        peer: u32,
        h: HandlerId,
        args: [u64; 4],
        channel: u16,
    ) -> Result<bool, AmError> {
        self.core.check_rank(peer)?;
        if h.0 as usize >= self.core.table_len.load(Ordering::Relaxed) {
            return Err(AmError::UnknownHandlerId(h.0));
        }
        let mut b = [0u8; SHORT_LEN];
        Short {
            handler: h.0,
            channel,
            flags: 0,
            args,
        }
        .write(&mut b);
        self.core.try_send_lane0(Priority::Low, peer, &[&b])
    }

    /// Tries to send a bulk message of one fragment (at most [`Worker::max_fragment`]) on
    /// the progress engine's lane without waiting; `Ok(false)` if the peer has no room.
    ///
    /// # Errors
    /// [`AmError::TooLarge`] above one fragment, and as [`Worker::try_send_short_now`].
    pub fn try_send_bulk_now(
        &self,
        peer: u32,
        h: HandlerId,
        args: [u64; 4],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        self.core.check_rank(peer)?;
        if h.0 as usize >= self.core.table_len.load(Ordering::Relaxed) {
            return Err(AmError::UnknownHandlerId(h.0));
        }
        let limit = self.max_fragment(peer);
        if payload.len() > limit {
            return Err(AmError::TooLarge {
                len: payload.len(),
                limit,
            });
        }
        let mut hdr = Vec::with_capacity(spools_proto::am::BULK_HEADER_LEN);
        AmHeader::Bulk(Bulk {
            handler: h.0,
            channel: 0,
            flags: 0,
            total: payload.len() as u32,
            offset: 0,
            args,
        })
        .encode(&mut hdr);
        self.core
            .try_send_lane0(Priority::Low, peer, &[&hdr, payload])
    }

    /// Wakes threads of this rank sleeping in a wait or in the progress thread (after an
    /// upper layer queued work for its poller outside a handler).
    pub fn wake(&self) {
        self.core.wake_waiters();
    }

    /// The job's bootstrap (rank, size, hosts, the watchdog's view of dead ranks).
    pub fn bootstrap(&self) -> &Arc<Bootstrap> {
        &self.core.boot
    }

    /// Polls until `cond()` holds: spin, then sleep until woken.
    ///
    /// # Errors
    /// As [`Worker::poll`]; a dead rank anywhere in the job.
    pub fn wait_for(&self, cond: impl FnMut() -> bool) -> Result<(), AmError> {
        self.core.wait_until(cond, None, true)
    }

    /// [`Worker::wait_for`] that gives up when `stop()` holds while nothing progresses
    /// (an upper layer's own reason the condition can never hold): `Ok(true)` when `cond`
    /// held, `Ok(false)` when it gave up.
    ///
    /// # Errors
    /// As [`Worker::wait_for`].
    pub fn wait_for_or(
        &self,
        cond: impl FnMut() -> bool,
        stop: impl FnMut() -> bool,
    ) -> Result<bool, AmError> {
        self.core.wait_until_or(cond, stop, None, true)
    }

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
            .ok_or(AmError::NoLane {
                lanes: usize::from(self.core.cfg.lanes),
            })?;
        Ok(Endpoint::new(self.clone(), lane))
    }

    /// Hooks for the bootstrap layer: while a rank waits in a runtime collective or in
    /// `finalize`, it keeps serving incoming messages (so that peers waiting on it, for
    /// instance for a get, are not stuck) and sleeps on the transport when idle. The
    /// hooks hold the comm layer weakly.
    pub fn bootstrap_hooks(
        &self,
    ) -> (
        spools_boot::client::ProgressHook,
        spools_boot::client::SleepHook,
    ) {
        let w = Arc::downgrade(&self.core);
        let w2 = w.clone();
        (
            Arc::new(move || {
                w.upgrade().map_or(0, |c| {
                    c.progress().unwrap_or_else(|e| {
                        c.push_error(e);
                        0
                    })
                })
            }),
            Arc::new(move |d| {
                if let Some(c) = w2.upgrade() {
                    c.sleep(d);
                }
            }),
        )
    }
}

/// A sender with a lane of its own: one per thread that sends. Batched messages wait in
/// its queue until the batch is full or [`Endpoint::flush`].
pub struct Endpoint {
    comm: Worker,
    lane: usize,
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
        let _ = self.flush();
        self.comm
            .free_lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.lane);
    }
}

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
    fn new(comm: Worker, lane: usize) -> Endpoint {
        let n = comm.size() as usize;
        Endpoint {
            comm,
            lane,
            batches: vec![Vec::new(); n],
            batch_count: vec![0; n],
            pending: Vec::new(),
        }
    }

    /// The comm layer this endpoint belongs to.
    pub fn worker(&self) -> &Worker {
        &self.comm
    }

    /// The lane it sends on.
    pub fn lane(&self) -> usize {
        self.lane
    }

    fn core(&self) -> &Core {
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

    fn flush_peer(&mut self, peer: u32) -> Result<(), AmError> {
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

    fn new_op(&self, is_get: bool, dest: usize, len: usize) -> u32 {
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
                },
            );
        token
    }

    fn finish_op(
        &self,
        peer: u32,
        token: u32,
        op: &'static str,
        key: RegionKey,
        offset: u64,
        len: u64,
    ) -> Result<(), AmError> {
        let _guard = OpGuard {
            core: self.core(),
            token,
        };
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
        let code = core
            .ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&token)
            .map_or(StatusCode::Malformed, |o| o.code);
        match code {
            StatusCode::Ok => Ok(()),
            StatusCode::UnknownRegion => Err(AmError::UnknownRegion { peer, key }),
            StatusCode::OutOfBounds => Err(AmError::OutOfBounds {
                op,
                peer,
                key,
                offset,
                len,
            }),
            StatusCode::UnknownHandler | StatusCode::Malformed => Err(AmError::Protocol {
                peer,
                what: format!("{op} answered with {code:?}"),
            }),
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
        let token = self.new_op(false, 0, 0);
        let frag = self.core().fragment_for(peer);
        let total = data.len() as u64;
        let mut off = 0usize;
        let send = (|| loop {
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
                return Ok::<(), AmError>(());
            }
        })();
        if let Err(e) = send {
            self.core()
                .ops
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&token);
            return Err(e);
        }
        self.finish_op(peer, token, "put", key, offset, total)
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
        let token = self.new_op(true, buf.as_mut_ptr() as usize, buf.len());
        let mut hdr = Vec::with_capacity(32);
        AmHeader::Get(Get {
            token,
            key,
            offset,
            len: buf.len() as u64,
        })
        .encode(&mut hdr);
        if let Err(e) = self
            .core()
            .send_raw(self.lane, Priority::Low, peer, &[&hdr])
        {
            self.core()
                .ops
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&token);
            return Err(e);
        }
        self.finish_op(peer, token, "get", key, offset, buf.len() as u64)
    }
}
