"""Pure-Python part of the pipes area (see src/pipes.rs)."""

__all__ = []
