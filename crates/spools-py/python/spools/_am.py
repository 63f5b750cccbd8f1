"""Pure-Python part of the am area (see src/am.rs)."""

__all__ = []
