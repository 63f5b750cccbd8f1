//! Remote procedure calls: C functions registered by name, called on another rank.

use std::ffi::{c_char, c_void};

use crate::args::{bytes, bytes_mut, handle, maybe_out, string};
use crate::comm::spools_comm_t;
use crate::status::{guard, spools_status_t, Failure};

/// Where an RPC function puts its reply (`spools_rpc_reply()`) or its failure
/// (`spools_rpc_fail()`).
pub struct spools_rpc_reply_t {
    data: Vec<u8>,
    failure: Option<String>,
}

/// An RPC function: gets the caller's `len` bytes of `args` and `ctx`, sets its reply
/// with `spools_rpc_reply()` and returns 0; a non-zero return fails the call on the
/// caller's side (`SPOOLS_ERR_REMOTE`, with the message given to `spools_rpc_fail()`).
/// Runs on whichever thread drives progress on the serving rank; it must not wait.
pub type spools_rpc_fn = Option<
    unsafe extern "C" fn(
        args: *const c_void,
        len: usize,
        reply: *mut spools_rpc_reply_t,
        ctx: *mut c_void,
    ) -> i32,
>;

#[derive(Clone, Copy)]
struct Ctx(*mut c_void);
// SAFETY: the C caller's contract for `spools_rpc_register`: the function and its
// context may be used from any thread of the rank.
unsafe impl Send for Ctx {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ctx {}

/// Registers `func` as RPC function `name` of this rank on `comm`.
///
/// Thread safety: any thread.
///
/// ```c
/// static int square(const void *a, size_t n, spools_rpc_reply_t *r, void *ctx) {
///     int64_t x; memcpy(&x, a, sizeof x); x *= x;
///     return spools_rpc_reply(r, &x, sizeof x) == SPOOLS_OK ? 0 : 1;
/// }
/// spools_rpc_register(comm, "square", square, NULL);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a name already registered, NULL `func`).
///
/// # Safety
/// `comm` is NULL or a live communicator; `name` is a NUL-terminated string; `ctx`
/// stays valid while the function may run.
#[no_mangle]
pub unsafe extern "C" fn spools_rpc_register(
    comm: *const spools_comm_t,
    name: *const c_char,
    func: spools_rpc_fn,
    ctx: *mut c_void,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let name = unsafe { string(name, "name") }?;
        let f = func.ok_or_else(|| Failure::arg("fn is NULL"))?;
        let ctx = Ctx(ctx);
        c.comm.register_rpc(name, move |args: &[u8]| {
            let c = ctx;
            let mut reply = spools_rpc_reply_t {
                data: Vec::new(),
                failure: None,
            };
            // SAFETY: `f` and `ctx` follow `spools_rpc_fn`'s contract (the caller's of
            // `spools_rpc_register`); `args` and `reply` live for the call.
            let rc = unsafe { f(args.as_ptr().cast(), args.len(), &mut reply, c.0) };
            if rc == 0 {
                Ok(reply.data)
            } else {
                Err(reply
                    .failure
                    .unwrap_or_else(|| format!("the function returned {rc}")))
            }
        })?;
        Ok(())
    })
}

/// Sets an RPC function's reply to a copy of `len` bytes at `data`.
///
/// # Safety
/// `reply` is the pointer the function was given; `data` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_rpc_reply(
    reply: *mut spools_rpc_reply_t,
    data: *const c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { crate::args::out(reply, "reply") }?;
        // SAFETY: the caller's contract.
        r.data = unsafe { bytes(data, len, "data") }?.to_vec();
        Ok(())
    })
}

/// Sets the message an RPC function's failure (non-zero return) reports to the caller.
///
/// # Safety
/// `reply` is the pointer the function was given; `message` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn spools_rpc_fail(
    reply: *mut spools_rpc_reply_t,
    message: *const c_char,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { crate::args::out(reply, "reply") }?;
        // SAFETY: the caller's contract.
        r.failure = Some(unsafe { string(message, "message") }?.to_string());
        Ok(())
    })
}

/// Calls RPC function `name` on rank `rank` of `comm` with `len` bytes of `args` and
/// waits for its reply, copied into `reply` of `cap` bytes; `reply_len` (may be NULL)
/// gets the reply's length.
///
/// Thread safety: any thread.
///
/// ```c
/// int64_t x = 7, y;
/// spools_rpc_call(comm, 1, "square", &x, sizeof x, &y, sizeof y, NULL);
/// ```
///
/// Errors: `SPOOLS_ERR_NOT_FOUND` (no such function there), `SPOOLS_ERR_REMOTE` (it
/// failed: the message is its own), `SPOOLS_ERR_TRUNCATED` (a reply longer than `cap`:
/// `reply_len` says how long), `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `name` is a NUL-terminated string; `args`
/// holds `len` bytes; `reply` holds `cap` writable bytes; `reply_len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_rpc_call(
    comm: *const spools_comm_t,
    rank: u32,
    name: *const c_char,
    args: *const c_void,
    len: usize,
    reply: *mut c_void,
    cap: usize,
    reply_len: *mut usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let name = unsafe { string(name, "name") }?;
        // SAFETY: the caller's contract.
        let a = unsafe { bytes(args, len, "args") }?;
        // SAFETY: the caller's contract.
        let dst = unsafe { bytes_mut(reply, cap, "reply") }?;
        let got = c.comm.rpc(rank, name, a)?.wait()?;
        // SAFETY: the caller's contract.
        unsafe { maybe_out(reply_len, got.len()) };
        if got.len() > cap {
            return Err(Failure::new(
                spools_status_t::SPOOLS_ERR_TRUNCATED,
                format!(
                    "the reply of {name:?} on rank {rank} is {} bytes; the buffer has {cap}",
                    got.len()
                ),
            ));
        }
        dst[..got.len()].copy_from_slice(&got);
        Ok(())
    })
}
