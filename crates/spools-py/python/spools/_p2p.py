"""Pure-Python part of the p2p area (see src/p2p.rs)."""

__all__ = []
