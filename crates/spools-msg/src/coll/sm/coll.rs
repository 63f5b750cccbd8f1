//! The blocking collectives through the segment, chosen by size and topology: each returns
//! `Ok(false)` when it does not apply (too large, shared memory off, a single member on
//! this host, or a case the message algorithms handle) and the caller runs those instead.
//! Across hosts the segment serves the phases within each host; the phases between hosts
//! are the message algorithms' own, with the same tags, so hosts that use the segment and
//! hosts that do not (a single rank there) work together.

use super::kind::Kind;
use super::machine::{SmColl, Stage};
use super::{coll_no, SmComm};
use crate::coll::flat::{allreduce_flat, between_hosts, dissemination};
use crate::coll::group::{disagreement, send, Group, Poisoned};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The segment serves from this many members on a host: one flag each way instead of
/// messages. (Measured at 2 ranks on 2 cores, medians of 7 runs of `coll_abi`: bcast of
/// 8 B 0.240 us against 0.226 through the messages, of 4 KiB 0.520 against 0.778;
/// allgather of 8 B 0.444 against 0.622; alltoall of 8 B 0.437 against 1.109.)
const MIN_MEMBERS: usize = 2;

/// Up to this many members on one host, barrier and allreduce are flat (one step: every
/// member reads every contribution); beyond, a fan-in to member 0 and a fan-out.
pub(super) const FLAT_MAX: usize = 4;

/// Whether a collective may go through a segment at all (checked before
/// any group is built, so that the messages' path pays next to nothing for it where no
/// segment can serve). Deliberately not the length: every rank must take the same
/// decision to set a segment up (a handshake), whatever length it was given.
pub(super) fn may(c: &CommCore) -> bool {
    c.size() as usize >= MIN_MEMBERS && !c.sm.is_off()
}

/// Whether `bytes` fit this rank's `coll_sm_limit` (every rank agreed on the limit when
/// the segment was set up).
pub(crate) fn fits(c: &CommCore, bytes: usize) -> bool {
    let limit = c.engine.worker.config().coll_sm_limit as usize;
    limit > 0 && bytes <= limit
}

/// Whether `bytes` fit (`Some(true)`), or do not and the caller goes to the messages at
/// once (`None`: the segment is set up already, and records there that this rank runs
/// collective `tag` through the messages, see [`SmComm::enter_messages`], without
/// building a group), or do not and the segment is not set up yet (`Some(false)`).
fn fit(c: &CommCore, bytes: usize, tag: u32, kind: Kind) -> Option<bool> {
    if fits(c, bytes) {
        return Some(true);
    }
    match c.sm.ready() {
        Some(sm) => {
            sm.enter_messages(kind, tag, bytes);
            None
        }
        None => Some(false),
    }
}

/// The segment for a collective of `bytes` over `local`, if one applies. Sets the
/// segment up at the communicator's first collective that could use it, whatever its
/// length; a collective too long for it is recorded there as going through the messages.
/// `fits`: whether the collective's `bytes` fit (see [`fit`]). Its caller, [`place`],
/// has found the segment set up or due (not before the collective a deferral names:
/// `SmSlot::defer`).
fn segment<'c>(
    c: &'c CommCore,
    local: &Group,
    (bytes, fits): (usize, bool),
    tag: u32,
    kind: Kind,
) -> Result<Option<&'c SmComm>, MsgError> {
    if local.n() < MIN_MEMBERS {
        return Ok(None);
    }
    let Some(sm) = super::setup::segment(&c.sm, c, local, tag)? else {
        return Ok(None);
    };
    if !fits {
        sm.enter_messages(kind, tag, bytes);
        return Ok(None);
    }
    Ok(Some(sm))
}

/// Where a collective through the segment runs: the segment, and across hosts the
/// communicator's group with its split into this host's members and the hosts' leaders.
pub(super) type Placed<'c> = (&'c SmComm, Option<(Group, (Group, Group))>);

/// The segment for a collective of `kind` with `bytes` here, if one serves it: at once
/// when it is set up over the whole communicator (one host), else set up (or found off)
/// over this host's members; `across`: whether this collective may run across hosts.
pub(super) fn place<'c>(
    c: &'c CommCore,
    hosts: &[u32],
    tag: u32,
    (kind, bytes): (Kind, usize),
    across: bool,
) -> Result<Option<Placed<'c>>, MsgError> {
    // Not set up and deferred past this collective: the messages, before any group is
    // built (what `segment` would decide after building them).
    if !may(c) || (c.sm.ready().is_none() && !c.sm.due(coll_no(tag))) {
        return Ok(None);
    }
    let Some(fits) = fit(c, bytes, tag, kind) else {
        return Ok(None);
    };
    if let Some(sm) = whole(c, fits) {
        return Ok(Some((sm, None)));
    }
    let g = Group::all(c);
    let hier = g.hierarchy(hosts);
    if hier.is_some() && !across {
        return Ok(None);
    }
    let local = hier.as_ref().map_or(&g, |(l, _)| l);
    let Some(sm) = segment(c, local, (bytes, fits), tag, kind)? else {
        return Ok(None);
    };
    Ok(Some((sm, hier.map(|h| (g, h)))))
}

