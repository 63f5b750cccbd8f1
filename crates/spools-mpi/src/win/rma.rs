//! The communication calls of one-sided windows: `MPI_Put`, `MPI_Get`,
//! `MPI_Accumulate`, `MPI_Get_accumulate`, `MPI_Fetch_and_op`, `MPI_Compare_and_swap`
//! and the request-based `MPI_R*` forms (and their `_c` twins). Each completes before
//! it returns (the copy is done by this rank), so a request is born complete and the
//! flushes have nothing to wait for. Accumulates hold the target's accumulate lock
//! while they read, combine and write: element-wise atomic, as MPI requires of them.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::abi::*;
use crate::coll::op::{span, Reducer};
use crate::datatype::{committed, count as ccount, pack, predefined, unpack, TypeObj};
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::{empty_status, give, Op};
use crate::win::target::{runs_of, Runs, Target};
use crate::win::{cached, on_win, win, with_win, WinObj};

/// One side of an access: `count` elements of a datatype at an address.
struct Side {
    addr: *const u8,
    count: usize,
    t: Arc<TypeObj>,
}

/// Checks one side of an access (`what`: the argument naming its buffer).
fn side(
    addr: *const c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    call: &'static str,
    what: &'static str,
) -> Result<Side, MpiError> {
    let t = committed(dt, call)?;
    let count = ccount(count, call)?;
    // The byte count must fit (a huge `_c` count is an error, not an overflow).
    crate::datatype::bytes_of(count, &t, call)?;
    crate::datatype::buffer(addr as usize, count, &t, call, what)?;
    Ok(Side {
        addr: addr.cast(),
        count,
        t,
    })
}

impl Side {
    fn bytes(&self) -> usize {
        self.count * self.t.size
    }
}

/// The target side: where the elements land in target `rank`'s window.
struct At<'w> {
    t: &'w Target,
    runs: Runs,
    bytes: usize,
}

fn at<'w>(
    w: &'w WinObj,
    rank: c_int,
    disp: MPI_Aint,
    count: MPI_Count,
    dt: MPI_Datatype,
    origin_bytes: usize,
    call: &'static str,
) -> Result<Option<At<'w>>, MpiError> {
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    let t = w.target(rank, call)?;
    if !w.reaches(rank as u32) {
        return Err(MpiError::invalid(
            MPI_ERR_RMA_SYNC,
            format!("{call}: rank {rank} is in no access epoch of this rank (a fence, a lock or MPI_Win_start opens one)"),
        ));
    }
    let tt = committed(dt, call)?;
    let n = ccount(count, call)?;
    let bytes = crate::datatype::bytes_of(n, &tt, call)?;
    if bytes != origin_bytes {
        return Err(MpiError::invalid(
            MPI_ERR_TYPE,
            format!("{call}: the origin has {origin_bytes} bytes of data and the target {bytes}: their type signatures differ"),
        ));
    }
    let start = if t.dynamic {
        disp
    } else {
        if disp < 0 {
            return Err(MpiError::invalid(
                MPI_ERR_DISP,
                format!("{call}: target displacement {disp} is negative"),
            ));
        }
        disp.checked_mul(t.disp_unit as isize).ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_DISP,
                format!("{call}: target displacement {disp} overflows"),
            )
        })?
    };
    let runs = runs_of(start, n, &tt, call)?;
    t.check(&runs, call)?;
    Ok(Some(At { t, runs, bytes }))
}

/// The fast path of a put or a get: both datatypes predefined and contiguous, and the
/// target's window mapped in this process (this rank's own, or a peer's shared-heap
/// segment; not a dynamic window). Gives the target address and the bytes, checked as
/// [`at`] and [`side`] check them (counts, equal byte counts, a displacement in the
/// window, an origin buffer that is no NULL or `MPI_IN_PLACE`), with no reference count, no run list and no allocation; `None` sends the access down the
/// general path, which also reports every error.
#[inline(always)]
fn direct(
    w: &WinObj,
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    rank: c_int,
    disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
) -> Option<(&Target, *mut u8, usize)> {
    let ot = predefined(origin_datatype)?;
    let tt = predefined(target_datatype)?;
    if !ot.contiguous() || !tt.contiguous() {
        return None;
    }
    let t = w.targets.get(usize::try_from(rank).ok()?)?;
    let base = t.direct()?;
    // Outside an epoch: the general path reports it.
    if !w.reaches(rank as u32) {
        return None;
    }
    let n = usize::try_from(origin_count).ok()?;
    if crate::datatype::unusable(origin_addr as usize, n, ot).is_some() {
        return None;
    }
    let bytes = n.checked_mul(ot.size)?;
    if usize::try_from(target_count).ok()?.checked_mul(tt.size)? != bytes
        || bytes > isize::MAX as usize
    {
        return None;
    }
    let start = usize::try_from(disp).ok()?.checked_mul(t.disp_unit)?;
    if start.checked_add(bytes)? > t.len {
        return None;
    }
    Some((t, base.wrapping_add(start), bytes))
}

