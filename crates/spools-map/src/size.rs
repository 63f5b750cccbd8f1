//! Byte sizes with binary suffixes, as used by byte-stream layouts (`unit=64KiB`).

use std::fmt;

const SUFFIXES: [(&str, u64); 5] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("B", 1),
];

/// Suffix multipliers accepted after an integer size, longest match first.
pub(crate) fn suffixes() -> &'static [(&'static str, u64)] {
    &SUFFIXES
}

/// A byte count printed with the largest binary suffix that divides it exactly.
///
/// ```
/// use spools_map::ByteSize;
/// assert_eq!(ByteSize(4 << 20).to_string(), "4MiB");
/// assert_eq!(ByteSize(1000).to_string(), "1000B");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, mult) in SUFFIXES {
            if self.0 != 0 && self.0 % mult == 0 {
                return write!(f, "{}{}", self.0 / mult, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}
