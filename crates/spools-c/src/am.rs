//! Active messages: C handlers with a context pointer, the cluster-wide handler table,
//! short and bulk sends, progress and waiting.

use std::ffi::{c_char, c_void};

use spools::{ActiveMessage, Channel, Delivery, HandlerId};

use crate::args::{bytes, handle, maybe_out, out, string};
use crate::status::{guard, spools_status_t, Failure};
use crate::world::spools_world_t;

/// An active message as its handler sees it. `payload` (of bulk messages) is valid only
/// during the handler's call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_am_msg_t {
    /// The sending rank.
    pub from: u32,
    /// The channel it was sent on.
    pub channel: u16,
    /// The four argument words.
    pub args: [u64; 4],
    /// The payload (NULL for short messages).
    pub payload: *const c_void,
    /// The payload's length in bytes.
    pub payload_len: usize,
}

/// A handler: called with each message sent to it and the `ctx` given at registration,
/// on whichever thread drives progress (the caller of a Spools call that waits, or the
/// progress thread). It must be quick and must not call Spools functions that wait or
/// send: no active-message sends, puts or gets (the thread running it may hold the
/// world's endpoint, which they take), no blocking messages or collectives. It records
/// what arrived (a counter, a flag, a queue) for the program to act on.
pub type spools_am_handler_fn =
    Option<unsafe extern "C" fn(msg: *const spools_am_msg_t, ctx: *mut c_void)>;

/// A condition for `spools_am_wait_until()`: non-zero when the wait is over.
pub type spools_cond_fn = Option<unsafe extern "C" fn(ctx: *mut c_void) -> i32>;

/// Send flag: high priority (overtakes low-priority traffic; never batched).
pub const SPOOLS_AM_HIGH: u32 = 1;
/// Send flag: the channel's messages need not arrive in order.
pub const SPOOLS_AM_UNORDERED: u32 = 2;
/// Send flag (short messages): queue with others and hand over at the batch size or at
/// `spools_am_flush()`, for the highest message rate.
pub const SPOOLS_AM_BATCHED: u32 = 4;

#[derive(Clone, Copy)]
struct Ctx(*mut c_void);
// SAFETY: the C caller's contract for `spools_am_register`: the handler and its context
// may be used from any thread of the rank.
unsafe impl Send for Ctx {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ctx {}

fn channel(id: u16, flags: u32) -> Result<Channel, Failure> {
    if flags & !(SPOOLS_AM_HIGH | SPOOLS_AM_UNORDERED | SPOOLS_AM_BATCHED) != 0 {
        return Err(Failure::arg(format!("flags {flags:#x} has unknown bits")));
    }
    let mut ch = Channel::new(id);
    if flags & SPOOLS_AM_HIGH != 0 {
        ch = ch.high();
    }
    if flags & SPOOLS_AM_UNORDERED != 0 {
        ch = ch.unordered();
    }
    Ok(ch)
}

/// Registers handler `func` under `name` on this rank; call `spools_am_sync()` on every
/// rank afterwards to give it its cluster-wide id.
///
/// Thread safety: any thread.
///
/// ```c
/// static void greet(const spools_am_msg_t *m, void *ctx) {
///     __atomic_fetch_add((uint64_t *)ctx, 1, __ATOMIC_SEQ_CST);
/// }
/// uint64_t greetings = 0;
/// spools_am_register(world, "greet", greet, &greetings);
/// spools_am_sync(world);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a name already registered, NULL `func`).
///
/// # Safety
/// `world` is NULL or a live world; `name` is a NUL-terminated string; `ctx` stays
/// valid while the handler may run (until `spools_finalize()`).
#[no_mangle]
pub unsafe extern "C" fn spools_am_register(
    world: *const spools_world_t,
    name: *const c_char,
    func: spools_am_handler_fn,
    ctx: *mut c_void,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let name = unsafe { string(name, "name") }?;
        let f = func.ok_or_else(|| Failure::arg("fn is NULL"))?;
        let ctx = Ctx(ctx);
        w.world
            .worker()
            .register(name, move |m: &ActiveMessage<'_>| {
                let c = ctx;
                let msg = spools_am_msg_t {
                    from: m.from,
                    channel: m.channel,
                    args: m.args,
                    payload: if m.payload.is_empty() {
                        std::ptr::null()
                    } else {
                        m.payload.as_ptr().cast()
                    },
                    payload_len: m.payload.len(),
                };
                // SAFETY: `f` and `ctx` follow `spools_am_handler_fn`'s contract (the
                // caller's of `spools_am_register`); `msg` lives for the call.
                unsafe { f(&msg, c.0) };
            })?;
        Ok(())
    })
}

/// Collective: merges every rank's handler names and installs one name-to-id table on
/// every rank. Names already in the table keep their ids.
///
/// Thread safety: one call at a time, on every rank.
///
/// # Safety
/// `world` is NULL or a live world.
#[no_mangle]
pub unsafe extern "C" fn spools_am_sync(world: *const spools_world_t) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { handle(world) }?.world.worker().sync_handlers()?;
        Ok(())
    })
}

