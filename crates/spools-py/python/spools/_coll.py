"""Pure-Python part of the coll area (see src/coll.rs)."""

__all__ = []
