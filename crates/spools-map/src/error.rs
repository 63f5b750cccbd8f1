//! Errors of building layouts, parsing specs and planning transfers.

use thiserror::Error;

/// A layout description that does not describe a valid mapping.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// An array has no dimensions.
    #[error("an array needs at least one dimension")]
    NoDimensions,
    /// The number of distributions or grid extents differs from the number of dimensions.
    #[error("{dims} dimensions but {dists} distributions and {grid} grid extents")]
    RankMismatch {
        /// Dimensions of the array.
        dims: usize,
        /// Distributions given.
        dists: usize,
        /// Grid extents given.
        grid: usize,
    },
    /// A dimension of extent 0.
    #[error("dimension {dim} has extent 0; every extent must be at least 1")]
    ZeroExtent {
        /// Index of the dimension.
        dim: usize,
    },
    /// A grid extent of 0.
    #[error("grid extent {dim} is 0; every grid extent must be at least 1")]
    ZeroGrid {
        /// Index of the dimension.
        dim: usize,
    },
    /// A block size of 0.
    #[error("dimension {dim} has block size 0; block sizes must be at least 1")]
    ZeroBlock {
        /// Index of the dimension.
        dim: usize,
    },
    /// `block(b)` whose blocks cannot cover the dimension (`b * p < n`).
    #[error("dimension {dim}: block({block}) over {procs} units covers only {covered} of {extent} indices (need block*units >= extent)")]
    BlockTooSmall {
        /// Index of the dimension.
        dim: usize,
        /// The block size given.
        block: u64,
        /// The grid extent.
        procs: u64,
        /// `block * procs`.
        covered: u64,
        /// The dimension's extent.
        extent: u64,
    },
    /// `*` on a grid extent other than 1.
    #[error(
        "dimension {dim} is not distributed ('*') but its grid extent is {procs}; it must be 1"
    )]
    WholeOnGrid {
        /// Index of the dimension.
        dim: usize,
        /// The grid extent given.
        procs: u64,
    },
    /// An element type of size 0.
    #[error("element size must be at least 1 byte")]
    ZeroElement,
    /// The dataset or the unit count does not fit the 64-bit address space.
    #[error("{what} overflows 64 bits")]
    Overflow {
        /// What overflowed.
        what: &'static str,
    },
    /// More units than supported.
    #[error("too many units ({units}{more}); at most {max} are supported", more = if *units == u64::MAX { " or more" } else { "" })]
    TooManyUnits {
        /// Units requested (saturated at `u64::MAX` when the count itself overflows).
        units: u64,
        /// The limit.
        max: u64,
    },
    /// A byte-stream layout with a stripe unit of 0 bytes.
    #[error("stripe unit must be at least 1 byte")]
    ZeroStripeUnit,
    /// A byte-stream layout with too few units.
    #[error("{kind} needs at least {min} units, got {count}")]
    TooFewUnits {
        /// `stripe` or `raid5`.
        kind: &'static str,
        /// The minimum.
        min: u64,
        /// Units given.
        count: u64,
    },
    /// A dataset of 0 bytes.
    #[error("a dataset must hold at least 1 byte")]
    EmptyDataset,
    /// A bit-permutation layout over too many bits.
    #[error("bits(n={n}): n must be between 1 and {max}")]
    BitsWidth {
        /// Bits requested.
        n: u64,
        /// The limit.
        max: u32,
    },
    /// A bit index that is out of range or listed twice.
    #[error("bit {bit} is {problem} (index bits are 0..{n}, 0 least significant)")]
    BadBit {
        /// The bit index.
        bit: u32,
        /// The width.
        n: u32,
        /// `out of range` or `listed twice`.
        problem: &'static str,
    },
    /// Two bit permutations of different widths composed.
    #[error("cannot compose a {left}-bit permutation with a {right}-bit one")]
    WidthMismatch {
        /// Width of the first.
        left: u32,
        /// Width of the second.
        right: u32,
    },
    /// An explicit `local=[...]` list that is not exactly the bits not in `unit=[...]`.
    #[error("local=[...] must list exactly the {expected} bits not used for the unit, got {got}")]
    LocalBits {
        /// Bits expected.
        expected: u32,
        /// Bits given.
        got: u32,
    },
    /// An irregular layout's extents are not sorted, overlap, or do not cover the dataset once.
    #[error("irregular layout: {problem} at element {at}")]
    Irregular {
        /// What is wrong.
        problem: &'static str,
        /// The global element index where it was found.
        at: u64,
    },
    /// A unit number beyond the layout's units.
    #[error("unit {unit} is out of range: the layout has {units} units")]
    UnitOutOfRange {
        /// The unit asked for.
        unit: u64,
        /// Units in the layout.
        units: u64,
    },
    /// A byte-stream layout whose size was not given and could not be inferred.
    #[error(
        "{spec}: a byte-stream layout needs a size (add size=SIZE, or plan it against an array)"
    )]
    Unsized {
        /// The layout, printed.
        spec: String,
    },
}

/// A spec string that does not parse, or parses to an invalid layout.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The text does not follow the grammar.
    #[error("at column {column}: expected {expected}, found {found}", column = pos + 1)]
    Syntax {
        /// Byte offset of the problem (0-based; the message shows it 1-based).
        pos: usize,
        /// What the grammar allows here.
        expected: String,
        /// What was found instead.
        found: String,
    },
    /// The text follows the grammar but describes an invalid layout.
    #[error("at column {column}: {source}", column = pos + 1)]
    Invalid {
        /// Byte offset of the part at fault (0-based).
        pos: usize,
        /// Why the layout is invalid.
        source: LayoutError,
    },
}

impl SpecError {
    /// Byte offset (0-based) of the problem within the spec.
    pub fn position(&self) -> usize {
        match self {
            SpecError::Syntax { pos, .. } | SpecError::Invalid { pos, .. } => *pos,
        }
    }
}

/// A transfer plan that cannot be made from the two layouts given.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The two layouts describe datasets of different sizes.
    #[error("source holds {src} bytes but destination holds {dst} bytes")]
    SizeMismatch {
        /// Bytes in the source dataset.
        src: u64,
        /// Bytes in the destination dataset.
        dst: u64,
    },
    /// Neither layout gives the dataset's size.
    #[error("neither layout gives the dataset size: add size=SIZE to a byte-stream layout")]
    Unsized,
    /// A unit number beyond the layout's units.
    #[error("{side} unit {unit} is out of range: that layout has {units} units")]
    UnitOutOfRange {
        /// `source` or `destination`.
        side: &'static str,
        /// The unit asked for.
        unit: u64,
        /// Units in the layout.
        units: u64,
    },
    /// A summary matrix with more cells than [`MAX_SUMMARY_CELLS`](crate::MAX_SUMMARY_CELLS).
    #[error("a summary of {src_units} x {dst_units} units is too large (at most {max} pairs); ask for one unit's sends instead")]
    SummaryTooLarge {
        /// Source units.
        src_units: u64,
        /// Destination units.
        dst_units: u64,
        /// The most pairs a summary holds.
        max: u64,
    },
    /// A layout became invalid when its size was bound to the other side's.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}
