"""Pure-Python part of the coll area (see src/coll/): the collectives are methods of
``Comm`` implemented in the extension; the names below are re-exported by ``spools``.

As in mpi4py, the capitalised collectives (``Bcast``, ``Reduce``, ``Allreduce``,
``Scan``, ``Reduce_scatter``, ``Gather``, ``Gatherv``, ``Allgather``, ``Allgatherv``,
``Scatter``, ``Scatterv``, ``Alltoall``, ``Alltoallv`` and the non-blocking ``Ibcast``,
``Ireduce``, ...) take arrays, used in place; the lower-case ones (``bcast``, ``gather``,
``allgather``, ``scatter``, ``alltoall``, ``reduce``, ``allreduce``) take any picklable
object.

- Operators: ``"sum"``, ``"prod"``, ``"min"``, ``"max"`` (``spools.SUM``, ...), any
  callable ``f(a, b) -> array`` on whole arrays (``a`` the lower ranks' partial result,
  taken as non-commutative), or ``spools.Op(f, commute=True)``.
- In-place forms: pass ``out=a`` to ``Reduce`` (on the root), ``Allreduce``, ``Scan``
  and their non-blocking forms; ``Bcast`` is always in place. There is no ``IN_PLACE``
  sentinel: ``out=`` is the one way to name where a result goes.
- Non-blocking forms return a ``spools.CollRequest`` (``wait()`` -> the result,
  ``test()`` -> bool).
- The object reductions ``reduce`` and ``allreduce`` gather the objects (on the root,
  or on every rank) and combine them in rank order with the operator: ``"sum"`` is
  ``a + b``, ``"prod"`` ``a * b``, ``"min"`` and ``"max"`` the smaller and the larger;
  a callable (or ``Op``) is called as ``f(a, b)``.
"""

import operator as _operator

from ._spools import SUM, PROD, MIN, MAX, Op, CollRequest

__all__ = ["SUM", "PROD", "MIN", "MAX", "Op", "CollRequest"]

_OBJ_OPS = {
    "sum": _operator.add,
    "prod": _operator.mul,
    "min": lambda a, b: b if b < a else a,
    "max": lambda a, b: b if b > a else a,
}


def _obj_op(op):
    """The function of an object reduction's operator (raises for a wrong one)."""
    if op is None:
        return _operator.add
    if isinstance(op, str):
        f = _OBJ_OPS.get(op.lower()) if op in (op.lower(), op.upper()) else None
        if f is None:
            raise ValueError('op must be "sum", "prod", "min", "max" (spools.SUM, ...), '
                             "a callable f(a, b) or spools.Op(f); got %r" % (op,))
        return f
    if callable(op):  # a function, or an Op (callable as its function)
        return op
    raise TypeError('op must be "sum", "prod", "min", "max" (spools.SUM, ...), a callable '
                    "f(a, b) or spools.Op(f); got %s" % type(op).__name__)


def _fold(f, objs):
    acc = objs[0]
    for o in objs[1:]:
        acc = f(acc, o)
    return acc


def _reduce_obj(comm, obj, op, root):
    # A wrong operator is raised once the collective is over: raising first, on this
    # rank alone, would leave the others waiting for its object.
    try:
        f, err = _obj_op(op), None
    except (TypeError, ValueError) as e:
        f, err = None, e
    objs = comm.gather(obj, root=root)
    if err is not None:
        raise err
    return None if objs is None else _fold(f, objs)


def _allreduce_obj(comm, obj, op):
    try:
        f, err = _obj_op(op), None
    except (TypeError, ValueError) as e:
        f, err = None, e
    objs = comm.allgather(obj)
    if err is not None:
        raise err
    return _fold(f, objs)
