"""Pure-Python part of the io area (see src/io.rs)."""

__all__ = []
