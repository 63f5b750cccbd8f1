//! MPI-1 functions that MPI 3.0 removed and the standard ABI's header does not declare,
//! which MPICH's and Open MPI's libraries still export and old programs still call
//! (declaring them themselves, or through an older `mpi.h`): each is the call that
//! replaced it. Their `PMPI_` names are here too (`gen/exports.py` writes only the
//! ABI's).

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::out::out;

/// `MPI_Type_extent` (removed in MPI 3.0): `MPI_Type_get_extent`'s extent.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_extent(datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
    let mut lb = 0;
    // SAFETY: the caller's contract (`extent` writable; NULL is refused there).
    unsafe { crate::datatype::MPI_Type_get_extent(datatype, &mut lb, extent) }
}

/// The profiling name of `MPI_Type_extent`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_extent(datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_extent`'s.
    unsafe { MPI_Type_extent(datatype, extent) }
}

/// `MPI_Type_lb` (removed in MPI 3.0): `MPI_Type_get_extent`'s lower bound.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_lb(datatype: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
    let mut extent = 0;
    // SAFETY: the caller's contract.
    unsafe { crate::datatype::MPI_Type_get_extent(datatype, displacement, &mut extent) }
}

/// The profiling name of `MPI_Type_lb`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_lb(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_lb`'s.
    unsafe { MPI_Type_lb(datatype, displacement) }
}

/// `MPI_Type_ub` (removed in MPI 3.0): the upper bound: lower bound plus extent.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_ub(datatype: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
    let (mut lb, mut extent) = (0, 0);
    // SAFETY: pointers to locals.
    let rc = unsafe { crate::datatype::MPI_Type_get_extent(datatype, &mut lb, &mut extent) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    // SAFETY: the caller's contract.
    on_self(unsafe { out(displacement, lb + extent, "MPI_Type_ub") })
}

/// The profiling name of `MPI_Type_ub`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_ub(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_ub`'s.
    unsafe { MPI_Type_ub(datatype, displacement) }
}

/// `MPI_Address` (removed in MPI 3.0): `MPI_Get_address`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { crate::datatype::MPI_Get_address(location, address) }
}

/// The profiling name of `MPI_Address`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: the caller's contract is `MPI_Address`'s.
    unsafe { MPI_Address(location, address) }
}

/// `MPI_Type_hvector` (removed in MPI 3.0): `MPI_Type_create_hvector`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        crate::datatype::typector::MPI_Type_create_hvector(
            count,
            blocklength,
            stride,
            oldtype,
            newtype,
        )
    }
}

/// The profiling name of `MPI_Type_hvector`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_hvector`'s.
    unsafe { MPI_Type_hvector(count, blocklength, stride, oldtype, newtype) }
}

/// `MPI_Type_hindexed` (removed in MPI 3.0): `MPI_Type_create_hindexed`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        crate::datatype::typector::MPI_Type_create_hindexed(
            count,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
        )
    }
}

/// The profiling name of `MPI_Type_hindexed`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_hindexed`'s.
    unsafe {
        MPI_Type_hindexed(
            count,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
        )
    }
}

/// `MPI_Type_struct` (removed in MPI 3.0): `MPI_Type_create_struct`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        crate::datatype::typector::MPI_Type_create_struct(
            count,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
        )
    }
}

/// The profiling name of `MPI_Type_struct`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Type_struct`'s.
    unsafe {
        MPI_Type_struct(
            count,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
        )
    }
}

/// `MPI_Errhandler_create` (removed in MPI 3.0): `MPI_Comm_create_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_create(
    function: *const c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { crate::env::errhandler::MPI_Comm_create_errhandler(function, errhandler) }
}

/// The profiling name of `MPI_Errhandler_create`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_create(
    function: *const c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Errhandler_create`'s.
    unsafe { MPI_Errhandler_create(function, errhandler) }
}

/// `MPI_Errhandler_set` (removed in MPI 3.0): `MPI_Comm_set_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_set(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { crate::comm::MPI_Comm_set_errhandler(comm, errhandler) }
}

/// The profiling name of `MPI_Errhandler_set`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_set(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    // SAFETY: the caller's contract is `MPI_Errhandler_set`'s.
    unsafe { MPI_Errhandler_set(comm, errhandler) }
}

/// `MPI_Errhandler_get` (removed in MPI 3.0): `MPI_Comm_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_get(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { crate::comm::MPI_Comm_get_errhandler(comm, errhandler) }
}

/// The profiling name of `MPI_Errhandler_get`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_get(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: the caller's contract is `MPI_Errhandler_get`'s.
    unsafe { MPI_Errhandler_get(comm, errhandler) }
}
