//! Who advances the schedules (see [`super::schedule`]): one poller per engine, added to
//! the active-message layer the first time a schedule starts there, advances every
//! active schedule at the end of each progress round, never blocking; and a request's
//! `wait` ([`run_to_end`]), which takes its schedule off the poller's list and advances it
//! itself until it finishes, watching for ranks that made it impossible. The non-blocking
//! collectives through a segment ([`super::sm::SmJob`]) are on the same list: one posts
//! only once the one before it finished here, whichever the program waits for first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use super::schedule::Schedule;
use super::sm::{SharedJob, SmJob};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::MsgError;

/// What the poller sees of a schedule.
pub(crate) trait Advance: Send {
    /// [`Schedule::advance`].
    fn advance(&mut self) -> bool;
}

impl<T: Element> Advance for Schedule<T> {
    fn advance(&mut self) -> bool {
        Schedule::advance(self)
    }
}

impl<T: Element> Advance for SmJob<T> {
    /// Done for the poller once settled: an abandoned job may still have to mark its
    /// collective finished after its request's wait returned.
    fn advance(&mut self) -> bool {
        SmJob::advance(self);
        self.settled()
    }
}

/// A schedule shared between its request and the poller.
pub(crate) type Shared<T> = Arc<Mutex<Schedule<T>>>;

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The schedules the pollers advance: (engine address, schedule).
type Entry = (usize, Arc<Mutex<dyn Advance>>);

/// Every active schedule of the process (each engine's poller advances its own).
struct Registry {
    active: Mutex<Vec<Entry>>,
    count: AtomicUsize,
}

static REGISTRY: Registry = Registry {
    active: Mutex::new(Vec::new()),
    count: AtomicUsize::new(0),
};

fn engine_key(e: &Arc<Engine>) -> usize {
    Arc::as_ptr(e) as usize
}

/// Hands a started schedule to the engine's poller (adding the poller the first time).
pub(crate) fn activate<T: Element>(s: &Shared<T>) {
    let (engine, quiet) = {
        let mut g = lock(s);
        g.registered = true;
        (g.core.engine.clone(), g.quiet())
    };
    let dynamic: Arc<Mutex<dyn Advance>> = s.clone();
    enlist(&engine, dynamic);
    if !quiet && engine.worker.config().progress_thread {
        // A send to retry: a sleeping progress thread would only wake for incoming
        // traffic.
        engine.worker.wake();
    }
}

/// Hands a started non-blocking collective through a segment to the engine's poller.
pub(crate) fn activate_job<T: Element>(j: &SharedJob<T>) {
    let (engine, sends) = {
        let mut g = lock(j);
        g.registered = true;
        (g.engine(), g.sends_pending())
    };
    let dynamic: Arc<Mutex<dyn Advance>> = j.clone();
    enlist(&engine, dynamic);
    if sends && engine.worker.config().progress_thread {
        // A v collective's sends to retry: a sleeping progress thread would only wake
        // for incoming traffic.
        engine.worker.wake();
    }
}

/// Puts `a` on the list of `engine`'s poller, adding the poller the first time.
fn enlist(engine: &Arc<Engine>, a: Arc<Mutex<dyn Advance>>) {
    let key = engine_key(engine);
    if !engine.coll_poller.swap(true, Ordering::AcqRel) {
        let w = Arc::downgrade(engine);
        engine.worker.add_poller(Arc::new(move || {
            if REGISTRY.count.load(Ordering::Acquire) == 0 || w.strong_count() == 0 {
                return Ok(0);
            }
            Ok(poll_active(key))
        }));
    }
    lock(&REGISTRY.active).push((key, a));
    REGISTRY.count.fetch_add(1, Ordering::Release);
}

/// Removes `s` from the poller's list (once it finished).
pub(crate) fn deactivate<T: Element>(s: &Shared<T>) {
    if !std::mem::take(&mut lock(s).registered) {
        return;
    }
    delist(Arc::as_ptr(s).cast::<()>());
}

