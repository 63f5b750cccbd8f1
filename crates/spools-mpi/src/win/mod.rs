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

pub(crate) mod create;
mod ctl;
pub(crate) mod props;
mod remote;
pub(crate) mod rma;
pub(crate) mod sync;
mod target;

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};

use spools::{Communicator, SharedBuf, World};

use crate::abi::*;
use crate::error::{raise, MpiError, ERRHANDLERS};
use crate::handles::{Kind, Table};
use crate::init::rt;
use crate::win::ctl::LockKind;
use crate::win::target::Target;

/// A window.
pub(crate) struct WinObj {
    /// A private duplicate of the window's communicator: fences, PSCW notices and
    /// `MPI_Win_free` synchronise on it.
    pub(crate) comm: Communicator,
    /// The job, for waits that drive progress and watch for dead ranks.
    pub(crate) world: Arc<World>,
    /// Job ranks of the window's group, in its order.
    pub(crate) members: Vec<u32>,
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
    pub(crate) attrs: crate::attr::Attrs,
    /// Synchronisation state of this rank's epochs.
    pub(crate) epoch: Mutex<Epoch>,
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
}

// SAFETY: the window's addresses are kept as integers and reached only through the
// raw copies of `target.rs`; the rest is Send + Sync (the World, mutexes, atomics).
unsafe impl Send for WinObj {}
// SAFETY: as above.
unsafe impl Sync for WinObj {}

pub(crate) static WINS: Table<WinObj> = Table::new(Kind::Win);

/// The window of handle `h`.
///
/// # Errors
/// `MPI_ERR_WIN` for a handle that is not a live window.
pub(crate) fn win(h: MPI_Win, call: &'static str) -> Result<Arc<WinObj>, MpiError> {
    rt(call)?;
    let w = WINS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_WIN,
        what: "window",
        handle: h,
    })?;
    // With targets reached by messages, every window call serves the messages that
    // came: a rank spinning on a window (a compare-and-swap lock) must not starve the
    // peers whose memory messages it owes answers to.
    if w.targets.iter().any(|t| t.remote()) {
        w.world
            .worker()
            .progress()
            .map_err(|e| MpiError::Msg(e.into()))?;
    }
    Ok(w)
}

/// Reports `e` on window `h`, under its error handler (`MPI_ERRORS_ARE_FATAL` unless
/// set); an invalid window's errors go to `MPI_COMM_SELF`'s handler.
pub(crate) fn raise_win(h: MPI_Win, e: &MpiError) -> c_int {
    let Some(w) = WINS.get(h) else {
        return raise(MPI_COMM_SELF, e);
    };
    let handler = w.errhandler.load(std::sync::atomic::Ordering::Relaxed);
    let mut code = crate::error::code_of(e);
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::init::fatal(&e.to_string(), e.class()),
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
