//! Collectives over a flat group (no host hierarchy): the barrier, broadcast and allreduce
//! algorithms that the hierarchical collectives, their shared-memory phases and their
//! nonblocking plans run among a host's members or among the hosts' leaders.

use super::args::{bytes, bytes_mut};
use super::group::{disagreement, exchange, recv, send, Group, Poisoned};
use super::ring::{ring_allgather, ring_reduce_scatter};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;
use crate::status::{Source, Tag};

/// Dissemination barrier over `g`: in round k every member signals the one 2^k ahead and
/// waits for the one 2^k behind; after ceil(log2 n) rounds everyone has heard from all.
pub(crate) fn dissemination(c: &CommCore, g: &Group, tag: u32) -> Result<(), MsgError> {
    let n = g.n();
    let mut dist = 1;
    let mut round = 0;
    while dist < n {
        let to = (g.me + dist) % n;
        let from = (g.me + n - dist) % n;
        let guard = c.post_bytes(
            c.coll_ctx(),
            crate::status::Source::Rank(g.members[from]),
            crate::status::Tag::Is((tag + round) as i32),
            &mut [],
        )?;
        send(c, g, to, tag + round, &[])?;
        c.finish_bytes(guard)?;
        dist *= 2;
        round += 1;
    }
    Ok(())
}

/// Messages up to this size use the binomial tree.
const TREE_MAX: usize = 16 << 10;

/// Binomial tree from member `root` of `g`: relative rank r receives from r minus its
/// lowest set bit, then sends to r + 2^k for the lower bits.
pub(crate) fn binomial(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let mut poisoned = Poisoned::default();
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            let from = (rel - mask + root) % n;
            let r = recv(c, g, from, tag, buf);
            if let (Err(MsgError::Mismatch { got, .. }), 1) = (&r, mask) {
                if *got > TREE_MAX && rel + 1 < n {
                    // A chain's chunk: the ranks chose the chain for their lengths, and
                    // the one after this one in it waits for this one's chunks (this one
                    // has no tree children): it fails too instead of waiting forever.
                    let _ = send(c, g, (rel + 1 + root) % n, tag, &[]);
                }
            }
            poisoned.step(r)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rel + mask < n {
            let to = (rel + mask + root) % n;
            poisoned.step(send(c, g, to, tag, poisoned.send(buf)))?;
        }
        mask >>= 1;
    }
    poisoned.end()
}

/// Pipelined chain from member `root`: the message travels in chunks along relative
/// ranks 0, 1, ..., n-1; each member receives chunk i+1 while it forwards chunk i.
///
/// The first chunk is longer than any message of the binomial tree ([`TREE_MAX`]), and
/// the root's length follows it, in a header of 8 bytes that each member forwards after
/// the first chunk (it posts both receives at once, so the pipeline does not wait for
/// the header): chunks alone cannot tell a member whose length is the root's short by a
/// whole number of chunks (it would take the root's first chunks and return `Ok`) or
/// long by some (it would wait for chunks that never come), and a member whose length
/// chose the tree finds a first message longer than its own. A member whose length
/// differs fails with `Mismatch`, and so does every member after it (it sends the next
/// one an empty block).
pub(crate) fn chain(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
    chunk: usize,
) -> Result<(), MsgError> {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let next = (rel + 1 < n).then(|| (rel + 1 + root) % n);
    let prev = (rel > 0).then(|| (rel - 1 + root) % n);
    let len = buf.len();
    let chunk = chunk.max(1);
    let first = chunk.max(TREE_MAX + 1).min(len);
    let Some(prev) = prev else {
        if let Some(next) = next {
            send(c, g, next, tag, &buf[..first])?;
            send(c, g, next, tag, &(len as u64).to_le_bytes())?;
            let mut off = first;
            while off < len {
                let end = (off + chunk).min(len);
                send(c, g, next, tag, &buf[off..end])?;
                off = end;
            }
        }
        return Ok(());
    };
    let r = chain_from(c, g, (prev, next), tag, buf, (first, chunk));
    if let (Err(e), Some(next)) = (&r, next) {
        if disagreement(e) {
            // The ranks disagree: the next member fails too instead of waiting for the
            // rest (best effort: the error reported is this one).
            let _ = send(c, g, next, tag, &[]);
        }
    }
    r
}