/// The segment when it is set up already over the whole communicator (all its members
/// on this host) and the collective fits it: the fast path, which builds no group.
fn whole(c: &CommCore, fits: bool) -> Option<&SmComm> {
    if !fits {
        return None;
    }
    c.sm.ready().filter(|sm| sm.n() == c.size() as usize)
}

/// After collective `tag` (of `bytes` here, `kind`) failed on this rank, by whichever
/// path: when the ranks disagree, marks it failed on this host's segment (the local
/// members waiting in it, on the segment or on messages, fail too), and a host leader
/// sends the other leaders an empty message on each tag of the phase between hosts
/// (`leader_tags`), which no leader waiting there accepts, so that they fail too and tell
/// their hosts (a leader that failed before the phase between hosts, and did not take
/// its part there, leaves them waiting otherwise; one that took its part, sending empty
/// blocks, has failed them already, and these messages are dropped where they left).
/// Nothing for other errors (a dead rank fails everyone already).
pub(crate) fn failed(
    c: &CommCore,
    hosts: &[u32],
    tag: u32,
    bytes: usize,
    leader_tags: std::ops::Range<u32>,
    e: &MsgError,
) {
    if !disagreement(e) {
        return;
    }
    if let Some(sm) = c.sm.ready() {
        sm.mark_failed(coll_no(tag), bytes, e);
    }
    let g = Group::all(c);
    if let Some((_, leaders)) = g.hierarchy(hosts) {
        if leaders.me != usize::MAX {
            for l in (0..leaders.n()).filter(|&l| l != leaders.me) {
                for t in leader_tags.clone() {
                    // Best effort: the error reported is the one that came first.
                    let _ = send(c, &leaders, l, tag + t, &[]);
                }
            }
        }
    }
}

/// Tags (over the base tag) of the phase between hosts of a broadcast and of an
/// allreduce (see `bcast::between_hosts`, `reduce::allreduce`).
pub(crate) const BCAST_LEADER_TAGS: std::ops::Range<u32> = 1..3;
pub(crate) const ALLREDUCE_LEADER_TAGS: std::ops::Range<u32> = 8..72;

