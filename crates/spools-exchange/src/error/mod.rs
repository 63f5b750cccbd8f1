//! The engine's errors ([`ExchangeError`], naming a [`Side`]), and the vocabulary every
//! I/O error shares: its [`ErrorKind`], and the [`Cause`] a failing rank tells the others.

mod cause;
mod exchange;
mod side;

pub use cause::{message_chain, Cause, Told};
pub use exchange::ExchangeError;
pub use side::Side;

/// What kind of failure an I/O error is (a parallel file, an exchange, a pipe, a stream),
/// for the interfaces that turn errors into their own classes (Python's exceptions, C's
/// statuses, MPI's error classes): one kind per thing the user does about it. Every error
/// of the I/O layer has a `kind()`; a rank that failed a collective step tells the others
/// its kind and message (a [`Cause`]), so that each interface maps ONE error to its
/// class on every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The stored data or metadata is damaged: a checksum that fails, a unit, chunk or
    /// shard that is lost, a header or manifest that is malformed or inconsistent, more
    /// than parity can rebuild; or an exchange's transfer unit or a pipe's frame that fails
    /// its checksum in transit (a stream's, which the receiver refuses, is `Transport`).
    /// Python: `FileDamageError`; C: `SPOOLS_ERR_DAMAGED`.
    Damaged,
    /// The file is well formed but uses what Spools does not implement (a codec, a data
    /// type, a chunk grid, a chunked HDF5 dataset), or a write asks for a combination
    /// Spools cannot store. Python: `UnsupportedError`; C: `SPOOLS_ERR_UNSUPPORTED`.
    Unsupported,
    /// An argument of the call is wrong: a format spec that does not parse or does not
    /// fit the layout, options that cannot go together, a dataset name that is not in
    /// the file, a path that is not a parallel file, a buffer of the wrong size. Python:
    /// `InvalidArgumentError` (a `ValueError`); C: `SPOOLS_ERR_INVALID_ARG`.
    BadArgument,
    /// An argument has the wrong type: a binding's buffer of another element type than
    /// the layout's. Python: `TypeError`; C: `SPOOLS_ERR_INVALID_ARG`.
    WrongType,
    /// What the call needs is missing from this process: a library that cannot be loaded
    /// (HDF5's libhdf5) or a feature this build lacks. Python: `UnavailableError`; C:
    /// `SPOOLS_ERR_UNAVAILABLE`.
    Unavailable,
    /// The dataset, layout or placement of ranks does not fit the file or the other end
    /// (another element type or shape, another size, more units than ranks). Python:
    /// `LayoutError`; C: `SPOOLS_ERR_LAYOUT`.
    Mismatch,
    /// The file does not exist. Python: `FileNotFoundError`; C: `SPOOLS_ERR_NOT_FOUND`.
    NotFound,
    /// The path holds something a write must not replace. Python: `FileExistsError`;
    /// C: `SPOOLS_ERR_INVALID_ARG`.
    Exists,
    /// A system call on a file failed (permissions, space, the disk). Python:
    /// `TransportError`; C: `SPOOLS_ERR_IO`.
    Io,
    /// A connection or a protocol between ranks or programs failed: a socket, a
    /// handshake, a single copy out of a peer's memory, a malformed message. Python:
    /// `TransportError`; C: `SPOOLS_ERR_TRANSPORT`.
    Transport,
    /// The program at the other end of a pipe or stream went away. Python:
    /// `PeerGoneError`; C: `SPOOLS_ERR_PEER_GONE`.
    PeerGone,
    /// Messaging between the ranks failed: the wrapped
    /// [`MsgError`](spools_msg::MsgError) says how (the interfaces classify it as they
    /// classify messaging errors; told to another rank, it is a `Transport` failure).
    Transfer,
    /// Another rank failed its part of the collective operation and what it said is not
    /// understood (a newer kind). Python: `SpoolsError`; C: `SPOOLS_ERR_REMOTE`.
    Remote,
}
