//! Errors of the exchange engine, parallel files, parallel pipes and streams.

mod exchange;
mod file;
mod hdf5;
mod pipe;
mod side;
mod stream;
mod stream_recv;
mod zarr;

pub use exchange::ExchangeError;
pub use file::{FileError, FormatDefect, NpyError, SumsDefect};
pub use hdf5::Hdf5Error;
pub use pipe::{FrameError, PipeError, PipeStep, PipeViolation};
pub use side::Side;
pub use stream::StreamError;
pub use stream_recv::StreamRecvError;
pub use zarr::{ChunkDefect, ZarrError};

/// What kind of failure a parallel-file error is, for the interfaces that turn errors
/// into their own classes (Python's exceptions, C's statuses): one kind per thing the
/// user does about it. [`FileError::kind`] gives it; the Python and C interfaces map
/// each kind to one exception class and one status, so that they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The stored data or metadata is damaged: a checksum that fails, a unit, chunk or
    /// shard that is lost, a header or manifest that is malformed or inconsistent, more
    /// than parity can rebuild. Python: `FileDamageError`; C: `SPOOLS_ERR_DAMAGED`.
    Damaged,
    /// The file is well formed but uses what Spools does not implement (a codec, a data
    /// type, a chunk grid, a chunked HDF5 dataset), or a write asks for a combination
    /// Spools cannot store. Python: `UnsupportedError`; C: `SPOOLS_ERR_UNSUPPORTED`.
    Unsupported,
    /// An argument of the call is wrong: a format spec that does not parse or does not
    /// fit the layout, options that cannot go together, a dataset name that is not in
    /// the file, a path that is not a parallel file. Python: `InvalidArgumentError` (a
    /// `ValueError`); C: `SPOOLS_ERR_INVALID_ARG`.
    BadArgument,
    /// What the call needs is missing from this process: a library that cannot be loaded
    /// (HDF5's libhdf5) or a feature this build lacks. Python: `UnavailableError`; C:
    /// `SPOOLS_ERR_UNAVAILABLE`.
    Unavailable,
    /// The dataset, layout or placement of ranks does not fit the file (another element
    /// type or shape, another size). Python: `LayoutError`; C: `SPOOLS_ERR_LAYOUT`.
    Mismatch,
    /// The file does not exist. Python: `FileNotFoundError`; C: `SPOOLS_ERR_NOT_FOUND`.
    NotFound,
    /// The path holds something a write must not replace. Python: `FileExistsError`;
    /// C: `SPOOLS_ERR_INVALID_ARG`.
    Exists,
    /// A system call on a file failed (permissions, space, the disk). Python:
    /// `TransportError`; C: `SPOOLS_ERR_IO`.
    Io,
    /// Moving the data between ranks failed: the wrapped [`ExchangeError`] or
    /// [`MsgError`](spools_msg::MsgError) says how (the interfaces classify it as they
    /// classify those errors).
    Transfer,
    /// Another rank failed its part of the collective operation; its own error is the
    /// cause. Python: `SpoolsError`; C: `SPOOLS_ERR_REMOTE`.
    Remote,
}
