"""The exceptions Spools raises. Every runtime failure is a :class:`SpoolsError`;
wrong arguments (a non-contiguous array, a wrong dtype or size) are plain
``TypeError``/``ValueError`` naming what was expected and what was given.

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
    """A parallel file whose data or metadata is damaged (a checksum, a missing unit)."""


class RemoteError(SpoolsError):
    """A remote procedure raised on the rank that ran it; the message carries that
    rank's exception and traceback."""


class TransportError(SpoolsError):
    """A transport or system failure (sockets, shared memory, files)."""
