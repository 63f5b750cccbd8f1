"""Pure-Python part of the streams area (see src/streams.rs)."""

__all__ = []
