//! One-sided communication (`MPI_Win_*`, `MPI_Put`, `MPI_Get`, accumulates). Within a
//! host every access is one copy by the origin into or out of the target's memory, with
//! nothing asked of the target; between hosts it is a memory message (GRIM's and
//! StarT-X's):
//!
//! - `create.rs`: the four flavours. `MPI_Win_allocate` and `MPI_Win_allocate_shared`
//!   take the shared heap (peers map the segments); `MPI_Win_create` and
//!   `MPI_Win_create_dynamic` leave the program's memory where it is and reach it by
//!   cross-memory attach.
//! - `ctl.rs`: each rank's control block in shared memory (passive-target lock,
//!   accumulate lock, attached regions); `target.rs`: the copies.
//! - `rma.rs`: the communication calls; `sync.rs`: fence, lock, flush, PSCW;
//!   `props.rs`: attributes, names, info, error handlers, groups.
//!
//! - `remote.rs`: targets on another host, reached by memory messages (RPCs the
//!   target's progress engine serves).
//!
//! Shared windows (`MPI_Win_allocate_shared`) need one host and are refused across
//! hosts by name.

mod ask;
pub(crate) mod create;
mod ctl;
mod mem;
pub(crate) mod props;
mod remote;
pub(crate) mod rma;
mod serve;
pub(crate) mod sync;
mod target;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use spools::{Communicator, SharedBuf, World};

use crate::abi::*;
use crate::env::errhandler::raise;
use crate::env::error::{MpiError, ERRHANDLERS};
use crate::handles::{Kind, Table};
use crate::runtime::rt;
use crate::win::ctl::LockKind;
use crate::win::target::Target;

/// A window.
pub(crate) struct WinObj {
    /// A private duplicate of the window's communicator: fences, PSCW notices and
    /// `MPI_Win_free` synchronise on it.
    pub(crate) comm: Communicator,
    /// The job, for waits that drive progress and watch for dead ranks.
    pub(crate) world: Arc<World>,
    /// The window's group, in its order, as groups name processes (labels:
    /// `comm/worlds.rs`).
    pub(crate) labels: Vec<u32>,
    /// Every rank of the window, by rank in the window.
    pub(crate) targets: Vec<Target>,
    /// `MPI_WIN_FLAVOR_*` (also `MPI_WIN_CREATE_FLAVOR`'s value, handed out by pointer).
    pub(crate) flavor: c_int,
    /// Attribute values handed out by pointer (`MPI_Win_get_attr`).
    pub(crate) size_attr: MPI_Aint,
    pub(crate) disp_attr: c_int,
    pub(crate) model_attr: c_int,
    pub(crate) base: usize,
    pub(crate) errhandler: AtomicUsize,
    pub(crate) name: Mutex<String>,
    pub(crate) info: Mutex<Vec<(String, String)>>,
    pub(crate) attrs: crate::comm::attr::Attrs,
    /// Synchronisation state of this rank's epochs.
    pub(crate) epoch: Mutex<Epoch>,
    /// Whether an epoch reaches every rank now (a fence's, `MPI_Win_lock_all`): the
    /// direct accesses check it without the lock of `epoch`.
    pub(crate) all_open: std::sync::atomic::AtomicBool,
    /// What this rank allocated for the window (freed with it): its memory and its
    /// control block.
    pub(crate) _own: Vec<SharedBuf<u8>>,
    /// Its id for memory messages (`remote.rs`).
    pub(crate) id: u64,
}

