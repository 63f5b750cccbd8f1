//! Checking collectives' buffers and counts, and cutting buffers into blocks.

use std::borrow::Cow;

use crate::comm_core::CommCore;
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::MsgError;

/// `s` as bytes.
pub(crate) fn bytes<T: Element>(s: &[T]) -> &[u8] {
    as_bytes(s)
}

/// `s` as bytes, writable.
pub(crate) fn bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    as_bytes_mut(s)
}

/// `Ok` if `got == want`, else [`MsgError::BadBuffer`] naming the `rule` broken.
pub(crate) fn check(
    op: &'static str,
    rule: &'static str,
    got: usize,
    want: usize,
) -> Result<(), MsgError> {
    if got == want {
        Ok(())
    } else {
        Err(MsgError::BadBuffer {
            op,
            rule,
            got,
            want,
        })
    }
}

/// The rule "one count per rank".
pub(crate) const ONE_COUNT_PER_RANK: &str = "counts must hold one entry per rank";
/// The rule "send splits evenly among the ranks" (checked as the remainder).
pub(crate) const EVEN_SPLIT: &str = "send's length modulo the ranks must be 0";
/// The rule "recv as long as send".
pub(crate) const RECV_AS_SEND: &str = "recv must hold as many elements as send";
/// The rule a rooted collective's root buffer breaks when it is not every rank's part.
pub(crate) const ROOT_HOLDS_ALL: &str = "the root's buffer must hold the sum of the counts";

/// Checks the arguments of an alltoallv (`op` names it) on `n` ranks, this one `me`: one
/// count per rank on each side, a `send` of `send_len` elements holding the sum of
/// `send_counts`, and this rank's block to itself of one count on both sides.
pub(crate) fn check_alltoallv(
    op: &'static str,
    (n, me): (usize, usize),
    send_len: usize,
    (send_counts, recv_counts): (&[usize], &[usize]),
) -> Result<(), MsgError> {
    check(op, ONE_COUNT_PER_RANK, send_counts.len(), n)?;
    check(op, ONE_COUNT_PER_RANK, recv_counts.len(), n)?;
    check(
        op,
        "send must hold the sum of send_counts",
        send_len,
        send_counts.iter().sum(),
    )?;
    check(
        op,
        "this rank's block to itself must have the same count in both",
        send_counts[me],
        recv_counts[me],
    )
}

/// Checks the arguments of a rooted v-collective: one count per rank, this rank's own
/// buffer (`mine`) of its count, and at the root the whole buffer (`whole`) of their sum.
pub(crate) fn check_rooted(
    op: &'static str,
    c: &CommCore,
    counts: &[usize],
    mine: usize,
    whole: usize,
    root: u32,
) -> Result<(), MsgError> {
    let n = c.size() as usize;
    let me = c.rank as usize;
    check(op, ONE_COUNT_PER_RANK, counts.len(), n)?;
    check(
        op,
        "this rank's buffer must hold its own count",
        mine,
        counts[me],
    )?;
    let total: usize = counts.iter().sum();
    if c.rank == root {
        check(op, ROOT_HOLDS_ALL, whole, total)?;
    }
    Ok(())
}

/// `counts` of elements of `T` in bytes: borrowed for bytes (the MPI layer's), else a
/// copy.
pub(crate) fn byte_counts<T>(counts: &[usize]) -> Cow<'_, [usize]> {
    match std::mem::size_of::<T>() {
        1 => Cow::Borrowed(counts),
        size => Cow::Owned(counts.iter().map(|&k| k * size).collect()),
    }
}

/// `f` of `n` numbers, one per rank (zeroed), on the stack up to 64 ranks: no
/// allocation per call.
pub(crate) fn with_per_rank<R>(n: usize, f: impl FnOnce(&mut [usize]) -> R) -> R {
    let mut small = [0usize; 64];
    if n <= small.len() {
        f(&mut small[..n])
    } else {
        f(&mut vec![0; n])
    }
}

/// `f` of `n` counts that all equal `len` (a rooted or all-to-all call's, where every
/// rank's part has one length), without allocating ([`with_per_rank`]).
pub(crate) fn with_even_counts<R>(n: usize, len: usize, f: impl FnOnce(&[usize]) -> R) -> R {
    with_per_rank(n, |counts| {
        counts.fill(len);
        f(counts)
    })
}

/// Prefix sums of `counts`: where each rank's block starts.
pub(crate) fn displs(counts: &[usize]) -> Vec<usize> {
    let mut d = Vec::with_capacity(counts.len());
    let mut at = 0;
    for &c in counts {
        d.push(at);
        at += c;
    }
    d
}

/// Where rank `me`'s block lies in a buffer of consecutive blocks of `counts` elements.
pub(crate) fn block(counts: &[usize], me: usize) -> std::ops::Range<usize> {
    let from: usize = counts[..me].iter().sum();
    from..from + counts[me]
}

/// `buf` cut into consecutive blocks of `counts` elements.
pub(crate) fn blocks_mut<'a, T>(
    mut buf: &'a mut [T],
    counts: &[usize],
) -> smallvec::SmallVec<[&'a mut [T]; 8]> {
    let mut out = smallvec::SmallVec::with_capacity(counts.len());
    for &c in counts {
        let take = c.min(buf.len());
        let (a, b) = std::mem::take(&mut buf).split_at_mut(take);
        out.push(a);
        buf = b;
    }
    out
}
