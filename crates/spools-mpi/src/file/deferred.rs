//! Non-blocking collective accesses (`MPI_File_iread_all`, `iwrite_all`,
//! `iread_at_all`, `iwrite_at_all` and their `_c` forms): the call returns before the
//! group has called, as MPI requires (a program may order a message after one rank's
//! call and before another's).
//!
//! The call places the access (the individual pointer moves past the data at once),
//! starts a non-blocking barrier on the file's communicator (its arrival: every rank
//! starts it in the same order, as collective calls are made) and queues the access on
//! the file. Queued accesses are moved in the order they were made, each once its
//! barrier completed (every rank has made it): when its request is waited on, when a
//! test finds the barrier complete, and before any later collective call on the file
//! (`flush`), so that every rank moves them in the same order among the file's
//! collective steps. Moving one is the blocking collective access, with its agreement
//! on the outcome; its error is the request's, raised on the file.

use std::ffi::c_int;
use std::sync::{Arc, Mutex, PoisonError};

use spools::CollRequest;

use crate::abi::*;
use crate::datatype::{bytes_of, committed, count as ccount};
use crate::error::MpiError;
use crate::file::place::{Dir, Place};
use crate::file::queue::{Access, Queue};
use crate::file::transfer::access_now;
use crate::file::{file, on_file, FileObj};
use crate::request::{give_on, CollOp, Op};

impl Access {
    fn moved(&self) -> bool {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Whether every rank has made the access (drives the barrier once).
    fn arrived(&self) -> bool {
        self.arrival
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(CollRequest::test)
    }

    /// Waits for the arrival barrier, then moves the bytes (the blocking collective
    /// access) and keeps the outcome.
    fn perform(&self) {
        let arrival = self
            .arrival
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let waited = arrival.map_or(Ok(()), |b| b.wait().map_err(MpiError::from));
        let r = waited.and_then(|()| {
            // SAFETY: the program's buffer, which MPI forbids it to touch until the
            // request completes (the request holds this access until then).
            unsafe {
                access_now(
                    self.fh,
                    self.buf as *mut u8,
                    self.count,
                    self.dt,
                    self.place,
                    self.dir,
                    true,
                    self.call,
                )
            }
        });
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    }
}

impl Queue {
    /// Moves the queued accesses in order, up to and including `until` (all without
    /// it). With `wait`, each waits for its arrival; without, moving stops at the first
    /// whose barrier has not completed. Whether `until` (or the whole queue) was moved.
    fn drain(&self, until: Option<&Arc<Access>>, wait: bool) -> bool {
        loop {
            let front = self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .front()
                .cloned();
            let Some(a) = front else {
                return true;
            };
            if !a.moved() {
                if !wait && !a.arrived() {
                    return false;
                }
                a.perform();
            }
            let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if q.front().is_some_and(|x| Arc::ptr_eq(x, &a)) {
                q.pop_front();
            }
            drop(q);
            if until.is_some_and(|u| Arc::ptr_eq(u, &a)) {
                return true;
            }
        }
    }
}

/// Moves every queued non-blocking collective access of `f`, in order (their outcomes
/// kept for their requests). Every collective call on a file calls this first.
pub(crate) fn flush(f: &FileObj) {
    f.deferred.drain(None, true);
}

/// A queued access as a request's operation.
struct Pending {
    file: Arc<FileObj>,
    access: Arc<Access>,
}

impl CollOp for Pending {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.access.moved() || self.file.deferred.drain(Some(&self.access), false))
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        self.finish_status().map(drop)
    }

    fn finish_status(self: Box<Self>) -> Result<MPI_Status, MpiError> {
        if !self.access.moved() {
            self.file.deferred.drain(Some(&self.access), true);
        }
        self.access
            .outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| {
                Err(MpiError::invalid(
                    MPI_ERR_INTERN,
                    format!("{}: the access was not moved", self.access.call),
                ))
            })
    }
}

/// Where an access through the individual pointer starts, in etypes, and how many it
/// asks for: `None` when it cannot be placed (the access then reports why when moved).
fn own_extent(f: &FileObj, count: MPI_Count, dt: MPI_Datatype, call: &'static str) -> Option<u64> {
    let t = committed(dt, call).ok()?;
    let bytes = bytes_of(ccount(count, call).ok()?, &t, call).ok()? as u64;
    let es = f.view().etype.size as u64;
    (es > 0 && bytes % es == 0 && f.amode & MPI_MODE_SEQUENTIAL == 0).then_some(bytes / es)
}

/// Makes a non-blocking collective access: placed and queued, its request in `request`.
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
        let place = match place {
            Place::Own => {
                let extent = own_extent(&f, count, dt, call);
                let mut pos = f.pos.lock().unwrap_or_else(PoisonError::into_inner);
                match extent {
                    Some(etypes) => {
                        let start = *pos;
                        *pos = start.saturating_add(etypes);
                        Place::At(MPI_Offset::try_from(start).unwrap_or(MPI_Offset::MAX))
                    }
                    None => Place::Own,
                }
            }
            p => p,
        };
        // Every rank starts the barrier, whatever its access: a rank that cannot make
        // it says so when it is moved, and the group agrees then.
        let arrival = f.comm.ibarrier()?;
        let access = Arc::new(Access {
            fh,
            buf: buf as usize,
            count,
            dt,
            place,
            dir,
            call,
            arrival: Mutex::new(Some(arrival)),
            outcome: Mutex::new(None),
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