/// Whether `len` bytes at `a` and at `b` overlap (an accumulate from a window into
/// itself): such an accumulate is not combined in place but through a copy of the
/// target's bytes (the general path).
fn overlap(a: *const u8, b: *const u8, len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    a < b.wrapping_add(len) && b < a.wrapping_add(len)
}

/// The origin's data, packed (borrowed when contiguous).
///
/// # Safety
/// `s.addr` holds `s.count` elements of `s.t`.
unsafe fn data(s: &Side) -> Vec<u8> {
    if s.bytes() == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { pack(s.addr, s.count, &s.t) }
}

/// # Safety
/// The caller's buffers hold what their counts and datatypes say.
unsafe fn put(
    w: &WinObj,
    o: &Side,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: MPI_Datatype,
    call: &'static str,
) -> Result<(), MpiError> {
    let Some(a) = at(w, rank, disp, tc, tdt, o.bytes(), call)? else {
        return Ok(());
    };
    if a.bytes == 0 {
        return Ok(());
    }
    if o.t.contiguous() {
        // SAFETY: the caller's contract: `bytes` contiguous bytes at the origin.
        let src = unsafe { std::slice::from_raw_parts(o.addr, a.bytes) };
        return a.t.write(&a.runs, src, call);
    }
    // SAFETY: the caller's contract.
    let d = unsafe { data(o) };
    a.t.write(&a.runs, &d, call)
}

/// # Safety
/// As [`put`].
unsafe fn get(
    w: &WinObj,
    o: &Side,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: MPI_Datatype,
    call: &'static str,
) -> Result<(), MpiError> {
    let Some(a) = at(w, rank, disp, tc, tdt, o.bytes(), call)? else {
        return Ok(());
    };
    if a.bytes == 0 {
        return Ok(());
    }
    if o.t.contiguous() {
        // SAFETY: the caller's contract: `bytes` writable contiguous bytes.
        let dst = unsafe { std::slice::from_raw_parts_mut(o.addr.cast_mut(), a.bytes) };
        return a.t.read(&a.runs, dst, call);
    }
    let mut d = vec![0u8; a.bytes];
    a.t.read(&a.runs, &mut d, call)?;
    // SAFETY: the caller's contract.
    unsafe { unpack(&d, o.addr.cast_mut(), &o.t) };
    Ok(())
}

/// The combining of an accumulate: `None` for `MPI_NO_OP`, `Some(None)` for
/// `MPI_REPLACE`.
fn combiner(
    op: MPI_Op,
    dt: MPI_Datatype,
    t: &Arc<TypeObj>,
    n: usize,
    call: &'static str,
) -> Result<Option<Option<Reducer>>, MpiError> {
    match op {
        MPI_NO_OP => Ok(None),
        MPI_REPLACE => Ok(Some(None)),
        MPI_SUM | MPI_PROD | MPI_MIN | MPI_MAX | MPI_BAND | MPI_BOR | MPI_BXOR | MPI_LAND | MPI_LOR | MPI_LXOR
        | MPI_MINLOC | MPI_MAXLOC => {
            // The arithmetic is the target type's basic element's: a derived target
            // type is many of one predefined type.
            let r = Reducer::new(op, dt, t, n)?;
            if !r.packed() && t.blocks.iter().any(|b| b.0 < 0) {
                return Err(MpiError::invalid(
                    MPI_ERR_TYPE,
                    format!("{call}: the target datatype has bytes before its start"),
                ));
            }
            Ok(Some(Some(r)))
        }
        _ => Err(MpiError::invalid(
            MPI_ERR_OP,
            format!("{call}: accumulates take predefined operators, MPI_REPLACE and MPI_NO_OP only (operator {op:#x})"),
        )),
    }
}

