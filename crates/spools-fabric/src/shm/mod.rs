//! The shared-memory transport between ranks of one host.
//!
//! Every rank creates one segment (`/dev/shm/spools-<job>-<rank>`, mode 0600, stamped with
//! a tag derived from the job secret) holding the rings of the messages it *receives*: one
//! single-producer ring per (local sender, lane, priority). All local ranks map all local
//! segments, then the names are unlinked, so nothing is left in `/dev/shm` however the job
//! ends. A receiver that has spun for its spin time sleeps on the futex word of its
//! segment; a sender rings it only when the receiver says it sleeps, so the fast path of a
//! small message makes no system call.

mod area;
mod bell;
mod cma;
mod copy_probe;
mod fence;
mod futex;
#[cfg(test)]
mod futex_model;
mod ring;
#[cfg(test)]
mod ring_model;
pub(crate) mod segment;
mod sleep;

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use spools_boot::client::Bootstrap;
use spools_boot::config::{show_size, Config};
use spools_boot::health::JobHealth;
use spools_heap::shm::unlink;

use crate::caps::{Caps, Priority, SingleCopy};
use crate::error::{Defect, FabricError};
use crate::lock::TryLock;
use crate::transport::{Incoming, Transport};
pub use area::SharedArea;
use bell::Bells;
use ring::{Ring, TxState};
use segment::Segment;
pub use segment::{fit_rings, Geometry};

/// Messages drained from one ring per poll before the next ring's turn.
const BUDGET: usize = 64;

/// A ring this rank receives from: (ring, sending rank, lane, priority, index of its
/// position in `rx`).
type Served = (Ring, u32, u16, Priority, usize);

/// The shared-memory transport.
pub struct ShmTransport {
    /// Reads of local peers' memory, when single copy is cross-memory attach.
    cma: Option<cma::CmaRma>,
    me_local: u32,
    /// Global rank of each local index.
    local: Vec<u32>,
    /// Local index of each global rank (None: another host).
    local_of: Vec<Option<u32>>,
    segs: Vec<Segment>,
    lanes: Vec<TryLock<Vec<[TxState; 2]>>>,
    rx: TryLock<Vec<u64>>,
    /// The rings this rank receives from, in serving order (high priority first):
    /// (ring, sending rank, lane, priority, index of its position in `rx`).
    serve: Vec<Served>,
    /// The entries of `serve` per local sender (by local index), in the same order.
    serve_from: Vec<Vec<Served>>,
    blocked: Mutex<Vec<Ring>>,
    blocked_n: AtomicUsize,
    /// Local ranks whose rings held corrupt data: no longer read.
    bad: Vec<std::sync::atomic::AtomicBool>,
    caps: Caps,
    state: Arc<JobHealth>,
    notes: Vec<String>,
    /// Every local rank's bell, for sleeps in the TCP event loop.
    bells: Bells,
    /// A send woke a sleeping receiver (see [`Transport::take_roused`]).
    roused: AtomicBool,
    /// The CPUs this process may run on (its affinity mask when the transport was set
    /// up; `None`: not known, every CPU): [`Transport::awake_local`] counts the ranks
    /// that may share them.
    mask: Option<rustix::thread::CpuSet>,
}

impl std::fmt::Debug for ShmTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmTransport")
            .field("local", &self.local)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// The name of a rank's segment.
pub fn segment_name(job: u64, rank: u32) -> String {
    format!("/spools-{job:016x}-{rank}")
}

