"""Pure-Python part of the coll area (see src/coll/): the collectives are methods of
``Comm`` implemented in the extension; the names below are re-exported by ``spools``.

- Operators: ``"sum"``, ``"prod"``, ``"min"``, ``"max"`` (``spools.SUM``, ...), any
  callable ``f(a, b) -> array`` on whole arrays (``a`` the lower ranks' partial result,
  taken as non-commutative), or ``spools.Op(f, commute=True)``.
- In-place forms: pass ``out=a`` to ``reduce`` (on the root), ``allreduce``, ``scan``
  and their non-blocking forms; ``bcast`` is always in place. There is no ``IN_PLACE``
  sentinel: ``out=`` is the one way to name where a result goes.
- Non-blocking forms return a ``spools.CollRequest`` (``wait()`` -> the result,
  ``test()`` -> bool).
"""

from ._spools import SUM, PROD, MIN, MAX, Op, CollRequest

__all__ = ["SUM", "PROD", "MIN", "MAX", "Op", "CollRequest"]
