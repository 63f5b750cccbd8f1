//! Requests (`MPI_Request`) and statuses: waiting and testing one, any, some or all of
//! them, cancelling and freeing them, and reading a status (`MPI_Get_count`).

use std::ffi::c_int;
use std::sync::{Arc, Mutex, PoisonError};

use spools::{Completion, MsgError, Status};

use crate::abi::*;
use crate::datatype::{dtype, elements, unpack, TypeObj};
use crate::env::errhandler::{on_self, raise};
use crate::env::error::MpiError;
use crate::handles::{Kind, Table};
use crate::out::out;

/// What a request stands for.
pub(crate) enum Op {
    /// A send in flight (`None`: already complete).
    Send(Option<spools::Request>),
    /// A receive in flight: straight into the program's buffer (`direct`, a contiguous
    /// datatype), or into a buffer of its own, to be copied (unpacked) to the program's
    /// buffer at `addr` (`count` elements of `t`) on completion.
    Recv {
        req: spools::Request,
        addr: usize,
        t: Arc<TypeObj>,
        direct: bool,
    },
    /// Complete, with this status (sends and receives with `MPI_PROC_NULL`).
    Done(MPI_Status),
    /// A send the program cancelled (`MPI_Cancel`): complete, or refused at the wait;
    /// `polls` counts the tests that found it still waiting for its receiver.
    CancelledSend { req: spools::Request, polls: u32 },
    /// Two operations completing together (`MPI_Isendrecv`): the status is the first's.
    Pair(Box<Op>, Box<Op>),
    /// A non-blocking collective.
    Coll(Box<dyn CollOp>),
    /// A generalized request (`MPI_Grequest_start`, `grequest.rs`).
    Greq(Arc<dyn ProgramOp>),
}

impl Op {
    /// Removes a point-to-point operation that a failing call started (its other half
    /// failed): a receive is released, not detached, so nothing is written into the
    /// program's buffer after the call returns (a detached receive that already matched
    /// a long message would finish into it in the background).
    pub(crate) fn abandon(self) {
        match self {
            Op::Recv { req, .. } | Op::Send(Some(req)) => req.release(),
            Op::Pair(a, b) => {
                a.abandon();
                b.abandon();
            }
            _ => {}
        }
    }
}

/// An operation the program carries out itself (a generalized request): it completes
/// when the program says so, and the program's callbacks give its status, release it
/// and cancel it.
pub(crate) trait ProgramOp: Send + Sync {
    /// Whether the program completed it.
    fn is_done(&self) -> bool;
    /// Waits until the program completes it (from another of its threads).
    fn wait_done(&self);
    /// Its status (the query callback).
    ///
    /// # Errors
    /// The callback's error code.
    fn query(&self) -> Result<MPI_Status, MpiError>;
    /// Releases the program's state (the free callback).
    ///
    /// # Errors
    /// The callback's error code.
    fn release(&self) -> Result<(), MpiError>;
    /// Queries, then releases it: a wait or test that completes it.
    ///
    /// # Errors
    /// The first callback error.
    fn finish(&self) -> Result<MPI_Status, MpiError> {
        let q = self.query();
        let f = self.release();
        let s = q?;
        f?;
        Ok(s)
    }
    /// `MPI_Cancel` on it (the cancel callback).
    ///
    /// # Errors
    /// The callback's error code.
    fn cancel(&self) -> Result<(), MpiError>;
    /// `MPI_Request_free` before completion: whether it had completed already (the
    /// caller then releases it; otherwise its completion will).
    fn orphan(&self) -> bool;
}

/// A non-blocking collective in flight: `poll` drives it once and says whether it
/// completed; `finish` waits for it and writes its results into the program's buffers.
pub(crate) trait CollOp: Send {
    /// Drives it once; whether it completed.
    fn poll(&mut self) -> Result<bool, MpiError>;
    /// Waits for it and delivers its results.
    fn finish(self: Box<Self>) -> Result<(), MpiError>;
    /// Waits for it and delivers its results; the status it completes with (an empty
    /// one, but for file accesses, which count their bytes).
    fn finish_status(self: Box<Self>) -> Result<MPI_Status, MpiError> {
        self.finish().map(|()| empty_status())
    }
}

/// What starts a collective (again, for a persistent one).
pub(crate) type Start = Arc<dyn Fn() -> Result<Box<dyn CollOp>, MpiError> + Send + Sync>;

/// What starts a persistent request's operation again (`MPI_Start`).
pub(crate) type Starter = Box<dyn Fn() -> Result<Op, MpiError> + Send + Sync>;

/// A request object: the operation, and the communicator errors go to.
pub(crate) struct ReqObj {
    op: Mutex<Option<Op>>,
    /// The object its errors are reported on (a communicator, or a file).
    comm: MPI_Comm,
    /// How they are reported there: [`raise`] for a communicator; a file access gives
    /// its file's (`file::raise_file`), so that this module needs nothing of files.
    report: Report,
    /// For a persistent request: what starts its operation.
    starter: Option<Starter>,
    /// Whether it is a generalized request (which keeps its handle until the program
    /// completes it).
    greq: bool,
}

