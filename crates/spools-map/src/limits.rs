//! The bounds every kind of layout checks: most units ([`MAX_UNITS`]) and largest dataset
//! ([`MAX_BYTES`]).

/// Most units one layout may have.
pub const MAX_UNITS: u64 = 1 << 31;

/// Largest dataset a layout may describe, in bytes (4 EiB), so that no offset arithmetic
/// can overflow.
pub const MAX_BYTES: u64 = 1 << 62;