impl ShmTransport {
    /// Creates this rank's segment and maps those of the other ranks on this host.
    /// Collective: every rank of the job calls it (it runs two bootstrap barriers).
    ///
    /// If `/dev/shm` lacks room for the configured rings, they shrink to what fits and a
    /// warning says so (see [`ShmTransport::notes`]).
    ///
    /// # Errors
    /// [`FabricError::Io`] if shared memory cannot be created or mapped,
    /// [`FabricError::Corrupt`] if a peer's segment is not this job's,
    /// [`FabricError::Boot`] if a rank dies during set-up.
    pub fn setup(boot: &Bootstrap, cfg: &Config) -> Result<ShmTransport, FabricError> {
        let me = boot.rank();
        let eps = boot.endpoints();
        let my_host = &eps[me as usize].host;
        let local: Vec<u32> = (0..boot.size())
            .filter(|&r| eps[r as usize].host == *my_host)
            .collect();
        let mut local_of = vec![None; boot.size() as usize];
        for (i, &r) in local.iter().enumerate() {
            local_of[r as usize] = Some(i as u32);
        }
        let me_local = local_of[me as usize].unwrap_or(0);
        let want = Geometry {
            sources: local.len() as u32,
            lanes: u32::from(cfg.lanes),
            cell: cfg.cell_size as u32,
            ring_low: cfg.ring_size,
            ring_high: cfg.high_ring_size,
        };
        let mut notes = Vec::new();
        let geo = match segment::shm_free() {
            Some(free) => {
                // Every local rank creates a segment of this size at about the same time.
                let budget = free / local.len() as u64;
                match fit_rings(want, budget) {
                    Some(g) if g == want => g,
                    Some(g) => {
                        let note = format!(
                            "/dev/shm has {} free for {} local ranks: rings shrunk from {}/{} to {}/{} (low/high priority)",
                            show_size(free),
                            local.len(),
                            show_size(want.ring_low),
                            show_size(want.ring_high),
                            show_size(g.ring_low),
                            show_size(g.ring_high)
                        );
                        spools_boot::logger::warn(format_args!("spools: warning: {note}"));
                        notes.push(note);
                        g
                    }
                    None => {
                        return Err(FabricError::ShmFull {
                            free,
                            need: fit_rings(want, u64::MAX).map_or(0, |g| g.bytes()),
                        })
                    }
                }
            }
            None => want,
        };
        let name = segment_name(boot.job(), me);
        // Before the barrier that publishes the segments: a peer's first read of this
        // process (set-up's `can_read`) comes after it.
        if local.len() > 1 {
            copy_probe::allow_peer_reads(cfg.single_copy);
        }
        let mine =
            Segment::create(&name, geo, me, boot.secret()).and_then(|m| {
                match bell::create(&name) {
                    Ok(b) => Ok((m, b)),
                    Err(e) => {
                        unlink(&name);
                        Err(e)
                    }
                }
            });
        // Everyone reaches the barrier even on failure, so that nobody waits forever; the
        // failure is reported after it.
        let created = boot.barrier();
        let mine = match (mine, created) {
            (Ok(m), Ok(())) => m,
            (Err(e), Ok(())) => {
                bell::unlink(&name);
                // Keep the collective sequence of the others: enter the second barrier too.
                let _ = boot.barrier();
                return Err(e);
            }
            (Err(e), Err(_)) => {
                bell::unlink(&name);
                return Err(e);
            }
            (Ok(_), Err(e)) => {
                unlink(&name);
                bell::unlink(&name);
                return Err(e.into());
            }
        };
        let (mine, my_bell) = mine;
        let mut segs = Vec::with_capacity(local.len());
        let mut attach_err = None;
        let mut mine = Some(mine);
        for &r in &local {
            if r == me {
                if let Some(m) = mine.take() {
                    segs.push(m);
                }
                continue;
            }
            match Segment::attach(&segment_name(boot.job(), r), r, boot.secret()) {
                // Ring offsets are computed from the attacher's lane and local index:
                // the peer's segment must have been laid out for the same job shape.
                Ok(s) if s.geo.sources != geo.sources || s.geo.lanes != geo.lanes => {
                    attach_err = Some(FabricError::Corrupt {
                        rank: r,
                        defect: Defect::JobShape {
                            their_sources: s.geo.sources,
                            their_lanes: s.geo.lanes,
                            our_sources: geo.sources,
                            our_lanes: geo.lanes,
                        },
                    });
                    break;
                }
                Ok(s) => segs.push(s),
                Err(e) => {
                    attach_err = Some(e);
                    break;
                }
            }
        }
        let bells = match attach_err {
            Some(e) => Err(e),
            None => {
                let names: Vec<_> = local
                    .iter()
                    .map(|&r| (segment_name(boot.job(), r), r))
                    .collect();
                Bells::open(my_bell, me_local as usize, &names)
            }
        };
        let attached = boot.barrier();
        unlink(&name);
        bell::unlink(&name);
        let bells = bells?;
        attached?;
        // One thread drives the rank: it owns the lanes and the receive side (no lock).
        let level = cfg.thread_level_in_effect();
        let lanes = (0..cfg.lanes)
            .map(|_| TryLock::new(vec![[TxState::default(); 2]; local.len()], level))
            .collect();
        let rings = local.len() * usize::from(cfg.lanes) * 2;
        let (mut single_copy, mut single_copy_reason) = if local.len() > 1 {
            copy_probe::choose(cfg.single_copy)
        } else {
            (SingleCopy::None, "no other rank on this host".into())
        };
        let mut max_message = usize::MAX;
        let mut max_inline = usize::MAX;
        for s in &segs {
            for high in [false, true] {
                let r = s.ring(0, 0, high);
                max_message = max_message.min(r.max_message());
                max_inline = max_inline.min(r.max_inline());
            }
        }
        let mut serve = Vec::new();
        for priority in Priority::SERVE_ORDER {
            let high = priority == Priority::High;
            for (src, &from) in local.iter().enumerate() {
                if src as u32 == me_local {
                    continue;
                }
                for lane in 0..usize::from(cfg.lanes) {
                    let ring = segs[me_local as usize].ring(src as u32, lane as u32, high);
                    let i = (src * usize::from(cfg.lanes) + lane) * 2 + usize::from(high);
                    serve.push((ring, from, lane as u16, priority, i));
                }
            }
        }
        let serve_from = (0..local.len())
            .map(|src| {
                let from = local[src];
                serve.iter().copied().filter(|e| e.1 == from).collect()
            })
            .collect();
        let mut peers = vec![None; boot.size() as usize];
        for (i, &r) in local.iter().enumerate() {
            if i as u32 != me_local {
                peers[r as usize] = Some(segs[i].process());
            }
        }
        // The probe read this process's own memory, which no ptrace policy refuses: a
        // read of a peer's cookie says whether other ranks may be read (Yama's scopes 2
        // and 3, a security module).
        if single_copy != SingleCopy::None {
            if let Some(Err(e)) = peers
                .iter()
                .flatten()
                .next()
                .map(|&p| cma::CmaRma::can_read(p))
            {
                single_copy = SingleCopy::None;
                single_copy_reason = format!(
                    "pipelined copy: process_vm_readv of another rank is not permitted here ({e})"
                );
            }
        }
        let cma = (single_copy != SingleCopy::None).then(|| cma::CmaRma::new(peers));
        let t = ShmTransport {
            cma,
            mask: rustix::thread::sched_getaffinity(None).ok(),
            serve,
            serve_from,
            me_local,
            local,
            local_of,
            segs,
            lanes,
            rx: TryLock::new(vec![0; rings], level),
            blocked: Mutex::new(Vec::new()),
            blocked_n: AtomicUsize::new(0),
            bad: (0..rings / (usize::from(cfg.lanes) * 2))
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            caps: Caps {
                name: "shm",
                max_message,
                max_inline,
                ordered: true,
                lanes: usize::from(cfg.lanes),
                single_copy,
                single_copy_reason,
            },
            state: boot.state().clone(),
            notes,
            bells,
            roused: AtomicBool::new(false),
        };
        Ok(t)
    }