impl ReqObj {
    /// Whether its handle goes with the completion of its operation: neither persistent
    /// nor generalized.
    fn one_shot(&self) -> bool {
        self.starter.is_none() && !self.greq
    }
}

// SAFETY: the program's buffer address is kept as an integer and written only by the
// thread that completes the request; Spools' requests are Send.
unsafe impl Sync for ReqObj {}

static REQUESTS: Table<ReqObj> = Table::new(Kind::Request);

/// Stores a new request and gives its handle.
///
/// # Errors
/// `MPI_ERR_NO_MEM` when the table is full.
pub(crate) fn give(op: Op, comm: MPI_Comm) -> Result<MPI_Request, MpiError> {
    give_on(op, comm, raise)
}

/// How a request's errors are reported on the object it is about: its code made, that
/// object's error handler applied.
pub(crate) type Report = fn(MPI_Comm, &MpiError) -> c_int;

/// As [`give`], for a request whose errors go to object `on` through `report`.
///
/// # Errors
/// `MPI_ERR_NO_MEM` when the table is full.
pub(crate) fn give_on(op: Op, on: MPI_Comm, report: Report) -> Result<MPI_Request, MpiError> {
    REQUESTS
        .insert(ReqObj {
            greq: matches!(op, Op::Greq(_)),
            op: Mutex::new(Some(op)),
            comm: on,
            report,
            starter: None,
        })
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many requests"))
}

/// Drops request `h` from the table (a generalized request the program freed, at its
/// completion).
pub(crate) fn forget(h: MPI_Request) {
    REQUESTS.remove(h);
}

/// Stores a new inactive persistent request and gives its handle.
///
/// # Errors
/// `MPI_ERR_NO_MEM` when the table is full.
pub(crate) fn give_persistent(starter: Starter, comm: MPI_Comm) -> Result<MPI_Request, MpiError> {
    REQUESTS
        .insert(ReqObj {
            op: Mutex::new(None),
            comm,
            report: raise,
            starter: Some(starter),
            greq: false,
        })
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many requests"))
}

/// Operations whose requests were freed before they completed: they complete in the
/// background (polled by later waits and tests, finished at `MPI_Finalize`).
static DETACHED: Mutex<Vec<Op>> = Mutex::new(Vec::new());

fn detach(op: Op) {
    DETACHED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(op);
}

/// Drives the detached operations once, finishing those that completed.
fn poll_detached() {
    let Ok(mut g) = DETACHED.try_lock() else {
        return;
    };
    if g.is_empty() {
        return;
    }
    let ops = std::mem::take(&mut *g);
    for mut op in ops {
        match ready(&mut op) {
            Ok(false) => g.push(op),
            _ => {
                let _ = complete(op);
            }
        }
    }
}

/// Finishes every detached operation (`MPI_Finalize`).
pub(crate) fn finish_detached() {
    let ops = std::mem::take(&mut *DETACHED.lock().unwrap_or_else(PoisonError::into_inner));
    for op in ops {
        let _ = complete(op);
    }
}

/// `MPI_Start`: starts an inactive persistent request.
#[no_mangle]
pub unsafe extern "C" fn MPI_Start(request: *mut MPI_Request) -> c_int {
    if request.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_REQUEST,
            "MPI_Start: NULL request",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *request };
    let Some(obj) = REQUESTS.get(h) else {
        return on_self(Err(MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "request",
            handle: h,
        }));
    };
    let r = (|| {
        let starter = obj.starter.as_ref().ok_or_else(|| {
            MpiError::invalid(MPI_ERR_REQUEST, "MPI_Start: not a persistent request")
        })?;
        let mut g = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
        if g.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_REQUEST,
                "MPI_Start: the request is active (wait for it first)",
            ));
        }
        *g = Some(starter()?);
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => (obj.report)(obj.comm, &e),
    }
}

/// `MPI_Startall`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Startall(count: c_int, array_of_requests: *mut MPI_Request) -> c_int {
    // SAFETY: the caller's contract.
    for h in unsafe { reqs(array_of_requests, count) } {
        // SAFETY: an element of the caller's array.
        let rc = unsafe { MPI_Start(h) };
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    MPI_SUCCESS
}

/// `MPI_Request_get_status`: whether the request completed, without freeing it.
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { get_status(request, flag, status, false) }
}

/// Writes a status: as [`put_status`], or (`full`) with its MPI_ERROR too.
///
/// # Safety
/// As [`put_status`].
unsafe fn put_status_as(full: bool, p: *mut MPI_Status, s: MPI_Status) {
    // SAFETY: the caller's contract.
    unsafe {
        if full {
            put_status_at(p, 0, s);
        } else {
            put_status(p, s);
        }
    }
}

