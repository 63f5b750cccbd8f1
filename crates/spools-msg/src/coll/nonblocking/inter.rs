//! The collectives of an intercommunicator laid over a communicator: two disjoint
//! groups of its members ([`Sides`]), each of which gets what the other group gives.
//! Every member of both groups calls each collective, in the same order, on the same
//! communicator (MPI's intercommunicator rule), so the collectives take their place in
//! its order of non-blocking collectives as the others do.
//!
//! Data crosses between the groups once, between their leaders (member 0 of each group):
//! a group's contributions meet at its leader first (a binomial reduce, or a gather), the
//! leaders swap, and each leader hands on what it got within its group (the broadcast of
//! the intracommunicator, hierarchical across hosts; a binomial tree for the barrier; a
//! scatter). A rooted
//! collective's root talks to the other group's leader alone. The critical path is
//! O(log L + log R) messages for groups of L and R members, where sending every block
//! to every rank of the other group took L·R messages and a root's L receives.
//!
//! Where the groups are small (at most [`INTER_FLAT_PAIRS`] pairs of a member here and
//! one there), barrier, allreduce, allgather and reduce-scatter go flat instead: every
//! member sends to and receives from every member of the other group in one round, and
//! folds what it got in rank order. Three phases cost three waits in a row, where one
//! round's messages (at most R per member) go out at once: on 2 cores, 4 ranks in
//! groups of 2 took 10.5 µs per barrier through the leaders and 5.8 flat (an 8-byte
//! allreduce 11.5 and 7.1). The choice depends on the group sizes alone, which every
//! member of both groups knows alike. The rooted ones go through the leaders at every
//! size (one message crosses, where a root sent to or heard from every member: 0.5 to
//! 0.65x the time at those 4 ranks).
//! Flat, a member holds a part of every member of the other group at once: an
//! allreduce R vectors, a reduce-scatter R whole vectors (it cannot send each remote
//! member its block alone: it knows its own group's counts only), as the exchange
//! before it did. A choice by length as well would bound that, but a member whose
//! length differs (an erroneous call) would then take the other path and wait forever.
//!
//! Step tags, within the collective's own: the phase within the giving group from 0
//! (`plans::reduce_to` takes 0 and 1), the leaders' swap at [`CROSS`], the phase within
//! the getting group from [`HAND_ON`] (`plans::bcast` takes 1 to 3 past it).

use super::{first, CollRequest};
use crate::coll::args::{check, ONE_COUNT_PER_RANK};
use crate::coll::group::Group;
use crate::coll::plans::{self, whole};
use crate::coll::schedule::{Part, Schedule};
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The leaders' swap.
const CROSS: u32 = 10;
/// The phase within the group that gets the data.
const HAND_ON: u32 = 20;

/// Up to this many pairs of members (one per group), the symmetric collectives go flat
/// unless [`Sides::flat_up_to`] says otherwise.
pub const INTER_FLAT_PAIRS: usize = 64;

/// The two groups of an intercommunicator laid over a communicator: `local` (this rank
/// among them) and `remote`, each a list of ranks of that communicator in its group's
/// rank order. Disjoint, and together the whole communicator: every member calls each
/// of its collectives.
///
/// ```
/// let world = spools::init().unwrap();
/// // On one rank there is no second group to speak of; a rank's own group alone:
/// assert!(spools::Sides::new(&world, vec![world.rank()], vec![]).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Sides {
    local: Vec<u32>,
    remote: Vec<u32>,
    /// This rank in `local`.
    me: usize,
    /// Up to how many pairs the symmetric collectives go flat.
    flat_pairs: usize,
}

impl Sides {
    /// The groups `local` and `remote` of `comm`'s ranks.
    ///
    /// # Errors
    /// [`MsgError::BadRank`] for a rank outside `comm`; [`MsgError::BadBuffer`] when
    /// either group is empty, when they overlap or leave out a member of `comm`, or
    /// when this rank is not in `local`.
    pub fn new(comm: &Communicator, local: Vec<u32>, remote: Vec<u32>) -> Result<Sides, MsgError> {
        const OP: &str = "intercommunicator";
        for &r in local.iter().chain(&remote) {
            comm.core.job_rank(r)?;
        }
        check(
            OP,
            "the remote group must not be empty",
            remote.len().min(1),
            1,
        )?;
        let mut all: Vec<u32> = local.iter().chain(&remote).copied().collect();
        all.sort_unstable();
        all.dedup();
        let rule = "the groups must hold every member once";
        check(OP, rule, all.len(), local.len() + remote.len())?;
        check(OP, rule, all.len(), comm.size() as usize)?;
        let me = local.iter().position(|&r| r == comm.rank());
        check(
            OP,
            "this rank must be in the local group",
            usize::from(me.is_some()),
            1,
        )?;
        Ok(Sides {
            me: me.unwrap_or(0),
            local,
            remote,
            flat_pairs: INTER_FLAT_PAIRS,
        })
    }