/// Removes `j` from the poller's list.
pub(crate) fn deactivate_job<T: Element>(j: &SharedJob<T>) {
    if !std::mem::take(&mut lock(j).registered) {
        return;
    }
    delist(Arc::as_ptr(j).cast::<()>());
}

/// Removes the entry at `ptr` from the poller's list.
fn delist(ptr: *const ()) {
    let mut list = lock(&REGISTRY.active);
    let before = list.len();
    list.retain(|(_, a)| Arc::as_ptr(a).cast::<()>() != ptr);
    REGISTRY
        .count
        .fetch_sub(before - list.len(), Ordering::Release);
}

/// The poller: advances the active schedules of engine `key`, never blocking (a schedule
/// its request is advancing right now is skipped). Returns how many finished.
fn poll_active(key: usize) -> usize {
    let mine: Vec<Arc<Mutex<dyn Advance>>> = match REGISTRY.active.try_lock() {
        Ok(list) => list
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, a)| a.clone())
            .collect(),
        Err(_) => return 0,
    };
    let mut finished = Vec::new();
    for a in mine {
        let done = match a.try_lock() {
            Ok(mut s) => s.advance(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().advance(),
            Err(TryLockError::WouldBlock) => false,
        };
        if done {
            finished.push(a);
        }
    }
    let n = finished.len();
    if n > 0 {
        if let Ok(mut list) = REGISTRY.active.try_lock() {
            let before = list.len();
            list.retain(|(_, a)| !finished.iter().any(|f| Arc::ptr_eq(f, a)));
            REGISTRY
                .count
                .fetch_sub(before - list.len(), Ordering::Release);
        }
    }
    n
}

/// Advances `s` until it finishes: the caller's wait. Fails when a rank that finalised
/// before starting this collective makes it impossible, or a rank died.
pub(crate) fn run_to_end<T: Element>(s: &Shared<T>) -> Result<Vec<Vec<T>>, MsgError> {
    // From here the waiting thread advances it: the poller need not.
    deactivate(s);
    let (engine, ctx, coll, finished, members, split) = {
        let mut g = lock(s);
        let finished = g.advance();
        (
            g.core.engine.clone(),
            g.core.coll_ctx(),
            g.tag >> 8,
            finished,
            g.core.clone(),
            g.split,
        )
    };
    if !finished {
        let state = engine.worker.bootstrap().state();
        let mut blocker = None;
        let mut split_seen = None;
        let mut seen = None;
        let mut quiet = false;
        let waited = engine
            .worker
            .wait_for_or(
                || {
                    // Look at the schedule only when an operation completed, or when it
                    // has sends to retry.
                    let g = engine.generation();
                    if quiet && seen == Some(g) {
                        return false;
                    }
                    seen = Some(g);
                    let mut sched = lock(s);
                    let done = sched.advance();
                    quiet = sched.quiet();
                    done
                },
                || {
                    // Members that took the segment where this rank's length kept it off.
                    split_seen = split
                        .and_then(|w| Some((members.sm.ready()?, w)))
                        .and_then(|(sm, w)| sm.split_on_messages(&w));
                    blocker = state.collective_blocker(ctx, coll, &members.ranks);
                    blocker.is_some() || split_seen.is_some()
                },
            )
            .map_err(MsgError::from);
        let failed = match waited {
            Ok(true) => None,
            Ok(false) if split_seen.is_some() => split_seen,
            Ok(false) => {
                let (rank, started) = blocker.unwrap_or((u32::MAX, 0));
                engine.worker.bootstrap().blame(
                    rank,
                    &format!(
                        "it finalised after {started} collective(s) on a communicator whose collective #{coll} other ranks wait in"
                    ),
                );
                Some(MsgError::PeerFinalized {
                    rank,
                    started,
                    waiting: coll,
                })
            }
            Err(e) => Some(e),
        };
        if let Some(e) = failed {
            let mut g = lock(s);
            g.fail(e);
            return g.take();
        }
    }
    lock(s).take()
}