/// A chain's member after the first: receives the first chunk (`first` bytes), the
/// root's length and then the other chunks from `prev`, and forwards them to `next`.
fn chain_from(
    c: &CommCore,
    g: &Group,
    (prev, next): (usize, Option<usize>),
    tag: u32,
    buf: &mut [u8],
    (first, chunk): (usize, usize),
) -> Result<(), MsgError> {
    let len = buf.len();
    let peer = g.members[prev];
    let from = Source::Rank(peer);
    let t = Tag::Is(tag as i32);
    let ctx = c.coll_ctx();
    let differs = |got: usize, want: usize| MsgError::Mismatch {
        op: "bcast",
        from: Some(peer),
        got,
        want,
    };
    // Chunk 0 and the header at once.
    let mut header = [0u8; 8];
    let (chunk0, _) = buf.split_at_mut(first);
    let chunk0 = c.post_bytes(ctx, from, t, chunk0)?;
    let head = c.post_bytes(ctx, from, t, &mut header)?;
    let st = super::group::finish(c, chunk0, tag, peer)?;
    if st.len != first {
        // `head`'s receive is released as it drops.
        return Err(differs(st.len, first));
    }
    let st = super::group::finish(c, head, tag, peer).map_err(|e| match e {
        MsgError::Mismatch { got, .. } => differs(got, len),
        e => e,
    })?;
    let root_len = u64::from_le_bytes(header);
    if st.len != header.len() || root_len != len as u64 {
        let got = if st.len == header.len() {
            usize::try_from(root_len).unwrap_or(usize::MAX)
        } else {
            st.len
        };
        return Err(differs(got, len));
    }
    // Then: post chunk i+1, forward chunk i (after chunk 0, the header), wait for
    // chunk i+1.
    let mut off = 0;
    while off < len {
        let end = if off == 0 {
            first
        } else {
            (off + chunk).min(len)
        };
        let (done, rest) = buf.split_at_mut(end);
        let next_len = chunk.min(rest.len());
        let guard = if next_len > 0 {
            Some(c.post_bytes(ctx, from, t, &mut rest[..next_len])?)
        } else {
            None
        };
        if let Some(next) = next {
            send(c, g, next, tag, &done[off..end])?;
            if off == 0 {
                send(c, g, next, tag, &header)?;
            }
        }
        if let Some(guard) = guard {
            let st = super::group::finish(c, guard, tag, peer)?;
            if st.len != next_len {
                return Err(differs(st.len, next_len));
            }
        }
        off = end;
    }
    Ok(())
}

/// Broadcast over a flat group, choosing the algorithm by size.
pub(crate) fn flat(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    if g.n() <= 1 {
        return Ok(());
    }
    if buf.len() <= TREE_MAX || g.n() == 2 {
        binomial(c, g, root, tag, buf)
    } else {
        let chunk = c.engine.limits.eager_limit.clamp(8 << 10, 64 << 10);
        chain(c, g, root, tag, buf, chunk)
    }
}

/// The phases of a broadcast across hosts before the one within each host: the root
/// hands the data to its host's leader, and the leaders broadcast among themselves.
/// Returns the member of `local` that serves this host (the root on its host, else the
/// leader). A disagreement is kept in `poisoned`; the result says only other errors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn between_hosts(
    c: &CommCore,
    g: &Group,
    local: &Group,
    leaders: &Group,
    hosts: &[u32],
    root: usize,
    tag: u32,
    buf: &mut [u8],
    poisoned: &mut Poisoned,
) -> Result<usize, MsgError> {
    let root_rank = g.members[root];
    let host_of = |m: u32| hosts.get(m as usize).copied().unwrap_or(0);
    let root_host = host_of(root_rank);
    let root_leader = leaders.leader_of(hosts, root_rank);
    let root_leader_rank = leaders.members[root_leader];
    let me = g.members[g.me];
    // 1. The root hands the data to its host's leader.
    if root_rank != root_leader_rank {
        if me == root_rank {
            let l = g
                .members
                .iter()
                .position(|&m| m == root_leader_rank)
                .unwrap_or(0);
            poisoned.step(send(c, g, l, tag + 1, buf))?;
        } else if me == root_leader_rank {
            poisoned.step(recv(c, g, root, tag + 1, buf))?;
        }
    }
    // 2. Between leaders (a root leader that found the disagreement sends nothing, so
    // that the others fail too).
    if leaders.me != usize::MAX {
        let data = if poisoned.failed() && leaders.me == root_leader {
            &mut [][..]
        } else {
            buf
        };
        poisoned.step(flat(c, leaders, root_leader, tag + 2, data))?;
    }
    Ok(if host_of(me) == root_host {
        local
            .members
            .iter()
            .position(|&m| m == root_rank)
            .unwrap_or(0)
    } else {
        0
    })
}