/// The cluster-wide id of handler `name` (after `spools_am_sync()`).
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_NOT_FOUND` for a name not in the table.
///
/// # Safety
/// `world` is NULL or a live world; `name` is a NUL-terminated string; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_am_handler_id(
    world: *const spools_world_t,
    name: *const c_char,
    id: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let name = unsafe { string(name, "name") }?;
        // SAFETY: the caller's contract.
        *unsafe { out(id, "id") }? = w.world.worker().handler_id(name)?.0;
        Ok(())
    })
}

/// Sends a short active message (four argument words) to handler `handler` on rank
/// `peer`, on channel `channel` with `SPOOLS_AM_*` flags.
///
/// Thread safety: any thread (sends of the world go out one at a time).
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a rank outside the job, an unknown handler id,
/// unknown flags), `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `world` is NULL or a live world; `args` points to 4 words.
#[no_mangle]
pub unsafe extern "C" fn spools_am_send_short(
    world: *const spools_world_t,
    peer: u32,
    handler: u32,
    args: *const u64,
    channel: u16,
    flags: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { crate::dtype::typed::<u64>(args.cast(), 4, "args") }?;
        let ch = self::channel(channel, flags)?;
        let mode = if flags & SPOOLS_AM_BATCHED != 0 {
            Delivery::Batched
        } else {
            Delivery::Immediate
        };
        let words = [a[0], a[1], a[2], a[3]];
        w.with_endpoint(|ep| Ok(ep.send_short(peer, HandlerId(handler), words, ch, mode)?))
    })
}

/// Sends a bulk active message: four words and `len` bytes of payload (up to the
/// configuration's `bulk_limit`) to handler `handler` on rank `peer`. `payload` may be
/// reused on return.
///
/// Thread safety: as `spools_am_send_short()`.
///
/// Errors: as `spools_am_send_short()`; `SPOOLS_ERR_INVALID_ARG` past `bulk_limit`.
///
/// # Safety
/// `world` is NULL or a live world; `args` points to 4 words; `payload` holds `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_am_send_bulk(
    world: *const spools_world_t,
    peer: u32,
    handler: u32,
    args: *const u64,
    payload: *const c_void,
    len: usize,
    channel: u16,
    flags: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { crate::dtype::typed::<u64>(args.cast(), 4, "args") }?;
        // SAFETY: the caller's contract.
        let data = unsafe { bytes(payload, len, "payload") }?;
        let ch = self::channel(channel, flags & !SPOOLS_AM_BATCHED)?;
        let words = [a[0], a[1], a[2], a[3]];
        w.with_endpoint(|ep| Ok(ep.send_bulk(peer, HandlerId(handler), words, data, ch)?))
    })
}

/// Hands over the batched short messages now.
///
/// Thread safety: any thread.
///
/// # Safety
/// `world` is NULL or a live world.
#[no_mangle]
pub unsafe extern "C" fn spools_am_flush(world: *const spools_world_t) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        w.with_endpoint(|ep| Ok(ep.flush()?))
    })
}

/// Runs the handlers of the messages that have arrived, without waiting; `handled` (may
/// be NULL) gets how many ran.
///
/// Thread safety: any thread.
///
/// # Safety
/// `world` is NULL or a live world; `handled` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_am_progress(
    world: *const spools_world_t,
    handled: *mut usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let n = w.world.worker().progress()?;
        // SAFETY: the caller's contract.
        unsafe { maybe_out(handled, n) };
        Ok(())
    })
}

/// Runs handlers until `cond(ctx)` returns non-zero (checked after each round of
/// progress): spins briefly, then sleeps until a message arrives. The way to wait for
/// what handlers do.
///
/// Thread safety: any thread.
///
/// ```c
/// static int all_greeted(void *ctx) { return __atomic_load_n((uint64_t *)ctx, __ATOMIC_SEQ_CST) == 3; }
/// spools_am_wait_until(world, all_greeted, &greetings);
/// ```
///
/// Errors: `SPOOLS_ERR_PEER_GONE` (a rank died meanwhile), `SPOOLS_ERR_INTERRUPTED`.
///
/// # Safety
/// `world` is NULL or a live world; `cond` is a function of `spools_cond_fn`'s contract.
#[no_mangle]
pub unsafe extern "C" fn spools_am_wait_until(
    world: *const spools_world_t,
    cond: spools_cond_fn,
    ctx: *mut c_void,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let f = cond.ok_or_else(|| Failure::arg("cond is NULL"))?;
        // SAFETY: `f` follows `spools_cond_fn`'s contract (the caller's).
        w.world.worker().wait_for(|| unsafe { f(ctx) } != 0)?;
        Ok(())
    })
}
