//! The blocking allgatherv of an intracommunicator on Spools' own
//! (`Communicator::allgatherv`: the shared-memory engine within a host, the ring or the
//! hierarchical algorithm beyond), instead of `vcoll`'s linear exchange: the program's
//! receive buffer in place when its datatype is contiguous and its blocks lie one after
//! the other in rank order, else one packed copy unpacked block by block.
//! Intercommunicators wait for the non-blocking form (`vcoll`).

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::coll::{is_inter, waited};
use crate::comm::comm;
use crate::datatype::{block, buffer, committed, count as ccount, unpack};
use crate::errhandler::on_comm;
use crate::error::MpiError;
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
