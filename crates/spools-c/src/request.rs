//! Non-blocking sends and receives on the caller's memory, and completing them.

use std::ffi::c_void;
use std::ptr::NonNull;

use spools::{Completion, MsgError, Request};
use spools_msg::PinnedBuf;

use crate::args::{bytes, handle, handle_mut, out, Handle};
use crate::comm::spools_comm_t;
use crate::p2p::{report, source, spools_msg_status_t, tag};
use crate::status::{guard, spools_status_t, Failure};

/// A non-blocking send or receive in flight. Complete it with `spools_wait()`,
/// `spools_waitall()` or a `spools_test()` that says it is done: each frees it and sets
/// the caller's pointer to NULL.
pub struct spools_request_t {
    magic: u64,
    req: Request,
}

impl Handle for spools_request_t {
    const MAGIC: u64 = 0x5350_4f4f_4c52_4551;
    const NAME: &'static str = "spools_request_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// The caller's memory of a pending operation: C keeps it valid until the operation
/// completes (the contract of `spools_isend` and `spools_irecv`).
struct CMem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the memory is the operation's until it completes (the C caller's contract);
// the engine may touch it from any thread of the rank.
unsafe impl Send for CMem {}

// SAFETY: `ptr` and `len` never change; the C caller keeps the memory valid, unmoved and
// untouched until the request completes (the contract of `spools_isend`/`spools_irecv`).
unsafe impl PinnedBuf for CMem {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl CMem {
    fn new(p: *const c_void, len: usize) -> CMem {
        CMem {
            ptr: NonNull::new(p.cast_mut().cast::<u8>()).unwrap_or(NonNull::dangling()),
            len,
        }
    }
}

fn boxed(req: Request) -> *mut spools_request_t {
    Box::into_raw(Box::new(spools_request_t {
        magic: spools_request_t::MAGIC,
        req,
    }))
}

/// Starts sending `len` bytes at `buf` to `dest` with `tag`, without copying them first:
/// `buf` must stay valid and unchanged until the request completes.
///
/// Thread safety: any thread.
///
/// ```c
/// spools_request_t *r;
/// spools_isend(comm, buf, len, peer, 5, &r);
/// /* ... compute ... */
/// spools_wait(&r, NULL);
/// ```
///
/// Errors: as `spools_send()`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `buf` holds `len` readable bytes that stay
/// valid and unchanged until the request completes; `req` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_isend(
    comm: *const spools_comm_t,
    buf: *const c_void,
    len: usize,
    dest: u32,
    tag: i32,
    req: *mut *mut spools_request_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        // SAFETY: the caller's contract (checks NULL and the length).
        unsafe { bytes(buf, len, "buf") }?;
        *req = boxed(c.comm.isend_pinned(CMem::new(buf, len), dest, tag)?);
        Ok(())
    })
}

/// Starts receiving a message from `src` with `tag` into `buf` of `cap` bytes: the
/// message is written straight into it; `buf` must stay valid and untouched until the
/// request completes.
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (bad source, tag or buffer); truncation is reported
/// by the call that completes the request.
///
/// # Safety
/// `comm` is NULL or a live communicator; `buf` holds `cap` writable bytes that stay
/// valid until the request completes; `req` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_irecv(
    comm: *const spools_comm_t,
    buf: *mut c_void,
    cap: usize,
    src: i32,
    tag: i32,
    req: *mut *mut spools_request_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        // SAFETY: the caller's contract (checks NULL and the length).
        unsafe { bytes(buf, cap, "buf") }?;
        let r = c
            .comm
            .irecv_pinned(CMem::new(buf, cap), source(src)?, self::tag(tag)?)?;
        *req = boxed(r);
        Ok(())
    })
}

/// Ends a request whose operation completed (or failed): frees it, clears the caller's
/// pointer, fills `status`.
///
/// # Safety
/// `*slot` is a live request no other thread uses; `status` is NULL or writable.
unsafe fn finish(
    slot: &mut *mut spools_request_t,
    r: Result<Completion, MsgError>,
    status: *mut spools_msg_status_t,
) -> Result<(), Failure> {
    // SAFETY: a live request made by `boxed` (the caller's contract).
    let mut b = unsafe { Box::from_raw(*slot) };
    b.magic = 0;
    drop(b);
    *slot = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    unsafe { report(status, r.map(|c| c.status)) }
}