/// Allreduce messages up to this size use recursive doubling.
pub(crate) const DOUBLING_MAX: usize = 64 << 10;

/// Recursive doubling allreduce for any member count (the extra members first fold into
/// their neighbours), combining in rank order. A disagreement is kept in `poisoned`.
///
/// `src`: this member's contribution where it lies outside `acc`, which then holds
/// nothing yet: the first step that takes a partner's part receives it straight into
/// `acc` and folds `src` in (no copy of the contribution, no scratch for that step; at
/// 2 ranks none at all), and a step before that sends from `src`.
fn doubling<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (acc, mut src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let n = g.n();
    let me = g.me;
    let mut pof2 = 1;
    while pof2 * 2 <= n {
        pof2 *= 2;
    }
    let rem = n - pof2;
    let mut tmp = Vec::new();
    let newrank = if me < 2 * rem {
        if me % 2 == 0 {
            let data = poisoned.send(bytes(src.unwrap_or(acc)));
            poisoned.step(send(c, g, me + 1, tag, data))?;
            None
        } else {
            match src.take() {
                // The lower rank's part, then this one's.
                Some(own) => {
                    if poisoned.step(recv(c, g, me - 1, tag, bytes_mut(acc)))? {
                        op.combine(acc, own, true);
                    }
                }
                None => {
                    tmp.resize(acc.len(), T::default());
                    if poisoned.step(recv(c, g, me - 1, tag, bytes_mut(&mut tmp)))? {
                        op.combine(acc, &tmp, false);
                    }
                }
            }
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    if let Some(nr) = newrank {
        let mut mask = 1;
        let mut step = 1;
        while mask < pof2 {
            let nd = nr ^ mask;
            let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
            match src.take() {
                Some(own) => {
                    let data = poisoned.send(bytes(own));
                    let r = exchange(c, g, dst, dst, tag + step, data, bytes_mut(acc));
                    if poisoned.step(r)? {
                        // `acc` holds the partner's part: the lower rank's first.
                        op.combine(acc, own, dst < me);
                    }
                }
                None => {
                    tmp.resize(acc.len(), T::default());
                    let data = poisoned.send(bytes(acc));
                    let r = exchange(c, g, dst, dst, tag + step, data, bytes_mut(&mut tmp));
                    if poisoned.step(r)? {
                        op.combine(acc, &tmp, dst > me);
                    }
                }
            }
            mask <<= 1;
            step += 1;
        }
    }
    if me < 2 * rem {
        if me % 2 == 0 {
            poisoned.step(recv(c, g, me + 1, tag + 63, bytes_mut(acc)))?;
        } else {
            let data = poisoned.send(bytes(acc));
            poisoned.step(send(c, g, me - 1, tag + 63, data))?;
        }
    }
    Ok(())
}

/// Allreduce over a flat group.
pub(crate) fn allreduce_flat<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    acc: &mut [T],
    op: &Op<T>,
) -> Result<(), MsgError> {
    allreduce_flat_from(c, g, tag, (acc, None), op)
}

/// [`allreduce_flat`] into `acc` from `src` where it is given (`acc` then holds nothing
/// yet; see [`ring_reduce_scatter`]).
pub(crate) fn allreduce_flat_from<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (acc, src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
) -> Result<(), MsgError> {
    let mut poisoned = Poisoned::default();
    allreduce_poisoned(c, g, tag, (acc, src), op, &mut poisoned)?;
    poisoned.end()
}

/// [`allreduce_flat`] by a member that may have found the ranks disagree already: then
/// it takes the steps its length chose with empty blocks, so that every member fails.
/// A disagreement is kept in `poisoned`; the result says only other errors.
pub(crate) fn allreduce_poisoned<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (acc, src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
    poisoned: &mut Poisoned,
) -> Result<(), MsgError> {
    let n = g.n();
    let size = std::mem::size_of_val(acc);
    if n <= 1 {
        if let Some(src) = src {
            acc.copy_from_slice(src);
        }
        return Ok(());
    }
    if size <= DOUBLING_MAX || acc.len() < n || !op.commutative() {
        return doubling(c, g, tag, (acc, src), op, poisoned);
    }
    let counts = even_counts(acc.len(), n);
    ring_reduce_scatter(c, g, tag, (acc, &counts, src), op, poisoned)?;
    ring_allgather(c, g, tag + 1, (acc, &counts, None), poisoned)
}

/// `len` split into `n` nearly equal blocks.
pub(crate) fn even_counts(len: usize, n: usize) -> Vec<usize> {
    (0..n).map(|i| len / n + usize::from(i < len % n)).collect()
}
