//! Non-blocking collective accesses (`MPI_File_iread_all`, `iwrite_all`,
//! `iread_at_all`, `iwrite_at_all` and their `_c` forms): the call returns before the
//! group has called, as MPI requires (a program may order a message after one rank's
//! call and before another's), and the request completes like any other non-blocking
//! collective's: no rank has to call into the file for another's request to complete.
//!
//! The call moves this rank's own bytes at once, as an independent access does
//! (`access_now` without the group: each rank its own runs, with positioned I/O; the
//! two-phase and whole-array paths need every rank inside one call, which a
//! non-blocking call cannot ask), and starts one non-blocking collective on the file's
//! communicator: an allreduce of the minimum of every rank's outcome as one word
//! (`outcome_word`: success, or the rank and the MPI class of its error). That
//! allreduce is a `spools-msg` schedule, advanced by the progress engine's poller in
//! any wait of the rank (a blocking receive, another request's wait, a collective) and
//! by `MPI_Test` of the request, which runs a progress round. The request's outcome is
//! the group's: this rank's error; else the first failing rank's, in its class
//! (`heard`); else this rank's status (the bytes it moved).
//!
//! The file keeps the accesses not settled yet, oldest first (`queue.rs`); every
//! collective call on the file settles them first (`flush`: waits for their
//! agreements, which every rank started, in order), so that none outlives its file.

use std::ffi::c_int;
use std::sync::{Arc, Mutex, PoisonError};

use spools::{CollRequest, MsgError, Op as ReduceOp};

use crate::abi::*;
use crate::env::error::MpiError;
use crate::file::outcome::{heard, outcome_word};
use crate::file::place::{Dir, Place};
use crate::file::queue::{Access, Stage};
use crate::file::transfer::access_now;
use crate::file::{file, on_file, FileObj};
use crate::p2p::request::{give_on, CollOp, Op};

/// The group's outcome: this rank's `local` one and the minimum of every rank's
/// [`outcome_word`] (or the error of the agreement itself).
fn group_outcome(
    local: Result<MPI_Status, MpiError>,
    agreed: Result<Vec<u64>, MsgError>,
    call: &'static str,
) -> Result<MPI_Status, MpiError> {
    match (local, agreed) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e.into()),
        (Ok(s), Ok(word)) => match heard(word.first().copied().unwrap_or(u64::MAX), call) {
            Some(e) => Err(e),
            None => Ok(s),
        },
    }
}

impl Access {
    /// Settles the access when its agreement completed (with `wait`, waits for it);
    /// whether it is settled. A test runs one round of the rank's progress.
    fn settle(&self, wait: bool) -> bool {
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Stage::Agreeing(_, agreement) = &*stage {
            if !wait && !agreement.test() {
                return false;
            }
            if let Stage::Agreeing(local, agreement) = std::mem::replace(&mut *stage, Stage::Taken)
            {
                *stage = Stage::Agreed(group_outcome(local, agreement.wait(), self.call));
            }
        }
        true
    }

    /// The settled outcome, taken (once).
    fn take(&self) -> Result<MPI_Status, MpiError> {
        self.settle(true);
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *stage, Stage::Taken) {
            Stage::Agreed(r) => r,
            _ => Err(MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{}: the access's outcome was already taken", self.call),
            )),
        }
    }
}

/// Settles every non-blocking collective access of `f` not settled yet, in order (their
/// outcomes kept for their requests). Every collective call on a file calls this first.
pub(crate) fn flush(f: &FileObj) {
    let queued: Vec<Arc<Access>> = f
        .deferred
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain(..)
        .collect();
    for a in queued {
        a.settle(true);
    }
}

/// A non-blocking collective access as a request's operation.
struct Pending {
    file: Arc<FileObj>,
    access: Arc<Access>,
}

impl Pending {
    /// Takes the access off its file's queue (settled, its outcome with the request).
    fn unqueue(&self) {
        self.file
            .deferred
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|a| !Arc::ptr_eq(a, &self.access));
    }
}

impl CollOp for Pending {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.access.settle(false))
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        self.finish_status().map(drop)
    }

    fn finish_status(self: Box<Self>) -> Result<MPI_Status, MpiError> {
        let r = self.access.take();
        self.unqueue();
        r
    }
}

/// Makes a non-blocking collective access: this rank's bytes moved, the group's
/// agreement on the outcome started, its request in `request`.
///
/// # Safety
/// `buf` holds `count` elements of `dt` (writable for a read) until the request
/// completes; `request` is writable.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start(
    fh: MPI_File,
    buf: *mut u8,
    count: MPI_Count,
    dt: MPI_Datatype,
    place: Place,
    dir: Dir,
    call: &'static str,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let f = file(fh, call)?;
        // Every rank starts the agreement, whatever its access: a rank that cannot make
        // it tells its error's class there.
        // SAFETY: the caller's contract (the access is done before this returns).
        let local = unsafe { access_now(&f, buf, count, dt, place, dir, false, call) };
        let word = outcome_word(f.comm.rank(), &local);
        let agreement: CollRequest<Vec<u64>> = f.comm.iallreduce(vec![word], ReduceOp::Min)?;
        let access = Arc::new(Access {
            call,
            stage: Mutex::new(Stage::Agreeing(local, agreement)),
        });
        f.deferred
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(access.clone());
        let h = give_on(
            Op::Coll(Box::new(Pending { file: f, access })),
            fh,
            crate::file::raise_file,
        )?;
        // SAFETY: the caller's contract.
        unsafe { crate::out::out(request, h, call) }
    })();
    on_file(fh, r)
}
