//! Writing through a C caller's output pointer.

use crate::abi::*;
use crate::env::error::MpiError;

/// Writes `v` through an output pointer, which need not be aligned: Fortran passes an
/// `INTEGER(KIND=8)` (an `MPI_Count`, an `MPI_Aint`) where it lies, at any 4-byte boundary.
///
/// # Errors
/// `MPI_ERR_ARG` for a NULL pointer.
///
/// # Safety
/// `p` is NULL or writable for a `T` (aligned or not).
pub(crate) unsafe fn out<T>(p: *mut T, v: T, call: &'static str) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: an output argument is NULL"),
        ));
    }
    // SAFETY: non-NULL and writable for a `T` (the caller's contract); no alignment is
    // assumed.
    unsafe { p.write_unaligned(v) };
    Ok(())
}