/// The epochs this rank has open on a window.
#[derive(Default)]
pub(crate) struct Epoch {
    /// Passive-target locks held, by target.
    pub(crate) locks: HashMap<u32, LockKind>,
    /// Targets locked with `MPI_MODE_NOCHECK` (nothing taken, nothing to release).
    pub(crate) nocheck: std::collections::HashSet<u32>,
    /// Whether the locks were taken by `MPI_Win_lock_all`.
    pub(crate) lock_all: bool,
    /// Targets of an access epoch opened by `MPI_Win_start`.
    pub(crate) access: Option<Vec<u32>>,
    /// Origins of an exposure epoch opened by `MPI_Win_post` that have not completed.
    pub(crate) exposure: Option<Vec<u32>>,
    /// Whether the last `MPI_Win_fence` (not `MPI_MODE_NOSUCCEED`) opened an epoch
    /// that no lock or `MPI_Win_start` has ended since (a fence may only close one).
    pub(crate) fence: bool,
}

impl Epoch {
    /// Whether an access to window rank `r` is within an epoch: a fence's, a lock on
    /// it (or `MPI_Win_lock_all`), or an access epoch that names it.
    pub(crate) fn reaches(&self, r: u32) -> bool {
        self.fence
            || self.lock_all
            || self.locks.contains_key(&r)
            || self.access.as_ref().is_some_and(|a| a.contains(&r))
    }
}

// SAFETY: the window's addresses are kept as integers and reached only through the
// raw copies of `target.rs`; the rest is Send + Sync (the World, mutexes, atomics).
unsafe impl Send for WinObj {}
// SAFETY: as above.
unsafe impl Sync for WinObj {}

pub(crate) static WINS: Table<WinObj> = Table::new(Kind::Win);

/// Bumped whenever a window leaves [`WINS`] (`MPI_Win_free`): a thread's cached window
/// (below) is good only while this is what it was when the window was looked up.
static WIN_GEN: AtomicU64 = AtomicU64::new(0);

/// The window a thread used last, kept so that a stream of calls on one window (puts,
/// gets, flushes) finds it with no read lock and no reference count: a thread-local
/// read, a compare of the handle and of [`WIN_GEN`]. Each thread has its own, so threads
/// never contend for it, whatever the thread level.
struct LastWin {
    h: MPI_Win,
    gen: u64,
    /// Whether a target is reached by messages (then every call serves them).
    remote: bool,
    w: Option<Arc<WinObj>>,
}

impl Drop for LastWin {
    /// At a thread's exit: a window freed by another thread meanwhile holds its last
    /// reference here; once MPI is finalised (a process exiting) it is left to the
    /// process's end rather than torn down after the job.
    fn drop(&mut self) {
        if rt("").is_err() {
            std::mem::forget(self.w.take());
        }
    }
}

thread_local! {
    static LAST_WIN: RefCell<LastWin> = const {
        RefCell::new(LastWin { h: MPI_WIN_NULL, gen: 0, remote: false, w: None })
    };
}

/// A window leaves the table: every thread's cached window is stale from now on, and
/// this thread's is dropped at once (its memory and mappings go with the last handle).
pub(crate) fn forget_window() {
    WIN_GEN.fetch_add(1, Ordering::AcqRel);
    let old = LAST_WIN
        .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.w.take()))
        .ok()
        .flatten();
    drop(old);
}

/// Serves the memory messages that came, for a window with a target reached by them: a
/// rank spinning on a window (a compare-and-swap lock) must not starve the peers whose
/// memory messages it owes answers to.
fn serve(w: &WinObj) -> Result<(), MpiError> {
    w.world
        .worker()
        .progress()
        .map(drop)
        .map_err(|e| MpiError::Msg(e.into()))
}

fn lookup(h: MPI_Win) -> Result<Arc<WinObj>, MpiError> {
    WINS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_WIN,
        what: "window",
        handle: h,
    })
}

