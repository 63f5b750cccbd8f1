//! How a file operation fails: the MPI class and error of an I/O failure
//! ([`io_class`], [`io_error`]), and every rank's outcome of a collective step
//! ([`agree_on`], with the MPI class of each I/O kind: [`class_of_kind`]).

use std::ffi::c_int;

use spools::Communicator;
use spools_io::{Cause, ErrorKind};

use crate::abi::*;
use crate::error::MpiError;

/// Every rank's outcome of a collective step on `comm`: an error on any rank is an error
/// on every rank, through the I/O layer's agreement (`spools_io::agree_on_outcome`): the
/// first failing rank tells the others its error's kind and message.
///
/// # Errors
/// This rank's error; else the first failing rank's, in the class of its kind
/// ([`class_of_kind`]).
pub(crate) fn agree_on<T>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    call: &'static str,
) -> Result<T, MpiError> {
    spools_io::agree_on_outcome(
        comm,
        r,
        |e| Cause::new(kind_of_class(e.class()), e.to_string()),
        |rank, cause| {
            MpiError::invalid(
                class_of_kind(cause.kind),
                // The cause names the call already.
                format!("rank {rank} of the file's group failed in {call}: {cause}"),
            )
        },
    )
}

/// The I/O layer's kind of an error of MPI class `class` (what a failing rank tells the
/// others; [`class_of_kind`] maps it back).
fn kind_of_class(class: c_int) -> ErrorKind {
    match class {
        MPI_ERR_NO_SUCH_FILE => ErrorKind::NotFound,
        MPI_ERR_FILE_EXISTS => ErrorKind::Exists,
        MPI_ERR_UNSUPPORTED_OPERATION | MPI_ERR_UNSUPPORTED_DATAREP => ErrorKind::Unsupported,
        MPI_ERR_TYPE => ErrorKind::WrongType,
        MPI_ERR_ARG | MPI_ERR_COUNT | MPI_ERR_BUFFER | MPI_ERR_AMODE | MPI_ERR_BAD_FILE => {
            ErrorKind::BadArgument
        }
        _ => ErrorKind::Io,
    }
}

/// The MPI class of an error of the I/O layer's kind `kind`, as a rank that only heard of
/// another rank's failure reports it.
pub(crate) fn class_of_kind(kind: ErrorKind) -> c_int {
    match kind {
        ErrorKind::NotFound => MPI_ERR_NO_SUCH_FILE,
        ErrorKind::Exists => MPI_ERR_FILE_EXISTS,
        ErrorKind::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        ErrorKind::WrongType => MPI_ERR_TYPE,
        ErrorKind::BadArgument | ErrorKind::Mismatch => MPI_ERR_ARG,
        ErrorKind::Damaged
        | ErrorKind::Unavailable
        | ErrorKind::Io
        | ErrorKind::Transport
        | ErrorKind::PeerGone
        | ErrorKind::Transfer
        | ErrorKind::Remote => MPI_ERR_IO,
    }
}

/// The MPI error class of an error of the I/O layer: a failed system call's by the
/// system's error, the rest by its kind ([`class_of_kind`]; a failure another rank told
/// this one has that rank's kind).
pub(crate) fn file_class(e: &spools_io::FileError) -> c_int {
    match e {
        spools_io::FileError::Io { source, .. } => io_class(source),
        _ => class_of_kind(e.kind()),
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
