//! Blocking collectives on typed buffers (MPI's, with counts in elements of a
//! `spools_dtype_t`). Every rank of the communicator calls each collective, in the same
//! order; as in MPI, one collective at a time per communicator.
//!
//! Errors of every collective: `SPOOLS_ERR_INVALID_ARG` (NULL or misaligned buffers,
//! counts that do not fit, an unknown dtype or op, a root outside the communicator),
//! `SPOOLS_ERR_PEER_GONE` (a rank died or finalised), `SPOOLS_ERR_TRANSPORT`.

use std::ffi::c_void;

use crate::args::handle;
use crate::comm::spools_comm_t;
use crate::dtype::{send_view, spools_dtype_t, typed, typed_mut, with_dtype};
use crate::op::{op_for, spools_op_t};
use crate::status::{guard, spools_status_t, Failure};

fn counts<'a>(p: *const usize, n: u32, what: &str) -> Result<&'a [usize], Failure> {
    // SAFETY: the C caller's contract: `p` holds one count per rank of the communicator.
    unsafe { typed::<usize>(p.cast(), n as usize, what) }
}

fn total(c: &[usize], what: &str) -> Result<usize, Failure> {
    c.iter()
        .try_fold(0usize, |a, &b| a.checked_add(b))
        .ok_or_else(|| Failure::arg(format!("the {what} overflow")))
}

fn times(n: u32, count: usize, what: &str) -> Result<usize, Failure> {
    count
        .checked_mul(n as usize)
        .ok_or_else(|| Failure::arg(format!("{what}: size x count overflows")))
}

/// Waits until every rank of `comm` has entered the barrier.
///
/// # Safety
/// `comm` is NULL or a live communicator.
#[no_mangle]
pub unsafe extern "C" fn spools_barrier(comm: *const spools_comm_t) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { handle(comm) }?.comm.barrier()?;
        Ok(())
    })
}

/// Copies `count` elements of `buf` on rank `root` into `buf` on every rank.
///
/// ```c
/// double params[3];
/// if (rank == 0) load(params);
/// spools_bcast(comm, params, 3, SPOOLS_DTYPE_F64, 0);
/// ```
///
/// # Safety
/// `comm` is NULL or a live communicator; `buf` holds `count` elements of `dtype`.
#[no_mangle]
pub unsafe extern "C" fn spools_bcast(
    comm: *const spools_comm_t,
    buf: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let b = unsafe { typed_mut::<T>(buf, count, "buf") }?;
            c.comm.bcast(b, root)?;
            Ok(())
        })
    })
}

/// Combines every rank's `count` elements of `send` with `op`, element by element, into
/// `recv` on `root` (`recv` is not used elsewhere and may be NULL there).
///
/// # Safety
/// `comm` is NULL or a live communicator; `send` holds `count` elements; on `root`,
/// `recv` holds `count` writable elements.
#[no_mangle]
pub unsafe extern "C" fn spools_reduce(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    op: spools_op_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let n = if c.comm.rank() == root { count } else { 0 };
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.reduce(&s, r, &op_for::<T>(op, dtype)?, root)?;
            Ok(())
        })
    })
}

/// Combines every rank's `count` elements of `send` with `op` into `recv` on every rank.
///
/// ```c
/// double local = partial_sum(), global;
/// spools_allreduce(comm, &local, &global, 1, SPOOLS_DTYPE_F64, SPOOLS_OP_SUM);
/// ```
///
/// # Safety
/// `comm` is NULL or a live communicator; `send` and `recv` hold `count` elements.
#[no_mangle]
pub unsafe extern "C" fn spools_allreduce(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    op: spools_op_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, count, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, count, "recv") }?;
            c.comm.allreduce(&s, r, &op_for::<T>(op, dtype)?)?;
            Ok(())
        })
    })
}

/// Inclusive prefix reduction: rank r's `recv` is `send` of ranks 0..=r combined with
/// `op`.
///
/// # Safety
/// As `spools_allreduce()`.
#[no_mangle]
pub unsafe extern "C" fn spools_scan(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    op: spools_op_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, count, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, count, "recv") }?;
            c.comm.scan(&s, r, &op_for::<T>(op, dtype)?)?;
            Ok(())
        })
    })
}

/// Reduces `send` (the sum of `counts` elements, the same on every rank) with `op` and
/// gives rank i block i of the result (`counts[i]` elements) in `recv`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `counts` holds one count per rank; `send`
/// holds their sum, `recv` this rank's count.
#[no_mangle]
pub unsafe extern "C" fn spools_reduce_scatter(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    counts: *const usize,
    dtype: spools_dtype_t,
    op: spools_op_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let cs = self::counts(counts, c.comm.size(), "counts")?;
        let all = total(cs, "counts")?;
        let mine = cs[c.comm.rank() as usize];
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, all, recv, mine, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, mine, "recv") }?;
            c.comm.reduce_scatter(&s, r, cs, &op_for::<T>(op, dtype)?)?;
            Ok(())
        })
    })
}