/// [`MPI_Request_get_status`], writing the status's MPI_ERROR too (`full`: for the
/// calls of several statuses).
///
/// # Safety
/// As [`MPI_Request_get_status`].
unsafe fn get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
    full: bool,
) -> c_int {
    if request == MPI_REQUEST_NULL {
        // SAFETY: the caller's contract.
        unsafe { put_status_as(full, status, empty_status()) };
        // SAFETY: the caller's contract.
        return on_self(unsafe { out(flag, 1, "MPI_Request_get_status") });
    }
    let Some(obj) = REQUESTS.get(request) else {
        return on_self(Err(MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "request",
            handle: request,
        }));
    };
    let mut g = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
    let mut failed = None;
    let done = match g.as_mut() {
        None => Some(empty_status()),
        // A generalized request is queried (outside the lock: the program's query
        // function may call MPI on the request), and stays for the wait that frees it.
        Some(Op::Greq(q)) if !q.is_done() => None,
        Some(Op::Greq(q)) => {
            let q = q.clone();
            drop(g);
            let st = match q.query() {
                Ok(s) => s,
                Err(e) => {
                    let code = (obj.report)(obj.comm, &e);
                    let mut s = empty_status();
                    s.MPI_ERROR = code;
                    // SAFETY: the caller's contract.
                    unsafe {
                        put_status_as(full, status, s);
                        let _ = out(flag, 1, "MPI_Request_get_status");
                    }
                    return code;
                }
            };
            // SAFETY: the caller's contract.
            unsafe { put_status_as(full, status, st) };
            // SAFETY: the caller's contract.
            return on_self(unsafe { out(flag, 1, "MPI_Request_get_status") });
        }
        Some(op) => match ready(op) {
            Ok(true) => {
                let op = g.take();
                let st = match op.map(complete) {
                    Some(Ok(s)) => s,
                    Some(Err(b)) => {
                        // The operation's error is reported here, once (the request
                        // then completes with it in its status).
                        let (e, s) = *b;
                        let mut s = s.unwrap_or_else(empty_status);
                        failed = Some(e);
                        s.MPI_ERROR = MPI_ERR_IN_STATUS;
                        s
                    }
                    None => empty_status(),
                };
                *g = Some(Op::Done(st));
                Some(st)
            }
            Ok(false) => None,
            Err(e) => return (obj.report)(obj.comm, &e),
        },
    };
    drop(g);
    if let Some(mut s) = done {
        if let Some(e) = &failed {
            let code = (obj.report)(obj.comm, e);
            s.MPI_ERROR = code;
            // SAFETY: the caller's contract.
            unsafe {
                put_status_as(full, status, s);
                let _ = out(flag, 1, "MPI_Request_get_status");
            }
            return code;
        }
        // SAFETY: the caller's contract.
        unsafe { put_status_as(full, status, s) };
    }
    // SAFETY: the caller's contract.
    on_self(unsafe { out(flag, c_int::from(done.is_some()), "MPI_Request_get_status") })
}

/// The status of a completed Spools operation.
pub(crate) fn status_of(s: &Status) -> MPI_Status {
    status_with(s.source as c_int, s.tag, s.len, s.cancelled)
}

/// A status of the given fields.
pub(crate) fn status_with(source: c_int, tag: c_int, len: usize, cancelled: bool) -> MPI_Status {
    let s = Status {
        source: source as u32,
        tag,
        len,
        cancelled,
    };
    let len = s.len as u64;
    MPI_Status {
        MPI_SOURCE: s.source as c_int,
        MPI_TAG: s.tag,
        MPI_ERROR: MPI_SUCCESS,
        MPI_internal: [
            len as u32 as c_int,
            (len >> 32) as u32 as c_int,
            c_int::from(s.cancelled),
            0,
            0,
        ],
    }
}

/// Marks a send's status (`MPI_internal[3]`): writing it sets the status's cancelled flag
/// (and `MPI_ERROR` where the call sets that field) and leaves the rest as the program
/// had it. The standard leaves a send's source, tag and count undefined; MPICH writes
/// only the flag too, so a program that completes a send and a receive into one status
/// (MPICH's `irsendf` does) keeps the receive's whichever completes last.
const SEND_MARK: c_int = 0x5e4d;

/// The status a completed send gives: its cancelled flag alone (see [`SEND_MARK`]).
pub(crate) fn send_status(cancelled: bool) -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
        MPI_internal: [0, 0, c_int::from(cancelled), SEND_MARK, 0],
    }
}

/// The status of a receive or probe from `MPI_PROC_NULL`.
pub(crate) fn proc_null_status() -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: MPI_PROC_NULL,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
        MPI_internal: [0; 5],
    }
}

/// An empty status (of a null or inactive request, or a send).
pub(crate) fn empty_status() -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: MPI_ANY_SOURCE,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
        MPI_internal: [0; 5],
    }
}

fn status_len(s: &MPI_Status) -> usize {
    (s.MPI_internal[0] as u32 as u64 | ((s.MPI_internal[1] as u32 as u64) << 32)) as usize
}

/// Writes a status if the program asked for one.
///
/// # Safety
/// `p` is NULL (`MPI_STATUS_IGNORE`) or writable.
pub(crate) unsafe fn put_status(p: *mut MPI_Status, s: MPI_Status) {
    if p.is_null() {
        return;
    }
    if s.MPI_internal[3] == SEND_MARK {
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { (*p).MPI_internal[2] = s.MPI_internal[2] };
        return;
    }
    if s.MPI_SOURCE == MPI_ANY_SOURCE && s.MPI_TAG == MPI_ANY_TAG {
        // The empty status (of a null or inactive request) is whole: its MPI_ERROR is
        // MPI_SUCCESS too (MPI 4.1, 3.7.3).
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { *p = s };
        return;
    }
    // A call that gives one status leaves its MPI_ERROR as the program set it (MPI 4.1,
    // 3.2.5: only the calls that give several statuses set that field; the call's error
    // is its return value).
    // SAFETY: non-NULL and writable (the caller's contract).
    unsafe {
        (*p).MPI_SOURCE = s.MPI_SOURCE;
        (*p).MPI_TAG = s.MPI_TAG;
        (*p).MPI_internal = s.MPI_internal;
    }
}

