//! The segments in which collectives on non-contiguous datatypes pack and unpack their
//! data while it is in the caches (`coll/mod.rs`'s broadcast, `coll/op.rs`'s reductions).

/// The packed length from which a broadcast in which some rank's datatype is not
/// contiguous goes in segments of [`SEGMENT`] bytes (a reduction, whose datatype is the
/// same on every rank, goes in segments at any length: `op.rs`, `Segmented`). Every rank
/// has the same packed length, but only its own datatype: from this length the ranks
/// first agree whether any of them is non-contiguous (`any_scattered` in `coll/mod.rs`,
/// an allreduce of one byte, under 2 % of a broadcast of this size), and then all go in
/// segments or none does.
pub(crate) const SEGMENTED_FROM: usize = 4 * SEGMENT;

/// A segment of a non-contiguous collective's packed data: packed on the root and
/// unpacked on the others while it is still in the caches (a whole message packed into
/// memory of its size, broadcast, then unpacked, took three passes over memory and the
/// page faults of two fresh buffers of its size per call).
pub(crate) const SEGMENT: usize = 128 << 10;
