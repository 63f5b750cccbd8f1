//! The rank's shared state ([`Core`]): routing, blocking sends with back-pressure, waits
//! that drive progress, and the queue of errors reported back by peers. The receive side
//! lives in `progress.rs` (the progress round) and `dispatch.rs` (one incoming message).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_fabric::lock::RankLock;
use spools_fabric::{Backoff, FabricError, Pace, Priority, RemoteRegion, Transport};
use spools_heap::PeerHeaps;
use spools_proto::am::StatusCode;

use crate::error::AmError;
use crate::inbox::PollState;
use crate::poller::Poller;
use crate::region::Regions;
use crate::registry::Registry;

/// A rank woken within this long answers its peers closely (see `Core::wait_until_or`).
pub(crate) const RECENT: Duration = Duration::from_millis(1);

/// Longest the progress thread polls before it sleeps: it runs beside the application's
/// threads, which need the CPU more than it needs a quick start.
pub(crate) const PROGRESS_SPIN: Duration = Duration::from_micros(20);

/// A wait for a known rank's message reads only that rank's rings, except in its first
/// poll, one poll of this many and before it sleeps, which are whole progress rounds
/// (every sender, every transport, the pollers).
pub(crate) const WHOLE_ROUND: u32 = 8;

/// A wait asks what else may end it (a dead rank, an error a target sent back, the
/// caller's reason to give up) at its first empty poll and once in this many after.
pub(crate) const RARE: u32 = 16;

/// Longest single sleep in a wait; waits re-check the watchdog at least this often.
pub(crate) const NAP: Duration = Duration::from_millis(50);

/// Which transport reaches a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// This rank itself.
    Local,
    /// Shared memory.
    Shm,
    /// The network between hosts: TCP, or libfabric (`SPOOLS_TRANSPORT=ofi`, or `auto`
    /// with a high-speed provider).
    Net,
}

pub(crate) struct OpState {
    /// A get (data comes back) rather than a put (only a status).
    pub(crate) is_get: bool,
    pub(crate) done: bool,
    pub(crate) code: StatusCode,
    /// Destination of a get: address and length of the caller's buffer.
    pub(crate) dest: usize,
    pub(crate) len: usize,
    /// The answer to a request for a region's network key: the region, if exposed.
    pub(crate) remote: Option<RemoteRegion>,
}

pub(crate) struct Core {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) cfg: Config,
    pub(crate) boot: Arc<Bootstrap>,
    /// This job's cache of same-host peers' shared-heap segments (one per world).
    pub(crate) heaps: Arc<PeerHeaps>,
    pub(crate) shm: Option<Arc<dyn Transport>>,
    /// The network transport (TCP or libfabric).
    pub(crate) net: Option<Arc<dyn Transport>>,
    pub(crate) routes: Vec<Route>,
    /// The transports some route uses (the only ones worth polling).
    pub(crate) active: Vec<Arc<dyn Transport>>,
    pub(crate) uses_net: bool,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) regions: Arc<Regions>,
    /// The keys of this rank's regions and loans.
    pub(crate) keys: Arc<crate::keys::Keys>,
    pub(crate) ops: Mutex<HashMap<u32, OpState>>,
    pub(crate) next_token: AtomicU32,
    pub(crate) errors: Mutex<VecDeque<AmError>>,
    /// The progress state: locked, or owned by the rank's one thread (thread level
    /// single or funneled).
    pub(crate) poll: RankLock<PollState>,
    pub(crate) self_queue: Mutex<VecDeque<(u16, Priority, Vec<u8>)>>,
    /// Messages in `self_queue` (checked without the lock).
    pub(crate) self_pending: AtomicUsize,
    /// Errors in `errors` (checked without the lock).
    pub(crate) error_count: AtomicUsize,
    /// Length of the global handler table (checked without the registry lock).
    pub(crate) table_len: AtomicUsize,
    /// Bumped whenever handlers are registered or the table is installed.
    pub(crate) registry_gen: AtomicUsize,
    /// How long a wait polls before it sleeps (`spin_us`).
    pub(crate) hold: Duration,
    /// The job's ranks on this host (all awake, as far as a host without shared memory
    /// can tell).
    pub(crate) local_ranks: usize,
    /// CPUs this process may run on.
    pub(crate) cpus: usize,
    /// The pace the last look at the machine chose (a [`Pace`] as `u8`: 0 spin, 1
    /// yield, 2 yield to a neighbour), for the first polls of the next wait.
    pub(crate) last_pace: AtomicU8,
    /// When a sleep of this rank last ended (nanoseconds since `epoch`; 0: never).
    pub(crate) woken_at: AtomicU64,
    /// The origin of `woken_at`.
    pub(crate) epoch: Instant,
    /// Chunk size of fragmented transfers through shared memory.
    pub(crate) fragment: usize,
    /// Chunk size of fragmented transfers through the network transport.
    pub(crate) fragment_net: usize,
    /// Work of upper layers run at the end of every progress round (see `Worker::add_poller`).
    pub(crate) pollers: RwLock<Vec<Poller>>,
    /// Pollers added so far (checked without the lock: a progress round copies `pollers`
    /// into its own state only when this moved, and takes no lock for them otherwise).
    pub(crate) pollers_added: AtomicUsize,
    /// The process's interrupt check (see `Worker::set_interrupt`), asked before a wait
    /// sleeps.
    pub(crate) interrupt: RwLock<Option<Interrupt>>,
}

