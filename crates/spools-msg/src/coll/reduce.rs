//! Reductions: reduce, allreduce, reduce-scatter, scan.

use super::args::{bytes, bytes_mut, check, ONE_COUNT_PER_RANK, RECV_AS_SEND};
use super::flat::{allreduce_flat_from, allreduce_poisoned};
use super::gather::scatterv_in;
use super::group::{exchange, recv, send, Group, Poisoned};
use super::ring::ring_reduce_scatter_into;
use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// Binomial reduce of `acc` toward member `root`; on return the root's `acc` holds the
/// result (others' is scratch). With a non-commutative operator the root must be member
/// 0, so that every step combines a lower block with the next higher one.
///
/// `src`: this member's contribution where it lies outside `acc`, which then holds
/// nothing yet (and, for a member other than the root, may be empty where
/// [`binomial_receives`] says it receives nothing): a leaf sends straight from it, and an inner member receives its first
/// child's part straight into `acc` and folds `src` in, so that neither a copy of the
/// contribution nor scratch for that child is made.
pub(crate) fn binomial<T: Element>(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    (acc, mut src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
) -> Result<(), MsgError> {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let mut tmp = Vec::new();
    let mut poisoned = Poisoned::default();
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            let to = (rel - mask + root) % n;
            let data = poisoned.send(bytes(src.unwrap_or(acc)));
            poisoned.step(send(c, g, to, tag, data))?;
            return poisoned.end();
        }
        if rel + mask < n {
            let from = (rel + mask + root) % n;
            match src.take() {
                // This member's part, then the higher child's.
                Some(own) => {
                    if poisoned.step(recv(c, g, from, tag, bytes_mut(acc)))? {
                        op.combine(acc, own, false);
                    }
                }
                None => {
                    tmp.resize(acc.len(), T::default());
                    if poisoned.step(recv(c, g, from, tag, bytes_mut(&mut tmp)))? {
                        op.combine(acc, &tmp, true);
                    }
                }
            }
        }
        mask <<= 1;
    }
    // The root of a tree of one.
    if let Some(own) = src {
        acc.copy_from_slice(own);
    }
    poisoned.end()
}

/// Whether member `me` of `n` receives anything in a [`binomial`] reduce to `root`.
pub(crate) fn binomial_receives(n: usize, me: usize, root: usize) -> bool {
    let rel = (me + n - root) % n;
    let mut mask = 1;
    while mask < n && rel & mask == 0 {
        if rel + mask < n {
            return true;
        }
        mask <<= 1;
    }
    false
}

/// The root of the [`binomial`] reduce in [`reduce_to`]: non-commutative operators
/// reduce to member 0 (in rank order), which hands the result to the root.
fn binomial_root<T: Element>(op: &Op<T>, root: usize) -> usize {
    if op.commutative() {
        root
    } else {
        0
    }
}

