//! `MPIX_Comm_agree` and `MPIX_Comm_iagree` (the fault-tolerance proposal's agreement,
//! as Open MPI's and MPICH's native libraries export it): every member gets the bitwise
//! AND of the flags all members passed. The standard ABI's header does not declare them
//! (nor does MPICH's `libmpi_abi.so.1` export them); a program declares them itself. With no failed member (Spools takes the job down when a rank dies),
//! the agreement is an allreduce of `MPI_BAND` over `MPI_INT`.

use std::ffi::{c_int, c_void};

use crate::abi::*;

/// `MPIX_Comm_agree`: `*flag` becomes the bitwise AND of every member's `*flag`.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Comm_agree(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    // SAFETY: the caller's contract: `flag` points to an int (MPI_Allreduce checks NULL).
    unsafe {
        crate::coll::MPI_Allreduce(
            MPI_IN_PLACE as *const c_void,
            flag.cast(),
            1,
            MPI_INT,
            MPI_BAND,
            comm,
        )
    }
}

/// The profiling name of `MPIX_Comm_agree`.
#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_agree(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    // SAFETY: the caller's contract is `MPIX_Comm_agree`'s.
    unsafe { MPIX_Comm_agree(comm, flag) }
}

/// `MPIX_Comm_iagree`: as `MPIX_Comm_agree`, completing at the wait for `request`.
#[no_mangle]
pub unsafe extern "C" fn MPIX_Comm_iagree(
    comm: MPI_Comm,
    flag: *mut c_int,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract: `flag` points to an int that stays until the
    // request completes.
    unsafe {
        crate::coll::vcoll::MPI_Iallreduce(
            MPI_IN_PLACE as *const c_void,
            flag.cast(),
            1,
            MPI_INT,
            MPI_BAND,
            comm,
            request,
        )
    }
}

/// The profiling name of `MPIX_Comm_iagree`.
#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_iagree(
    comm: MPI_Comm,
    flag: *mut c_int,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract is `MPIX_Comm_iagree`'s.
    unsafe { MPIX_Comm_iagree(comm, flag, request) }
}