/// An interrupt check a wait asks before it sleeps: `true` ends the wait with
/// [`AmError::Interrupted`]. A language binding uses it to let a signal (Ctrl-C) end a
/// blocking call.
pub type Interrupt = Arc<dyn Fn() -> bool + Send + Sync>;

impl Core {
    pub(crate) fn transport(&self, peer: u32) -> Result<&Arc<dyn Transport>, AmError> {
        let t = match self.routes.get(peer as usize) {
            Some(Route::Shm) => self.shm.as_ref(),
            Some(Route::Net) => self.net.as_ref(),
            Some(Route::Local) => None,
            None => {
                return Err(AmError::BadRank {
                    rank: peer,
                    size: self.size,
                })
            }
        };
        // A match, not `ok_or`: the error value `ok_or` builds is dropped on every call,
        // and dropping an `AmError` is a call (measured: 3 % of a ping-pong's time).
        match t {
            Some(t) => Ok(t),
            None => Err(AmError::Fabric(FabricError::Unreachable(peer))),
        }
    }

    /// The network transport when some peer is reached through it and it offers remote
    /// memory access (regions are then exposed to it).
    pub(crate) fn rma_net(&self) -> Option<Arc<dyn Transport>> {
        self.net
            .as_ref()
            .filter(|t| self.uses_net && t.rma().is_some())
            .cloned()
    }

    /// Chunk size of fragmented transfers to `peer`.
    pub(crate) fn fragment_for(&self, peer: u32) -> usize {
        match self.routes.get(peer as usize) {
            Some(Route::Net) => self.fragment_net,
            _ => self.fragment,
        }
    }

    pub(crate) fn check_rank(&self, peer: u32) -> Result<(), AmError> {
        if peer >= self.size {
            return Err(AmError::BadRank {
                rank: peer,
                size: self.size,
            });
        }
        Ok(())
    }

