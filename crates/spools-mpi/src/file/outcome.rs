//! How a file operation fails: the MPI class and error of an I/O failure
//! ([`io_class`], [`io_error`]), and every rank's outcome of a collective step
//! ([`agree_on`]).

use std::ffi::c_int;

use spools::Communicator;

use crate::abi::*;
use crate::error::MpiError;

/// Every rank's outcome of a collective step on `comm`: an error on any rank is an error
/// on every rank (this rank's own, or one naming the rank that failed).
///
/// # Errors
/// This rank's error; else the first failing rank's, as `MPI_ERR_IO`.
pub(crate) fn agree_on<T>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    call: &'static str,
) -> Result<T, MpiError> {
    let all = comm.allgather_bytes(&[u8::from(r.is_err())])?;
    match r {
        Err(e) => Err(e),
        Ok(v) => match all.iter().position(|b| b.first() == Some(&1)) {
            Some(rank) => Err(MpiError::invalid(
                MPI_ERR_IO,
                format!("{call}: rank {rank} of the file's group failed in this collective call"),
            )),
            None => Ok(v),
        },
    }
}

/// The MPI error class of a failed file operation.
pub(crate) fn io_class(e: &std::io::Error) -> c_int {
    use std::io::ErrorKind as K;
    match e.raw_os_error() {
        Some(libc::ENOSPC) => return MPI_ERR_NO_SPACE,
        Some(libc::EDQUOT) => return MPI_ERR_QUOTA,
        Some(libc::EROFS) => return MPI_ERR_READ_ONLY,
        Some(libc::ENAMETOOLONG) | Some(libc::ENOTDIR) => return MPI_ERR_BAD_FILE,
        _ => {}
    }
    match e.kind() {
        K::NotFound => MPI_ERR_NO_SUCH_FILE,
        K::AlreadyExists => MPI_ERR_FILE_EXISTS,
        K::PermissionDenied => MPI_ERR_ACCESS,
        _ => MPI_ERR_IO,
    }
}

/// An error of a failed file operation, naming the call and the file.
pub(crate) fn io_error(call: &'static str, path: &std::path::Path, e: &std::io::Error) -> MpiError {
    MpiError::invalid(io_class(e), format!("{call}: {}: {e}", path.display()))
}