/// Gathers every rank's `count` elements of `send` on `root`, in rank order, into
/// `recv` (size x `count` elements there; not used elsewhere, may be NULL).
///
/// # Safety
/// `comm` is NULL or a live communicator; `send` holds `count` elements; on `root`,
/// `recv` holds size x `count`.
#[no_mangle]
pub unsafe extern "C" fn spools_gather(
    comm: *const spools_comm_t,
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    dtype: spools_dtype_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let n = if c.comm.rank() == root {
            times(c.comm.size(), count, "gather")?
        } else {
            0
        };
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.gather(&s, r, root)?;
            Ok(())
        })
    })
}

/// As `spools_gather()` with rank i giving `counts[i]` elements (`count` is this
/// rank's); `recv` on `root` holds their sum.
///
/// # Safety
/// As `spools_gather()`; `counts` holds one count per rank.
#[no_mangle]
pub unsafe extern "C" fn spools_gatherv(
    comm: *const spools_comm_t,
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    counts: *const usize,
    dtype: spools_dtype_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let cs = self::counts(counts, c.comm.size(), "counts")?;
        let n = if c.comm.rank() == root {
            total(cs, "counts")?
        } else {
            0
        };
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.gatherv(&s, r, cs, root)?;
            Ok(())
        })
    })
}

/// Sends block i of `send` on `root` (size x `count` elements there; not used
/// elsewhere, may be NULL) to rank i's `recv` of `count` elements.
///
/// # Safety
/// `comm` is NULL or a live communicator; `recv` holds `count` elements; on `root`,
/// `send` holds size x `count`.
#[no_mangle]
pub unsafe extern "C" fn spools_scatter(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let n = if c.comm.rank() == root {
            times(c.comm.size(), count, "scatter")?
        } else {
            0
        };
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, n, recv, count, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, count, "recv") }?;
            c.comm.scatter(&s, r, root)?;
            Ok(())
        })
    })
}

/// As `spools_scatter()` with block i of `counts[i]` elements (`count` is this rank's).
///
/// # Safety
/// As `spools_scatter()`; `counts` holds one count per rank, `send` on `root` their sum.
#[no_mangle]
pub unsafe extern "C" fn spools_scatterv(
    comm: *const spools_comm_t,
    send: *const c_void,
    counts: *const usize,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
    root: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let cs = self::counts(counts, c.comm.size(), "counts")?;
        let n = if c.comm.rank() == root {
            total(cs, "counts")?
        } else {
            0
        };
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, n, recv, count, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, count, "recv") }?;
            c.comm.scatterv(&s, cs, r, root)?;
            Ok(())
        })
    })
}

/// Gives every rank every rank's `count` elements of `send`, in rank order, in `recv`
/// (size x `count` elements).
///
/// # Safety
/// `comm` is NULL or a live communicator; `send` holds `count` elements, `recv` size x
/// `count`.
#[no_mangle]
pub unsafe extern "C" fn spools_allgather(
    comm: *const spools_comm_t,
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    dtype: spools_dtype_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let n = times(c.comm.size(), count, "allgather")?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.allgather(&s, r)?;
            Ok(())
        })
    })
}

/// As `spools_allgather()` with rank i giving `counts[i]` elements (`count` is this
/// rank's); `recv` holds their sum.
///
/// # Safety
/// As `spools_allgather()`; `counts` holds one count per rank.
#[no_mangle]
pub unsafe extern "C" fn spools_allgatherv(
    comm: *const spools_comm_t,
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    counts: *const usize,
    dtype: spools_dtype_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let cs = self::counts(counts, c.comm.size(), "counts")?;
        let n = total(cs, "counts")?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, count, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.allgatherv(&s, r, cs)?;
            Ok(())
        })
    })
}

/// Sends block j of `send` (`count` elements each, size blocks) to rank j, which keeps
/// it as block i (this rank's) of its `recv`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `send` and `recv` hold size x `count`
/// elements.
#[no_mangle]
pub unsafe extern "C" fn spools_alltoall(
    comm: *const spools_comm_t,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: spools_dtype_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let n = times(c.comm.size(), count, "alltoall")?;
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, n, recv, n, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, n, "recv") }?;
            c.comm.alltoall(&s, r)?;
            Ok(())
        })
    })
}

/// As `spools_alltoall()` with blocks of `send_counts[j]` elements to rank j and
/// `recv_counts[i]` from rank i.
///
/// # Safety
/// `comm` is NULL or a live communicator; both count arrays hold one count per rank;
/// `send` and `recv` hold their sums.
#[no_mangle]
pub unsafe extern "C" fn spools_alltoallv(
    comm: *const spools_comm_t,
    send: *const c_void,
    send_counts: *const usize,
    recv: *mut c_void,
    recv_counts: *const usize,
    dtype: spools_dtype_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        let sc = counts(send_counts, c.comm.size(), "send_counts")?;
        let rc = counts(recv_counts, c.comm.size(), "recv_counts")?;
        let (ns, nr) = (total(sc, "send_counts")?, total(rc, "recv_counts")?);
        with_dtype!(dtype, T => {
            // SAFETY: the caller's contract.
            let s = unsafe { send_view::<T>(send, ns, recv, nr, "send") }?;
            // SAFETY: the caller's contract.
            let r = unsafe { typed_mut::<T>(recv, nr, "recv") }?;
            c.comm.alltoallv(&s, sc, r, rc)?;
            Ok(())
        })
    })
}
