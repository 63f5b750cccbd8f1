//! [`CommCore`]: what every clone of a communicator shares (its engine, contexts and
//! rank map), and the byte-level point-to-point calls that communicators and collectives
//! are built on.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::buffer::{Buf, RecvBuf};
use crate::engine::{Engine, SendStart};
use crate::error::MsgError;
use crate::idhash::IdMap;
use crate::op_guard::OpGuard;
use crate::protocol::wire::CTX_STRIDE;
use crate::protocol::{MessageInfo, Pattern, RecvOutcome};
use crate::status::{Source, Status, Tag};

/// The most communicators a rank holds at once (each with contexts of its own; views
/// and clones of one count once, `MPI_COMM_WORLD` and `MPI_COMM_SELF` among them). A
/// creation that would pass it fails with [`MsgError::NoContext`] on every member, as
/// MPI implementations do when their context ids run out (MPICH's after about 2,000);
/// a program that makes communicators without freeing them learns it here, not by
/// running out of memory.
pub const MAX_LIVE_COMMUNICATORS: u32 = 16_384;

/// A communicator's place among this rank's live ones ([`crate::MAX_LIVE_COMMUNICATORS`]):
/// taken when it is made, given back when its last core (views share it) is dropped.
#[derive(Debug)]
pub(crate) struct Lease(Arc<AtomicU32>);

impl Lease {
    fn new(live: &Arc<AtomicU32>) -> Lease {
        live.fetch_add(1, Ordering::AcqRel);
        Lease(live.clone())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The collective (context, number) a message of context `ctx` with `tag` belongs to:
/// collectives use the odd context `ctx + 1` of their communicator and tags
/// `number << 8 | step` (see [`CommCore::next_coll_tag`]).
fn collective_of(ctx: u32, tag: Tag, members: &[u32]) -> Option<(u32, u32, &[u32])> {
    match tag {
        Tag::Is(t) if ctx % 2 == 1 => Some((ctx, (t as u32) >> 8, members)),
        _ => None,
    }
}

/// The tag a receive in context `ctx` matches (`None`: any). A program's tags are
/// non-negative; a collective's (odd context) are `number << 8 | step`, all 32 bits of
/// them, carried as `i32` (past 2^23 collectives on one communicator they read as
/// negative, and must still be taken).
fn tag_of(ctx: u32, tag: Tag) -> Result<Option<u32>, MsgError> {
    match tag {
        Tag::Any => Ok(None),
        Tag::Is(t) if t < 0 && ctx % 2 == 0 => Err(MsgError::BadTag(t)),
        Tag::Is(t) => Ok(Some(t as u32)),
    }
}

/// The shared state of a communicator (MPI's group plus its contexts).
pub(crate) struct CommCore {
    pub(crate) engine: Arc<Engine>,
    /// Point-to-point context; collectives use [`CommCore::coll_ctx`].
    pub(crate) ctx: u32,
    /// Job rank of each communicator rank.
    pub(crate) ranks: Vec<u32>,
    /// Communicator rank of each member's job rank.
    comm_rank_of_job: IdMap<u32, u32>,
    /// This rank in the communicator.
    pub(crate) rank: u32,
    /// Collectives started (shared with the engine's list, reported at finalise).
    colls_started: Arc<AtomicU32>,
    /// Non-blocking collectives started (made at first use, shared with views of this
    /// communicator and with the engine's list): see [`CommCore::nonblocking`].
    nb_started: Arc<OnceLock<Arc<AtomicU32>>>,
    /// The core of this communicator's non-blocking collectives, made at first use.
    nonblocking: OnceLock<Arc<CommCore>>,
    /// The segment of collectives in shared memory on this host (set up at first use).
    pub(crate) sm: crate::coll::SmSlot,
    /// The host of each communicator rank (found once: every collective asks).
    pub(crate) hosts: Vec<u32>,
    /// Its place among the rank's live communicators (shared with views).
    lease: Arc<Lease>,
}

/// The host of each of `ranks` (job ranks).
fn hosts_of(engine: &Engine, ranks: &[u32]) -> Vec<u32> {
    ranks
        .iter()
        .map(|&j| engine.hosts.get(j as usize).copied().unwrap_or(0))
        .collect()
}

impl CommCore {
    /// The shared state of a communicator of job ranks `ranks` in context `ctx`; `None`
    /// if this rank is not among them.
    pub(crate) fn new(engine: Arc<Engine>, ctx: u32, ranks: Vec<u32>) -> Option<CommCore> {
        let me = engine.worker.rank();
        let rank = ranks.iter().position(|&r| r == me)? as u32;
        let comm_rank_of_job = ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i as u32))
            .collect();
        Some(CommCore {
            colls_started: engine.track_collectives(ctx + 1),
            nb_started: Default::default(),
            nonblocking: Default::default(),
            hosts: hosts_of(&engine, &ranks),
            lease: Arc::new(Lease::new(&engine.live_comms)),
            engine,
            ctx,
            ranks,
            comm_rank_of_job,
            rank,
            sm: Default::default(),
        })
    }

