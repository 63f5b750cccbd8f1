//! Checking collectives' buffers and counts, and cutting buffers into blocks.

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

/// `Ok` if `ok`, else [`MsgError::BadBuffer`] saying `what`.
pub(crate) fn check(
    op: &'static str,
    ok: bool,
    what: impl FnOnce() -> String,
) -> Result<(), MsgError> {
    if ok {
        Ok(())
    } else {
        Err(MsgError::BadBuffer { op, what: what() })
    }
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
    check(op, counts.len() == n && mine == counts[me], || {
        format!(
            "{} counts for {n} ranks; this rank's buffer holds {mine}",
            counts.len()
        )
    })?;
    let total: usize = counts.iter().sum();
    check(op, c.rank != root || whole == total, || {
        format!("the root's buffer holds {whole}, counts say {total}")
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

/// `buf` cut into consecutive blocks of `counts` elements.
pub(crate) fn blocks_mut<'a, T>(mut buf: &'a mut [T], counts: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(counts.len());
    for &c in counts {
        let take = c.min(buf.len());
        let (a, b) = std::mem::take(&mut buf).split_at_mut(take);
        out.push(a);
        buf = b;
    }
    out
}