    /// Sends one message, waiting (and serving incoming traffic) while the peer is full.
    pub(crate) fn send_raw(
        &self,
        lane: usize,
        prio: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<(), AmError> {
        if peer == self.rank {
            self.check_rank(peer)?;
            self.self_queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back((lane as u16, prio, parts.concat()));
            self.self_pending.fetch_add(1, Ordering::Release);
            return Ok(());
        }
        let t = self.transport(peer)?;
        if t.try_send(lane, prio, peer, parts)? {
            return Ok(());
        }
        let mut backoff = self.backoff();
        loop {
            // Serve our own incoming traffic while the peer is full, so that two ranks
            // flooding each other both make progress.
            if self.progress()? > 0 {
                backoff.reset();
            }
            if t.try_send(lane, prio, peer, parts)? {
                return Ok(());
            }
            if !backoff.spin(|| self.pace()) {
                t.wait(NAP);
            }
        }
    }

    /// Waits until `done()` holds, driving progress: spin, then sleep until woken.
    /// Fails when `peer` dies (or, with no peer, when any rank does). With
    /// `report_async`, errors that targets sent back (unknown handlers) end the wait too.
    pub(crate) fn wait_until(
        &self,
        done: impl FnMut() -> bool,
        peer: Option<u32>,
        report_async: bool,
    ) -> Result<(), AmError> {
        self.wait_until_or(done, || false, peer, None, report_async, true)
            .map(|_| ())
    }

    /// [`Core::wait_until`] that also gives up, returning `Ok(false)`, when `stop()`
    /// holds while nothing progresses (asked at the first poll that found nothing, and
    /// at every [`RARE`]th after), or,
    /// without `sleeps`, once it polled for the hold time (the caller then sleeps
    /// elsewhere). With a `source` (the rank whose message `done` waits for), most
    /// polls read only that rank's messages, and one in [`WHOLE_ROUND`] is a whole
    /// round.
    pub(crate) fn wait_until_or(
        &self,
        mut done: impl FnMut() -> bool,
        mut stop: impl FnMut() -> bool,
        peer: Option<u32>,
        source: Option<u32>,
        report_async: bool,
        sleeps: bool,
    ) -> Result<bool, AmError> {
        let mut backoff = self.backoff();
        let mut idle = 0u32;
        let mut rounds = 0u32;
        loop {
            if done() {
                return Ok(true);
            }
            rounds = rounds.wrapping_add(1);
            // The first round is whole (a receive just posted may have queued its CTS or
            // pull for the pollers), then one in `WHOLE_ROUND`.
            let whole = source.is_none() || rounds % WHOLE_ROUND == 1;
            let n = match source {
                Some(s) if !whole => self.progress_from(s)?,
                _ => self.progress()?,
            };
            if n > 0 {
                // An error a target sent back came with this round's messages.
                if report_async {
                    if let Some(e) = self.take_error() {
                        return Err(e);
                    }
                }
                backoff.reset();
                idle = 0;
                continue;
            }
            idle += 1;
            // What ends a wait otherwise (a dead rank, the caller's own reason) comes
            // seldom and costs more to ask than a poll: asked at the first empty poll
            // and every `RARE` after (and at the first after every sleep).
            if idle % RARE == 1 {
                if report_async {
                    if let Some(e) = self.take_error() {
                        return Err(e);
                    }
                }
                let failure = match peer {
                    Some(p) => self.boot.state().failure_of(p),
                    None => self.boot.state().any_failure(),
                };
                if let Some(f) = failure {
                    return Err(AmError::Fabric(FabricError::PeerFailed(f)));
                }
                if stop() {
                    return Ok(false);
                }
            }
            // A peer this rank's last send woke from its sleep answers no sooner than its
            // wake-up time, and the scheduler often queues it on the waker's CPU, where
            // neither polling nor yielding lets it run (measured: the reply came only
            // once the waker slept, after its whole hold): wait for it asleep. Unless
            // this rank itself was woken a moment ago: then the two answer each other
            // closely, and sleeping at once would make them sleep and wake in turn for
            // every message; polling for the hold gets them out of it.
            // (`woke_a_sleeper` is asked first: asking clears it, also for waits that
            // never sleep here.)
            let early = idle == 1 && self.woke_a_sleeper() && sleeps && !self.woken_recently();
            if early || !backoff.spin(|| self.pace()) {
                if !sleeps {
                    return Ok(false);
                }
                // Never asleep with work of the pollers' queued (a CTS this receive
                // owes its sender, who waits for it): a round that read one rank's
                // messages only is followed by a whole one first.
                if !whole && self.progress()? > 0 {
                    backoff.reset();
                    idle = 0;
                    continue;
                }
                self.check_interrupt()?;
                self.sleep(NAP);
                // The job's health is looked at again right after every sleep.
                idle = 0;
            }
        }
    }

    /// A new wait's state: the hold time, and the pace the last look chose.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(self.hold, self.recorded_pace())
    }

    /// The pace the last look at the machine chose (without looking again).
    pub(crate) fn recorded_pace(&self) -> Pace {
        match self.last_pace.load(Ordering::Relaxed) {
            0 => Pace::Spin,
            1 => Pace::Yield,
            _ => Pace::YieldToNeighbour,
        }
    }

