"""Spools for Python: messaging, collectives, redistribution, parallel files, pipes and
streams between the ranks of a parallel program, on numpy arrays.

Run a program on 4 ranks with ``spools run -n 4 -- python3 prog.py`` (or under
``mpirun``/``srun`` with ``SPOOLS_BOOTSTRAP`` set); run alone it is a job of one rank::

    import numpy as np
    import spools

    world = spools.init()          # also done on import under a launcher
    a = np.full(4, world.rank, dtype=np.float64)
    total = world.Allreduce(a)     # sum over the ranks, a new array
    if world.rank == 0:
        world.Send(a, dest=1, tag=7)
        world.send({"any": "object"}, dest=1)
    elif world.rank == 1:
        buf = np.empty(4)
        status = world.Recv(buf, source=0, tag=7)   # fills buf in place
        obj = world.recv(source=0)

Conventions follow mpi4py's for messaging (capitalised names such as ``Send``,
``Allreduce`` take buffers, used in place; lower-case ones such as ``send``,
``allreduce`` take any picklable object) and h5py's for files
(``spools.open(path)[10:20, :]``).

Calls that wait release the GIL, and Ctrl-C interrupts them with ``KeyboardInterrupt``.
An exception that ends a rank's program ends the whole job: its traceback is printed
once, and the other ranks stop with a one-line note instead of a traceback of their own.
"""

import atexit as _atexit
import os as _os
import sys as _sys

from . import _spools
from ._spools import *  # noqa: F401,F403  (the extension's names; __all__ lists them)
from ._spools import init, finalize, initialized, finalized
from . import errors
from .errors import *  # noqa: F401,F403  (the exception classes; errors.__all__ lists them)
from .errors import PeerGoneError, SpoolsError

# The pure-Python parts of each area (object messaging, file slicing, pipes, ...).
from ._p2p import *  # noqa: F401,F403
from ._coll import *  # noqa: F401,F403
from ._am import *  # noqa: F401,F403
from ._io import *  # noqa: F401,F403
from ._pipes import *  # noqa: F401,F403
from ._streams import *  # noqa: F401,F403
from . import _p2p, _coll, _am, _io, _pipes, _streams

__all__ = [name for name in dir(_spools) if not name.startswith("_")]
for _area in (errors, _p2p, _coll, _am, _io, _pipes, _streams):
    __all__ += list(getattr(_area, "__all__", []))


def _under_launcher():
    env = _os.environ
    return "SPOOLS_RANK" in env or "SPOOLS_BOOTSTRAP" in env


_previous_hook = _sys.excepthook


def _excepthook(kind, value, tb):
    """An exception that ends a rank's program ends the job. A rank stopped because
    another failed (``PeerGoneError``) prints one line: the failing rank's traceback is
    the one to read."""
    if initialized() and isinstance(value, PeerGoneError):
        _sys.stderr.write("spools: this rank stopped because the job is ending: %s\n" % value)
    else:
        _previous_hook(kind, value, tb)
    if initialized():
        try:
            _sys.stderr.flush()
        except Exception:  # pragma: no cover
            pass
        name = getattr(kind, "__name__", str(kind))
        text = str(value)
        _spools._abort_job("%s: %s" % (name, text) if text else name)


_sys.excepthook = _excepthook


_original_exit = _sys.exit
_exit_code = [0]


def _exit(status=None):
    """``sys.exit`` that remembers a failing status: a rank that ends with one ends the
    job (as an exception does) rather than wait in ``finalize`` for ranks that may be
    waiting for it. Inside an RPC function it only raises ``SystemExit``: that goes back
    to the caller as ``RemoteError`` and does not end this rank (see _am.py)."""
    if status is not None and status != 0 and not _am._in_rpc_function():
        _exit_code[0] = status
    _original_exit(status)


_exit.__doc__ = _original_exit.__doc__
_sys.exit = _exit


@_atexit.register
def _finalize_at_exit():
    if initialized() and _exit_code[0] != 0:
        try:
            _sys.stdout.flush()
            _sys.stderr.flush()
        except Exception:  # pragma: no cover
            pass
        status = _exit_code[0]
        _spools._abort_job("exited with status %s" % (status,))
        return
    if initialized():
        try:
            finalize()
        except SpoolsError as e:  # the job is ending for another reason
            _sys.stderr.write("spools: finalize at exit: %s\n" % e)


if _under_launcher() and _os.environ.get("SPOOLS_PY_INIT", "1") != "0":
    init()