    /// These groups with barrier, allreduce, allgather and reduce-scatter going flat
    /// (every member with every member of the other group, in one round) up to `pairs`
    /// pairs of members (the local group's size times the remote's), through the
    /// groups' leaders beyond: [`INTER_FLAT_PAIRS`] unless set. Every member of both groups
    /// must pass the same.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// if world.size() == 2 {
    ///     let (me, other) = (world.rank(), 1 - world.rank());
    ///     let leaders = spools::Sides::new(&world, vec![me], vec![other]).unwrap().flat_up_to(0);
    ///     let sum = world.inter_iallreduce(&leaders, vec![me], spools::Op::Sum).unwrap();
    ///     assert_eq!(sum.wait().unwrap(), [other]);
    /// }
    /// ```
    #[must_use]
    pub fn flat_up_to(mut self, pairs: usize) -> Sides {
        self.flat_pairs = pairs;
        self
    }

    /// The local group's ranks.
    pub fn local(&self) -> &[u32] {
        &self.local
    }

    /// The remote group's ranks.
    pub fn remote(&self) -> &[u32] {
        &self.remote
    }

    fn group(&self) -> Group {
        Group {
            members: self.local.iter().copied().collect(),
            me: self.me,
        }
    }

    fn leader(&self) -> bool {
        self.me == 0
    }

    /// Whether the symmetric collectives go flat (see the module's comment).
    fn flat(&self) -> bool {
        self.local.len() * self.remote.len() <= self.flat_pairs
    }
}

/// Who a rooted intercommunicator collective's root is, as this rank sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterRoot {
    /// This rank (MPI's `MPI_ROOT`).
    Here,
    /// Another rank of this rank's group (`MPI_PROC_NULL`): this rank only takes part
    /// in the order.
    Bystander,
    /// Member `r` of the remote group (a rank of [`Sides::remote`], counted from 0).
    There(u32),
}

/// One round with every member of the other group (ranks of the job `remote`): slot
/// `send` whole to each, and from member i into `into(i)`.
fn flat_round<T: Element>(
    s: &mut Schedule<T>,
    remote: &[u32],
    tag: u32,
    send: usize,
    into: impl Fn(usize) -> Part,
) {
    let all = whole(s, send);
    s.round();
    for (i, &r) in remote.iter().enumerate() {
        s.recv(r, tag + CROSS, into(i));
    }
    for &r in remote {
        s.send(r, tag + CROSS, all);
    }
}

/// The leaders' swap (on the leader; nothing elsewhere): `mine`, this group's part, to
/// the other group's leader (job rank `leader`), whose part lands in `theirs`.
fn swap_at_leaders<T: Element>(
    s: &mut Schedule<T>,
    sides: &Sides,
    (leader, tag): (u32, u32),
    (mine, theirs): (Part, Part),
) {
    if sides.leader() {
        s.round()
            .send(leader, tag + CROSS, mine)
            .recv(leader, tag + CROSS, theirs);
    }
}

/// A `Reduce` step folding elements `range` of slots `first..first + n`, in order, into
/// slot `out`: it gets slot `first`'s, then each next one's combined after it.
fn fold_in_order<T: Element>(
    s: &mut Schedule<T>,
    op: &Op<T>,
    (first, n): (usize, usize),
    out: usize,
    range: std::ops::Range<usize>,
) {
    let op = op.clone();
    s.reduce(move |slots| {
        let (head, parts) = slots.split_at_mut(first);
        let acc = &mut head[out];
        acc.copy_from_slice(&parts[0][range.clone()]);
        for p in &parts[1..n] {
            op.combine(acc, &p[range.clone()], true);
        }
    });
}

/// A rooted collective's root and what [`Communicator::inter_schedule`] found: the
/// remote root's job rank (where the root is there), the remote leader's, the base tag.
type Rooted = (InterRoot, Option<u32>, u32, u32);

