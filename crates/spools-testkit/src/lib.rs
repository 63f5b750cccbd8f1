//! Spools test kit (dev-only).