/// Reduce to member `root` (any operator). `src`: as in [`binomial`] (the root's `acc`
/// is its receive buffer; another member's may be empty where it receives nothing,
/// [`binomial_receives`] of [`binomial_root`]).
pub(crate) fn reduce_to<T: Element>(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    (acc, src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
) -> Result<(), MsgError> {
    if binomial_root(op, root) == root {
        return binomial(c, g, root, tag, (acc, src), op);
    }
    // Member 0 hands the result to the root even after a disagreement (nothing, then).
    let mut poisoned = Poisoned::default();
    poisoned.step(binomial(c, g, 0, tag, (acc, src), op))?;
    if g.me == 0 {
        let data = poisoned.send(bytes(acc));
        poisoned.step(send(c, g, root, tag + 1, data))?;
    } else if g.me == root {
        poisoned.step(recv(c, g, 0, tag + 1, bytes_mut(acc)))?;
    }
    poisoned.end()
}

/// Allreduce, hierarchical across hosts for commutative operators.
///
/// `src`: the contribution where it lies outside `acc`, which then holds nothing yet
/// (see [`ring_reduce_scatter`]).
pub(crate) fn allreduce<T: Element>(
    c: &CommCore,
    g: &Group,
    hosts: &[u32],
    tag: u32,
    (acc, src): (&mut [T], Option<&[T]>),
    op: &Op<T>,
) -> Result<(), MsgError> {
    let hier = if op.commutative() {
        g.hierarchy(hosts)
    } else {
        None
    };
    let Some((local, leaders)) = hier else {
        return allreduce_flat_from(c, g, tag, (acc, src), op);
    };
    if let Some(src) = src {
        acc.copy_from_slice(src);
    }
    // A phase that finds the ranks disagree does not end this rank's part: a host's
    // members wait for its leader's broadcast, which then carries nothing, so that they
    // fail too. (A member keeps its length, which chose the broadcast's algorithm as
    // its peers' did.)
    let mut poisoned = Poisoned::default();
    poisoned.step(binomial(c, &local, 0, tag, (acc, None), op))?;
    if leaders.me != usize::MAX {
        // Started poisoned, it sends the other leaders empty blocks: they fail too.
        allreduce_poisoned(c, &leaders, tag + 8, (acc, None), op, &mut poisoned)?;
    }
    let result = if poisoned.failed() && local.me == 0 {
        &mut [][..]
    } else {
        bytes_mut(acc)
    };
    poisoned.step(super::flat::flat(c, &local, 0, tag + 16, result))?;
    poisoned.end()
}

/// Reduce-scatter of `acc` (the sum of `counts`) with a non-commutative operator: an
/// ordered reduce to member 0 and a scatter; this member's block lands in `out`. (A
/// commutative one goes round the ring: `ring::ring_reduce_scatter_into`.)
pub(crate) fn reduce_scatter<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    mut acc: Vec<T>,
    counts: &[usize],
    op: &Op<T>,
    out: &mut [T],
) -> Result<(), MsgError> {
    let me = g.me;
    // Member 0 scatters even after a disagreement (empty blocks, then), so that every
    // member fails.
    let mut poisoned = Poisoned::default();
    poisoned.step(reduce_to(c, g, 0, tag, (&mut acc, None), op))?;
    if poisoned.failed() && me == 0 {
        for i in 1..g.n() {
            poisoned.step(send(c, g, i, tag + 2, &[]))?;
        }
    } else {
        poisoned.step(scatterv_in(c, g, 0, tag + 2, &acc, counts, out))?;
    }
    poisoned.end()
}

/// Scan by recursive doubling (any member count, rank order kept): `result` holds this
/// member's part, and on return the parts of members 0 to this one (`inclusive`) or to
/// the one before it combined (an exclusive scan leaves member 0's `result` as it was).
pub(crate) fn scan<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    result: &mut [T],
    op: &Op<T>,
    inclusive: bool,
) -> Result<(), MsgError> {
    let n = g.n();
    let me = g.me;
    // Whether `result` holds a fold yet (an exclusive scan's: not before the first part
    // from below).
    let mut has = inclusive;
    let mut partial = result.to_vec();
    let mut tmp = vec![T::default(); result.len()];
    let mut poisoned = Poisoned::default();
    let mut mask = 1;
    let mut step = 0;
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            let r = exchange(
                c,
                g,
                dst,
                dst,
                tag + step,
                poisoned.send(bytes(&partial)),
                bytes_mut(&mut tmp),
            );
            if !poisoned.step(r)? {
                // Nothing to combine once the ranks disagree.
            } else if me > dst {
                op.combine(&mut partial, &tmp, false);
                if has {
                    op.combine(result, &tmp, false);
                } else {
                    result.copy_from_slice(&tmp);
                    has = true;
                }
            } else {
                op.combine(&mut partial, &tmp, true);
            }
        }
        mask <<= 1;
        step += 1;
    }
    poisoned.end()
}

/// Scan as a chain of messages: member m takes the fold of members 0 to m - 1 from
/// member m - 1, folds its own part (`send`) after it and sends that on to member m + 1.
/// On return `out` holds the fold of members 0 to this one (`inclusive`), or of those
/// before it (member 0's is left as it was). A member waits for its left neighbour
/// alone, and only once: where ranks take turns on CPUs, an eager send lets each member
/// run ahead of the ones after it by many scans (the segment's chain, by
/// [`super::sm::SLOTS`]), as Open MPI's linear scan does. The fold from the left lands in
/// `out` itself, and an inclusive scan sends `out` on: no scratch of the parts' size
/// (fresh buffers of 1 MiB each call cost their page faults every call; an exclusive
/// scan's middle members fold into one).
pub(crate) fn scan_chain<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (mine, out): (&[T], &mut [T]),
    op: &Op<T>,
    inclusive: bool,
) -> Result<(), MsgError> {
    let (n, me) = (g.n(), g.me);
    let mut poisoned = Poisoned::default();
    let right = me + 1 < n;
    if me == 0 {
        if inclusive {
            out.copy_from_slice(mine);
        }
        if right {
            poisoned.step(send(c, g, 1, tag, bytes(mine)))?;
        }
        return poisoned.end();
    }
    let r = recv(c, g, me - 1, tag, bytes_mut(out));
    let got = poisoned.step(r)?;
    if inclusive {
        if got {
            op.combine(out, mine, true);
        }
        if right {
            let r = send(c, g, me + 1, tag, poisoned.send(bytes(out)));
            poisoned.step(r)?;
        }
    } else if right {
        let mut prefix = out.to_vec();
        if got {
            op.combine(&mut prefix, mine, true);
        }
        let r = send(c, g, me + 1, tag, poisoned.send(bytes(&prefix)));
        poisoned.step(r)?;
    }
    poisoned.end()
}