/// The status of a finished receive into a buffer of its own: copies the data out.
///
/// # Safety
/// `addr` holds the receive's elements of `t`.
pub(crate) unsafe fn deliver(c: Completion, addr: usize, t: &TypeObj) -> MPI_Status {
    if t.contiguous() {
        // SAFETY: the program's buffer holds the receive's capacity, which the
        // message fitted (Spools truncates otherwise).
        unsafe {
            std::ptr::copy_nonoverlapping(
                c.buf.as_ptr(),
                addr as *mut u8,
                c.buf.len().min(c.status.len),
            )
        };
    } else {
        // SAFETY: as above, element by element.
        unsafe { unpack(&c.buf[..c.buf.len().min(c.status.len)], addr as *mut u8, t) };
    }
    status_of(&c.status)
}

/// The status a truncated receive reports.
pub(crate) fn truncated_status(e: &MsgError) -> Option<MPI_Status> {
    match e {
        MsgError::Truncated {
            len,
            source_rank,
            tag,
            ..
        } => Some(status_of(&Status {
            source: *source_rank,
            tag: *tag,
            len: *len,
            cancelled: false,
        })),
        _ => None,
    }
}

/// The error of a wait for a cancelled send that still waits for its receiver: MPI
/// wants such a wait to return at once, and Spools cannot take the send back.
fn cancel_refused() -> MpiError {
    MpiError::invalid(
        MPI_ERR_UNSUPPORTED_OPERATION,
        "a cancelled send still waits for its receiver: Spools does not take sends back \
         (MPI 4.1 deprecates cancelling them), and a wait for it would not end",
    )
}

/// Waits for an operation and gives its status.
fn complete(op: Op) -> Result<MPI_Status, Box<(MpiError, Option<MPI_Status>)>> {
    match op {
        Op::Done(s) => Ok(s),
        Op::Pair(a, b) => {
            let first = complete(*a);
            let second = complete(*b);
            let s = first?;
            second?;
            Ok(s)
        }
        Op::Coll(c) => c.finish_status().map_err(|e| Box::new((e, None))),
        Op::Greq(g) => {
            g.wait_done();
            g.finish().map_err(|e| Box::new((e, None)))
        }
        Op::Send(None) => Ok(send_status(false)),
        // A send that can complete without its receiver (an eager one still in the
        // transport's queue) gets a few rounds of progress; one that waits for its
        // receiver is refused.
        Op::CancelledSend { req: mut r, .. } => match (0..64).try_fold(false, |done, _| {
            if done {
                return Ok(true);
            }
            std::thread::yield_now();
            r.test()
        }) {
            Ok(true) => r
                .wait()
                .map(|c| send_status(c.status.cancelled))
                .map_err(|e| Box::new((e.into(), None))),
            Ok(false) => Err(Box::new((cancel_refused(), None))),
            Err(e) => Err(Box::new((e.into(), None))),
        },
        Op::Send(Some(r)) => r
            .wait()
            .map(|c| send_status(c.status.cancelled))
            .map_err(|e| Box::new((e.into(), None))),
        Op::Recv {
            req,
            addr,
            t,
            direct,
        } => match req.wait() {
            Ok(c) if direct => Ok(status_of(&c.status)),
            // SAFETY: `addr` is the program's buffer for this receive (MPI's contract:
            // valid until the request completes).
            Ok(c) => Ok(unsafe { deliver(c, addr, &t) }),
            Err(e) => {
                let s = truncated_status(&e);
                Err(Box::new((e.into(), s)))
            }
        },
    }
}

/// Whether the operation has completed (driving progress once).
fn ready(op: &mut Op) -> Result<bool, MpiError> {
    ready_counting(op, false)
}

/// [`ready`]; `count` (a test of this request alone, or of all: `MPI_Test`,
/// `MPI_Testall`) counts a cancelled send's tests toward its refusal, which the waits
/// and tests for any or some never take (their other requests may still complete).
fn ready_counting(op: &mut Op, count: bool) -> Result<bool, MpiError> {
    poll_detached();
    Ok(match op {
        Op::Pair(a, b) => ready_counting(a, count)? && ready_counting(b, count)?,
        Op::Coll(c) => c.poll()?,
        Op::Greq(g) => g.is_done(),
        Op::Done(_) | Op::Send(None) => true,
        Op::Send(Some(r)) => r.test()?,
        // Ready when sent (a test or a status query may come before the program
        // receives the message itself); only a wait refuses (`complete`). A program
        // that tests it in a loop (`MPI_Test`, `MPI_Testall`) meets the refusal too,
        // after `CANCELLED_TESTS` tests (MPI: a test of a cancelled operation
        // eventually succeeds).
        Op::CancelledSend { req, polls } => {
            req.test()?
                || (count && {
                    *polls += 1;
                    *polls > CANCELLED_TESTS
                })
        }
        Op::Recv { req, .. } => req.test()?,
    })
}

