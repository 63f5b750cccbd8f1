//! The ring algorithms, shared by reductions and gathers: reduce-scatter and allgather
//! of blocks around the ring of a group's members.
//!
//! A member whose step finds the ranks disagree (a block of another length arrived)
//! keeps its part of the ring: it sends empty blocks in its remaining steps, so that its
//! right neighbour fails too instead of waiting for a block that never comes; the
//! caller's `Poisoned` keeps the first error, which the caller reports at the end.

use super::args::{blocks_mut, bytes, bytes_mut, displs};
use super::group::{exchange, exchange_during, Group, Poisoned};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// Ring reduce-scatter: afterwards member i's block `counts[i]` of `acc` (at the prefix
/// sum) holds the reduction of everyone's block i. Commutative operators only. A
/// disagreement is kept in `poisoned` (see the module's comment); the result says only
/// other errors.
///
/// `src`: this member's contribution where it lies outside `acc`, which then holds
/// nothing yet (an allreduce's send buffer): each step receives its block straight into
/// `acc` and folds this member's part of it in from `src`, and the first step sends from
/// `src`, so that neither a copy of the contribution into `acc` nor a block of scratch
/// is made. Afterwards the blocks of `acc` other than this member's hold partial
/// results or nothing (the allgather that follows overwrites them).
pub(crate) fn ring_reduce_scatter<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (acc, counts, src): (&mut [T], &[usize], Option<&[T]>),
    op: &Op<T>,
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let n = g.n();
    let d = displs(counts);
    let me = g.me;
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    if let Some(src) = src {
        for s in 0..n.saturating_sub(1) {
            let sb = (me + 2 * n - s - 1) % n;
            let rb = (me + 2 * n - s - 2) % n;
            let mut blocks = blocks_mut(acc, counts);
            let (send_block, recv_block) = two_blocks(&mut blocks, sb, rb);
            let send_block = &*send_block;
            // The first step sends this member's own part; later ones, the block the
            // step before folded.
            let data = if s == 0 {
                &src[d[sb]..d[sb] + counts[sb]]
            } else {
                send_block
            };
            let part = &src[d[rb]..d[rb] + counts[rb]];
            fold_step(
                c,
                g,
                (right, left, tag),
                (data, recv_block, part),
                op,
                poisoned,
            )?;
        }
        if n < 2 {
            acc.copy_from_slice(src);
        }
        return Ok(());
    }
    let mut tmp = vec![T::default(); counts.iter().copied().max().unwrap_or(0)];
    for s in 0..n.saturating_sub(1) {
        let sb = (me + 2 * n - s - 1) % n;
        let rb = (me + 2 * n - s - 2) % n;
        let t = &mut tmp[..counts[rb]];
        let r = exchange(
            c,
            g,
            right,
            left,
            tag,
            poisoned.send(bytes(&acc[d[sb]..d[sb] + counts[sb]])),
            bytes_mut(t),
        );
        if poisoned.step(r)? {
            op.combine(&mut acc[d[rb]..d[rb] + counts[rb]], t, true);
        }
    }
    Ok(())
}

