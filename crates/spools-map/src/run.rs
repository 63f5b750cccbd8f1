//! Runs ([`Run`]): what every plan hands out, bytes moving from a source unit's storage to
//! a destination unit's storage.

/// `len` bytes moving from byte `src` of a source unit's storage to byte `dst` of a
/// destination unit's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Run {
    /// Offset in the source unit's local storage.
    pub src: u64,
    /// Offset in the destination unit's local storage.
    pub dst: u64,
    /// Length in bytes.
    pub len: u64,
}