/// Runs `f` on the window of handle `h`, found through this thread's cached window when
/// it is that one (no lock, no reference count), through the table otherwise (which
/// then becomes the cached one).
///
/// # Errors
/// `MPI_ERR_WIN` for a handle that is not a live window, and `f`'s.
pub(crate) fn with_win<R>(
    h: MPI_Win,
    call: &'static str,
    f: impl FnOnce(&WinObj) -> Result<R, MpiError>,
) -> Result<R, MpiError> {
    rt(call)?;
    let gen = WIN_GEN.load(Ordering::Acquire);
    let mut f = Some(f);
    // The cache stays borrowed while `f` runs: a nested call can neither replace nor
    // drop the window `f` was given (`remember` and `forget_window` then leave it).
    let hit = LAST_WIN
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            let w = c.w.as_deref().filter(|_| c.h == h && c.gen == gen)?;
            let f = f.take()?;
            Some(if c.remote {
                serve(w).and_then(|()| f(w))
            } else {
                f(w)
            })
        })
        .ok()
        .flatten();
    if let Some(r) = hit {
        return r;
    }
    let Some(f) = f else {
        return Err(MpiError::invalid(
            MPI_ERR_INTERN,
            format!("{call}: the window cache lost its call"),
        ));
    };
    let w = lookup(h)?;
    let remote = w.targets.iter().any(Target::remote);
    if remote {
        serve(&w)?;
    }
    let r = f(&w);
    remember(h, gen, remote, w);
    r
}

/// The fast path's look-up: `f` on this thread's cached window when `h` is it, MPI is
/// running and no target of it is reached by messages; `None` otherwise (and when `f`
/// says `None`), for the caller to take the general path through [`with_win`], which
/// reports every error and caches the window. Everything here is small (no `MpiError`
/// is built or moved), so a hit costs a thread-local read and a few compares.
#[inline(always)]
pub(crate) fn cached<R>(h: MPI_Win, f: impl FnOnce(&WinObj) -> Option<R>) -> Option<R> {
    rt("").ok()?;
    let gen = WIN_GEN.load(Ordering::Acquire);
    LAST_WIN
        .try_with(|c| {
            // Borrowed while `f` runs, as in `with_win`.
            let c = c.try_borrow().ok()?;
            if c.remote || c.h != h || c.gen != gen {
                return None;
            }
            f(c.w.as_deref()?)
        })
        .ok()
        .flatten()
}

/// Makes `w` (of handle `h`, looked up at generation `gen`) this thread's cached window.
fn remember(h: MPI_Win, gen: u64, remote: bool, w: Arc<WinObj>) {
    let old = LAST_WIN
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            let old = c.w.replace(w);
            c.h = h;
            c.gen = gen;
            c.remote = remote;
            old
        })
        .ok()
        .flatten();
    // Dropped with the cache released (dropping a freed window runs no MPI call, but
    // nothing is borrowed while it does).
    drop(old);
}

/// The window of handle `h`.
///
/// # Errors
/// `MPI_ERR_WIN` for a handle that is not a live window.
pub(crate) fn win(h: MPI_Win, call: &'static str) -> Result<Arc<WinObj>, MpiError> {
    rt(call)?;
    let gen = WIN_GEN.load(Ordering::Acquire);
    let cached = LAST_WIN.try_with(|c| {
        let c = c.try_borrow().ok()?;
        match &c.w {
            Some(w) if c.h == h && c.gen == gen => Some((w.clone(), c.remote)),
            _ => None,
        }
    });
    let (w, remote) = match cached {
        Ok(Some(hit)) => hit,
        _ => {
            let w = lookup(h)?;
            let remote = w.targets.iter().any(Target::remote);
            remember(h, gen, remote, w.clone());
            (w, remote)
        }
    };
    if remote {
        serve(&w)?;
    }
    Ok(w)
}

/// Reports `e` on window `h`, under its error handler (`MPI_ERRORS_ARE_FATAL` unless
/// set); an invalid window's errors go to the handler of errors of no object
/// ([`crate::env::errhandler::no_object`]).
pub(crate) fn raise_win(h: MPI_Win, e: &MpiError) -> c_int {
    let Some(w) = WINS.get(h) else {
        return raise(crate::env::errhandler::no_object(), e);
    };
    let handler = w.errhandler.load(std::sync::atomic::Ordering::Relaxed);
    let mut code = crate::env::error::code_of(e);
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(&e.to_string(), e.class()),
        hd => match ERRHANDLERS.get(hd) {
            Some(f) => {
                let mut wh = h;
                // SAFETY: a user handler of the standard's window type
                // (`fn(MPI_Win *, int *, ...)`, a handle like a communicator's); it
                // receives pointers to locals that live for the call.
                unsafe { f(&mut wh, &mut code) };
                code
            }
            None => code,
        },
    }
}