/// Accumulate with an optional fetch of the target's previous contents into `result`.
///
/// # Safety
/// As [`put`]; `result` holds its count of elements of its type.
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate(
    w: &WinObj,
    o: Option<&Side>,
    result: Option<&Side>,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: MPI_Datatype,
    op: MPI_Op,
    call: &'static str,
) -> Result<(), MpiError> {
    let tt = committed(tdt, call)?;
    let n = ccount(tc, call)?;
    let bytes = crate::datatype::bytes_of(n, &tt, call)?;
    // Nothing to combine in no element (MPI's own tests accumulate zero bytes with SUM).
    let how = if bytes == 0 {
        None
    } else {
        combiner(op, tdt, &tt, n, call)?
    };
    // The origin's data is the target's element count's (MPI_NO_OP reads none).
    let Some(a) = at(w, rank, disp, tc, tdt, bytes, call)? else {
        return Ok(());
    };
    let input = match (o, &how) {
        (Some(o), Some(_)) => {
            if o.bytes() != bytes {
                return Err(MpiError::invalid(
                    MPI_ERR_TYPE,
                    format!(
                        "{call}: the origin has {} bytes of data and the target {bytes}",
                        o.bytes()
                    ),
                ));
            }
            if o.t.contiguous() {
                // SAFETY: the caller's contract: `bytes` contiguous bytes at the origin,
                // which MPI forbids the program to change during the call.
                std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(o.addr, bytes) })
            } else {
                // SAFETY: the caller's contract.
                std::borrow::Cow::Owned(unsafe { data(o) })
            }
        }
        _ => std::borrow::Cow::Borrowed(&[][..]),
    };
    if let Some(r) = result {
        if r.bytes() != bytes {
            return Err(MpiError::invalid(
                MPI_ERR_TYPE,
                format!(
                    "{call}: the result buffer takes {} bytes and the target holds {bytes}",
                    r.bytes()
                ),
            ));
        }
    }
    if bytes == 0 {
        return Ok(());
    }
    // A combining accumulate with no result, into a window mapped here, in one run of
    // packed elements: combined in place in the target's memory under its accumulate
    // lock (no copy of the target's bytes out and back).
    if let (None, Some(Some(red)), Some(base), [(off, len)]) =
        (result, &how, a.t.direct(), &*a.runs)
    {
        let at = base.wrapping_add(*off);
        if (red.packed() || tt.contiguous())
            && *len == input.len()
            && !overlap(input.as_ptr(), at, *len)
        {
            let len = *len;
            return w.with_acc(a.t, || {
                // SAFETY: the run was checked against the window, whose bytes are mapped
                // here (`Target::direct`); the accumulate lock keeps every other
                // accumulate off them while the slice lives. A put or get of the same
                // bytes meanwhile is a conflicting access, whose outcome MPI leaves
                // undefined (mixed bytes), as with the raw copies of `target.rs`.
                let cur = unsafe { std::slice::from_raw_parts_mut(at, len) };
                red.apply(&input, cur);
                Ok(())
            });
        }
    }
    w.with_acc(a.t, || {
        let need_old = result.is_some() || matches!(how, Some(Some(_)));
        // The target's bytes, in a buffer kept from call to call (a fresh one of
        // megabytes is page faults on every call).
        let mut cur = SCRATCH.with(|c| std::mem::take(&mut *c.borrow_mut()));
        cur.clear();
        cur.resize(if need_old { bytes } else { 0 }, 0);
        let r = accumulate_at(&a, result, &how, &tt, n, &input, &mut cur, call);
        SCRATCH.with(|c| *c.borrow_mut() = cur);
        r
    })
}