/// Runs `m` through the segment; a root stops before publishing and runs `between`
/// (the phase between hosts) first.
fn run<T: Element>(
    c: &CommCore,
    sm: &SmComm,
    tag: u32,
    m: &mut SmColl<'_, T>,
    between: impl FnOnce(&mut [T]) -> Result<(), MsgError>,
) -> Result<(), MsgError> {
    let w = m.watch();
    if let Err(e) = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || {
        Ok(m.poll()? || m.stage() == Stage::Publish)
    }) {
        m.abandon();
        return Err(e);
    }
    if m.stage() == Stage::Publish {
        match between(m.buf()) {
            Ok(()) => m.publish()?,
            // A dead rank: the local members' waits report it too.
            Err(e @ MsgError::Am(_)) => return Err(e),
            // Anything else: tell the local members it failed, so that none waits.
            Err(e) => {
                m.fail();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Barrier; `hosts[r]` is rank r's host.
///
/// # Errors
/// A dead rank, a rank that finalised without joining.
pub(crate) fn barrier(c: &CommCore, hosts: &[u32], tag: u32) -> Result<bool, MsgError> {
    let Some((sm, hier)) = place(c, hosts, tag, (Kind::Barrier, 0), true)? else {
        return Ok(false);
    };
    let no = coll_no(tag);
    let mut m = SmColl::<u8>::new(sm, sm.take_seq(), no, Kind::Barrier, 0, &mut [], None);
    if hier.is_none() && sm.n() <= FLAT_MAX {
        m = m.flat();
    }
    run(c, sm, tag, &mut m, |_| match &hier {
        Some((_, (_, leaders))) => dissemination(c, leaders, tag),
        None => Ok(()),
    })?;
    Ok(true)
}

/// Broadcast from communicator rank `root`.
///
/// # Errors
/// [`MsgError::Mismatch`] when lengths differ, a dead rank.
pub(crate) fn bcast(
    c: &CommCore,
    hosts: &[u32],
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<bool, MsgError> {
    let Some((sm, hier)) = place(c, hosts, tag, (Kind::Bcast, buf.len()), true)? else {
        return Ok(false);
    };
    let no = coll_no(tag);
    let local_root = match &hier {
        None => root,
        Some((g, (local, leaders))) => {
            let mut poisoned = Poisoned::default();
            let r = between_hosts(c, g, local, leaders, hosts, root, tag, buf, &mut poisoned);
            match r.and_then(|r| poisoned.end().map(|()| r)) {
                Ok(r) => r,
                Err(e) => {
                    failed(c, hosts, tag, buf.len(), BCAST_LEADER_TAGS, &e);
                    return Err(e);
                }
            }
        }
    };
    let mut m = SmColl::<u8>::new(sm, sm.take_seq(), no, Kind::Bcast, local_root, buf, None);
    let w = m.watch();
    if let Err(e) = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || m.poll_through()) {
        m.abandon();
        failed(c, hosts, tag, w.bytes, BCAST_LEADER_TAGS, &e);
        return Err(e);
    }
    Ok(true)
}

/// Scatter of bytes from communicator rank `root` within one host (across hosts: the
/// messages): the root publishes `send` (every rank's part of `recv.len()` bytes, in rank
/// order; those bytes must fit a slot) in a result slot and every member copies its part
/// out, as a broadcast does; the root's own part is copied here.
///
/// # Errors
/// [`MsgError::Mismatch`] when lengths differ, a dead rank.
pub(crate) fn scatter(
    c: &CommCore,
    root: usize,
    tag: u32,
    send: &[u8],
    recv: &mut [u8],
) -> Result<bool, MsgError> {
    let whole = recv.len() * c.size() as usize;
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Scatter, whole), false)? else {
        return Ok(false);
    };
    let no = coll_no(tag);
    let me = c.rank as usize;
    let mut m = SmColl::<u8>::new(sm, sm.take_seq(), no, Kind::Scatter, root, recv, None);
    if me == root {
        let part = m.buf().len();
        m.buf().copy_from_slice(&send[me * part..(me + 1) * part]);
        m = m.scatters(send);
    }
    let w = m.watch();
    if let Err(e) = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || m.poll_through()) {
        m.abandon();
        return Err(e);
    }
    Ok(true)
}

/// Reduce to communicator rank `root` within one host (across hosts: the messages).
/// `acc` holds this rank's contribution, and on return at the root the result.
///
/// # Errors
/// [`MsgError::Mismatch`] when lengths differ, a dead rank.
pub(crate) fn reduce<T: Element>(
    c: &CommCore,
    hosts: &[u32],
    root: usize,
    tag: u32,
    acc: &mut [T],
    op: &Op<T>,
) -> Result<bool, MsgError> {
    let bytes = std::mem::size_of_val(acc);
    let Some((sm, _)) = place(c, hosts, tag, (Kind::Reduce, bytes), false)? else {
        return Ok(false);
    };
    let no = coll_no(tag);
    let mut m = SmColl::new(sm, sm.take_seq(), no, Kind::Reduce, root, acc, Some(op));
    let w = m.watch();
    if let Err(e) = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || m.poll_through()) {
        m.abandon();
        return Err(e);
    }
    Ok(true)
}

/// Says on the segment, where one is set up, that this rank runs collective `tag` (of
/// `kind`, `bytes` here, which do not fit the segment: [`fits`]) through the messages,
/// for members that wait on the segment in it (see [`SmComm::enter_messages`]); sets
/// the segment up first at the communicator's first collective, as every collective
/// does. For a caller that needs no data of its own in place to find that out.
///
/// # Errors
/// A dead rank during the segment's set-up.
pub(crate) fn decline(
    c: &CommCore,
    hosts: &[u32],
    tag: u32,
    (kind, bytes): (Kind, usize),
) -> Result<(), MsgError> {
    debug_assert!(!fits(c, bytes));
    place(c, hosts, tag, (kind, bytes), false).map(|_| ())
}

