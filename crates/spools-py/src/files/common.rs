//! What `files.rs` and `files/open.rs` share: a file error as its exception.

use pyo3::prelude::*;
use spools_io::{ExchangeError, FileError};

use crate::errors;

/// Whether a file error is a write's or a read's (a unit path a manifest names outside
/// its directory is damage when read, a wrong `dirs=` when written).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Write,
    Read,
}

/// A file error as its exception, by its kind (`FileError::kind`, the same kinds as
/// the C interface's statuses): damaged data or metadata (a checksum, a missing unit,
/// more than parity rebuilds, a malformed manifest or header) is `FileDamageError`; a
/// feature Spools does not implement (a codec, a data type) `UnsupportedError`; a bad
/// spec or options `InvalidArgumentError` (a `ValueError`); a library or build feature
/// that is missing (libhdf5) `UnavailableError`; a dataset, layout or placement of ranks
/// on hosts that does not fit the file `LayoutError`; a system call's failure
/// `FileNotFoundError` for a missing file, `TransportError` otherwise; a path a Zarr
/// array would replace that is not one `FileExistsError`.
pub(crate) fn file_error(e: FileError, op: Op) -> PyErr {
    let kind = match &e {
        // A unit directory given to a write outside the manifest's: the `dirs` argument.
        FileError::UnsafePath { .. } if op == Op::Write => spools_io::ErrorKind::BadArgument,
        _ => e.kind(),
    };
    let wrapped = match &e {
        FileError::Msg(m) | FileError::Exchange(ExchangeError::Msg(m)) => Some(m),
        _ => None,
    };
    errors::from_io(kind, wrapped, spools_io::message_chain(&e))
}