thread_local! {
    /// The target's bytes of this thread's last accumulate (reused).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The body of an accumulate, under the target's accumulate lock: reads the target's
/// bytes into `cur` (when a result or a combination needs them), hands them to
/// `result`, combines and writes back.
#[allow(clippy::too_many_arguments)]
fn accumulate_at(
    a: &At<'_>,
    result: Option<&Side>,
    how: &Option<Option<Reducer>>,
    tt: &TypeObj,
    n: usize,
    input: &[u8],
    cur: &mut [u8],
    call: &'static str,
) -> Result<(), MpiError> {
    {
        let need_old = !cur.is_empty();
        if need_old {
            a.t.read(&a.runs, cur, call)?;
        }
        if let Some(r) = result {
            // SAFETY: the caller's contract.
            unsafe { unpack(cur, r.addr.cast_mut(), &r.t) };
        }
        match how {
            None => Ok(()),
            Some(None) => a.t.write(&a.runs, input, call),
            Some(Some(red)) => {
                combine(red, tt, n, input, cur);
                a.t.write(&a.runs, cur, call)
            }
        }
    }
}

/// `cur = input op cur` on `n` packed elements of `t`. Reducers of packed elements
/// apply as they are; the others (MINLOC and MAXLOC on the pair types and types made of
/// them, whose size is not their extent) work on elements laid out as in a buffer, from
/// their lowest byte (`span`).
fn combine(red: &Reducer, t: &TypeObj, n: usize, input: &[u8], cur: &mut [u8]) {
    if red.packed() || t.contiguous() {
        red.apply(input, cur);
        return;
    }
    // The reducer's layout: the bytes of `n` elements from their lowest one (`lo` from
    // the elements' base).
    let (lo, len) = span(t, n);
    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
    // SAFETY: `a` and `b` hold the bytes of `n` elements of `t` whose base is `-lo`
    // bytes into them (every byte of the elements lies in `lo..lo + len` from their
    // base); `input` and `cur` are `n` packed elements.
    unsafe {
        unpack(input, a.as_mut_ptr().wrapping_offset(-lo), t);
        unpack(cur, b.as_mut_ptr().wrapping_offset(-lo), t);
    }
    red.apply(&a, &mut b);
    // SAFETY: as above.
    let packed = unsafe { pack(b.as_ptr().wrapping_offset(-lo), n, t) };
    cur.copy_from_slice(&packed);
}

thread_local! {
    /// The reducer of this thread's last fast accumulate: (operator, datatype, count).
    static LAST_REDUCER: std::cell::RefCell<Option<(MPI_Op, MPI_Datatype, usize, Reducer)>> =
        const { std::cell::RefCell::new(None) };
}

/// The fast path of `MPI_Accumulate` (after [`direct`]'s checks, one predefined type at
/// both sides): `MPI_REPLACE` or a predefined operator on the type's numbers, applied in
/// place in the target's memory under its accumulate lock, taken at the first attempt.
/// The thread's last reducer (operator, type, count) is kept for the next call. `None`
/// (nothing done) sends the call down the general path: the lock held by another
/// origin (which the general path waits for, serving progress), an operator not
/// defined on the type (which it reports), or origin bytes overlapping the target.
///
/// # Safety
/// `to` is `input.len()` bytes of `t`'s window mapped here (`direct`).
unsafe fn accumulate_direct(
    t: &Target,
    input: &[u8],
    to: *mut u8,
    op: MPI_Op,
    dt: MPI_Datatype,
    bytes: usize,
) -> Option<()> {
    let ctl = t.ctl()?;
    if overlap(input.as_ptr(), to, bytes) {
        return None;
    }
    let n = bytes / predefined(dt)?.size;
    if op == MPI_REPLACE {
        if !ctl.try_acc() {
            return None;
        }
        // SAFETY: the caller's contract; the accumulate lock keeps the other
        // accumulates off these bytes.
        unsafe { std::ptr::copy(input.as_ptr(), to, bytes) };
        ctl.release_acc();
        return Some(());
    }
    LAST_REDUCER
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            if !matches!(&*c, Some((o, d, k, _)) if *o == op && *d == dt && *k == n) {
                if !matches!(
                    op,
                    MPI_SUM
                        | MPI_PROD
                        | MPI_MIN
                        | MPI_MAX
                        | MPI_BAND
                        | MPI_BOR
                        | MPI_BXOR
                        | MPI_LAND
                        | MPI_LOR
                        | MPI_LXOR
                ) {
                    return None;
                }
                let tt = committed(dt, "MPI_Accumulate").ok()?;
                let r = Reducer::new(op, dt, &tt, n).ok()?;
                if !r.packed() {
                    return None;
                }
                *c = Some((op, dt, n, r));
            }
            let (_, _, _, red) = c.as_ref()?;
            if !ctl.try_acc() {
                return None;
            }
            // SAFETY: the caller's contract; as in `accumulate`'s in-place combining.
            let cur = unsafe { std::slice::from_raw_parts_mut(to, bytes) };
            red.apply(input, cur);
            ctl.release_acc();
            Some(())
        })
        .ok()
        .flatten()
}

