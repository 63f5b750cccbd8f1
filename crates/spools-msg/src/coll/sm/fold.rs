//! Reduce-scatter through the segment, flat (as `gather.rs`'s collectives): every member
//! posts its whole buffer and folds its own block of everyone's, in rank order. One step
//! and no root, within one host only (across hosts: the messages). Scans are a chain
//! (`chain.rs`).

use super::coll::place;
use super::gather::{run, Taker};
use super::kind::Kind;
use super::SmComm;
use crate::coll::args::{block, bytes, bytes_mut};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// A member's fold of the others' parts around its own, in rank order: the result
/// starts as this member's own part (or block); the parts of the members before it are
/// folded into `before`, those after it straight into the result, and `before` goes in
/// front at the end.
pub(crate) struct Folder<T: Element> {
    op: Op<T>,
    /// This member's index (its rank: one host).
    me: usize,
    /// Where this member's block starts in each part, in bytes (0: the whole part).
    at: usize,
    before: Vec<T>,
    has_before: bool,
    tmp: Vec<T>,
    /// For an operator that takes whole contributions only ([`Op::splits`]): this
    /// member's whole contribution, folded whole; its block goes to the result at the
    /// end.
    whole: Option<Vec<T>>,
}

impl<T: Element> Folder<T> {
    /// A reduce-scatter's fold for member `me`, whose block starts `at` bytes into
    /// every part (`mine`, this member's, included).
    pub(crate) fn block(op: Op<T>, me: usize, at: usize, mine: &[T]) -> Folder<T> {
        Folder {
            whole: (!op.splits()).then(|| mine.to_vec()),
            op,
            me,
            at,
            before: Vec::new(),
            has_before: false,
            tmp: Vec::new(),
        }
    }
}

impl<T: Element> Taker<T> for Folder<T> {
    fn take(&mut self, sm: &SmComm, (m, seq): (usize, u32), part: usize, out: &mut [T]) {
        let Folder {
            op,
            me,
            at,
            before,
            has_before,
            tmp,
            whole,
            ..
        } = self;
        // Whole contributions, or this member's block of each.
        let (acc, from) = match whole {
            Some(w) => (w.as_mut_slice(), 0),
            None => (out, *at),
        };
        tmp.resize(acc.len(), T::default());
        sm.read_part(m, seq, part, from, bytes_mut(tmp));
        if m > *me {
            op.combine(acc, tmp, true);
        } else if *has_before {
            op.combine(before, tmp, true);
        } else {
            std::mem::swap(before, tmp);
            *has_before = true;
        }
    }

    fn end(&mut self, out: &mut [T]) {
        let acc = match &mut self.whole {
            Some(w) => w.as_mut_slice(),
            None => &mut *out,
        };
        if self.has_before {
            self.op.combine(acc, &self.before, false);
        }
        if let Some(w) = &self.whole {
            let from = self.at / std::mem::size_of::<T>().max(1);
            out.copy_from_slice(&w[from..from + out.len()]);
        }
    }
}

/// Reduce-scatter within one host (across hosts: the messages): every rank's `send`
/// (blocks of `counts` elements, the same on every rank), combined with `op` in rank
/// order, leaves block r in rank r's `recv`. `Ok(false)` when the segment does not
/// serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] when a member's buffer has another length, a dead rank.
pub(crate) fn reduce_scatter<T: Element>(
    c: &CommCore,
    tag: u32,
    send: &[T],
    counts: &[usize],
    recv: &mut [T],
    op: &Op<T>,
) -> Result<bool, MsgError> {
    let whole = std::mem::size_of_val(send);
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::ReduceScatter, whole), false)? else {
        return Ok(false);
    };
    // One host: a member's index is its rank.
    let me = sm.me;
    let mine = block(counts, me);
    let at = mine.start * std::mem::size_of::<T>();
    recv.copy_from_slice(&send[mine]);
    let mut f = Folder::block(op.clone(), me, at, send);
    run(
        c,
        sm,
        tag,
        (Kind::ReduceScatter, None),
        bytes(send),
        |_| whole,
        |sm, m, seq| f.take(sm, (m, seq), whole, recv),
    )?;
    f.end(recv);
    Ok(true)
}
