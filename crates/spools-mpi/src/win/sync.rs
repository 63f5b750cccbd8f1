//! Synchronisation of one-sided windows: `MPI_Win_fence`, passive target
//! (`MPI_Win_lock` / `unlock` and their `_all` forms, taken in the target's control
//! block in shared memory, with nothing asked of the target), the flushes and
//! `MPI_Win_sync`, and generalized active target (post / start / complete / wait /
//! test, whose notices are zero-byte messages on the window's own communicator).
//!
//! Every access completes before its call returns, so closing an epoch only has to
//! order memory and tell the other side.

use std::ffi::c_int;
use std::sync::atomic::{fence, Ordering};

use spools::Source;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::out::out;
use crate::win::ctl::LockKind;
use crate::win::{cached, on_win, win, with_win, WinObj};

/// Tags of the PSCW notices on the window's communicator.
const TAG_POST: i32 = 1;
const TAG_DONE: i32 = 2;

/// Asserts the standard defines for each call (others are an error).
fn check_assert(assert: c_int, allowed: c_int, call: &'static str) -> Result<(), MpiError> {
    if assert & !allowed != 0 {
        return Err(MpiError::invalid(
            MPI_ERR_ASSERT,
            format!("{call}: assert {assert:#x} holds flags the call does not take"),
        ));
    }
    Ok(())
}

/// `MPI_Win_fence`: ends the previous epoch and starts the next, on every rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_fence(assert: c_int, win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_fence";
    let r = (|| {
        let w = win(win_h, call)?;
        check_assert(
            assert,
            MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED,
            call,
        )?;
        {
            let e = w.epoch();
            if !e.locks.is_empty() || e.access.is_some() || e.exposure.is_some() {
                return Err(MpiError::invalid(
                    MPI_ERR_RMA_SYNC,
                    format!("{call}: a lock or PSCW epoch is open on the window"),
                ));
            }
        }
        fence(Ordering::SeqCst);
        // With NOPRECEDE no rank accessed this one before the fence; the barrier is
        // still what keeps the next epoch's accesses after every rank's local stores.
        w.comm.barrier()?;
        fence(Ordering::SeqCst);
        let mut e = w.epoch();
        e.fence = assert & MPI_MODE_NOSUCCEED == 0;
        w.note_open(&e);
        Ok(())
    })();
    on_win(win_h, r)
}

fn lock_kind(lock_type: c_int, call: &'static str) -> Result<LockKind, MpiError> {
    match lock_type {
        MPI_LOCK_EXCLUSIVE => Ok(LockKind::Exclusive),
        MPI_LOCK_SHARED => Ok(LockKind::Shared),
        _ => Err(MpiError::invalid(
            MPI_ERR_LOCKTYPE,
            format!(
                "{call}: lock type {lock_type} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"
            ),
        )),
    }
}

/// Takes target `rank`'s lock as `kind` (waiting for it unless `NOCHECK`).
fn take(w: &WinObj, rank: u32, kind: LockKind, nocheck: bool) -> Result<(), MpiError> {
    if nocheck {
        return Ok(());
    }
    let t = &w.targets[rank as usize];
    w.acquire(t, || t.try_lock(kind))
}

