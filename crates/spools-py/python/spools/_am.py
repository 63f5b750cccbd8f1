"""Remote procedure calls between ranks (the pure-Python part; see src/am.rs).

A function registered by name on a rank (``world.register_rpc("f", f)`` or the
decorator ``@world.rpc``) can be called from any rank (``world.call(rank, "f", *args,
**kwargs)``); the arguments and the result travel pickled, so numpy arrays, tuples and
dicts are fine. An exception in the function comes back as :class:`RemoteError` with the
remote exception's type, message and traceback text, and the rank that ran it.

Where the function runs: on the target rank, inside the runtime's progress, on whichever
thread progresses there: the thread of a Spools call that waits (``recv``, ``barrier``,
``call``'s own wait, ``finalize``: a rank serves calls until every rank has finalised),
or the progress thread with ``SPOOLS_PROGRESS_THREAD=1`` (then also while the rank only
computes in Python). It takes the GIL for the call, so it runs between the rank's own
Python statements, never beside them. Without a progress thread, a rank busy in Python
(not in a Spools call) serves the call when it next enters one. The function must
therefore be short and must not call Spools itself (the progress it would wait for is the
one running it): compute, update a Python object, return.

``sys.exit()`` in the function is an exception like any other: the function runs on the
caller's behalf, so its ``SystemExit`` goes back to the caller as :class:`RemoteError`
(``remote_type`` ``"SystemExit"``) and neither ends the target rank nor sets the status
it exits with.
"""

import pickle
import threading
import traceback

from .errors import RemoteError, SpoolsError

__all__ = ["UnknownRpcError"]

_OK = b"\x00"
_RAISED = b"\x01"

# Per thread: whether it is running an RPC function now (see _in_rpc_function).
_serving = threading.local()


class UnknownRpcError(SpoolsError, LookupError):
    """The target rank has no RPC function of that name (register it there, before a
    barrier, before other ranks call it)."""


def _pack_call(args, kwargs):
    """The call's payload: the positional and keyword arguments, pickled."""
    return pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)


def _in_rpc_function():
    """Whether this thread is running an RPC function for a caller (``sys.exit`` then
    only raises ``SystemExit``, which goes back to the caller: see spools/__init__.py)."""
    return getattr(_serving, "active", False)


def _serve(fn, payload):
    """Runs ``fn`` on a call's payload on the target rank; returns the reply bytes (the
    result, or the exception's type, message and traceback) and whether the function was
    interrupted by Ctrl-C (this rank's own: src/am.rs then hands it on to this rank's
    program). Never raises."""
    outer = _in_rpc_function()
    _serving.active = True
    try:
        args, kwargs = pickle.loads(payload)
        result = fn(*args, **kwargs)
        return _OK + pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL), False
    except BaseException as e:  # noqa: BLE001 (every failure goes back to the caller)
        return _raised(e), isinstance(e, KeyboardInterrupt)
    finally:
        _serving.active = outer


def _raised(e):
    """The reply of a function that raised ``e``."""
    kind = type(e)
    qual = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        qual = "%s.%s" % (kind.__module__, qual)
    text = "".join(traceback.format_exception(kind, e, e.__traceback__))
    try:
        return _RAISED + pickle.dumps((qual, str(e), text))
    except BaseException:  # noqa: BLE001 (a message that does not pickle)
        return _RAISED + pickle.dumps((qual, repr(e), text))


def _remote_error(rank, name, kind, message, tb):
    """The :class:`RemoteError` for a remote exception."""
    head = "RPC %r on rank %d raised %s" % (name, rank, kind)
    if message:
        head += ": %s" % message
    e = RemoteError("%s\n\nRemote traceback (rank %d):\n%s" % (head, rank, tb.rstrip()))
    e.rank = rank
    e.name = name
    e.remote_type = kind
    e.remote_message = message
    e.remote_traceback = tb
    return e


def _unpack_reply(reply, rank, name):
    """The result of a call from its reply bytes; raises :class:`RemoteError` for a remote
    exception."""
    if reply[:1] == _OK:
        return pickle.loads(reply[1:])
    if reply[:1] == _RAISED:
        kind, message, tb = pickle.loads(reply[1:])
        raise _remote_error(rank, name, kind, message, tb)
    raise SpoolsError("malformed RPC reply from rank %d for %r" % (rank, name))


def _decorator(comm, name):
    """``@comm.rpc("name")``: registers the function under ``name`` and returns it."""

    def register(fn):
        comm.register_rpc(name, fn)
        return fn

    return register
