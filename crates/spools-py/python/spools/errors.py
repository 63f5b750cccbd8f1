"""The exceptions Spools raises. Every runtime failure is a :class:`SpoolsError`;
wrong arguments (a non-contiguous array, a wrong dtype or size) are plain
``TypeError``/``ValueError`` naming what was expected and what was given.

Each kind of file failure has its own class, the same kinds as the C interface's
statuses: a damaged file (:class:`FileDamageError`), a feature Spools does not
implement (:class:`UnsupportedError`), a bad argument found by the runtime
(:class:`InvalidArgumentError`, also a ``ValueError``), a library or build feature
that is missing (:class:`UnavailableError`).

The message is the Rust runtime's own, so it names the rank, the peer and the
operation involved.
"""

__all__ = [
    "SpoolsError",
    "InitError",
    "FinalizedError",
    "TruncatedError",
    "PeerGoneError",
    "LayoutError",
    "FileDamageError",
    "UnsupportedError",
    "InvalidArgumentError",
    "UnavailableError",
    "RemoteError",
    "TransportError",
]


class SpoolsError(Exception):
    """Base class of every error of the Spools runtime."""


class InitError(SpoolsError):
    """This rank could not join its job (environment, rendezvous, transports)."""


class FinalizedError(SpoolsError):
    """A call after ``finalize()`` or ``abort()``."""


class TruncatedError(SpoolsError):
    """A message was longer than the receive buffer (nothing past the buffer was written)."""


class PeerGoneError(SpoolsError):
    """A rank this one needed died, aborted or finalised: the job is ending."""


class LayoutError(SpoolsError, ValueError):
    """A layout that does not parse, or does not fit the array or the other layout."""


class FileDamageError(SpoolsError):
    """A parallel file whose data or metadata is damaged: a checksum that fails, a lost
    unit, chunk or shard, a malformed header or manifest, more than parity rebuilds."""


class UnsupportedError(SpoolsError):
    """A well-formed file (or a write) that uses what Spools does not implement: a codec,
    a data type, a chunk grid, a chunked HDF5 dataset. The file is not damaged."""


class InvalidArgumentError(SpoolsError, ValueError):
    """A bad argument the runtime found: a format spec that does not fit the layout,
    options that cannot go together, a dataset name the file does not hold, a path that
    is not a parallel file."""


class UnavailableError(SpoolsError):
    """Something the call needs is missing from this installation: a library that
    cannot be loaded (HDF5's libhdf5) or a feature this build lacks."""


class RemoteError(SpoolsError):
    """A remote procedure raised on the rank that ran it; the message carries that
    rank's exception and traceback."""


class TransportError(SpoolsError):
    """A transport or system failure (sockets, shared memory, files)."""