    /// The core through which this communicator's non-blocking collectives (and its
    /// partitioned messages) go: the same members in the same order, point-to-point
    /// context `ctx + 2` (partitioned messages) and collective context `ctx + 3`, with a
    /// count of collectives of its own. MPI orders blocking and non-blocking collectives
    /// apart (a non-blocking one never matches a blocking one, MPI 4.1 section 6.12),
    /// and programs rely on it: one rank may start a non-blocking collective before a
    /// barrier that the others finish before they start it. This core's segment in
    /// shared memory, if any, is set up by this communicator's (`coll::sm::setup`): it
    /// never runs a blocking collective. `None` for a core that is itself one
    /// (its context is not the first of a communicator's [`CTX_STRIDE`]).
    pub(crate) fn nonblocking(&self) -> Option<&Arc<CommCore>> {
        if self.ctx % CTX_STRIDE != 0 {
            return None;
        }
        Some(self.nonblocking.get_or_init(|| {
            let ctx = self.ctx + 2;
            // One count per collective context on this rank (views share it): a rank
            // that finalises reports it, and a second one would read as a rank that
            // never started the collectives the others wait in.
            let started = self
                .nb_started
                .get_or_init(|| self.engine.track_collectives(ctx + 1));
            Arc::new(CommCore {
                colls_started: started.clone(),
                nb_started: Default::default(),
                nonblocking: Default::default(),
                hosts: self.hosts.clone(),
                engine: self.engine.clone(),
                ctx,
                ranks: self.ranks.clone(),
                comm_rank_of_job: self.comm_rank_of_job.clone(),
                rank: self.rank,
                sm: Default::default(),
                lease: self.lease.clone(),
            })
        }))
    }