/// Outcome of finishing a request: its status, or an error code (already reported on
/// the request's communicator) with the status to show.
fn finish_handle(h: &mut MPI_Request) -> Result<MPI_Status, (c_int, MPI_Status)> {
    if *h == MPI_REQUEST_NULL {
        return Ok(empty_status());
    }
    // A one-shot request leaves the table at once (one lock of the table), and its
    // object is then this call's alone: its operation is taken without a lock.
    let obj = match REQUESTS.take_if(*h, ReqObj::one_shot) {
        Some(Ok(obj)) => {
            *h = MPI_REQUEST_NULL;
            let (comm, report) = (obj.comm, obj.report);
            let op = match Arc::try_unwrap(obj) {
                Ok(o) => o.op.into_inner().unwrap_or_else(PoisonError::into_inner),
                // Another thread still holds it (a test of the same request at once,
                // which MPI makes erroneous): through its lock.
                Err(shared) => shared
                    .op
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(),
            };
            return complete_reporting(op, comm, report);
        }
        Some(Err(obj)) => obj,
        None => {
            let e = MpiError::Handle {
                class: MPI_ERR_REQUEST,
                what: "request",
                handle: *h,
            };
            let code = raise(crate::env::errhandler::no_object(), &e);
            return Err((code, empty_status()));
        }
    };
    // A generalized request keeps its handle until the program completes it (another
    // thread's `MPI_Grequest_start` must not be given the handle meanwhile:
    // `MPI_Grequest_complete` finds requests by handle); a persistent one for good.
    // One lock for every other request, released before the wait below.
    let op = {
        let mut held = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_ref() {
            Some(Op::Greq(g)) => {
                let g = g.clone();
                drop(held);
                g.wait_done();
                obj.op.lock().unwrap_or_else(PoisonError::into_inner).take()
            }
            _ => held.take(),
        }
    };
    if obj.starter.is_none() {
        REQUESTS.remove(*h);
        *h = MPI_REQUEST_NULL;
    }
    complete_reporting(op, obj.comm, obj.report)
}

/// Completes `op` (none: an inactive request), reporting its error on `comm` through
/// `report`.
fn complete_reporting(
    op: Option<Op>,
    comm: MPI_Comm,
    report: Report,
) -> Result<MPI_Status, (c_int, MPI_Status)> {
    let Some(op) = op else {
        return Ok(empty_status());
    };
    complete(op).map_err(|b| {
        let (e, s) = *b;
        let code = report(comm, &e);
        let mut s = s.unwrap_or_else(empty_status);
        s.MPI_ERROR = code;
        (code, s)
    })
}

/// Whether request `h` has completed (`MPI_REQUEST_NULL` has).
fn poll_handle(h: MPI_Request) -> Result<bool, c_int> {
    poll_handle_counting(h, false)
}

/// [`poll_handle`], counting a cancelled send's tests ([`ready_counting`]).
fn poll_handle_counting(h: MPI_Request, count: bool) -> Result<bool, c_int> {
    if h == MPI_REQUEST_NULL {
        return Ok(true);
    }
    let Some(obj) = REQUESTS.get(h) else {
        let e = MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "request",
            handle: h,
        };
        return Err(raise(crate::env::errhandler::no_object(), &e));
    };
    let mut g = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
    match g.as_mut() {
        None => Ok(true),
        Some(op) => ready_counting(op, count).map_err(|e| (obj.report)(obj.comm, &e)),
    }
}

/// The requests of an array argument.
///
/// # Safety
/// `p` holds `n` requests.
unsafe fn reqs<'a>(p: *mut MPI_Request, n: c_int) -> &'a mut [MPI_Request] {
    if p.is_null() || n <= 0 {
        return &mut [];
    }
    // SAFETY: `n` requests (the caller's contract).
    unsafe { std::slice::from_raw_parts_mut(p, n as usize) }
}

/// # Safety
/// `p` is NULL or holds `i + 1` statuses.
unsafe fn put_status_at(p: *mut MPI_Status, i: usize, s: MPI_Status) {
    if p.is_null() {
        return;
    }
    if s.MPI_internal[3] == SEND_MARK {
        // A send's: its flag and MPI_ERROR (these calls set that field) only.
        // SAFETY: the caller's contract.
        unsafe {
            (*p.add(i)).MPI_internal[2] = s.MPI_internal[2];
            (*p.add(i)).MPI_ERROR = s.MPI_ERROR;
        }
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { *p.add(i) = s };
}

/// `MPI_Wait`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    if request.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_REQUEST,
            "MPI_Wait: request is NULL",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    match finish_handle(unsafe { &mut *request }) {
        Ok(s) => {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, s) };
            MPI_SUCCESS
        }
        Err((code, s)) => {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, s) };
            code
        }
    }
}