/// A request that is complete (the operation is done when it is made).
fn done_request(request: *mut MPI_Request, call: &'static str) -> Result<(), MpiError> {
    let h = give(Op::Done(empty_status()), MPI_COMM_SELF)?;
    // SAFETY: the caller's contract.
    unsafe { out(request, h, call) }
}

/// `MPI_Put`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Put_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win_h,
        )
    }
}

/// `MPI_Put_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Put_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
) -> c_int {
    let fast = cached(win_h, |w| {
        let (_, to, bytes) = direct(
            w,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
        )?;
        if bytes > 0 {
            // SAFETY: the caller's contract: `bytes` bytes at the origin; `to` is `bytes`
            // bytes of the target's window mapped here (checked in `direct`). Window
            // memory is reached only by raw copies (`target.rs`).
            unsafe { std::ptr::copy(origin_addr.cast::<u8>(), to, bytes) };
        }
        Some(())
    });
    if fast.is_some() {
        return MPI_SUCCESS;
    }
    let call = "MPI_Put";
    let r = with_win(win_h, call, |w| {
        let o = side(
            origin_addr,
            origin_count,
            origin_datatype,
            call,
            "origin_addr",
        )?;
        // SAFETY: the caller's contract.
        unsafe {
            put(
                w,
                &o,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                call,
            )
        }
    });
    on_win(win_h, r)
}

/// `MPI_Get`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Get_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win_h,
        )
    }
}

/// `MPI_Get_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
) -> c_int {
    let fast = cached(win_h, |w| {
        let (_, from, bytes) = direct(
            w,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
        )?;
        if bytes > 0 {
            // SAFETY: as in `MPI_Put_c`, the other way: `bytes` writable bytes at the
            // origin (the caller's contract).
            unsafe { std::ptr::copy(from, origin_addr.cast::<u8>(), bytes) };
        }
        Some(())
    });
    if fast.is_some() {
        return MPI_SUCCESS;
    }
    let call = "MPI_Get";
    let r = with_win(win_h, call, |w| {
        let o = side(
            origin_addr,
            origin_count,
            origin_datatype,
            call,
            "origin_addr",
        )?;
        // SAFETY: the caller's contract.
        unsafe {
            get(
                w,
                &o,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                call,
            )
        }
    });
    on_win(win_h, r)
}

/// `MPI_Accumulate`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Accumulate_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            op,
            win_h,
        )
    }
}

/// `MPI_Accumulate_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
) -> c_int {
    let fast = cached(win_h, |w| {
        if origin_datatype != target_datatype {
            return None;
        }
        let (t, to, bytes) = direct(
            w,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
        )?;
        if bytes == 0 {
            return None;
        }
        // SAFETY: the caller's contract: `bytes` bytes at the origin.
        let input = unsafe { std::slice::from_raw_parts(origin_addr.cast::<u8>(), bytes) };
        // SAFETY: `to` is `bytes` bytes of the target's window mapped here.
        unsafe { accumulate_direct(t, input, to, op, target_datatype, bytes) }
    });
    if fast.is_some() {
        return MPI_SUCCESS;
    }
    let call = "MPI_Accumulate";
    let r = (|| {
        let w = win(win_h, call)?;
        let o = side(
            origin_addr,
            origin_count,
            origin_datatype,
            call,
            "origin_addr",
        )?;
        // SAFETY: the caller's contract.
        unsafe {
            accumulate(
                &w,
                Some(&o),
                None,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                call,
            )
        }
    })();
    on_win(win_h, r)
}

/// `MPI_Get_accumulate`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Get_accumulate_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            result_addr,
            result_count.into(),
            result_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            op,
            win_h,
        )
    }
}

/// `MPI_Get_accumulate_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
) -> c_int {
    let call = "MPI_Get_accumulate";
    let r = (|| {
        let w = win(win_h, call)?;
        let o = if op == MPI_NO_OP {
            None
        } else {
            Some(side(
                origin_addr,
                origin_count,
                origin_datatype,
                call,
                "origin_addr",
            )?)
        };
        let res = side(
            result_addr,
            result_count,
            result_datatype,
            call,
            "result_addr",
        )?;
        // SAFETY: the caller's contract.
        unsafe {
            accumulate(
                &w,
                o.as_ref(),
                Some(&res),
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                call,
            )
        }
    })();
    on_win(win_h, r)
}