    /// How many non-blocking collectives this rank started on this communicator (and
    /// its views).
    pub(crate) fn nonblocking_started(&self) -> u32 {
        self.nb_started
            .get()
            .map_or(0, |n| n.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The same communicator (engine, contexts, collectives' count) with its members in
    /// another order on this rank; `None` if `ranks` are not its members.
    pub(crate) fn view(&self, ranks: Vec<u32>) -> Option<CommCore> {
        let mut a = ranks.clone();
        let mut b = self.ranks.clone();
        a.sort_unstable();
        b.sort_unstable();
        if a != b {
            return None;
        }
        let me = self.engine.worker.rank();
        let rank = ranks.iter().position(|&r| r == me)? as u32;
        let comm_rank_of_job = ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i as u32))
            .collect();
        Some(CommCore {
            colls_started: self.colls_started.clone(),
            // A view's non-blocking collectives count with the communicator's; its
            // members' order is the view's own.
            nb_started: self.nb_started.clone(),
            nonblocking: Default::default(),
            hosts: hosts_of(&self.engine, &ranks),
            engine: self.engine.clone(),
            ctx: self.ctx,
            ranks,
            comm_rank_of_job,
            rank,
            sm: Default::default(),
            lease: self.lease.clone(),
        })
    }

    pub(crate) fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// The collective context (collectives' messages never match point-to-point ones).
    pub(crate) fn coll_ctx(&self) -> u32 {
        self.ctx + 1
    }

    pub(crate) fn job_rank(&self, r: u32) -> Result<u32, MsgError> {
        self.ranks
            .get(r as usize)
            .copied()
            .ok_or_else(|| MsgError::BadRank {
                rank: r,
                size: self.size(),
            })
    }

    /// The communicator rank of job rank `job` (`u32::MAX` if not a member). Where
    /// communicator rank `job` is job rank `job` (every rank of the world communicator,
    /// and of a communicator keeping the job's order), that is the answer with no map
    /// look-up: members' job ranks are distinct.
    pub(crate) fn comm_rank(&self, job: u32) -> u32 {
        if self.ranks.get(job as usize) == Some(&job) {
            return job;
        }
        self.comm_rank_of_job.get(&job).copied().unwrap_or(u32::MAX)
    }

    /// The status of a message (sender as a communicator rank).
    pub(crate) fn status(&self, m: &MessageInfo) -> Status {
        Status {
            source: self.comm_rank(m.src),
            tag: m.tag as i32,
            len: m.len,
            cancelled: false,
        }
    }

    /// A receive's outcome as MPI reports it: a status, or the truncation error.
    pub(crate) fn outcome(&self, o: RecvOutcome) -> Result<Status, MsgError> {
        match o {
            RecvOutcome::Received(m) => Ok(self.status(&m)),
            RecvOutcome::Truncated { msg, capacity } => Err(MsgError::Truncated {
                len: msg.len,
                capacity,
                source_rank: self.comm_rank(msg.src),
                tag: msg.tag as i32,
            }),
            RecvOutcome::Cancelled => Ok(Status {
                source: self.comm_rank(0),
                tag: 0,
                len: 0,
                cancelled: true,
            }),
        }
    }

    pub(crate) fn pattern(&self, ctx: u32, src: Source, tag: Tag) -> Result<Pattern, MsgError> {
        let src = match src {
            Source::Any => None,
            Source::Rank(r) => Some(self.job_rank(r)?),
        };
        let tag = tag_of(ctx, tag)?;
        Ok(Pattern { ctx, src, tag })
    }

    /// The count of collectives started on this core, which numbers them (a shared
    /// segment compares its records by it).
    pub(crate) fn started_count(&self) -> Arc<AtomicU32> {
        self.colls_started.clone()
    }

    /// The number the next collective on this communicator takes (modulo 2^24 once
    /// masked).
    pub(crate) fn next_coll_no(&self) -> u32 {
        self.colls_started.load(Ordering::Relaxed)
    }

    /// Counts `n` collectives as started without running them (see
    /// `Communicator::skip_collective_numbers`).
    pub(crate) fn skip_collectives(&self, n: u32) {
        self.colls_started.fetch_add(n, Ordering::Relaxed);
    }

    /// The base tag of the next collective call (the same on every rank, as every rank
    /// calls collectives in the same order); the low 8 bits are for its steps.
    pub(crate) fn next_coll_tag(&self) -> u32 {
        self.colls_started
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_shl(8)
    }

    /// Blocking send in context `ctx` to communicator rank `dest`.
    pub(crate) fn send_bytes(
        &self,
        ctx: u32,
        dest: u32,
        tag: u32,
        data: &[u8],
    ) -> Result<(), MsgError> {
        self.send_bytes_during(ctx, dest, tag, data, || {})
    }

    /// [`CommCore::send_bytes`], running `during` once the send started (a rendezvous
    /// send's receiver may then take the bytes while `during` runs), before it waits.
    pub(crate) fn send_bytes_during(
        &self,
        ctx: u32,
        dest: u32,
        tag: u32,
        data: &[u8],
        during: impl FnOnce(),
    ) -> Result<(), MsgError> {
        let job = self.job_rank(dest)?;
        // SAFETY: `data` stays borrowed until this function returns, and the guard below
        // removes the operation from the engine before that, whatever happens.
        let buf = unsafe { Buf::borrowed_ro(data) };
        match self.engine.start_send(job, ctx, tag, buf)? {
            SendStart::Complete(_) => {
                during();
                Ok(())
            }
            SendStart::Rendezvous(id) => {
                let g = OpGuard {
                    engine: &self.engine,
                    id,
                    recv: false,
                    source: None,
                    collective: collective_of(ctx, Tag::Is(tag as i32), &self.ranks),
                    finished: Cell::new(None),
                    generation_at_start: None,
                    _buf: PhantomData,
                };
                during();
                g.wait()
            }
        }
    }

    /// Posts a receive into `buf`; the guard removes it when dropped.
    pub(crate) fn post_bytes<'a>(
        &'a self,
        ctx: u32,
        src: Source,
        tag: Tag,
        buf: &'a mut [u8],
    ) -> Result<OpGuard<'a>, MsgError> {
        let p = self.pattern(ctx, src, tag)?;
        // SAFETY: the guard returned borrows `buf` for 'a and removes the operation from
        // the engine when dropped, so the engine never writes after the borrow ends.
        let b = unsafe { Buf::borrowed(buf) };
        // Read before posting: a receive that completes at once (from an unexpected
        // message) moves it.
        let generation = self.engine.generation();
        let id = self.engine.post_recv(p, RecvBuf::Fixed(b));
        Ok(OpGuard {
            engine: &self.engine,
            id,
            recv: true,
            source: p.src,
            collective: collective_of(ctx, tag, &self.ranks),
            finished: Cell::new(None),
            generation_at_start: Some(generation),
            _buf: PhantomData,
        })
    }

    /// Waits for a posted receive and turns its outcome into a status.
    pub(crate) fn finish_bytes(&self, g: OpGuard<'_>) -> Result<Status, MsgError> {
        g.wait()?;
        match g.outcome() {
            Some(o) => self.outcome(o),
            None => Err(MsgError::Protocol {
                peer: self.rank,
                what: "receive finished before completing",
            }),
        }
    }

    /// Blocking receive in context `ctx`.
    pub(crate) fn recv_bytes(
        &self,
        ctx: u32,
        src: Source,
        tag: Tag,
        buf: &mut [u8],
    ) -> Result<Status, MsgError> {
        let g = self.post_bytes(ctx, src, tag, buf)?;
        self.finish_bytes(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collective_tags_past_two_to_the_31_are_taken_and_program_tags_are_not() {
        // Collective number 2^23 + 1, step 3: its tag has the top bit set.
        let tag = ((1u32 << 23) + 1).wrapping_shl(8) | 3;
        assert!(matches!(tag_of(5, Tag::Is(tag as i32)), Ok(Some(t)) if t == tag));
        let coll = collective_of(5, Tag::Is(tag as i32), &[]).map(|c| c.1);
        assert_eq!(coll, Some((1 << 23) + 1));
        assert!(matches!(tag_of(4, Tag::Is(-1)), Err(MsgError::BadTag(-1))));
        assert!(matches!(tag_of(4, Tag::Is(7)), Ok(Some(7))));
        assert!(matches!(tag_of(4, Tag::Any), Ok(None)));
    }
}