/// Data from the root: it sends slot 0 whole to the other group's leader, which
/// receives it into slot `into`; then `spread` runs within that group.
fn from_root<T: Element>(
    s: &mut Schedule<T>,
    sides: &Sides,
    (root, peer, leader, tag): Rooted,
    into: usize,
    spread: impl FnOnce(&mut Schedule<T>, &Group),
) {
    match (root, peer) {
        (InterRoot::Here, _) => {
            let all = whole(s, 0);
            s.round().send(leader, tag + CROSS, all);
        }
        (InterRoot::There(_), Some(from)) => {
            if sides.leader() {
                let at = whole(s, into);
                s.round().recv(from, tag + CROSS, at);
            }
            spread(s, &sides.group());
        }
        _ => {}
    }
}

/// Data toward the root: `meet` brings the other group's parts to its leader's slot 0,
/// which the leader sends whole to the root; the root receives its slot 0 whole.
fn toward_root<T: Element>(
    s: &mut Schedule<T>,
    sides: &Sides,
    (root, peer, leader, tag): Rooted,
    meet: impl FnOnce(&mut Schedule<T>, &Group),
) {
    match (root, peer) {
        (InterRoot::Here, _) => {
            let all = whole(s, 0);
            s.round().recv(leader, tag + CROSS, all);
        }
        (InterRoot::There(_), Some(to)) => {
            meet(s, &sides.group());
            if sides.leader() {
                let all = whole(s, 0);
                s.round().send(to, tag + CROSS, all);
            }
        }
        _ => {}
    }
}

impl Communicator {
    /// `s` with the agreement of `op`'s verdict at its end, if it has one, among every
    /// member in the order of their job ranks: members whose communicator orders them
    /// otherwise (an MPI intercommunicator's view puts each side's remote group first)
    /// still pair alike.
    fn agree_inter<T: Element>(&self, mut s: Schedule<T>, tag: u32, op: &Op<T>) -> Schedule<T> {
        if let Some(v) = op.verdict() {
            let mut members: crate::coll::group::Members = (0..self.size()).collect();
            members.sort_by_key(|&r| self.core.ranks[r as usize]);
            let me = members.iter().position(|&r| r == self.rank()).unwrap_or(0);
            crate::coll::verdict::append(&mut s, &Group { members, me }, tag, v);
        }
        s
    }

    /// The job ranks of the remote group.
    fn remote_jobs(&self, sides: &Sides) -> Result<Vec<u32>, MsgError> {
        sides
            .remote
            .iter()
            .map(|&r| self.core.job_rank(r))
            .collect()
    }

    /// The place of a collective between two groups in the order of this
    /// communicator's non-blocking collectives: the core they run on and the base tag.
    /// Taken first, before any argument is checked, as the other non-blocking
    /// collectives do: a rank whose call fails stays in step with the others.
    fn inter_place(&self) -> (Communicator, u32) {
        let nb = self.nonblocking();
        let tag = nb.core.next_coll_tag();
        (nb, tag)
    }

    /// The schedule of `sides`' collective at `place` ([`Communicator::inter_place`]),
    /// with its tag and the ranks of the job of the remote leader and of a remote root.
    fn inter_schedule<T: Element>(
        &self,
        (nb, tag): (Communicator, u32),
        sides: &Sides,
        root: InterRoot,
        slots: Vec<Vec<T>>,
    ) -> Result<(Schedule<T>, u32, u32, Option<u32>), MsgError> {
        // Groups made for another communicator would index past this one's ranks.
        let size = nb.size();
        let fits = sides.local.len() + sides.remote.len() == size as usize
            && sides.local.get(sides.me) == Some(&nb.rank())
            && sides.local.iter().chain(&sides.remote).all(|&r| r < size);
        let rule = "the groups must be of this communicator";
        check("intercommunicator", rule, usize::from(fits), 1)?;
        let leader = nb.core.job_rank(sides.remote[0])?;
        let root = match root {
            InterRoot::There(r) => {
                let at = sides.remote.get(r as usize).ok_or(MsgError::BadRank {
                    rank: r,
                    size: sides.remote.len() as u32,
                })?;
                Some(nb.core.job_rank(*at)?)
            }
            _ => None,
        };
        Ok((nb.schedule(tag, slots), tag, leader, root))
    }