/// A scan (`inclusive` or not) of `mine` into `out` over the messages among every
/// member: the chain where the segment's creator sent scans there (`chain`) and
/// between 2 members (one message where recursive doubling swaps two, and no scratch:
/// an exclusive scan of 1 MiB at 2 ranks took 2.25x Open MPI's time by doubling), else
/// recursive doubling. An exclusive scan leaves member 0's `out` as it was. As in any
/// chain, where lengths differ the members before the disagreement may succeed (member
/// 0 of 2 only sends); the others fail.
fn scan_messages<T: Element>(
    c: &CommCore,
    tag: u32,
    (mine, out): (&[T], &mut [T]),
    op: &Op<T>,
    (inclusive, chain): (bool, bool),
) -> Result<(), MsgError> {
    let g = Group::all(c);
    if chain || g.n() == 2 {
        return scan_chain(c, &g, tag, (mine, out), op, inclusive);
    }
    if inclusive {
        out.copy_from_slice(mine);
        return scan(c, &g, tag, out, op, true);
    }
    let mut fold = mine.to_vec();
    scan(c, &g, tag, &mut fold, op, false)?;
    if g.me > 0 {
        out.copy_from_slice(&fold);
    }
    Ok(())
}

impl Communicator {
    /// Combines every rank's `send` element by element with `op`; the result lands in
    /// `recv` of rank `root` (other ranks' `recv` is not touched and may be empty).
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let (me, n) = (i64::from(world.rank()), i64::from(world.size()));
    /// let root = world.size() - 1;
    /// let mut sum = [0i64; 2];
    /// world.reduce(&[1, me], &mut sum, &Op::Sum, root).unwrap();
    /// if world.rank() == root {
    ///     assert_eq!(sum, [n, n * (n - 1) / 2]);
    /// }
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if the root's `recv` differs in length from `send`,
    /// [`MsgError::BadRank`], a dead rank.
    pub fn reduce<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &Op<T>,
        root: u32,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            self.core.job_rank(root)?;
            let me = self.core.rank as usize;
            let hosts = self.core.hosts.as_slice();
            let bytes = std::mem::size_of_val(send);
            let failed = |e: &MsgError| {
                super::sm::failed(&self.core, hosts, tag, bytes, 0..0, e);
            };
            let root = root as usize;
            if me == root {
                check("reduce", RECV_AS_SEND, recv.len(), send.len())?;
            }
            if !super::sm::fits(&self.core, bytes) {
                let g = Group::all(&self.core);
                // Too long for the shared-memory engine (said there, for members that
                // would wait on it): from the send buffer, with scratch only where this
                // member receives (and is not the root, whose receive buffer serves).
                super::sm::decline(&self.core, hosts, tag, (super::sm::Kind::Reduce, bytes))?;
                let src = Some(send);
                if g.me == root {
                    return reduce_to(&self.core, &g, root, tag, (recv, src), op)
                        .inspect_err(failed);
                }
                let mut acc = if binomial_receives(g.n(), g.me, binomial_root(op, root)) {
                    vec![T::default(); send.len()]
                } else {
                    Vec::new()
                };
                return reduce_to(&self.core, &g, root, tag, (&mut acc, src), op)
                    .inspect_err(failed);
            }
            if me == root {
                recv.copy_from_slice(send);
                if super::sm::reduce(&self.core, hosts, root, tag, recv, op)? {
                    return Ok(());
                }
                let g = Group::all(&self.core);
                reduce_to(&self.core, &g, root, tag, (recv, None), op).inspect_err(failed)
            } else {
                // A contributor's copy (a tree's group leader folds into it): on the
                // stack when small, as the segment's contributions are.
                let mut small = [T::default(); super::sm::SMALL];
                let mut heap = Vec::new();
                let acc = super::sm::scratch(&mut small, &mut heap, send.len());
                acc.copy_from_slice(send);
                if super::sm::reduce(&self.core, hosts, root, tag, acc, op)? {
                    return Ok(());
                }
                let g = Group::all(&self.core);
                reduce_to(&self.core, &g, root, tag, (acc, None), op).inspect_err(failed)
            }
        })
    }

    /// Combines every rank's `send` with `op` and gives every rank the result in `recv`.
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let (me, n) = (f64::from(world.rank()), f64::from(world.size()));
    /// let mut out = [0.0f64; 2];
    /// world.allreduce(&[me + 0.5, -me], &mut out, &Op::Max).unwrap();
    /// assert_eq!(out, [n - 0.5, 0.0]);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if `recv` and `send` differ in length, a dead rank.
    pub fn allreduce<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &Op<T>,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            check("allreduce", RECV_AS_SEND, recv.len(), send.len())?;
            // Too long for the shared-memory engine (which takes nothing from `recv`
            // then): the algorithm copies `send` where it needs to, if at all.
            let lazy = !super::sm::fits(&self.core, std::mem::size_of_val(send));
            if !lazy {
                recv.copy_from_slice(send);
            }
            let hosts = self.core.hosts.as_slice();
            if super::sm::allreduce(&self.core, hosts, tag, recv, op)? {
                return Ok(());
            }
            let g = Group::all(&self.core);
            let src = lazy.then_some(send);
            allreduce(&self.core, &g, hosts, tag, (recv, src), op).inspect_err(|e| {
                let (bytes, tags) = (
                    std::mem::size_of_val(send),
                    super::sm::ALLREDUCE_LEADER_TAGS,
                );
                super::sm::failed(&self.core, hosts, tag, bytes, tags, e);
            })
        })
    }

    /// Reduces every rank's `send` (the sum of `counts` elements) with `op` and leaves
    /// block i (`counts[i]` elements, blocks in rank order) in rank i's `recv`.
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if the lengths do not fit `counts`, a dead rank.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: &Op<T>,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            let n = self.size() as usize;
            let me = self.rank() as usize;
            check("reduce_scatter", ONE_COUNT_PER_RANK, counts.len(), n)?;
            let total: usize = counts.iter().sum();
            check(
                "reduce_scatter",
                "send must hold the sum of the counts",
                send.len(),
                total,
            )?;
            check(
                "reduce_scatter",
                "recv must hold this rank's count",
                recv.len(),
                counts[me],
            )?;
            if super::sm::reduce_scatter(&self.core, tag, send, counts, recv, op)? {
                return Ok(());
            }
            if op.commutative() {
                let g = Group::all(&self.core);
                let mut poisoned = Poisoned::default();
                let io = (send, counts, &mut *recv);
                ring_reduce_scatter_into(&self.core, &g, tag, io, op, &mut poisoned)?;
                return poisoned.end();
            }
            reduce_scatter(
                &self.core,
                &Group::all(&self.core),
                tag,
                send.to_vec(),
                counts,
                op,
                recv,
            )
        })
    }

    /// Inclusive prefix reduction: rank i gets `send` of ranks 0..=i combined with `op`.
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if `recv` and `send` differ in length, a dead rank.
    pub fn scan<T: Element>(&self, send: &[T], recv: &mut [T], op: &Op<T>) -> Result<(), MsgError> {
        self.collective(|tag| {
            check("scan", RECV_AS_SEND, recv.len(), send.len())?;
            // Decided before the segment is looked at: every member decides alike.
            let chain = super::sm::scans_by_messages(&self.core);
            if !chain && super::sm::scan(&self.core, tag, (send, recv), op, true)? {
                return Ok(());
            }
            scan_messages(&self.core, tag, (send, recv), op, (true, chain))
        })
    }

    /// Exclusive prefix reduction: rank i > 0 gets `send` of ranks 0 to i - 1 combined
    /// with `op` in rank order; rank 0's `recv` is left as it was.
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let me = u64::from(world.rank());
    /// let mut below = [u64::MAX];
    /// world.exscan(&[me + 1], &mut below, &Op::Sum).unwrap();
    /// // Ranks 0 to me - 1 sent 1, 2, ..., me.
    /// assert_eq!(below, [if me == 0 { u64::MAX } else { me * (me + 1) / 2 }]);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if `recv` and `send` differ in length, a dead rank.
    pub fn exscan<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &Op<T>,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            check("exscan", RECV_AS_SEND, recv.len(), send.len())?;
            let chain = super::sm::scans_by_messages(&self.core);
            if !chain && super::sm::scan(&self.core, tag, (send, recv), op, false)? {
                return Ok(());
            }
            scan_messages(&self.core, tag, (send, recv), op, (false, chain))
        })
    }
}