/// `MPI_Test`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    if request.is_null() || flag.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Test: request or flag is NULL",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    match poll_handle_counting(unsafe { *request }, true) {
        Ok(true) => {
            // SAFETY: the caller's contract.
            unsafe { *flag = 1 };
            // SAFETY: the caller's contract.
            unsafe { MPI_Wait(request, status) }
        }
        Ok(false) => {
            // SAFETY: the caller's contract.
            unsafe { *flag = 0 };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// `MPI_Waitall`: waits for every request; `MPI_ERR_IN_STATUS` if any failed (each
/// status's `MPI_ERROR` says which).
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests, count) };
    let mut failed = false;
    for (i, h) in rs.iter_mut().enumerate() {
        let s = match finish_handle(h) {
            Ok(s) => s,
            Err((_, s)) => {
                failed = true;
                s
            }
        };
        // SAFETY: the caller's contract: `count` statuses or MPI_STATUSES_IGNORE.
        unsafe { put_status_at(array_of_statuses, i, s) };
    }
    if failed {
        MPI_ERR_IN_STATUS
    } else {
        MPI_SUCCESS
    }
}

/// `MPI_Testall`: whether every request has completed (then they are finished as
/// `MPI_Waitall` does).
#[no_mangle]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests, count) };
    for &h in rs.iter() {
        match poll_handle_counting(h, true) {
            Ok(true) => {}
            Ok(false) => {
                // SAFETY: the caller's contract.
                return on_self(unsafe { out(flag, 0, "MPI_Testall") });
            }
            Err(code) => return code,
        }
    }
    // SAFETY: the caller's contract.
    if let Err(e) = unsafe { out(flag, 1, "MPI_Testall") } {
        return on_self(Err(e));
    }
    // SAFETY: the caller's contract.
    unsafe { MPI_Waitall(count, array_of_requests, array_of_statuses) }
}

/// Whether `h` is an active request (not `MPI_REQUEST_NULL`, not an inactive
/// persistent one).
fn active(h: MPI_Request) -> bool {
    h != MPI_REQUEST_NULL
        && REQUESTS.get(h).is_none_or(|o| {
            o.starter.is_none()
                || o.op
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_some()
        })
}

/// The first completed active request of `rs`, polling each once.
fn any_ready(rs: &[MPI_Request]) -> Result<Option<usize>, c_int> {
    for (i, &h) in rs.iter().enumerate() {
        if active(h) && poll_handle(h)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// The first of `rs` when every active request there is a cancelled send: a wait for
/// any of them would not end unless a receiver takes one, so after a few rounds the
/// waits for any or some refuse the first (as `MPI_Wait` does).
fn only_cancelled_sends(rs: &[MPI_Request]) -> Option<usize> {
    let mut first = None;
    for (i, &h) in rs.iter().enumerate() {
        if !active(h) {
            continue;
        }
        let obj = REQUESTS.get(h)?;
        let g = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(g.as_ref(), Some(Op::CancelledSend { .. })) {
            return None;
        }
        first.get_or_insert(i);
    }
    first
}

/// Rounds of polling before a wait for any or some looks for cancelled sends only.
const CANCELLED_ROUNDS: u32 = 64;

/// Tests of a cancelled send still waiting for its receiver before a test reports it
/// complete, to be refused as a wait refuses it.
const CANCELLED_TESTS: u32 = 1000;

/// `MPI_Waitany`: waits for one request; `MPI_UNDEFINED` in `index` when none is
/// active.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests, count) };
    if !rs.iter().any(|&h| active(h)) {
        // SAFETY: the caller's contract.
        unsafe { put_status(status, empty_status()) };
        // SAFETY: the caller's contract.
        return on_self(unsafe { out(index, MPI_UNDEFINED, "MPI_Waitany") });
    }
    let mut rounds = 0u32;
    loop {
        let found = match any_ready(rs) {
            Ok(None) if rounds >= CANCELLED_ROUNDS => only_cancelled_sends(rs),
            Ok(found) => found,
            Err(code) => return code,
        };
        if let Some(i) = found {
            // SAFETY: the caller's contract.
            if let Err(e) = unsafe { out(index, i as c_int, "MPI_Waitany") } {
                return on_self(Err(e));
            }
            // SAFETY: the caller's contract: `rs[i]` is in the array.
            return unsafe { MPI_Wait(&mut rs[i], status) };
        }
        rounds = rounds.saturating_add(1);
        std::thread::yield_now();
    }
}

/// `MPI_Testany`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests, count) };
    if !rs.iter().any(|&h| active(h)) {
        // SAFETY: the caller's contract.
        unsafe {
            put_status(status, empty_status());
            let _ = out(flag, 1, "MPI_Testany");
            return on_self(out(index, MPI_UNDEFINED, "MPI_Testany"));
        }
    }
    match any_ready(rs) {
        Ok(Some(i)) => {
            // SAFETY: the caller's contract.
            unsafe {
                let _ = out(flag, 1, "MPI_Testany");
                let _ = out(index, i as c_int, "MPI_Testany");
                MPI_Wait(&mut rs[i], status)
            }
        }
        Ok(None) => {
            // SAFETY: the caller's contract.
            unsafe {
                let _ = out(index, MPI_UNDEFINED, "MPI_Testany");
                on_self(out(flag, 0, "MPI_Testany"))
            }
        }
        Err(code) => code,
    }
}