/// Allreduce: within one host any operator (in rank order); across hosts, commutative
/// operators reduce within each host, the leaders combine, and each host gets the result
/// back through its segment.
///
/// # Errors
/// [`MsgError::Mismatch`] when lengths differ, a dead rank.
pub(crate) fn allreduce<T: Element>(
    c: &CommCore,
    hosts: &[u32],
    tag: u32,
    acc: &mut [T],
    op: &Op<T>,
) -> Result<bool, MsgError> {
    let bytes = std::mem::size_of_val(acc);
    let across = op.commutative();
    let Some((sm, hier)) = place(c, hosts, tag, (Kind::Allreduce, bytes), across)? else {
        return Ok(false);
    };
    let no = coll_no(tag);
    let mut m = SmColl::new(sm, sm.take_seq(), no, Kind::Allreduce, 0, acc, Some(op));
    if hier.is_none() && sm.n() <= FLAT_MAX {
        m = m.flat();
    }
    let r = run(c, sm, tag, &mut m, |acc| match &hier {
        Some((_, (_, leaders))) if leaders.me != usize::MAX => {
            allreduce_flat(c, leaders, tag + 8, acc, op)
        }
        _ => Ok(()),
    });
    if let Err(e) = r {
        failed(c, hosts, tag, bytes, ALLREDUCE_LEADER_TAGS, &e);
        return Err(e);
    }
    Ok(true)
}

impl crate::communicator::Communicator {
    /// How many collectives of this communicator went through shared memory on this rank
    /// so far: a statistic for tests and benchmarks, which shows the path taken.
    #[doc(hidden)]
    pub fn shared_memory_collectives(&self) -> u32 {
        self.core.sm.count()
    }

    /// Makes this communicator's next `n` collectives go through the messages and sets
    /// its shared-memory segment up (where one can serve) at the one after, instead of at
    /// its first: for a communicator that may run only a few collectives in its life (an
    /// MPI file's), whose segment would cost more to set up (a file in `/dev/shm`,
    /// mapped, its pages touched, and unmapped when the communicator goes) than it
    /// saves. Every member calls it alike, at the same point, before the communicator's
    /// collectives (a member that did not would set the segment up alone and wait for
    /// the others' handshake); once a segment is set up it changes nothing. `n` is
    /// taken up to 2^22.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let c = world.dup().unwrap();
    /// c.defer_shared_memory(8);
    /// c.barrier().unwrap();
    /// assert_eq!(c.shared_memory_collectives(), 0);
    /// ```
    pub fn defer_shared_memory(&self, n: u32) {
        // Collective numbers compare within half their range (2^23): a deferral up to a
        // quarter of it.
        let n = n.min(1 << 22);
        let next = self.core.next_coll_no();
        self.core.sm.defer(next.wrapping_add(n) & super::NO_MASK);
    }

    /// A barrier that sets this communicator's shared-memory segments up now, where one
    /// can serve (at least 2 members here, shared memory in use): the segment of its
    /// blocking collectives and, where every member is on this host, that of its
    /// non-blocking ones. Returns whether its non-blocking collectives go through a
    /// segment from now on. For a communicator that runs only non-blocking collectives
    /// (a persistent collective's own: MPI's `MPI_Bcast_init` and the others), which
    /// would otherwise never set one up (a non-blocking collective cannot wait for the
    /// handshake). Collective: every member calls it at the same point, as a barrier; a
    /// deferral ([`Communicator::defer_shared_memory`](crate::Communicator::defer_shared_memory)) holds it off like any other
    /// collective.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let c = world.dup().unwrap();
    /// let served = c.set_up_shared_memory().unwrap();
    /// // A job of one rank (this example run alone) has no segment to set up.
    /// assert!(world.size() > 1 || !served);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::barrier`](crate::Communicator::barrier).
    pub fn set_up_shared_memory(&self) -> Result<bool, MsgError> {
        self.barrier()?;
        Ok(self
            .core
            .nonblocking()
            .is_some_and(|nb| nb.sm.ready().is_some()))
    }

    /// Advances this communicator's numbering of collectives by `n` as if that many had
    /// run: a test hook, to reach the numbers of a long job without running its
    /// collectives. Every member must call it with the same `n` between the same two
    /// collectives, as if it were one.
    #[doc(hidden)]
    pub fn skip_collective_numbers(&self, n: u32) {
        self.core.skip_collectives(n);
    }

    /// Whether this communicator's shared-memory segment sets its flags with light
    /// fences (`None` while it has none): what its members agreed when they set it up
    /// (a statistic for tests and benchmarks).
    #[doc(hidden)]
    pub fn shared_memory_light_fences(&self) -> Option<bool> {
        self.core.sm.ready().map(super::SmComm::light)
    }

    /// How many of this communicator's non-blocking collectives went through shared
    /// memory on this rank so far (a statistic for tests and benchmarks).
    #[doc(hidden)]
    pub fn nonblocking_shared_memory_collectives(&self) -> u32 {
        self.core.nonblocking().map_or(0, |nb| nb.sm.count())
    }
}
