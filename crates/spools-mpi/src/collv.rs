//! The blocking allgatherv and reduce-scatters of an intracommunicator on Spools' own
//! (`Communicator::allgatherv`, `reduce_scatter`: the shared-memory engine within a host,
//! the ring or the hierarchical algorithms beyond), instead of `vcoll`'s linear exchange.
//! Allgatherv uses the program's receive buffer in place when its datatype is contiguous
//! and its blocks lie one after the other in rank order, else one packed copy unpacked
//! block by block; a reduce-scatter reduces packed elements (a predefined operator as
//! Spools' typed one, a user function on the caller's thread, block by block).
//! Intercommunicators, and reduce-scatters combined byte-wise (MINLOC, long double and
//! complex arithmetic, whose contributions are not packed), wait for the non-blocking
//! form (`vcoll`).

use std::ffi::{c_int, c_void};

use spools::{Communicator, Element, Op};

use crate::abi::*;
use crate::coll::{is_inter, waited};
use crate::comm::comm;
use crate::datatype::{block, buffer, committed, count as ccount, unpack};
use crate::errhandler::on_comm;
use crate::error::MpiError;
use crate::op::{cast, engine, slice_op, with_op, Engine, Reducer, WithOp};
use crate::p2p::data;
use crate::vcoll::{arr, counts, Wide};

/// `MPI_Allgatherv` and `MPI_Allgatherv_c`: one body for both widths (errors name
/// `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Allgatherv`.
#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv<K: Copy + Wide, D: Copy + Wide>(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    displs: *const D,
    recvtype: MPI_Datatype,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm(comm_h, call)?;
    let n = c.comm.size() as usize;
    let me = c.comm.rank() as usize;
    // SAFETY: `size` values each (the caller's contract).
    let (k, d) = unsafe {
        (
            counts(&arr(recvcounts, n, call)?, call)?,
            arr(displs, n, call)?,
        )
    };
    let rt = committed(recvtype, call)?;
    for (&k, &d) in k.iter().zip(&d) {
        block(
            recvbuf as usize,
            d as isize * rt.extent,
            k,
            &rt,
            call,
            "recvbuf",
        )?;
    }
    let at = |i: usize| (recvbuf as isize).wrapping_add(d[i] as isize * rt.extent) as *mut u8;
    let mine = if sendbuf as usize == MPI_IN_PLACE {
        // SAFETY: this rank's block of the receive buffer (checked above).
        unsafe { data(at(me).cast_const().cast(), k[me], &rt) }.into_owned()
    } else {
        let (sn, st) = (ccount(sendcount, call)?, committed(sendtype, call)?);
        buffer(sendbuf as usize, sn, &st, call, "sendbuf")?;
        // SAFETY: `sn` elements of `st` (the caller's contract, checked above).
        unsafe { data(sendbuf, sn, &st) }.into_owned()
    };
    let mut bytes: Vec<usize> = k.iter().map(|&k| k * rt.size).collect();
    // A send block of another length than this rank's receive count: this rank takes
    // part with what it sends, so that the others find the disagreement, and fails.
    let agrees = mine.len() == bytes[me];
    bytes[me] = mine.len();
    let total: usize = bytes.iter().sum();
    let packed = d
        .iter()
        .zip(&k)
        .try_fold(0i64, |next, (&d, &k)| {
            (d == next).then_some(next + k as i64)
        })
        .is_some();
    if agrees && packed && rt.contiguous() && total > 0 && !recvbuf.is_null() {
        // SAFETY: the receive buffer's blocks, one after the other from its start, are
        // `total` bytes (checked above); `mine` is a copy, apart from them.
        let out = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
        return Ok(c.comm.allgatherv(&mine, out, &bytes)?);
    }
    let mut all = vec![0u8; total];
    c.comm.allgatherv(&mine, &mut all, &bytes)?;
    if !agrees {
        return Err(MpiError::invalid(
            MPI_ERR_TRUNCATE,
            format!(
                "{call}: this rank sends {} bytes where its receive count takes {}",
                mine.len(),
                k[me] * rt.size
            ),
        ));
    }
    let mut from = 0;
    for (i, &len) in bytes.iter().enumerate() {
        if len > 0 {
            // SAFETY: block i of the receive buffer holds `k[i]` elements, `len` bytes
            // (checked above).
            unsafe { unpack(&all[from..from + len], at(i), &rt) };
        }
        from += len;
    }
    Ok(())
}

/// `MPI_Allgatherv`.
///
/// # Safety
/// The caller's contract of `MPI_Allgatherv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if is_inter(comm) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Iallgatherv(
                    sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    &mut q,
                ),
                &mut q,
            )
        };
    }
    // SAFETY: the caller's contract.
    let r = unsafe {
        allgatherv(
            sendbuf,
            i64::from(sendcount),
            sendtype,
            recvbuf,
            recvcounts,
            displs,
            recvtype,
            comm,
            "MPI_Allgatherv",
        )
    };
    on_comm(comm, r)
}

/// `MPI_Allgatherv_c`.
///
/// # Safety
/// The caller's contract of `MPI_Allgatherv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    if is_inter(comm) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Iallgatherv_c(
                    sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    &mut q,
                ),
                &mut q,
            )
        };
    }
    // SAFETY: the caller's contract.
    let r = unsafe {
        allgatherv(
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcounts,
            displs,
            recvtype,
            comm,
            "MPI_Allgatherv_c",
        )
    };
    on_comm(comm, r)
}