/// `MPI_Fetch_and_op`: one element.
#[no_mangle]
pub unsafe extern "C" fn MPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: MPI_Op,
    win_h: MPI_Win,
) -> c_int {
    let call = "MPI_Fetch_and_op";
    let r = (|| {
        let w = win(win_h, call)?;
        let o = if op == MPI_NO_OP {
            None
        } else {
            Some(side(origin_addr, 1, datatype, call, "origin_addr")?)
        };
        let res = side(result_addr, 1, datatype, call, "result_addr")?;
        // SAFETY: the caller's contract.
        unsafe {
            accumulate(
                &w,
                o.as_ref(),
                Some(&res),
                target_rank,
                target_disp,
                1,
                datatype,
                op,
                call,
            )
        }
    })();
    on_win(win_h, r)
}

/// `MPI_Compare_and_swap`: one element, replaced by the origin's when it equals the
/// compare buffer's; the result gets what it was.
#[no_mangle]
pub unsafe extern "C" fn MPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win_h: MPI_Win,
) -> c_int {
    let call = "MPI_Compare_and_swap";
    let r = (|| {
        let w = win(win_h, call)?;
        let t = committed(datatype, call)?;
        // MPI 4.1 (12.3.4): a predefined integer, logical, byte or multi-language type
        // (floating and complex types and derived types are refused).
        let integral = !matches!(
            t.basic,
            None | Some(
                crate::datatype::Basic::F32
                    | crate::datatype::Basic::F64
                    | crate::datatype::Basic::LongDouble
                    | crate::datatype::Basic::Complex
            )
        );
        if crate::datatype::predefined(datatype).is_none() || !t.contiguous() || !integral {
            return Err(MpiError::invalid(
                MPI_ERR_TYPE,
                format!("{call}: the datatype must be a predefined integer, logical or byte type"),
            ));
        }
        for (addr, what) in [
            (origin_addr, "origin_addr"),
            (compare_addr, "compare_addr"),
            (result_addr.cast_const(), "result_addr"),
        ] {
            crate::datatype::buffer(addr as usize, 1, &t, call, what)?;
        }
        let Some(a) = at(&w, target_rank, target_disp, 1, datatype, t.size, call)? else {
            return Ok(());
        };
        let n = t.size;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract: one element at each address.
        let (new, cmp) = unsafe {
            (
                std::slice::from_raw_parts(origin_addr.cast::<u8>(), n).to_vec(),
                std::slice::from_raw_parts(compare_addr.cast::<u8>(), n).to_vec(),
            )
        };
        w.with_acc(a.t, || {
            let mut cur = vec![0u8; n];
            a.t.read(&a.runs, &mut cur, call)?;
            // SAFETY: the caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(cur.as_ptr(), result_addr.cast::<u8>(), n) };
            if cur == cmp {
                a.t.write(&a.runs, &new, call)?;
            }
            Ok(())
        })
    })();
    on_win(win_h, r)
}

/// `MPI_Rput`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rput(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Rput_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win_h,
            request,
        )
    }
}

/// `MPI_Rput_c`: complete when it returns.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rput_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe {
        MPI_Put_c(
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win_h,
        )
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    on_win(win_h, done_request(request, "MPI_Rput"))
}

/// `MPI_Rget`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rget(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Rget_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win_h,
            request,
        )
    }
}

/// `MPI_Rget_c`: complete when it returns.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe {
        MPI_Get_c(
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win_h,
        )
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    on_win(win_h, done_request(request, "MPI_Rget"))
}

/// `MPI_Raccumulate`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Raccumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Raccumulate_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            op,
            win_h,
            request,
        )
    }
}

/// `MPI_Raccumulate_c`: complete when it returns.
#[no_mangle]
pub unsafe extern "C" fn MPI_Raccumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe {
        MPI_Accumulate_c(
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            op,
            win_h,
        )
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    on_win(win_h, done_request(request, "MPI_Raccumulate"))
}

/// `MPI_Rget_accumulate`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        MPI_Rget_accumulate_c(
            origin_addr,
            origin_count.into(),
            origin_datatype,
            result_addr,
            result_count.into(),
            result_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            op,
            win_h,
            request,
        )
    }
}

/// `MPI_Rget_accumulate_c`: complete when it returns.
#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win_h: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe {
        MPI_Get_accumulate_c(
            origin_addr,
            origin_count,
            origin_datatype,
            result_addr,
            result_count,
            result_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            op,
            win_h,
        )
    };
    if rc != MPI_SUCCESS {
        return rc;
    }
    on_win(win_h, done_request(request, "MPI_Rget_accumulate"))
}
