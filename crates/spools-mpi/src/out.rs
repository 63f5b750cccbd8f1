//! Writing through a C caller's output pointer.

use crate::abi::*;
use crate::env::error::MpiError;

/// Writes `v` through an output pointer.
///
/// # Errors
/// `MPI_ERR_ARG` for a NULL pointer.
///
/// # Safety
/// `p` is NULL or writable.
pub(crate) unsafe fn out<T>(p: *mut T, v: T, call: &'static str) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: an output argument is NULL"),
        ));
    }
    // SAFETY: non-NULL and writable (the caller's contract).
    unsafe { *p = v };
    Ok(())
}