/// Finishes every completed active request; gives how many (`MPI_UNDEFINED` when none
/// is active).
///
/// # Safety
/// As `MPI_Testsome`'s arguments.
unsafe fn some(
    rs: &mut [MPI_Request],
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    wait: bool,
) -> c_int {
    if !rs.iter().any(|&h| active(h)) {
        // SAFETY: the caller's contract.
        return on_self(unsafe { out(outcount, MPI_UNDEFINED, "MPI_Testsome") });
    }
    let mut rounds = 0u32;
    loop {
        let mut n = 0usize;
        let mut failed = false;
        let refuse = if wait && rounds >= CANCELLED_ROUNDS {
            only_cancelled_sends(rs)
        } else {
            None
        };
        for (i, h) in rs.iter_mut().enumerate() {
            if !active(*h) {
                continue;
            }
            match poll_handle(*h) {
                Ok(ready) if ready || refuse == Some(i) => {
                    let s = finish_handle(h).unwrap_or_else(|(_, s)| {
                        failed = true;
                        s
                    });
                    // SAFETY: the caller's contract: `incount` indices and statuses.
                    unsafe {
                        if !indices.is_null() {
                            *indices.add(n) = i as c_int;
                        }
                        put_status_at(statuses, n, s);
                    }
                    n += 1;
                }
                Ok(_) => {}
                Err(code) => return code,
            }
        }
        if n > 0 || !wait {
            // SAFETY: the caller's contract.
            if let Err(e) = unsafe { out(outcount, n as c_int, "MPI_Testsome") } {
                return on_self(Err(e));
            }
            return if failed {
                MPI_ERR_IN_STATUS
            } else {
                MPI_SUCCESS
            };
        }
        rounds = rounds.saturating_add(1);
        std::thread::yield_now();
    }
}

/// `MPI_Waitsome`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        some(
            reqs(array_of_requests, incount),
            outcount,
            array_of_indices,
            array_of_statuses,
            true,
        )
    }
}

/// `MPI_Testsome`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Testsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        some(
            reqs(array_of_requests, incount),
            outcount,
            array_of_indices,
            array_of_statuses,
            false,
        )
    }
}

/// `MPI_Request_free`: the operation goes on (a send completes in the background); the
/// handle becomes `MPI_REQUEST_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_free(request: *mut MPI_Request) -> c_int {
    if request.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_REQUEST,
            "MPI_Request_free: NULL",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *request };
    // A generalized request the program has not completed stays in the table (its
    // handle not reused) until `MPI_Grequest_complete`, which releases it; a completed
    // one is released now.
    if let Some(obj) = REQUESTS.get(h) {
        let mut g = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(Op::Greq(q)) = g.as_ref() {
            let q = q.clone();
            let done = q.orphan();
            if done {
                *g = None;
            }
            drop(g);
            if done {
                REQUESTS.remove(h);
            }
            // SAFETY: as above.
            unsafe { *request = MPI_REQUEST_NULL };
            if !done {
                return MPI_SUCCESS;
            }
            return match q.release() {
                Ok(()) => MPI_SUCCESS,
                Err(e) => (obj.report)(obj.comm, &e),
            };
        }
    }
    match REQUESTS.remove(h) {
        Some(obj) => {
            // The operation goes on in the background (MPI: a freed request's
            // operation still completes).
            if let Some(op) = obj.op.lock().unwrap_or_else(PoisonError::into_inner).take() {
                detach(op);
            }
            // SAFETY: as above.
            unsafe { *request = MPI_REQUEST_NULL };
            MPI_SUCCESS
        }
        None => on_self(Err(MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "request",
            handle: h,
        })),
    }
}

/// `MPI_Cancel`: cancels a receive no message has matched yet (the status of its
/// completion says so); a send cannot be cancelled once started.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cancel(request: *mut MPI_Request) -> c_int {
    if request.is_null() {
        return on_self(Err(MpiError::invalid(MPI_ERR_REQUEST, "MPI_Cancel: NULL")));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *request };
    match REQUESTS.get(h) {
        Some(obj) => {
            let mut op = obj.op.lock().unwrap_or_else(PoisonError::into_inner);
            match op.take() {
                Some(Op::Recv {
                    req,
                    addr,
                    t,
                    direct,
                }) => {
                    let _ = req.cancel();
                    *op = Some(Op::Recv {
                        req,
                        addr,
                        t,
                        direct,
                    });
                }
                // A send cannot be taken back (MPI 4.1 deprecates cancelling one); it
                // is marked, so that a wait for it ends at once, as MPI wants of a
                // cancelled operation, rather than for good.
                Some(Op::Send(Some(req))) => *op = Some(Op::CancelledSend { req, polls: 0 }),
                Some(Op::Greq(q)) => {
                    *op = Some(Op::Greq(q.clone()));
                    drop(op);
                    if let Err(e) = q.cancel() {
                        return (obj.report)(obj.comm, &e);
                    }
                }
                other => *op = other,
            }
            MPI_SUCCESS
        }
        None => on_self(Err(MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "request",
            handle: h,
        })),
    }
}

