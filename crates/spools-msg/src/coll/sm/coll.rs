//! The blocking collectives through the segment, chosen by size and topology: each returns
//! `Ok(false)` when it does not apply (too large, shared memory off, a single member on
//! this host, or a case the message algorithms handle) and the caller runs those instead.
//! Across hosts the segment serves the phases within each host; the phases between hosts
//! are the message algorithms' own, with the same tags, so hosts that use the segment and
//! hosts that do not (a single rank there) work together.

use super::machine::{Kind, SmColl, Stage};
use super::SmComm;
use crate::coll::barrier::dissemination;
use crate::coll::bcast::between_hosts;
use crate::coll::group::Group;
use crate::coll::reduce::allreduce_flat;
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The segment serves from this many members on a host: two for barrier, reduce and
/// allreduce (one flag each way instead of messages); three for a broadcast, whose root
/// sends one message to a single reader as directly as a flag and can run further ahead
/// with messages (measured with `spools bench osu` at 2 ranks).
fn min_members(kind: Kind) -> usize {
    if kind == Kind::Bcast {
        3
    } else {
        2
    }
}

/// Up to this many members on one host, barrier and allreduce are flat (one step: every
/// member reads every contribution); beyond, a fan-in to member 0 and a fan-out.
pub(super) const FLAT_MAX: usize = 4;

/// Whether a collective of `bytes` may go through a segment at all (checked before any
/// group is built, so that the messages' path pays next to nothing for the choice).
pub(super) fn may(c: &CommCore, bytes: usize, kind: Kind) -> bool {
    let limit = c.engine.worker.config().coll_sm_limit as usize;
    bytes <= limit && limit > 0 && c.size() as usize >= min_members(kind) && !c.sm.is_off()
}

/// The segment for a collective of `bytes` over `local`, if one applies.
fn segment<'c>(
    c: &'c CommCore,
    local: &Group,
    bytes: usize,
    tag: u32,
    kind: Kind,
) -> Result<Option<&'c SmComm>, MsgError> {
    let limit = c.engine.worker.config().coll_sm_limit as usize;
    if bytes > limit || local.n() < min_members(kind) {
        return Ok(None);
    }
    c.sm.get(c, local, tag)
}

/// Runs `m` through the segment; a root stops before publishing and runs `between`
/// (the phase between hosts) first.
fn run<T: Element>(
    c: &CommCore,
    sm: &SmComm,
    tag: u32,
    m: &mut SmColl<'_, T>,
    between: impl FnOnce(&mut [T]) -> Result<(), MsgError>,
) -> Result<(), MsgError> {
    sm.drive(c, tag, || Ok(m.poll()? || m.stage() == Stage::Publish))?;
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
    if !may(c, 0, Kind::Barrier) {
        return Ok(false);
    }
    let g = Group::all(c);
    let hier = g.hierarchy(hosts);
    let local = hier.as_ref().map_or(&g, |(l, _)| l);
    let Some(sm) = segment(c, local, 0, tag, Kind::Barrier)? else {
        return Ok(false);
    };
    let mut m = SmColl::<u8>::new(sm, sm.take_seq(), Kind::Barrier, 0, &mut [], None);
    if hier.is_none() && sm.n() <= FLAT_MAX {
        m = m.flat();
    }
    run(c, sm, tag, &mut m, |_| match &hier {
        Some((_, leaders)) => dissemination(c, leaders, tag),
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
    if !may(c, buf.len(), Kind::Bcast) {
        return Ok(false);
    }
    let g = Group::all(c);
    let hier = g.hierarchy(hosts);
    let local = hier.as_ref().map_or(&g, |(l, _)| l);
    let Some(sm) = segment(c, local, buf.len(), tag, Kind::Bcast)? else {
        return Ok(false);
    };
    let local_root = match &hier {
        None => root,
        Some((local, leaders)) => between_hosts(c, &g, local, leaders, hosts, root, tag, buf)?,
    };
    let mut m = SmColl::<u8>::new(sm, sm.take_seq(), Kind::Bcast, local_root, buf, None);
    sm.drive(c, tag, || m.poll_through())?;
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
    if !may(c, std::mem::size_of_val(acc), Kind::Reduce) {
        return Ok(false);
    }
    let g = Group::all(c);
    if g.hierarchy(hosts).is_some() {
        return Ok(false);
    }
    let Some(sm) = segment(c, &g, std::mem::size_of_val(acc), tag, Kind::Reduce)? else {
        return Ok(false);
    };
    let mut m = SmColl::new(sm, sm.take_seq(), Kind::Reduce, root, acc, Some(op));
    sm.drive(c, tag, || m.poll_through())?;
    Ok(true)
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
    if !may(c, std::mem::size_of_val(acc), Kind::Allreduce) {
        return Ok(false);
    }
    let g = Group::all(c);
    let hier = g.hierarchy(hosts);
    if hier.is_some() && !op.commutative() {
        return Ok(false);
    }
    let local = hier.as_ref().map_or(&g, |(l, _)| l);
    let Some(sm) = segment(c, local, std::mem::size_of_val(acc), tag, Kind::Allreduce)? else {
        return Ok(false);
    };
    let mut m = SmColl::new(sm, sm.take_seq(), Kind::Allreduce, 0, acc, Some(op));
    if hier.is_none() && sm.n() <= FLAT_MAX {
        m = m.flat();
    }
    run(c, sm, tag, &mut m, |acc| match &hier {
        Some((_, leaders)) if leaders.me != usize::MAX => {
            allreduce_flat(c, leaders, tag + 8, acc, op)
        }
        _ => Ok(()),
    })?;
    Ok(true)
}

impl crate::communicator::Communicator {
    /// How many collectives of this communicator went through shared memory on this rank
    /// so far: a statistic for tests and benchmarks, which shows the path taken.
    #[doc(hidden)]
    pub fn shared_memory_collectives(&self) -> u32 {
        self.core.sm.count()
    }
}