/// Ring reduce-scatter of `src` (this member's contribution, the sum of `counts`) into
/// `out` (this member's block of the result, `counts[me]` elements), with two blocks of
/// scratch at most: each step folds this member's part into the partial result it
/// received and sends that on the next step; the last step's block is this member's,
/// received into `out` itself (among 2 members, the one step's). Where a reduce-scatter's
/// input and output are the program's own buffers, no copy of the input is made, and no
/// working copy of the whole vector: at 2 ranks and 1 MiB blocks, fresh buffers of the
/// vector's size each call cost their page faults every call (1.88 ms a call against
/// 0.12 at 512 KiB). Commutative operators only; a disagreement is kept in `poisoned`,
/// as in [`ring_reduce_scatter`].
pub(crate) fn ring_reduce_scatter_into<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (src, counts, out): (&[T], &[usize], &mut [T]),
    op: &Op<T>,
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let n = g.n();
    let d = displs(counts);
    let me = g.me;
    if n < 2 {
        out.copy_from_slice(&src[d[me]..d[me] + counts[me]]);
        return Ok(());
    }
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    // Partial results in flight: received into one while the other is sent.
    let most = if n > 2 {
        counts.iter().copied().max().unwrap_or(0)
    } else {
        0
    };
    let mut bufs = [vec![T::default(); most], vec![T::default(); most]];
    for s in 0..n - 1 {
        let sb = (me + 2 * n - s - 1) % n;
        let rb = (me + 2 * n - s - 2) % n;
        let [a, b] = &mut bufs;
        let (sent, next) = if s % 2 == 0 { (&*b, a) } else { (&*a, b) };
        // The first step sends this member's own part; later ones, the block the step
        // before folded.
        let data = if s == 0 {
            &src[d[sb]..d[sb] + counts[sb]]
        } else {
            &sent[..counts[sb]]
        };
        let into: &mut [T] = if s == n - 2 {
            &mut *out
        } else {
            &mut next[..counts[rb]]
        };
        let part = &src[d[rb]..d[rb] + counts[rb]];
        fold_step(c, g, (right, left, tag), (data, into, part), op, poisoned)?;
    }
    Ok(())
}

/// One step of a ring reduce-scatter with this member's contribution apart: `data` goes
/// to the right neighbour, the left one's partial result lands in `into`, and this
/// member's `part` of that block is folded in (the same order as the in-place form:
/// this member's part, then the incoming partial result).
fn fold_step<T: Element>(
    c: &CommCore,
    g: &Group,
    (right, left, tag): (usize, usize, u32),
    (data, into, part): (&[T], &mut [T], &[T]),
    op: &Op<T>,
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let r = exchange(
        c,
        g,
        right,
        left,
        tag,
        poisoned.send(bytes(data)),
        bytes_mut(into),
    );
    if poisoned.step(r)? {
        op.combine(into, part, false);
    }
    Ok(())
}

/// Ring allgather of blocks in place: member i contributes block i of `buf`. A
/// disagreement is kept in `poisoned`, as in [`ring_reduce_scatter`].
///
/// `own`: this member's block where it lies outside `buf` (an allgather's send buffer),
/// not yet in `buf`: the first step sends it from there, and copies it into `buf` while
/// the neighbours exchange (with none, at once). A neighbour that reads it in place
/// (single copy) then reads lines this member only reads: read from `buf`, they were the
/// ones just written there, and the next call's copy into `buf` had to take every line
/// back from that neighbour (at 2 ranks and 64 KiB, that copy took as long as the
/// exchange).
pub(crate) fn ring_allgather<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (buf, counts, own): (&mut [T], &[usize], Option<&[T]>),
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let n = g.n();
    let me = g.me;
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    if n < 2 {
        if let Some(o) = own {
            buf[..o.len()].copy_from_slice(o);
        }
        return Ok(());
    }
    for s in 0..n - 1 {
        let sb = (me + n - s) % n;
        let rb = (me + 2 * n - s - 1) % n;
        let mut blocks = blocks_mut(buf, counts);
        let (send_block, recv_block) = two_blocks(&mut blocks, sb, rb);
        let r = match own {
            // The first step sends this member's block from `own` and copies it into
            // its place (`send_block`, in `buf`) meanwhile.
            Some(o) if s == 0 => exchange_during(
                c,
                g,
                (right, left),
                tag,
                (poisoned.send(bytes(o)), bytes_mut(recv_block)),
                || send_block.copy_from_slice(o),
            ),
            _ => exchange(
                c,
                g,
                right,
                left,
                tag,
                poisoned.send(bytes(send_block)),
                bytes_mut(recv_block),
            ),
        };
        poisoned.step(r)?;
    }
    Ok(())
}

/// Blocks `x` and `y` (distinct) of `blocks`, both writable.
fn two_blocks<'a, T>(blocks: &'a mut [&mut [T]], x: usize, y: usize) -> (&'a mut [T], &'a mut [T]) {
    debug_assert_ne!(x, y);
    if x < y {
        let (a, b) = blocks.split_at_mut(y);
        (&mut *a[x], &mut *b[0])
    } else {
        let (a, b) = blocks.split_at_mut(x);
        (&mut *b[0], &mut *a[y])
    }
}