/// Waits until the request completes, then frees it and sets `*req` to NULL; `status`
/// (may be NULL) describes the message. A NULL `*req` (an already completed request) is
/// accepted: `status` is then left as it is.
///
/// Thread safety: any thread, one per request.
///
/// Errors: `SPOOLS_ERR_TRUNCATED` (a receive whose message did not fit; the request is
/// freed all the same), `SPOOLS_ERR_PEER_GONE`, `SPOOLS_ERR_INTERRUPTED`.
///
/// # Safety
/// `req` points to NULL or to a live request no other thread uses; `status` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_wait(
    req: *mut *mut spools_request_t,
    status: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let slot = unsafe { out(req, "req") }?;
        if slot.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(*slot) }?;
        match h.req.wait_in_place() {
            // The wait itself failed (a dead peer, an interrupt): the request stays.
            Err(e) if !h.req.is_complete() => Err(e.into()),
            // SAFETY: a live request (checked), not used elsewhere (the contract).
            r => unsafe { finish(slot, r, status) },
        }
    })
}

/// Drives progress once and says whether the request completed: then `*flag` is 1, the
/// request is freed and `*req` set to NULL, and `status` (may be NULL) is filled; else
/// `*flag` is 0. A NULL `*req` gives `*flag` = 1.
///
/// Thread safety: any thread, one per request.
///
/// Errors: as `spools_wait()` once complete; `SPOOLS_ERR_TRANSPORT`.
///
/// # Safety
/// As `spools_wait()`; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_test(
    req: *mut *mut spools_request_t,
    flag: *mut i32,
    status: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let slot = unsafe { out(req, "req") }?;
        // SAFETY: the caller's contract.
        let flag = unsafe { out(flag, "flag") }?;
        if slot.is_null() {
            *flag = 1;
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(*slot) }?;
        if !h.req.test()? {
            *flag = 0;
            return Ok(());
        }
        *flag = 1;
        let r = h.req.wait_in_place();
        // SAFETY: a live request (checked), not used elsewhere (the contract).
        unsafe { finish(slot, r, status) }
    })
}

/// Waits for `count` requests (NULL entries are skipped), freeing each and setting its
/// entry to NULL; `statuses` (may be NULL) gets one status per entry. Every request is
/// completed even when one fails; the first failure is returned (its message in
/// `spools_last_error_message()`).
///
/// Thread safety: any thread; the requests are this call's alone.
///
/// # Safety
/// `reqs` holds `count` entries, each NULL or a live request; `statuses` is NULL or
/// holds `count` writable entries.
#[no_mangle]
pub unsafe extern "C" fn spools_waitall(
    count: usize,
    reqs: *mut *mut spools_request_t,
    statuses: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        if count == 0 {
            return Ok(());
        }
        if reqs.is_null() {
            return Err(Failure::arg(format!(
                "reqs is NULL with a count of {count}"
            )));
        }
        let mut first: Option<Failure> = None;
        for i in 0..count {
            // SAFETY: `reqs` holds `count` entries (the caller's contract).
            let slot = unsafe { reqs.add(i) };
            let st = if statuses.is_null() {
                std::ptr::null_mut()
            } else {
                // SAFETY: `statuses` holds `count` entries (the caller's contract).
                unsafe { statuses.add(i) }
            };
            // SAFETY: as this call's contract, for one entry.
            let s = unsafe { spools_wait(slot, st) };
            if s != spools_status_t::SPOOLS_OK && first.is_none() {
                // SAFETY: the message is this thread's, just set by the failing wait.
                let m =
                    unsafe { std::ffi::CStr::from_ptr(crate::status::spools_last_error_message()) };
                first = Some(Failure::new(
                    s,
                    format!("request {i}: {}", m.to_string_lossy()),
                ));
            }
        }
        first.map_or(Ok(()), Err)
    })
}

/// Cancels a receive that no message has matched yet: `*cancelled` is 1 if it was
/// cancelled (complete it with `spools_wait()`, whose status has `cancelled` = 1), 0 if
/// it had matched or is a send (sends cannot be cancelled).
///
/// Thread safety: any thread.
///
/// # Safety
/// `req` is NULL or a live request; `cancelled` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_cancel(
    req: *mut spools_request_t,
    cancelled: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(req) }?;
        // SAFETY: the caller's contract.
        let cancelled = unsafe { out(cancelled, "cancelled") }?;
        *cancelled = i32::from(h.req.cancel());
        Ok(())
    })
}