/// `MPI_Test_cancelled`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    if status.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Test_cancelled: NULL status",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    let c = unsafe { (*status).MPI_internal[2] };
    // SAFETY: the caller's contract.
    on_self(unsafe { out(flag, c_int::from(c != 0), "MPI_Test_cancelled") })
}

/// `MPI_Get_count`: whole elements of `datatype` the status's message held
/// (`MPI_UNDEFINED` when not a whole number).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    let r = (|| {
        if status.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Get_count: NULL status"));
        }
        let t = dtype(datatype)?;
        // SAFETY: non-NULL (the caller's contract).
        let len = status_len(unsafe { &*status });
        // SAFETY: the caller's contract.
        unsafe { out(count, elements(len, &t), "MPI_Get_count") }
    })();
    on_self(r)
}

/// `MPI_Get_elements`: primitive elements the status's message held.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_elements(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    let r = (|| {
        if status.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Get_elements: NULL status",
            ));
        }
        let t = dtype(datatype)?;
        // SAFETY: non-NULL (the caller's contract).
        let len = status_len(unsafe { &*status });
        let n = crate::datatype::typeinfo::elements_of(len as u64, &t, true);
        let n = c_int::try_from(n).unwrap_or(MPI_UNDEFINED);
        // SAFETY: the caller's contract.
        unsafe { out(count, n, "MPI_Get_elements") }
    })();
    on_self(r)
}

/// `MPI_Status_set_elements`: sets the byte count a status reports.
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: c_int,
) -> c_int {
    let r = (|| {
        let t = dtype(datatype)?;
        if status.is_null() || count < 0 {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Status_set_elements: NULL status or negative count",
            ));
        }
        let len = crate::datatype::typeinfo::bytes_of_elements(count as u64, &t);
        // SAFETY: non-NULL (the caller's contract).
        unsafe {
            (*status).MPI_internal[0] = len as u32 as c_int;
            (*status).MPI_internal[1] = (len >> 32) as u32 as c_int;
        }
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Request_get_status_all`: whether every request completed (none is freed).
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_all(
    count: c_int,
    array_of_requests: *const MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests.cast_mut(), count) };
    let mut sts = Vec::with_capacity(rs.len());
    for &h in rs.iter() {
        let (mut f, mut s) = (0, empty_status());
        // SAFETY: locals.
        let rc = unsafe { get_status(h, &mut f, &mut s, true) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if f == 0 {
            // SAFETY: the caller's contract.
            return on_self(unsafe { out(flag, 0, "MPI_Request_get_status_all") });
        }
        sts.push(s);
    }
    for (i, s) in sts.into_iter().enumerate() {
        // SAFETY: the caller's contract: `count` statuses or MPI_STATUSES_IGNORE.
        unsafe { put_status_at(array_of_statuses, i, s) };
    }
    // SAFETY: the caller's contract.
    on_self(unsafe { out(flag, 1, "MPI_Request_get_status_all") })
}

/// `MPI_Request_get_status_any`: the index of a completed active request (none freed).
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_any(
    count: c_int,
    array_of_requests: *const MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests.cast_mut(), count) };
    if !rs.iter().any(|&h| active(h)) {
        // SAFETY: the caller's contract.
        unsafe {
            put_status(status, empty_status());
            let _ = out(index, MPI_UNDEFINED, "MPI_Request_get_status_any");
            return on_self(out(flag, 1, "MPI_Request_get_status_any"));
        }
    }
    for (i, &h) in rs.iter().enumerate() {
        if !active(h) {
            continue;
        }
        let (mut f, mut s) = (0, empty_status());
        // SAFETY: locals.
        let rc = unsafe { get_status(h, &mut f, &mut s, true) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if f != 0 {
            // SAFETY: the caller's contract.
            unsafe {
                put_status(status, s);
                let _ = out(index, i as c_int, "MPI_Request_get_status_any");
                return on_self(out(flag, 1, "MPI_Request_get_status_any"));
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        let _ = out(index, MPI_UNDEFINED, "MPI_Request_get_status_any");
        on_self(out(flag, 0, "MPI_Request_get_status_any"))
    }
}

/// `MPI_Request_get_status_some`: the indices of the completed active requests (none
/// freed).
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_some(
    incount: c_int,
    array_of_requests: *const MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let rs = unsafe { reqs(array_of_requests.cast_mut(), incount) };
    if !rs.iter().any(|&h| active(h)) {
        // SAFETY: the caller's contract.
        return on_self(unsafe { out(outcount, MPI_UNDEFINED, "MPI_Request_get_status_some") });
    }
    let mut n = 0usize;
    for (i, &h) in rs.iter().enumerate() {
        if !active(h) {
            continue;
        }
        let (mut f, mut s) = (0, empty_status());
        // SAFETY: locals.
        let rc = unsafe { get_status(h, &mut f, &mut s, true) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if f != 0 {
            // SAFETY: the caller's contract: `incount` indices and statuses.
            unsafe {
                if !array_of_indices.is_null() {
                    *array_of_indices.add(n) = i as c_int;
                }
                put_status_at(array_of_statuses, n, s);
            }
            n += 1;
        }
    }
    // SAFETY: the caller's contract.
    on_self(unsafe { out(outcount, n as c_int, "MPI_Request_get_status_some") })
}