/// The result of a call whose errors go to window `h`.
pub(crate) fn on_win(h: MPI_Win, r: Result<(), MpiError>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_win(h, &e),
    }
}

impl WinObj {
    /// Target `rank` of the window.
    ///
    /// # Errors
    /// `MPI_ERR_RANK` for a rank outside the window's group.
    pub(crate) fn target(&self, rank: c_int, call: &'static str) -> Result<&Target, MpiError> {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.targets.get(r))
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_RANK,
                    format!(
                        "{call}: target rank {rank} is not in the window's group of {}",
                        self.targets.len()
                    ),
                )
            })
    }

    /// This rank's epochs.
    pub(crate) fn epoch(&self) -> std::sync::MutexGuard<'_, Epoch> {
        self.epoch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an access to rank `r` is within one of this rank's epochs.
    pub(crate) fn reaches(&self, r: u32) -> bool {
        self.all_open.load(std::sync::atomic::Ordering::Relaxed) || self.epoch().reaches(r)
    }

    /// Keeps [`WinObj::all_open`] as `e` says (after a change to a fence or
    /// `MPI_Win_lock_all`).
    pub(crate) fn note_open(&self, e: &Epoch) {
        self.all_open
            .store(e.fence || e.lock_all, std::sync::atomic::Ordering::Relaxed);
    }

    /// Waits until `cond()` holds for a word in shared memory, driving this rank's
    /// progress meanwhile (peers waiting on it are served) and failing if a rank of the
    /// job dies: polls, then naps briefly between polls, since no message rings when
    /// another rank releases a word.
    ///
    /// # Errors
    /// A dead rank (the watchdog's verdict).
    pub(crate) fn wait_until(&self, mut cond: impl FnMut() -> bool) -> Result<(), MpiError> {
        if cond() {
            return Ok(());
        }
        let worker = self.world.worker();
        loop {
            let held = worker
                .wait_for_flags(&mut cond, || false)
                .map_err(|e| MpiError::Msg(e.into()))?;
            if held {
                return Ok(());
            }
            worker.nap(|| std::thread::sleep(std::time::Duration::from_micros(50)));
        }
    }

    /// Waits until `attempt()` succeeds: a word in this host's shared memory is polled
    /// as [`WinObj::wait_until`] does; a remote target's is asked again and again (each
    /// call drives progress and fails if the target died), with a short nap between.
    ///
    /// # Errors
    /// `attempt`'s, or a dead rank.
    pub(crate) fn acquire(
        &self,
        t: &Target,
        mut attempt: impl FnMut() -> Result<bool, MpiError>,
    ) -> Result<(), MpiError> {
        if !t.remote() {
            let mut failed = None;
            self.wait_until(|| match attempt() {
                Ok(done) => done,
                Err(e) => {
                    failed = Some(e);
                    true
                }
            })?;
            return failed.map_or(Ok(()), Err);
        }
        while !attempt()? {
            self.world
                .worker()
                .nap(|| std::thread::sleep(std::time::Duration::from_micros(20)));
        }
        Ok(())
    }

    /// Runs `f` with the accumulate lock of target `t` held.
    ///
    /// # Errors
    /// As [`WinObj::acquire`], and `f`'s.
    pub(crate) fn with_acc<R>(
        &self,
        t: &Target,
        f: impl FnOnce() -> Result<R, MpiError>,
    ) -> Result<R, MpiError> {
        self.acquire(t, || t.try_acc())?;
        let r = f();
        let released = t.release_acc();
        let r = r?;
        released.map(|()| r)
    }
}
