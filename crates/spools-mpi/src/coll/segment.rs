//! The segments in which collectives on non-contiguous datatypes pack and unpack their
//! data while it is in the caches (`coll/mod.rs`'s broadcast, `coll/op.rs`'s reductions),
//! and the agreement that makes every rank go in the same segments.

use crate::env::error::MpiError;

/// The packed length from which a broadcast in which some rank's datatype is not
/// contiguous goes in segments of [`SEGMENT`] bytes (a reduction, whose datatype is the
/// same on every rank, goes in segments at any length: `op.rs`, `Segmented`). Every rank
/// has the same packed length, but only its own datatype: from this length the ranks
/// first agree whether any of them is non-contiguous ([`agree`], an allreduce of
/// three words, under 2 % of a broadcast of this size), and then all go in
/// segments or none does.
pub(crate) const SEGMENTED_FROM: usize = 4 * SEGMENT;

/// A segment of a non-contiguous collective's packed data: packed on the root and
/// unpacked on the others while it is still in the caches (a whole message packed into
/// memory of its size, broadcast, then unpacked, took three passes over memory and the
/// page faults of two fresh buffers of its size per call).
pub(crate) const SEGMENT: usize = 128 << 10;

/// Agrees, before a collective `op` goes in segments, on its packed length (every rank's
/// `len`), and says whether any rank's datatype is not contiguous (`scattered`): one
/// allreduce of three words. Ranks whose lengths differ (an erroneous program) all fail
/// here alike, where the segments would have let some ranks make more collectives than
/// others and put every later collective of the communicator out of step.
///
/// # Errors
/// [`spools::MsgError::Mismatch`] on every rank when the lengths differ; the
/// allreduce's own (a dead rank, a rank that called another collective).
pub(crate) fn agree(
    c: &spools::Communicator,
    op: &'static str,
    len: usize,
    scattered: bool,
) -> Result<bool, MpiError> {
    let len64 = len as u64;
    let mine = [u64::from(scattered), len64, !len64];
    let mut most = [0u64; 3];
    c.allreduce(&mine, &mut most, &spools::Op::Max)?;
    let (longest, shortest) = (most[1], !most[2]);
    if longest != shortest {
        let other = if len64 == longest { shortest } else { longest };
        return Err(spools::MsgError::Mismatch {
            op,
            from: None,
            got: usize::try_from(other).unwrap_or(usize::MAX),
            want: len,
        }
        .into());
    }
    Ok(most[0] != 0)
}