/// Whether a reduce-scatter of `dt` with `op` on `comm` waits for the non-blocking
/// form: on an intercommunicator, or combined byte-wise (see the module's comment). A
/// bad argument is reported by the blocking body.
fn exchanged(comm_h: MPI_Comm, dt: MPI_Datatype, op: MPI_Op) -> bool {
    is_inter(comm_h)
        || committed(dt, "a reduce-scatter")
            .and_then(|t| engine(op, dt, &t))
            .is_ok_and(|e| matches!(e, Engine::Bytes))
}

/// A typed reduce-scatter of packed elements: blocks of `counts` elements of
/// `esize` bytes; this rank's block, as bytes.
struct Blocks<'a> {
    c: &'a Communicator,
    input: &'a [u8],
    counts: &'a [usize],
    esize: usize,
}

impl WithOp for Blocks<'_> {
    type Out = Vec<u8>;

    fn with<T: Element>(self, op: Op<T>) -> Result<Vec<u8>, MpiError> {
        let per = std::mem::size_of::<T>().max(1);
        let counts: Vec<usize> = self.counts.iter().map(|k| k * self.esize / per).collect();
        let send: Vec<T> = cast(self.input);
        let me = self.c.rank() as usize;
        let mut recv = vec![T::default(); counts.get(me).copied().unwrap_or(0)];
        self.c.reduce_scatter(&send, &mut recv, &counts, &op)?;
        Ok(spools::as_bytes(&recv).to_vec())
    }
}

/// The blocking reduce-scatter: every rank's input (`sendbuf`, or `recvbuf` in place)
/// of the sum of `k` elements of `dt` is combined with `op`, and block i (`k[i]`
/// elements) goes to rank i's `recvbuf`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter`.
unsafe fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    k: &[usize],
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm(comm_h, call)?;
    let me = c.comm.rank() as usize;
    let t = committed(dt, call)?;
    let total: usize = k.iter().sum();
    let mine = k.get(me).copied().unwrap_or(0);
    let src = if sendbuf as usize == MPI_IN_PLACE {
        buffer(recvbuf as usize, total, &t, call, "recvbuf")?;
        recvbuf.cast_const()
    } else {
        buffer(sendbuf as usize, total, &t, call, "sendbuf")?;
        buffer(recvbuf as usize, mine, &t, call, "recvbuf")?;
        sendbuf
    };
    let red = Reducer::new(op, dt, &t, total)?;
    // SAFETY: the input holds `total` elements (checked above).
    let input = unsafe { red.input(src.cast()) };
    let out = match engine(op, dt, &t)? {
        Engine::Typed(b, o) => with_op(
            b,
            o,
            Blocks {
                c: &c.comm,
                input: &input,
                counts: k,
                esize: t.size,
            },
        )?,
        Engine::Bytes | Engine::User => {
            let bytes: Vec<usize> = k.iter().map(|k| k * t.size).collect();
            let mut out = vec![0u8; mine * t.size];
            c.comm
                .reduce_scatter(&input, &mut out, &bytes, &slice_op(&red))?;
            out
        }
    };
    // SAFETY: this rank's block of the receive buffer holds `mine` elements (checked
    // above).
    unsafe { red.with_count(mine).output(&out, recvbuf.cast()) };
    Ok(())
}

/// The body of `MPI_Reduce_scatter_block` and `MPI_Reduce_scatter_block_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter_block`.
unsafe fn reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let n = comm(comm_h, call)?.comm.size() as usize;
    let k = vec![ccount(recvcount, call)?; n];
    // SAFETY: the caller's contract.
    unsafe { reduce_scatter(sendbuf, recvbuf, &k, dt, op, comm_h, call) }
}

/// The body of `MPI_Reduce_scatter` and `MPI_Reduce_scatter_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter`.
unsafe fn reduce_scatter_v<K: Copy + Wide>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let n = comm(comm_h, call)?.comm.size() as usize;
    // SAFETY: `size` values (the caller's contract).
    let k = counts(&unsafe { arr(recvcounts, n, call) }?, call)?;
    // SAFETY: the caller's contract.
    unsafe { reduce_scatter(sendbuf, recvbuf, &k, dt, op, comm_h, call) }
}

/// `MPI_Reduce_scatter_block`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter_block`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if exchanged(comm, datatype, op) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Ireduce_scatter_block(
                    sendbuf, recvbuf, recvcount, datatype, op, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let call = "MPI_Reduce_scatter_block";
    let count = i64::from(recvcount);
    // SAFETY: the caller's contract.
    let r = unsafe { reduce_scatter_block(sendbuf, recvbuf, count, datatype, op, comm, call) };
    on_comm(comm, r)
}

/// `MPI_Reduce_scatter_block_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter_block_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if exchanged(comm, datatype, op) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Ireduce_scatter_block_c(
                    sendbuf, recvbuf, recvcount, datatype, op, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let call = "MPI_Reduce_scatter_block_c";
    // SAFETY: the caller's contract.
    let r = unsafe { reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, call) };
    on_comm(comm, r)
}

/// `MPI_Reduce_scatter`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if exchanged(comm, datatype, op) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Ireduce_scatter(
                    sendbuf, recvbuf, recvcounts, datatype, op, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let call = "MPI_Reduce_scatter";
    // SAFETY: the caller's contract.
    let r = unsafe { reduce_scatter_v(sendbuf, recvbuf, recvcounts, datatype, op, comm, call) };
    on_comm(comm, r)
}

/// `MPI_Reduce_scatter_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    if exchanged(comm, datatype, op) {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::vcoll::MPI_Ireduce_scatter_c(
                    sendbuf, recvbuf, recvcounts, datatype, op, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let call = "MPI_Reduce_scatter_c";
    // SAFETY: the caller's contract.
    let r = unsafe { reduce_scatter_v(sendbuf, recvbuf, recvcounts, datatype, op, comm, call) };
    on_comm(comm, r)
}
