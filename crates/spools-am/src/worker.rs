//! The active-message layer of one rank: the [`Worker`] (handler registry, memory regions,
//! progress, waits) and its optional progress thread.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_fabric::lock::RankLock;
use spools_fabric::{Backoff, Pace, Priority, Transport};
use spools_heap::PeerHeaps;
use spools_proto::am::{AmHeader, Bulk, Short, SHORT_LEN};

use crate::core::{Core, Interrupt, Route, NAP, PROGRESS_SPIN};
use crate::error::AmError;
use crate::keys::KeyHold;
use crate::message::ActiveMessage;
use crate::poller::Poller;
use crate::region::Region;
use crate::registry::{self, HandlerId};

/// Chunk size of fragmented transfers over TCP.
const TCP_FRAGMENT: usize = 1 << 20;

/// The active-message layer of one rank (in UCX terms, its worker): handler registry,
/// memory regions, progress and waits. Cheap to clone (shared); senders open an
/// [`Endpoint`](crate::Endpoint) each.
#[derive(Clone)]
pub struct Worker {
    pub(crate) core: Arc<Core>,
    pub(crate) free_lanes: Arc<Mutex<Vec<usize>>>,
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
    /// Builds the active-message layer over the job's transports; `routes[r]` says which
    /// one reaches rank `r`.
    ///
    /// # Errors
    /// [`AmError::ThreadSpawn`] when `progress_thread` is configured and the thread cannot
    /// be started.
    pub fn new(
        boot: Arc<Bootstrap>,
        cfg: Config,
        shm: Option<Arc<dyn Transport>>,
        net: Option<Arc<dyn Transport>>,
        routes: Vec<Route>,
        local_ranks: usize,
    ) -> Result<Worker, AmError> {
        // Chunks of fragmented transfers: the configured size through shared memory
        // (pipelined through the rings); larger through TCP, where each chunk costs a
        // system call.
        let header = spools_proto::am::BULK_HEADER_LEN;
        let fragment = shm.as_ref().map_or(cfg.fragment_size as usize, |t| {
            (cfg.fragment_size as usize).min(t.caps().max_message - header)
        });
        let fragment_net = net.as_ref().map_or(fragment, |t| {
            TCP_FRAGMENT
                .max(cfg.fragment_size as usize)
                .min(t.caps().max_message - header)
        });
        let lanes = usize::from(cfg.lanes);
        let uses_shm = routes.contains(&Route::Shm);
        let uses_net = routes.contains(&Route::Net);
        let mut active = Vec::new();
        if let (Some(s), true) = (&shm, uses_shm) {
            active.push(s.clone());
        }
        if let (Some(t), true) = (&net, uses_net) {
            active.push(t.clone());
        }
        // One thread drives the rank (thread level single or funneled): it owns the
        // progress state (no lock).
        let level = cfg.thread_level_in_effect();
        let core = Arc::new(Core {
            active,
            uses_net,
            rank: boot.rank(),
            size: boot.size(),
            hold: Duration::from_micros(cfg.spin_us),
            local_ranks,
            cpus: spools_fabric::cpu_count(),
            last_pace: AtomicU8::new(u8::from(local_ranks > spools_fabric::cpu_count())),
            woken_at: AtomicU64::new(0),
            epoch: Instant::now(),
            fragment,
            fragment_net,
            cfg,
            heaps: Arc::new(PeerHeaps::new(boot.job(), boot.secret().clone())),
            boot,
            shm,
            net,
            routes,
            registry: RwLock::new(registry::Registry::default()),
            regions: Arc::new(RwLock::new(Default::default())),
            keys: Arc::new(crate::keys::Keys::new()),
            ops: Mutex::new(Default::default()),
            next_token: AtomicU32::new(1),
            errors: Mutex::new(Default::default()),
            poll: RankLock::new(Default::default(), level),
            self_queue: Mutex::new(Default::default()),
            self_pending: AtomicUsize::new(0),
            error_count: AtomicUsize::new(0),
            table_len: AtomicUsize::new(0),
            registry_gen: AtomicUsize::new(1),
            pollers: RwLock::new(Vec::new()),
            pollers_added: AtomicUsize::new(0),
            interrupt: RwLock::new(None),
        });
        let stop = Arc::new(AtomicBool::new(false));
        if core.cfg.progress_thread {
            let (c, s) = (core.clone(), stop.clone());
            std::thread::Builder::new()
                .name("spools-progress".into())
                .spawn(move || {
                    // Polls briefly, then sleeps until a message or `wake` comes.
                    let hold = c.hold.min(PROGRESS_SPIN);
                    let mut backoff = Backoff::new(hold, Pace::Spin);
                    // Its sleeps do not make the rank asleep for other ranks' pace, and it
                    // does not look at the machine itself (that would publish its CPU as
                    // the rank's): it polls at the pace the application's waits chose.
                    let sleep = || {
                        if let Some(t) = &c.shm {
                            t.note_helper_sleep(true);
                        }
                        c.sleep(NAP);
                        if let Some(t) = &c.shm {
                            t.note_helper_sleep(false);
                        }
                    };
                    while !s.load(Ordering::SeqCst) {
                        match c.progress() {
                            Ok(n) if n > 0 => backoff.reset(),
                            Ok(_) => {
                                if !backoff.spin(|| c.recorded_pace()) {
                                    sleep();
                                }
                            }
                            Err(e) => {
                                c.push_error(e);
                                if c.boot.state().troubled() {
                                    return;
                                }
                                // Do not spin on an error that repeats.
                                sleep();
                            }
                        }
                    }
                })
                .map_err(|source| AmError::ThreadSpawn {
                    what: "progress",
                    source,
                })?;
        }
        // Lane 0 belongs to the progress engine; with a single lane, endpoints share it
        // (the transports serialise a lane's senders).
        let free_lanes = if lanes > 1 {
            (1..lanes).rev().collect()
        } else {
            vec![0]
        };
        Ok(Worker {
            _progress: Arc::new(ProgressThread {
                stop,
                core: core.clone(),
            }),
            core,
            free_lanes: Arc::new(Mutex::new(free_lanes)),
        })
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
    /// [`AmError::RegionAlloc`] if it cannot be allocated.
    pub fn region(&self, len: usize) -> Result<Region, AmError> {
        let key = KeyHold::take(&self.core.keys).ok_or(AmError::RegionAlloc { len })?;
        Region::new(key, len, self.core.regions.clone(), self.core.rma_net())
    }

    /// [`Worker::region`] in the shared heap: puts and gets from ranks of this host copy
    /// straight into and out of it (one copy, no message to this rank), others go through
    /// the transport as for any region. Falls back to an ordinary region (see
    /// [`Region::is_shared`]) if shared memory cannot hold it. Its segment is named
    /// under the job's prefix in `/dev/shm` while it lives.
    ///
    /// # Errors
    /// [`AmError::RegionAlloc`] if memory cannot be allocated.
    pub fn shared_region(&self, len: usize) -> Result<Region, AmError> {
        let key = KeyHold::take(&self.core.keys).ok_or(AmError::RegionAlloc { len })?;
        let who = (
            self.core.boot.job(),
            self.core.rank,
            self.core.boot.secret(),
        );
        Region::new_shared(
            key,
            len,
            self.core.regions.clone(),
            who,
            self.core.rma_net(),
        )
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
        self.core.pollers_added.fetch_add(1, Ordering::Release);
    }

    /// Sets (or, with `None`, clears) the check every wait of this rank asks before it
    /// sleeps; when it returns `true` the wait ends with [`AmError::Interrupted`]. A
    /// language binding uses it so that a signal ends a blocking call (Python's Ctrl-C
    /// raises `KeyboardInterrupt`). It runs on the waiting thread, only when the wait is
    /// about to sleep, so it costs nothing while messages flow.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let world = spools::init().unwrap();
    /// world.worker().set_interrupt(Some(Arc::new(|| true)));
    /// let never = world.worker().wait_for(|| false);
    /// assert!(matches!(never, Err(spools::AmError::Interrupted)));
    /// world.worker().set_interrupt(None);
    /// ```
    pub fn set_interrupt(&self, f: Option<Interrupt>) {
        *self
            .core
            .interrupt
            .write()
            .unwrap_or_else(PoisonError::into_inner) = f;
    }

    /// Asks the interrupt check (see [`Worker::set_interrupt`]): a wait that sleeps
    /// somewhere of its own (flags in shared memory) calls it before each sleep, as the
    /// waits of this crate do.
    ///
    /// # Errors
    /// [`AmError::Interrupted`] when the check says so.
    pub fn check_interrupt(&self) -> Result<(), AmError> {
        self.core.check_interrupt()
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

    /// How long a wait of this rank polls before it sleeps (`spin_us`): a wait that
    /// sleeps somewhere of its own (flags in shared memory) polls this long first, as
    /// the waits of this crate do.
    pub fn hold(&self) -> Duration {
        self.core.hold
    }

    /// Whether polls yield the CPU now (see [`Pace`]): the job's ranks awake on this host
    /// outnumber its CPUs, or one of them was last seen on this rank's CPU; quick looks
    /// that hold the CPU are then skipped. Asks the machine (a look at every local
    /// rank's segment).
    pub fn oversubscribed(&self) -> bool {
        self.core.pace().yields()
    }

    /// Whether polls yielded the CPU at the last look at the machine (see
    /// [`Worker::oversubscribed`]), without looking again: a load of this rank's own
    /// memory, for the fast path of a call that should not read every local rank's
    /// segment (waits look again as they go on).
    pub fn seemed_oversubscribed(&self) -> bool {
        self.core.recorded_pace().yields()
    }

    /// Runs `sleep`, a sleep of this thread outside the transports (on flags in memory
    /// shared with other ranks), counted as such for the pace of other ranks' waits.
    pub fn nap<R>(&self, sleep: impl FnOnce() -> R) -> R {
        let shm = self.core.shm.as_ref();
        if let Some(s) = shm {
            s.note_nap(true);
        }
        let r = sleep();
        if let Some(s) = shm {
            s.note_nap(false);
        }
        self.core.note_woken();
        r
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

    /// This job's cache of same-host peers' shared-heap segments: the one place a layer
    /// above maps a peer's heap block (one cache per world, never a process's).
    pub fn heaps(&self) -> &Arc<PeerHeaps> {
        &self.core.heaps
    }

    /// Whether `other` is this worker (a clone of it): the same job's.
    pub fn same(&self, other: &Worker) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
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
        self.core.wait_until_or(cond, stop, None, None, true, true)
    }

    /// [`Worker::wait_for_or`] for a condition that a message from job rank `source`
    /// brings about (a receive from a known rank): most polls read only that rank's
    /// messages, one in eight is a whole progress round.
    ///
    /// # Errors
    /// As [`Worker::wait_for_or`].
    pub fn wait_for_from(
        &self,
        source: u32,
        cond: impl FnMut() -> bool,
        stop: impl FnMut() -> bool,
    ) -> Result<bool, AmError> {
        self.core
            .wait_until_or(cond, stop, None, Some(source), true, true)
    }

    /// [`Worker::wait_for_or`] for a condition that no transport signals (flags in memory
    /// shared with other ranks): it never sleeps on the transports, and gives up
    /// (`Ok(false)`) once it polled for [`Worker::hold`], for the caller to sleep where
    /// its flags ring.
    ///
    /// # Errors
    /// As [`Worker::wait_for_or`].
    pub fn wait_for_flags(
        &self,
        cond: impl FnMut() -> bool,
        stop: impl FnMut() -> bool,
    ) -> Result<bool, AmError> {
        self.core.wait_until_or(cond, stop, None, None, true, false)
    }

    /// Hooks for the bootstrap layer: while a rank waits in a runtime collective or in
    /// `finalize`, it keeps serving incoming messages (so that peers waiting on it, for
    /// instance for a get, are not stuck) and sleeps on the transport when idle. The
    /// hooks hold the active-message layer weakly.
    pub fn bootstrap_hooks(
        &self,
    ) -> (
        spools_boot::client::ProgressHook,
        spools_boot::client::SleepHook,
    ) {
        let w = Arc::downgrade(&self.core);
        let w2 = w.clone();
        (
            // A bootstrap wait may run on a thread that does not own a rank at thread
            // level single or funneled (the exit hook, on whichever thread exits): it
            // then waits without serving, rather than end the process.
            Arc::new(move || {
                w.upgrade()
                    .filter(|c| c.poll.reachable_here())
                    .map_or(0, |c| {
                        c.progress().unwrap_or_else(|e| {
                            c.push_error(e);
                            0
                        })
                    })
            }),
            Arc::new(move |d| match w2.upgrade() {
                Some(c) if c.poll.reachable_here() => c.sleep(d),
                _ => std::thread::sleep(d.min(Duration::from_millis(1))),
            }),
        )
    }
}
