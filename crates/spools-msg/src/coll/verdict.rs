//! The agreement that ends a non-blocking reduction with an [`Op::Agreed`] operator:
//! rounds appended to the collective's own schedule, after its reduction, so that it
//! needs no collective call of its own (a request may be waited in any order, or
//! dropped). Every rank writes one flag, its own [`Verdict::failed`], into a byte per
//! rank; an allreduce of those bytes with a bitwise or (recursive doubling: a few
//! bytes) gives every rank the whole list, which [`Verdict::agreed`] receives before
//! the request completes.

use std::sync::Arc;

use super::group::Group;
use super::plans;
use super::schedule::Schedule;
use crate::element::{as_bytes, as_bytes_mut, Element, Op, Verdict};

/// The step tags of the agreement, past every tag the reductions' own steps use (the
/// low 8 bits of a collective's tag are its steps').
const VERDICT_TAG: u32 = 160;

/// Appends the agreement of `verdict` among `g` to `s` (the schedule of collective
/// `tag`), after everything already in it.
pub(crate) fn append<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    verdict: &Arc<dyn Verdict>,
) {
    let n = g.n();
    let len = n.div_ceil(std::mem::size_of::<T>().max(1));
    let flags = s.add_slot(vec![T::default(); len]);
    let tmp = s.add_slot(vec![T::default(); len]);
    let me = g.me;
    let mine = verdict.clone();
    s.round().reduce(move |slots| {
        let b = as_bytes_mut(&mut slots[flags]);
        b.fill(0);
        b[me] = u8::from(mine.failed());
    });
    let or = Op::user_slice(
        |acc: &mut [T], other: &[T], _| {
            let o = as_bytes(other);
            for (a, b) in as_bytes_mut(acc).iter_mut().zip(o) {
                *a |= *b;
            }
        },
        true,
    );
    plans::allreduce_flat(s, g, tag + VERDICT_TAG, (flags, tmp), &or);
    let told = verdict.clone();
    // The members that failed, as ranks of the communicator (`g`'s own order may be
    // another, the same on every member).
    let members = g.members.clone();
    s.round().reduce(move |slots| {
        let b = as_bytes(&slots[flags]);
        let failed: Vec<u32> = (0..n).filter(|&r| b[r] != 0).map(|r| members[r]).collect();
        told.agreed(&failed);
    });
}
