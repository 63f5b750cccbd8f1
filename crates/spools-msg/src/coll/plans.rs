//! The collectives' algorithms written as [`Schedule`]s: the same steps, tags and
//! combining order as the blocking versions (recursive doubling, binomial trees,
//! dissemination, rings, direct exchanges), so results are identical. The pipelined
//! chain broadcast of long messages is a binomial tree here, and alltoall posts every
//! block at once at any size (sends never block in a schedule).

use super::flat::{even_counts, DOUBLING_MAX};
use super::group::Group;
use super::schedule::{Part, Schedule};
use crate::element::{Element, Op};

/// Job rank of member `i` of `g`.
fn job<T: Element>(s: &Schedule<T>, g: &Group, i: usize) -> u32 {
    s.core().ranks[g.members[i] as usize]
}

/// The whole of slot `slot`.
pub(crate) fn whole<T: Element>(s: &Schedule<T>, slot: usize) -> Part {
    Part::new(slot, 0, s.slot_len(slot))
}

/// `slots[a]` mutably and `slots[b]` shared (`a != b`).
fn pair<T>(slots: &mut [Vec<T>], a: usize, b: usize) -> (&mut Vec<T>, &Vec<T>) {
    if a < b {
        let (x, y) = slots.split_at_mut(b);
        (&mut x[a], &y[0])
    } else {
        let (x, y) = slots.split_at_mut(a);
        (&mut y[0], &x[b])
    }
}

/// A `Reduce` step: `acc` (a part) combined with the first elements of slot `tmp`.
fn combine<T: Element>(s: &mut Schedule<T>, op: &Op<T>, acc: Part, tmp: usize, lower: bool) {
    let op = op.clone();
    s.reduce(move |slots| {
        let (a, t) = pair(slots, acc.slot, tmp);
        let len = acc.end - acc.start;
        op.combine(&mut a[acc.start..acc.end], &t[..len], lower);
    });
}

/// Prefix sums of `counts`.
fn displs(counts: &[usize]) -> Vec<usize> {
    super::args::displs(counts)
}

/// Dissemination barrier over `g` (no data; slot 0 may be empty).
pub(crate) fn dissemination<T: Element>(s: &mut Schedule<T>, g: &Group, tag: u32) {
    let n = g.n();
    let none = Part::new(0, 0, 0);
    let (mut dist, mut round) = (1, 0);
    while dist < n {
        let to = job(s, g, (g.me + dist) % n);
        let from = job(s, g, (g.me + n - dist) % n);
        s.round()
            .recv(from, tag + round, none)
            .send(to, tag + round, none);
        dist *= 2;
        round += 1;
    }
}

/// Barrier over `g`, hierarchical across hosts.
pub(crate) fn barrier<T: Element>(s: &mut Schedule<T>, g: &Group, hosts: &[u32], tag: u32) {
    let Some((local, leaders)) = g.hierarchy(hosts) else {
        return dissemination(s, g, tag);
    };
    let none = Part::new(0, 0, 0);
    if local.me == 0 {
        s.round();
        for i in 1..local.n() {
            let from = job(s, &local, i);
            s.recv(from, tag + 100, none);
        }
        dissemination(s, &leaders, tag);
        s.round();
        for i in 1..local.n() {
            let to = job(s, &local, i);
            s.send(to, tag + 101, none);
        }
    } else {
        let leader = job(s, &local, 0);
        s.round()
            .send(leader, tag + 100, none)
            .recv(leader, tag + 101, none);
    }
}

/// Binomial broadcast of slot `buf` from member `root` of `g`.
pub(crate) fn bcast_tree<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    buf: usize,
) {
    let n = g.n();
    if n <= 1 {
        return;
    }
    let all = whole(s, buf);
    let rel = (g.me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            let from = job(s, g, (rel - mask + root) % n);
            s.round().recv(from, tag, all);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    s.round();
    while mask > 0 {
        if rel + mask < n {
            let to = job(s, g, (rel + mask + root) % n);
            s.send(to, tag, all);
        }
        mask >>= 1;
    }
}

/// Broadcast of slot `buf` from member `root` of `g`, in three phases across hosts
/// (root to its host's leader, between leaders, within each host).
pub(crate) fn bcast<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    hosts: &[u32],
    root: usize,
    tag: u32,
    buf: usize,
) {
    let Some((local, leaders)) = g.hierarchy(hosts) else {
        return bcast_tree(s, g, root, tag, buf);
    };
    let root_rank = g.members[root];
    let root_leader = leaders.leader_of(hosts, root_rank);
    let leader_rank = leaders.members[root_leader];
    let me = g.members[g.me];
    let all = whole(s, buf);
    if root_rank != leader_rank {
        if me == root_rank {
            let to = s.core().ranks[leader_rank as usize];
            s.round().send(to, tag + 1, all);
        } else if me == leader_rank {
            let from = s.core().ranks[root_rank as usize];
            s.round().recv(from, tag + 1, all);
        }
    }
    if leaders.me != usize::MAX {
        bcast_tree(s, &leaders, root_leader, tag + 2, buf);
    }
    // Within each host from its leader (the root's host's leader has it by now).
    bcast_tree(s, &local, 0, tag + 3, buf);
}