    /// The pace the machine calls for now: yield when the job's ranks awake on this
    /// host that may run on this rank's CPUs outnumber those CPUs, or one of them shares
    /// this rank's CPU (see [`Pace`]).
    pub(crate) fn pace(&self) -> Pace {
        let awake =
            (self.shm.as_ref())
                .and_then(|s| s.awake_local())
                .unwrap_or(spools_fabric::Awake {
                    ranks: self.local_ranks,
                    on_my_cpu: 0,
                });
        let pace = Pace::for_load(awake, self.cpus);
        let code = match pace {
            Pace::Spin => 0,
            Pace::Yield => 1,
            Pace::YieldToNeighbour => 2,
        };
        self.last_pace.store(code, Ordering::Relaxed);
        pace
    }

    /// [`AmError::Interrupted`] when the process's interrupt check says so.
    pub(crate) fn check_interrupt(&self) -> Result<(), AmError> {
        let hook = self
            .interrupt
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match hook {
            Some(f) if f() => Err(AmError::Interrupted),
            _ => Ok(()),
        }
    }

    /// Sleeps on the transports until woken or `timeout` passed.
    pub(crate) fn sleep(&self, timeout: Duration) {
        self.sleep_on_transports(timeout);
        self.note_woken();
    }

    /// Whether a sleep of this rank ended within the last [`RECENT`].
    pub(crate) fn woken_recently(&self) -> bool {
        let at = self.woken_at.load(Ordering::Relaxed);
        at != 0 && self.epoch.elapsed().as_nanos() as u64 - at < RECENT.as_nanos() as u64
    }

    /// Records that a sleep of this rank just ended.
    pub(crate) fn note_woken(&self) {
        let now = (self.epoch.elapsed().as_nanos() as u64).max(1);
        self.woken_at.store(now, Ordering::Relaxed);
    }

    fn sleep_on_transports(&self, timeout: Duration) {
        match (&self.shm, &self.net) {
            (Some(s), Some(t)) if self.routes.contains(&Route::Net) => {
                if self.routes.contains(&Route::Shm) {
                    // Both in use: one sleep in the TCP event loop, which also watches
                    // the bell local senders ring while this rank sleeps there.
                    match s.bell() {
                        Some(bell) => {
                            if s.begin_sleep_elsewhere() {
                                t.wait_with(bell, timeout);
                            }
                            s.end_sleep_elsewhere();
                        }
                        None => {
                            s.wait(Duration::from_millis(1).min(timeout));
                            t.wait(Duration::from_millis(1).min(timeout));
                        }
                    }
                } else {
                    t.wait(timeout)
                }
            }
            (Some(s), _) => s.wait(timeout),
            (None, Some(t)) => t.wait(timeout),
            (None, None) => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }

    /// Whether a send woke a sleeping peer since the last call (shared memory tells).
    fn woke_a_sleeper(&self) -> bool {
        self.shm.as_ref().is_some_and(|s| s.take_roused())
    }

    pub(crate) fn wake_waiters(&self) {
        if let Some(s) = &self.shm {
            s.wake();
        }
        if let Some(t) = &self.net {
            t.wake();
        }
    }

    pub(crate) fn try_send_lane0(
        &self,
        prio: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, AmError> {
        if peer == self.rank {
            self.self_queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back((0, prio, parts.concat()));
            self.self_pending.fetch_add(1, Ordering::Release);
            return Ok(true);
        }
        let t = self.transport(peer)?;
        match t.try_send(0, prio, peer, parts) {
            Ok(sent) => Ok(sent),
            // A dead peer no longer needs its replies.
            Err(FabricError::PeerFailed(_)) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// Records an error for the next `poll` to return.
    pub(crate) fn push_error(&self, e: AmError) {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(e);
        self.error_count.fetch_add(1, Ordering::Release);
    }

    /// Takes the oldest recorded error.
    pub(crate) fn take_error(&self) -> Option<AmError> {
        if self.error_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let e = self
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if e.is_some() {
            self.error_count.fetch_sub(1, Ordering::Release);
        }
        e
    }
}