    /// Non-blocking barrier of an intercommunicator: it completes on a rank once every
    /// member of the other group has started it.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// if world.size() >= 2 {
    ///     // Even ranks against odd ones (every rank calls it).
    ///     let (mut mine, mut other): (Vec<u32>, Vec<u32>) =
    ///         (0..world.size()).partition(|r| r % 2 == 0);
    ///     if world.rank() % 2 == 1 {
    ///         std::mem::swap(&mut mine, &mut other);
    ///     }
    ///     let sides = spools::Sides::new(&world, mine, other).unwrap();
    ///     world.inter_ibarrier(&sides).unwrap().wait().unwrap();
    /// }
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for groups made for another communicator; from `wait`, a
    /// dead rank.
    pub fn inter_ibarrier(&self, sides: &Sides) -> Result<CollRequest<()>, MsgError> {
        let place = self.inter_place();
        let slots = vec![Vec::new(), Vec::new()];
        let (mut s, tag, leader, _) =
            self.inter_schedule::<u8>(place, sides, InterRoot::Bystander, slots)?;
        if sides.flat() {
            let none = Part::new(0, 0, 0);
            flat_round(&mut s, &self.remote_jobs(sides)?, tag, 0, |_| none);
            return Self::start("inter_barrier", s, |_| ());
        }
        let g = sides.group();
        plans::reduce_tree(&mut s, &g, 0, tag, 0, 1, &Op::Sum);
        let none = Part::new(0, 0, 0);
        swap_at_leaders(&mut s, sides, (leader, tag), (none, none));
        plans::bcast_tree(&mut s, &g, 0, tag + HAND_ON, 0);
        Self::start("inter_barrier", s, |_| ())
    }

    /// Non-blocking broadcast of an intercommunicator from `root`: the root's `buf`
    /// goes to every member of the other group, whose `wait` returns it (`buf` there is
    /// where it lands, of the same length). The root's and the bystanders' `wait`
    /// return their `buf` as it was.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibarrier`]; [`MsgError::BadRank`] for a remote root
    /// outside the other group; from `wait`, a `buf` whose length differs from the
    /// root's ([`MsgError::Mismatch`]).
    pub fn inter_ibcast<T: Element>(
        &self,
        sides: &Sides,
        buf: Vec<T>,
        root: InterRoot,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        let (mut s, tag, leader, peer) = self.inter_schedule(place, sides, root, vec![buf])?;
        let hosts = self.hosts();
        from_root(&mut s, sides, (root, peer, leader, tag), 0, |s, g| {
            plans::bcast(s, g, &hosts, 0, tag + HAND_ON, 0);
        });
        Self::start("inter_bcast", s, first)
    }

    /// Non-blocking reduce of an intercommunicator to `root`: the members of the other
    /// group each give `buf`, and the root's `wait` returns their fold by `op` in their
    /// rank order (`buf` at the root gives the result's length; its contents are not
    /// read). The contributors' and the bystanders' `wait` return an unspecified
    /// buffer.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibcast`].
    pub fn inter_ireduce<T: Element>(
        &self,
        sides: &Sides,
        buf: Vec<T>,
        op: Op<T>,
        root: InterRoot,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        let tmp = match root {
            InterRoot::There(_) => vec![T::default(); buf.len()],
            _ => Vec::new(),
        };
        let (mut s, tag, leader, peer) = self.inter_schedule(place, sides, root, vec![buf, tmp])?;
        toward_root(&mut s, sides, (root, peer, leader, tag), |s, g| {
            plans::reduce_to(s, g, 0, tag, 0, 1, &op);
        });
        Self::start("inter_reduce", self.agree_inter(s, tag, &op), first)
    }

    /// Non-blocking allreduce of an intercommunicator: every member gives `buf`, and
    /// its `wait` returns the fold by `op` of the other group's, in their rank order.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibarrier`]; from `wait`, groups whose lengths differ
    /// ([`MsgError::Mismatch`]).
    pub fn inter_iallreduce<T: Element>(
        &self,
        sides: &Sides,
        buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        let n = buf.len();
        let r = sides.remote.len();
        // Flat: a slot for each remote member's part; else scratch for the reduce.
        let extra = if sides.flat() { r } else { 1 };
        let mut slots = vec![vec![T::default(); n], buf];
        slots.extend((0..extra).map(|_| vec![T::default(); n]));
        let (mut s, tag, leader, _) =
            self.inter_schedule(place, sides, InterRoot::Bystander, slots)?;
        if sides.flat() {
            flat_round(&mut s, &self.remote_jobs(sides)?, tag, 1, |i| {
                Part::new(2 + i, 0, n)
            });
            fold_in_order(&mut s, &op, (2, r), 0, 0..n);
            return Self::start("inter_allreduce", self.agree_inter(s, tag, &op), first);
        }
        let g = sides.group();
        plans::reduce_to(&mut s, &g, 0, tag, 1, 2, &op);
        let parts = (Part::new(1, 0, n), Part::new(0, 0, n));
        swap_at_leaders(&mut s, sides, (leader, tag), parts);
        plans::bcast(&mut s, &g, &self.hosts(), 0, tag + HAND_ON, 0);
        Self::start("inter_allreduce", self.agree_inter(s, tag, &op), first)
    }