/// Binomial reduce of slot `acc` toward member `root` (slot `tmp` as scratch, at least
/// as long), children combined in order with the lower contribution first.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_tree<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    acc: usize,
    tmp: usize,
    op: &Op<T>,
) {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let len = s.slot_len(acc);
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            let to = job(s, g, (rel - mask + root) % n);
            s.round().send(to, tag, Part::new(acc, 0, len));
            break;
        }
        if rel + mask < n {
            let from = job(s, g, (rel + mask + root) % n);
            s.round().recv(from, tag, Part::new(tmp, 0, len));
            combine(s, op, Part::new(acc, 0, len), tmp, true);
        }
        mask <<= 1;
    }
}

/// Reduce of slot `acc` to member `root`, any operator (through member 0 for a
/// non-commutative one).
pub(crate) fn reduce_to<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    acc: usize,
    tmp: usize,
    op: &Op<T>,
) {
    if op.commutative() || root == 0 {
        return reduce_tree(s, g, root, tag, acc, tmp, op);
    }
    reduce_tree(s, g, 0, tag, acc, tmp, op);
    let all = whole(s, acc);
    if g.me == 0 {
        let to = job(s, g, root);
        s.round().send(to, tag + 1, all);
    } else if g.me == root {
        let from = job(s, g, 0);
        s.round().recv(from, tag + 1, all);
    }
}

/// Recursive doubling allreduce of slot `acc` for any member count, in rank order.
pub(crate) fn doubling<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    acc: usize,
    tmp: usize,
    op: &Op<T>,
) {
    let (n, me) = (g.n(), g.me);
    let len = s.slot_len(acc);
    let (a, t) = (Part::new(acc, 0, len), Part::new(tmp, 0, len));
    let mut pof2 = 1;
    while pof2 * 2 <= n {
        pof2 *= 2;
    }
    let rem = n - pof2;
    let newrank = if me < 2 * rem {
        if me % 2 == 0 {
            let to = job(s, g, me + 1);
            s.round().send(to, tag, a);
            None
        } else {
            let from = job(s, g, me - 1);
            s.round().recv(from, tag, t);
            combine(s, op, a, tmp, false);
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    if let Some(nr) = newrank {
        let (mut mask, mut step) = (1, 1);
        while mask < pof2 {
            let nd = nr ^ mask;
            let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
            let peer = job(s, g, dst);
            s.round()
                .recv(peer, tag + step, t)
                .send(peer, tag + step, a);
            combine(s, op, a, tmp, dst > me);
            mask <<= 1;
            step += 1;
        }
    }
    if me < 2 * rem {
        if me % 2 == 0 {
            let from = job(s, g, me + 1);
            s.round().recv(from, tag + 63, a);
        } else {
            let to = job(s, g, me - 1);
            s.round().send(to, tag + 63, a);
        }
    }
}

/// Ring reduce-scatter of slot `acc` cut in `counts` blocks (slot `tmp` as scratch, at
/// least the largest block). Commutative operators only.
pub(crate) fn ring_reduce_scatter<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (acc, tmp): (usize, usize),
    counts: &[usize],
    op: &Op<T>,
) {
    let n = g.n();
    let d = displs(counts);
    let me = g.me;
    let right = job(s, g, (me + 1) % n);
    let left = job(s, g, (me + n - 1) % n);
    for st in 0..n.saturating_sub(1) {
        let sb = (me + 2 * n - st - 1) % n;
        let rb = (me + 2 * n - st - 2) % n;
        s.round()
            .recv(left, tag, Part::new(tmp, 0, counts[rb]))
            .send(right, tag, Part::new(acc, d[sb], d[sb] + counts[sb]));
        combine(s, op, Part::new(acc, d[rb], d[rb] + counts[rb]), tmp, true);
    }
}

/// Ring allgather in place of slot `buf` cut in `counts` blocks: member i contributes
/// block i.
pub(crate) fn ring_allgather<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    buf: usize,
    counts: &[usize],
) {
    let n = g.n();
    let d = displs(counts);
    let me = g.me;
    let right = job(s, g, (me + 1) % n);
    let left = job(s, g, (me + n - 1) % n);
    for st in 0..n.saturating_sub(1) {
        let sb = (me + n - st) % n;
        let rb = (me + 2 * n - st - 1) % n;
        s.round()
            .recv(left, tag, Part::new(buf, d[rb], d[rb] + counts[rb]))
            .send(right, tag, Part::new(buf, d[sb], d[sb] + counts[sb]));
    }
}