    /// Warnings raised at set-up (rings shrunk to fit `/dev/shm`).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Global ranks on this host.
    pub fn local_ranks(&self) -> &[u32] {
        &self.local
    }

    /// Segment geometry of this rank's own segment.
    pub fn geometry(&self) -> Geometry {
        self.segs[self.me_local as usize].geo
    }

    /// Returns a function that wakes this rank's sleeping waits (for the watchdog).
    pub fn waker(self: &Arc<Self>) -> Arc<dyn Fn() + Send + Sync> {
        let me = self.clone();
        Arc::new(move || me.wake())
    }

    #[inline]
    fn notify(&self, peer_local: usize) {
        // No fence: the ring's publishing swap already ordered the message before the
        // load of the receiver's `sleeping` word (see `Ring::try_write`).
        if self.segs[peer_local]
            .sleepers()
            .notify(|| self.bells.ring(peer_local))
        {
            self.roused.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a sleep may begin (after `sleeping` was raised): no message waits, no
    /// blocked sender got space, the job is whole.
    fn nothing_to_do(&self) -> bool {
        let ready = match self.rx.try_lock() {
            Some(pos) => self.any_ready(&pos),
            // Another thread is polling: it is awake and will handle arrivals.
            None => false,
        };
        !(ready || self.space_freed() || self.state.troubled())
    }

    /// Drains the rings of `list` (entries of `serve`) into `f`; `Ok(0)` at once while
    /// another thread polls.
    #[inline]
    fn drain_rings(
        &self,
        list: &[Served],
        f: &mut dyn FnMut(Incoming<'_>),
    ) -> Result<usize, FabricError> {
        let Some(mut pos) = self.rx.try_lock() else {
            return Ok(0);
        };
        let mut total = 0;
        for &(ring, from, lane, priority, i) in list {
            if !ring.ready(pos[i]) {
                continue;
            }
            let src = self.local_of[from as usize].unwrap_or(0) as usize;
            if self.bad[src].load(Ordering::Relaxed) {
                continue;
            }
            let (n, waiting) = match ring.drain(&mut pos[i], BUDGET, &mut |bytes| {
                f(Incoming {
                    from,
                    lane,
                    priority,
                    bytes,
                })
            }) {
                Ok(r) => r,
                Err(defect) => {
                    // Reported once; the ring is not read again (its position cannot be
                    // trusted), and the job learns of it through the error.
                    self.bad[src].store(true, Ordering::Relaxed);
                    return Err(FabricError::Corrupt { rank: from, defect });
                }
            };
            total += n;
            if waiting {
                if let Some(l) = self.local_of.get(from as usize).copied().flatten() {
                    let l = l as usize;
                    self.segs[l].sleepers().wake(|| self.bells.ring(l));
                }
            }
        }
        Ok(total)
    }

    fn any_ready(&self, pos: &[u64]) -> bool {
        self.serve
            .iter()
            .any(|(ring, _, _, _, i)| ring.ready(pos[*i]))
    }

    fn space_freed(&self) -> bool {
        if self.blocked_n.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut b = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        let before = b.len();
        b.retain(|r| !r.space_freed());
        self.blocked_n.store(b.len(), Ordering::Relaxed);
        b.len() != before
    }
}

impl Transport for ShmTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn rma(&self) -> Option<&dyn crate::Rma> {
        self.cma.as_ref().map(|c| c as &dyn crate::Rma)
    }

    fn reaches(&self, peer: u32) -> bool {
        self.local_of
            .get(peer as usize)
            .is_some_and(|l| l.is_some_and(|l| l != self.me_local))
    }

    #[inline]
    fn try_send(
        &self,
        lane: usize,
        priority: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, FabricError> {
        let pl = match self.local_of.get(peer as usize) {
            Some(Some(l)) if *l != self.me_local => *l as usize,
            _ => return Err(FabricError::Unreachable(peer)),
        };
        let (len, lane_state) =
            crate::transport::check_send(&self.caps, &self.state, &self.lanes, lane, peer, parts)?;
        let mut st = lane_state.lock();
        let high = priority == Priority::High;
        let ring = self.segs[pl].ring(self.me_local, lane as u32, high);
        let tx = &mut st[pl][usize::from(high)];
        if ring.try_write(tx, parts, len) {
            drop(st);
            self.notify(pl);
            return Ok(true);
        }
        ring.flag_full(tx);
        if ring.try_write(tx, parts, len) {
            drop(st);
            self.notify(pl);
            return Ok(true);
        }
        drop(st);
        let mut b = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        if !b.iter().any(|r| std::ptr::eq(r.mem.ctrl, ring.mem.ctrl)) {
            b.push(ring);
        }
        self.blocked_n.store(b.len(), Ordering::Relaxed);
        Ok(false)
    }

    fn flush(&self, _lane: usize) -> Result<bool, FabricError> {
        Ok(false)
    }

    #[inline]
    fn poll(&self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        self.drain_rings(&self.serve, f)
    }

    #[inline]
    fn poll_from(&self, peer: u32, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        match self.local_of.get(peer as usize).copied().flatten() {
            Some(l) => self.drain_rings(&self.serve_from[l as usize], f),
            None => Ok(0),
        }
    }

    fn wait(&self, timeout: Duration) {
        self.segs[self.me_local as usize]
            .sleepers()
            .sleep(timeout, || self.nothing_to_do());
    }

    fn wake(&self) {
        let me = self.me_local as usize;
        self.segs[me].sleepers().wake(|| self.bells.ring(me));
    }

    fn awake_local(&self) -> Option<crate::Awake> {
        // Relaxed: hints for the pace of a wait, read and written now and then.
        // A rank with a helper (the progress thread) asleep counts as awake unless it
        // naps on flags: its application may be polling beside the sleeping helper (it
        // may also sleep: counted awake then, the pace yields where it might spin).
        let asleep = |s: &Segment| {
            s.napping().load(Ordering::Relaxed) != 0
                || (s.sleeping().load(Ordering::Relaxed) != 0
                    && s.helpers().load(Ordering::Relaxed) == 0)
        };
        let me = self.me_local as usize;
        let cpu = rustix::thread::sched_getcpu() as u32 + 1;
        // Stored only when it changed: a store takes the line from every rank that
        // looked at it, and every wait of every rank looks.
        if self.segs[me].cpu().load(Ordering::Relaxed) != cpu {
            self.segs[me].cpu().store(cpu, Ordering::Relaxed);
        }
        // Whether a rank last seen on CPU `c` (plus one; 0: not seen yet) may be running
        // on this rank's CPUs: with ranks bound to CPUs of their own, the others do not
        // compete with this one, however few CPUs this process may use.
        let shares = |c: u32| {
            let i = c.wrapping_sub(1) as usize;
            c == 0
                || i >= rustix::thread::CpuSet::MAX_CPU
                || self.mask.as_ref().is_none_or(|m| m.is_set(i))
        };
        let (mut ranks, mut on_my_cpu) = (1, 0);
        for (i, s) in self.segs.iter().enumerate() {
            if i != me && !asleep(s) {
                let theirs = s.cpu().load(Ordering::Relaxed);
                ranks += usize::from(shares(theirs));
                on_my_cpu += usize::from(theirs == cpu);
            }
        }
        Some(crate::Awake { ranks, on_my_cpu })
    }

    fn note_helper_sleep(&self, asleep: bool) {
        count(self.segs[self.me_local as usize].helpers(), asleep);
    }

    fn note_nap(&self, napping: bool) {
        count(self.segs[self.me_local as usize].napping(), napping);
    }

    fn take_roused(&self) -> bool {
        self.roused.load(Ordering::Relaxed) && self.roused.swap(false, Ordering::Relaxed)
    }

    fn bell(&self) -> Option<BorrowedFd<'_>> {
        Some(self.bells.fd())
    }

    fn begin_sleep_elsewhere(&self) -> bool {
        // The receiver's half of the store-then-load handshake: announce the sleep, then
        // look; a sender publishes, then reads `sleeping` and rings the bell.
        self.segs[self.me_local as usize]
            .sleepers()
            .begin_bell_sleep(|| self.nothing_to_do())
    }

    fn end_sleep_elsewhere(&self) {
        self.segs[self.me_local as usize]
            .sleepers()
            .end_bell_sleep();
        self.bells.drain();
    }
}

/// Runs the start-up probe that chooses how large shared-memory transfers are copied:
/// kernel-assisted single copy or a pipelined copy through the rings. Returns the choice
/// and the measurements behind it.
pub fn probe_single_copy(cfg: spools_boot::config::SingleCopyChoice) -> (SingleCopy, String) {
    copy_probe::choose(cfg)
}

/// Counts one of this rank's threads into (`true`) or out of (`false`) a state its
/// segment publishes (napping, a helper asleep). Relaxed: hints for other ranks' pace.
fn count(word: &AtomicU32, into: bool) {
    if into {
        word.fetch_add(1, Ordering::Relaxed);
    } else {
        word.fetch_sub(1, Ordering::Relaxed);
    }
}