    /// Non-blocking gather of an intercommunicator to `root`: the members of the other
    /// group each give `send` (`block` elements), and the root's `wait` returns them one
    /// after the other in their rank order. `block` is the count of one member's block:
    /// at the root, what it receives from each; at a contributor, its own `send`'s
    /// length (checked). The bystanders pass anything, and neither they nor the root
    /// read `send`. Every `wait` but the root's returns an empty vector.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibcast`]; [`MsgError::BadBuffer`] for a contributor's
    /// `send` of another length than `block`.
    pub fn inter_igather<T: Element>(
        &self,
        sides: &Sides,
        send: Vec<T>,
        block: usize,
        root: InterRoot,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        if matches!(root, InterRoot::There(_)) {
            check(
                "inter_gather",
                "send must hold block elements",
                send.len(),
                block,
            )?;
        }
        let (n_local, n_remote) = (sides.local.len(), sides.remote.len());
        let out = match root {
            InterRoot::Here => vec![T::default(); n_remote * block],
            InterRoot::There(_) if sides.leader() => {
                let mut out = vec![T::default(); n_local * block];
                out[..block].copy_from_slice(&send);
                out
            }
            _ => Vec::new(),
        };
        let (mut s, tag, leader, peer) =
            self.inter_schedule(place, sides, root, vec![out, send])?;
        toward_root(&mut s, sides, (root, peer, leader, tag), |s, g| {
            plans::gather(s, g, 0, tag, (1, 0), &vec![block; n_local]);
        });
        let keep = matches!(root, InterRoot::Here);
        Self::start("inter_gather", s, if keep { first } else { nothing })
    }

    /// Non-blocking scatter of an intercommunicator from `root`: block i of the root's
    /// `send` (`block` elements each, one per member of the other group) goes to the
    /// other group's member i, whose `wait` returns it. `send` is read at the root
    /// alone; `block` is the receivers' count there and the root's own elsewhere. The
    /// root's and the bystanders' `wait` return an empty vector.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibcast`]; [`MsgError::BadBuffer`] for a root's `send` of
    /// another length than `block` per member of the other group.
    pub fn inter_iscatter<T: Element>(
        &self,
        sides: &Sides,
        send: Vec<T>,
        block: usize,
        root: InterRoot,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        let (n_local, n_remote) = (sides.local.len(), sides.remote.len());
        let rule = "send must hold block elements per remote member";
        let slots = match root {
            InterRoot::Here => {
                check("inter_scatter", rule, send.len(), n_remote * block)?;
                vec![send]
            }
            InterRoot::There(_) => {
                let whole = if sides.leader() {
                    vec![T::default(); n_local * block]
                } else {
                    Vec::new()
                };
                vec![vec![T::default(); block], whole]
            }
            InterRoot::Bystander => Vec::new(),
        };
        let (mut s, tag, leader, peer) = self.inter_schedule(place, sides, root, slots)?;
        from_root(&mut s, sides, (root, peer, leader, tag), 1, |s, g| {
            if g.me == 0 {
                // The leader's own block, after the round that brought the whole.
                s.reduce(move |slots| {
                    let (out, whole) = slots.split_at_mut(1);
                    out[0].copy_from_slice(&whole[0][..block]);
                });
            }
            plans::scatter(s, g, 0, tag + HAND_ON, (1, 0), &vec![block; n_local]);
        });
        let keep = matches!(root, InterRoot::There(_));
        Self::start("inter_scatter", s, if keep { first } else { nothing })
    }