/// Whether an allreduce of `len` elements over `n` members takes the ring (else
/// recursive doubling).
fn allreduce_takes_ring<T: Element>(n: usize, len: usize, op: &Op<T>) -> bool {
    len * std::mem::size_of::<T>() > DOUBLING_MAX && len >= n && op.commutative()
}

/// The scratch an allreduce of `len` elements needs (the ring only needs one block).
pub(crate) fn allreduce_scratch<T: Element>(
    g: &Group,
    hosts: &[u32],
    len: usize,
    op: &Op<T>,
) -> usize {
    let ring = allreduce_takes_ring(g.n(), len, op);
    if ring && (!op.commutative() || g.hierarchy(hosts).is_none()) {
        len.div_ceil(g.n())
    } else {
        len
    }
}

/// Allreduce of slot `acc` over a flat group (slot `tmp` as scratch: as long, or one
/// ring block when [`allreduce_scratch`] says so).
pub(crate) fn allreduce_flat<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (acc, tmp): (usize, usize),
    op: &Op<T>,
) {
    let n = g.n();
    if n <= 1 {
        return;
    }
    let len = s.slot_len(acc);
    if !allreduce_takes_ring(n, len, op) {
        return doubling(s, g, tag, acc, tmp, op);
    }
    let counts = even_counts(len, n);
    ring_reduce_scatter(s, g, tag, (acc, tmp), &counts, op);
    ring_allgather(s, g, tag + 1, acc, &counts);
}

/// Allreduce of slot `acc`, hierarchical across hosts for commutative operators.
pub(crate) fn allreduce<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    hosts: &[u32],
    tag: u32,
    (acc, tmp): (usize, usize),
    op: &Op<T>,
) {
    let hier = if op.commutative() {
        g.hierarchy(hosts)
    } else {
        None
    };
    let Some((local, leaders)) = hier else {
        return allreduce_flat(s, g, tag, (acc, tmp), op);
    };
    reduce_tree(s, &local, 0, tag, acc, tmp, op);
    if leaders.me != usize::MAX {
        allreduce_flat(s, &leaders, tag + 8, (acc, tmp), op);
    }
    bcast_tree(s, &local, 0, tag + 16, acc);
}

/// Inclusive scan by recursive doubling into slot `result` (slots `partial`, a copy of
/// it, and `tmp` as scratch).
pub(crate) fn scan<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (result, partial, tmp): (usize, usize, usize),
    op: &Op<T>,
) {
    let (n, me) = (g.n(), g.me);
    let len = s.slot_len(result);
    let (mut mask, mut step) = (1, 0);
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            let peer = job(s, g, dst);
            s.round()
                .recv(peer, tag + step, Part::new(tmp, 0, len))
                .send(peer, tag + step, Part::new(partial, 0, len));
            if me > dst {
                combine(s, op, Part::new(partial, 0, len), tmp, false);
                combine(s, op, Part::new(result, 0, len), tmp, false);
            } else {
                combine(s, op, Part::new(partial, 0, len), tmp, true);
            }
        }
        mask <<= 1;
        step += 1;
    }
}

/// Scan as a chain of messages into slot `result` (this member's part on entry; an
/// exclusive scan leaves member 0's so): member m takes the fold of members 0 to m - 1
/// from member m - 1 into slot `left`, folds it before slot `prefix` (a copy of its
/// part) and sends that to member m + 1 (see `reduce.rs`'s `scan_chain`).
pub(crate) fn scan_chain<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (result, prefix, left): (usize, usize, usize),
    op: &Op<T>,
    inclusive: bool,
) {
    let (n, me) = (g.n(), g.me);
    let len = s.slot_len(result);
    if me > 0 {
        let peer = job(s, g, me - 1);
        s.round().recv(peer, tag, Part::new(left, 0, len));
        combine(s, op, Part::new(prefix, 0, len), left, false);
        let from = if inclusive { prefix } else { left };
        s.reduce(move |slots| {
            let (to, from) = pair(slots, result, from);
            to[..len].copy_from_slice(&from[..len]);
        });
    }
    if me + 1 < n {
        let peer = job(s, g, me + 1);
        s.round().send(peer, tag, Part::new(prefix, 0, len));
    }
}