/// `MPI_Win_lock`: a passive-target epoch on `rank`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_lock(
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win_h: MPI_Win,
) -> c_int {
    let call = "MPI_Win_lock";
    let r = (|| {
        let w = win(win_h, call)?;
        let kind = lock_kind(lock_type, call)?;
        check_assert(assert, MPI_MODE_NOCHECK, call)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        w.target(rank, call)?;
        let r = rank as u32;
        {
            let e = w.epoch();
            if e.locks.contains_key(&r) || e.lock_all {
                return Err(MpiError::invalid(
                    MPI_ERR_RMA_SYNC,
                    format!("{call}: rank {rank} is locked already by this rank"),
                ));
            }
            if e.access.is_some() {
                return Err(MpiError::invalid(
                    MPI_ERR_RMA_SYNC,
                    format!("{call}: an access epoch (MPI_Win_start) is open on the window"),
                ));
            }
        }
        let nocheck = assert & MPI_MODE_NOCHECK != 0;
        take(&w, r, kind, nocheck)?;
        let mut e = w.epoch();
        e.locks.insert(r, kind);
        e.fence = false;
        w.note_open(&e);
        // A NOCHECK lock took nothing: nothing to release.
        if nocheck {
            e.nocheck.insert(r);
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_unlock`: ends the passive-target epoch on `rank`; its accesses are
/// complete at the target.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_unlock(rank: c_int, win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_unlock";
    let r = (|| {
        let w = win(win_h, call)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        w.target(rank, call)?;
        let r = rank as u32;
        let (kind, nocheck) = {
            let mut e = w.epoch();
            if e.lock_all {
                return Err(MpiError::invalid(
                    MPI_ERR_RMA_SYNC,
                    format!("{call}: the window was locked by MPI_Win_lock_all"),
                ));
            }
            let k = e.locks.remove(&r).ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_RMA_SYNC,
                    format!("{call}: rank {rank} is not locked by this rank"),
                )
            })?;
            (k, e.nocheck.remove(&r))
        };
        fence(Ordering::SeqCst);
        if !nocheck {
            w.targets[r as usize].unlock(kind)?;
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_lock_all`: a shared passive-target epoch on every rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_lock_all(assert: c_int, win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_lock_all";
    let r = (|| {
        let w = win(win_h, call)?;
        check_assert(assert, MPI_MODE_NOCHECK, call)?;
        let busy = {
            let e = w.epoch();
            !e.locks.is_empty() || e.access.is_some()
        };
        if busy {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: this rank holds locks or an access epoch on the window already"),
            ));
        }
        let nocheck = assert & MPI_MODE_NOCHECK != 0;
        for r in 0..w.targets.len() as u32 {
            if let Err(e) = take(&w, r, LockKind::Shared, nocheck) {
                // Give back what was taken.
                if !nocheck {
                    for q in 0..r {
                        let _ = w.targets[q as usize].unlock(LockKind::Shared);
                    }
                }
                return Err(e);
            }
        }
        let mut e = w.epoch();
        e.lock_all = true;
        e.fence = false;
        w.note_open(&e);
        for r in 0..w.targets.len() as u32 {
            e.locks.insert(r, LockKind::Shared);
            if nocheck {
                e.nocheck.insert(r);
            }
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_unlock_all`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_unlock_all(win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_unlock_all";
    let r = (|| {
        let w = win(win_h, call)?;
        let mut e = w.epoch();
        if !e.lock_all {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: the window is not locked by MPI_Win_lock_all"),
            ));
        }
        fence(Ordering::SeqCst);
        // Every lock is given back, whatever fails; the first failure is the result.
        let mut first = Ok(());
        let nocheck = std::mem::take(&mut e.nocheck);
        for (r, kind) in std::mem::take(&mut e.locks) {
            if !nocheck.contains(&r) {
                if let Err(err) = w.targets[r as usize].unlock(kind) {
                    if first.is_ok() {
                        first = Err(err);
                    }
                }
            }
        }
        e.lock_all = false;
        w.note_open(&e);
        first
    })();
    on_win(win_h, r)
}

/// A flush: every access is complete already; orders memory.
fn flush(win_h: MPI_Win, rank: Option<c_int>, call: &'static str) -> c_int {
    let fast = cached(win_h, |w| {
        match rank {
            Some(r) if r != MPI_PROC_NULL && usize::try_from(r).ok()? >= w.targets.len() => {
                return None
            }
            _ => {}
        }
        fence(Ordering::SeqCst);
        Some(())
    });
    if fast.is_some() {
        return MPI_SUCCESS;
    }
    let r = with_win(win_h, call, |w| {
        if let Some(rank) = rank {
            if rank != MPI_PROC_NULL {
                w.target(rank, call)?;
            }
        }
        fence(Ordering::SeqCst);
        Ok(())
    });
    on_win(win_h, r)
}

/// `MPI_Win_flush`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush(rank: c_int, win_h: MPI_Win) -> c_int {
    flush(win_h, Some(rank), "MPI_Win_flush")
}

/// `MPI_Win_flush_all`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_all(win_h: MPI_Win) -> c_int {
    flush(win_h, None, "MPI_Win_flush_all")
}

/// `MPI_Win_flush_local`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_local(rank: c_int, win_h: MPI_Win) -> c_int {
    flush(win_h, Some(rank), "MPI_Win_flush_local")
}

/// `MPI_Win_flush_local_all`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_local_all(win_h: MPI_Win) -> c_int {
    flush(win_h, None, "MPI_Win_flush_local_all")
}

/// `MPI_Win_sync`: orders this rank's loads and stores of the window with the others'.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_sync(win_h: MPI_Win) -> c_int {
    flush(win_h, None, "MPI_Win_sync")
}

/// The window ranks of group `g`'s members.
fn ranks_of(w: &WinObj, g: MPI_Group, call: &'static str) -> Result<Vec<u32>, MpiError> {
    crate::comm::group::members_of(g)?
        .into_iter()
        .map(|label| {
            w.labels
                .iter()
                .position(|&m| m == label)
                .map(|p| p as u32)
                .ok_or_else(|| {
                    MpiError::invalid(
                        MPI_ERR_GROUP,
                        format!(
                            "{call}: process {label} of the group is not in the window's group"
                        ),
                    )
                })
        })
        .collect()
}

/// `MPI_Win_post`: exposes this rank's window to the origins of `group`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_post(group: MPI_Group, assert: c_int, win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_post";
    let r = (|| {
        let w = win(win_h, call)?;
        check_assert(
            assert,
            MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT,
            call,
        )?;
        let origins = ranks_of(&w, group, call)?;
        if w.epoch().exposure.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: an exposure epoch is open already"),
            ));
        }
        fence(Ordering::SeqCst);
        for &o in &origins {
            w.comm.send::<u8>(&[], o, TAG_POST)?;
        }
        w.epoch().exposure = Some(origins);
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_start`: an access epoch on the targets of `group` (waits for their posts).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_start(group: MPI_Group, assert: c_int, win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_start";
    let r = (|| {
        let w = win(win_h, call)?;
        check_assert(assert, MPI_MODE_NOCHECK, call)?;
        let targets = ranks_of(&w, group, call)?;
        if w.epoch().access.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: an access epoch is open already"),
            ));
        }
        for &t in &targets {
            w.comm.recv::<u8>(&mut [], Source::Rank(t), TAG_POST)?;
        }
        fence(Ordering::SeqCst);
        let mut e = w.epoch();
        e.access = Some(targets);
        e.fence = false;
        w.note_open(&e);
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_complete`: ends the access epoch; tells its targets.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_complete(win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_complete";
    let r = (|| {
        let w = win(win_h, call)?;
        let targets = w.epoch().access.take().ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: no access epoch is open (MPI_Win_start)"),
            )
        })?;
        fence(Ordering::SeqCst);
        for t in targets {
            w.comm.send::<u8>(&[], t, TAG_DONE)?;
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// Takes the completion notices that have come; with `block`, waits for all.
fn wait_exposure(w: &WinObj, block: bool, call: &'static str) -> Result<bool, MpiError> {
    let mut pending = w.epoch().exposure.take().ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_RMA_SYNC,
            format!("{call}: no exposure epoch is open (MPI_Win_post)"),
        )
    })?;
    let mut left = Vec::new();
    for o in pending.drain(..) {
        if block || w.comm.iprobe(Source::Rank(o), TAG_DONE)?.is_some() {
            if let Err(e) = w.comm.recv::<u8>(&mut [], Source::Rank(o), TAG_DONE) {
                w.epoch().exposure = Some(left);
                return Err(e.into());
            }
        } else {
            left.push(o);
        }
    }
    fence(Ordering::SeqCst);
    if left.is_empty() {
        Ok(true)
    } else {
        w.epoch().exposure = Some(left);
        Ok(false)
    }
}

/// `MPI_Win_wait`: ends the exposure epoch once every origin completed.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_wait(win_h: MPI_Win) -> c_int {
    let call = "MPI_Win_wait";
    let r = (|| {
        let w = win(win_h, call)?;
        wait_exposure(&w, true, call).map(|_| ())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_test`: [`MPI_Win_wait`] without waiting; `flag` says whether it ended.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_test(win_h: MPI_Win, flag: *mut c_int) -> c_int {
    let call = "MPI_Win_test";
    let r = (|| {
        let w = win(win_h, call)?;
        let done = wait_exposure(&w, false, call)?;
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(done), call) }
    })();
    on_win(win_h, r)
}