    /// Non-blocking allgather of an intercommunicator: every member gives `send` (the
    /// same length across its group), and its `wait` returns the other group's blocks
    /// (`block` elements each) one after the other in their rank order.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibarrier`]; from `wait`, a block of another length than
    /// its receivers' `block` or than its group's others ([`MsgError::Mismatch`]).
    pub fn inter_iallgather<T: Element>(
        &self,
        sides: &Sides,
        send: Vec<T>,
        block: usize,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        let (n_local, n_remote) = (sides.local.len(), sides.remote.len());
        let mine = send.len();
        let gathered = if sides.leader() && !sides.flat() {
            let mut g = vec![T::default(); n_local * mine];
            g[..mine].copy_from_slice(&send);
            g
        } else {
            Vec::new()
        };
        let slots = vec![vec![T::default(); n_remote * block], gathered, send];
        let (mut s, tag, leader, _) =
            self.inter_schedule(place, sides, InterRoot::Bystander, slots)?;
        if sides.flat() {
            let into = |i: usize| Part::new(0, i * block, (i + 1) * block);
            flat_round(&mut s, &self.remote_jobs(sides)?, tag, 2, into);
            return Self::start("inter_allgather", s, first);
        }
        let g = sides.group();
        plans::gather(&mut s, &g, 0, tag, (2, 1), &vec![mine; n_local]);
        let parts = (whole(&s, 1), whole(&s, 0));
        swap_at_leaders(&mut s, sides, (leader, tag), parts);
        plans::bcast(&mut s, &g, &self.hosts(), 0, tag + HAND_ON, 0);
        Self::start("inter_allgather", s, first)
    }

    /// Non-blocking reduce-scatter of an intercommunicator: every member gives `buf`
    /// (the sum of `counts` elements, as long in both groups), and local member i's
    /// `wait` returns block i (`counts[i]` elements, one after the other) of the fold by
    /// `op` of the other group's, in their rank order. `counts` holds one count per
    /// member of the local group, the same on all of them.
    ///
    /// # Errors
    /// As [`Communicator::inter_ibarrier`]; [`MsgError::BadBuffer`] for `counts` without
    /// one entry per local member or a `buf` of another length than their sum; from
    /// `wait`, groups whose lengths differ ([`MsgError::Mismatch`]).
    pub fn inter_ireduce_scatter<T: Element>(
        &self,
        sides: &Sides,
        buf: Vec<T>,
        counts: Vec<usize>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let place = self.inter_place();
        const OP: &str = "inter_reduce_scatter";
        let n_local = sides.local.len();
        check(OP, ONE_COUNT_PER_RANK, counts.len(), n_local)?;
        let total: usize = counts.iter().sum();
        check(OP, "buf must hold the sum of counts", buf.len(), total)?;
        let mine = counts[sides.me];
        if sides.flat() {
            let r = sides.remote.len();
            let mut slots = vec![vec![T::default(); mine], buf];
            slots.extend((0..r).map(|_| vec![T::default(); total]));
            let (mut s, tag, _, _) =
                self.inter_schedule(place, sides, InterRoot::Bystander, slots)?;
            let into = |i: usize| Part::new(2 + i, 0, total);
            flat_round(&mut s, &self.remote_jobs(sides)?, tag, 1, into);
            let from: usize = counts[..sides.me].iter().sum();
            fold_in_order(&mut s, &op, (2, r), 0, from..from + mine);
            return Self::start(OP, self.agree_inter(s, tag, &op), first);
        }
        let theirs = if sides.leader() {
            vec![T::default(); total]
        } else {
            Vec::new()
        };
        let tmp = vec![T::default(); total];
        let slots = vec![vec![T::default(); mine], buf, tmp, theirs];
        let (mut s, tag, leader, _) =
            self.inter_schedule(place, sides, InterRoot::Bystander, slots)?;
        let g = sides.group();
        plans::reduce_to(&mut s, &g, 0, tag, 1, 2, &op);
        let parts = (Part::new(1, 0, total), Part::new(3, 0, total));
        swap_at_leaders(&mut s, sides, (leader, tag), parts);
        if sides.leader() {
            // The leader's own block of the other group's fold, after the swap.
            let own = counts[0];
            s.reduce(move |slots| {
                let (out, rest) = slots.split_at_mut(1);
                out[0].copy_from_slice(&rest[2][..own]);
            });
        }
        plans::scatter(&mut s, &g, 0, tag + HAND_ON, (3, 0), &counts);
        Self::start(OP, self.agree_inter(s, tag, &op), first)
    }
}

/// No result (an empty vector).
fn nothing<T>(_: Vec<Vec<T>>) -> Vec<T> {
    Vec::new()
}