/// Direct gather into slot `out` (blocks of `counts`) at member `root`; members other
/// than the root send slot `send`. The root's own block must already be in place.
pub(crate) fn gather<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    (send, out): (usize, usize),
    counts: &[usize],
) {
    direct(s, g, root, tag, (send, out), counts, false);
}

/// Direct scatter of slot `send` (blocks of `counts`) from member `root` into slot
/// `out`. The root's own block must already be in place.
pub(crate) fn scatter<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    (send, out): (usize, usize),
    counts: &[usize],
) {
    direct(s, g, root, tag, (send, out), counts, true);
}

/// One round between `root` and every other member: a block of `counts` each, sent from
/// the root's slot `send` to the others' slot `out` (`from_root`, a scatter), or from the
/// others' slot `send` into the root's slot `out` (a gather).
fn direct<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    root: usize,
    tag: u32,
    (send, out): (usize, usize),
    counts: &[usize],
    from_root: bool,
) {
    s.round();
    if g.me != root {
        let peer = job(s, g, root);
        if from_root {
            let all = whole(s, out);
            s.recv(peer, tag, all);
        } else {
            let all = whole(s, send);
            s.send(peer, tag, all);
        }
        return;
    }
    let d = displs(counts);
    for i in (0..g.n()).filter(|&i| i != root) {
        let peer = job(s, g, i);
        if from_root {
            s.send(peer, tag, Part::new(send, d[i], d[i] + counts[i]));
        } else {
            s.recv(peer, tag, Part::new(out, d[i], d[i] + counts[i]));
        }
    }
}

/// Alltoall of equal blocks of `block` elements from slot `send` into slot `out`, all at
/// once. This member's own block must already be in place.
pub(crate) fn alltoall<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    slots: (usize, usize),
    block: usize,
) {
    let counts = vec![block; g.n()];
    alltoallv(s, g, tag, slots, (&counts, &counts));
}

/// Alltoall of blocks of `send_counts` elements (one after the other in slot `send`, one
/// for each member) into blocks of `recv_counts` (in slot `out`), all at once. This
/// member's own block must already be in place.
pub(crate) fn alltoallv<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (send, out): (usize, usize),
    (send_counts, recv_counts): (&[usize], &[usize]),
) {
    let (n, me) = (g.n(), g.me);
    let (sd, rd) = (displs(send_counts), displs(recv_counts));
    s.round();
    for i in (0..n).filter(|&i| i != me) {
        let from = job(s, g, i);
        s.recv(from, tag, Part::new(out, rd[i], rd[i] + recv_counts[i]));
    }
    for st in 1..n {
        let i = (me + st) % n;
        let to = job(s, g, i);
        s.send(to, tag, Part::new(send, sd[i], sd[i] + send_counts[i]));
    }
}

/// Each member's slot `from` into its right neighbour's slot `into` (member 0's `into`
/// is left as it was): an inclusive scan's results made an exclusive scan's.
pub(crate) fn shift_right<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (from, into): (usize, usize),
) {
    let (n, me) = (g.n(), g.me);
    s.round();
    if me > 0 {
        let left = job(s, g, me - 1);
        let all = whole(s, into);
        s.recv(left, tag, all);
    }
    if me + 1 < n {
        let right = job(s, g, me + 1);
        let all = whole(s, from);
        s.send(right, tag, all);
    }
}

/// Reduce-scatter of slot `acc` (the sum of `counts`) into slot `out`: ring for
/// commutative operators, else an ordered reduce to member 0 and a scatter.
pub(crate) fn reduce_scatter<T: Element>(
    s: &mut Schedule<T>,
    g: &Group,
    tag: u32,
    (acc, tmp, out): (usize, usize, usize),
    counts: &[usize],
    op: &Op<T>,
) {
    let me = g.me;
    let d = displs(counts);
    let mine = d[me]..d[me] + counts[me];
    if op.commutative() {
        ring_reduce_scatter(s, g, tag, (acc, tmp), counts, op);
    } else {
        reduce_to(s, g, 0, tag, acc, tmp, op);
        scatter(s, g, 0, tag + 2, (acc, out), counts);
        if me != 0 {
            return;
        }
    }
    s.reduce(move |slots| {
        let (o, a) = pair(slots, out, acc);
        o.copy_from_slice(&a[mine.clone()]);
    });
}
