//! Making communicators: the job's first one ([`start`]), and [`Communicator::dup`] and
//! [`Communicator::split`], which agree on a new context with a collective.

use std::sync::atomic::Ordering;

use spools_am::{Endpoint, Worker};

use crate::comm_core::MAX_LIVE_COMMUNICATORS;
use crate::communicator::Communicator;
use crate::element::Op;
use crate::engine::Engine;
use crate::error::MsgError;
use crate::idup::LEADER_BASE;
use crate::protocol::wire::CTX_STRIDE;

/// Starts messaging on this rank and returns the job's first communicator (all ranks,
/// context 0). Collective: it installs the engine's handlers on every rank. `endpoint`
/// becomes the engine's sending lane; `hosts[r]` says which host job rank `r` runs on
/// (equal values share a host).
///
/// # Errors
/// A dead rank during the handler exchange.
pub fn start(
    worker: &Worker,
    endpoint: Endpoint,
    hosts: Vec<u32>,
) -> Result<Communicator, MsgError> {
    let engine = Engine::new(worker.clone(), endpoint, hosts)?;
    worker.sync_handlers()?;
    engine.lookup_handler_ids()?;
    let ranks = (0..worker.size()).collect();
    Communicator::from_parts(engine, 0, ranks).ok_or_else(|| MsgError::Protocol {
        peer: worker.rank(),
        what: "this rank is missing from the job",
    })
}

impl Communicator {
    /// A communicator of the same members in this order, in a context of this one's
    /// own that no other communicator's messages use: MPI's partitioned messages
    /// (`MPI_Psend_init`) travel there, so that no point-to-point receive on this
    /// communicator takes them. Local: every member derives the same context. (Its
    /// collectives are this communicator's non-blocking ones: do not call them on it.)
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let p = world.partitioned().unwrap();
    /// assert_eq!((p.rank(), p.size()), (world.rank(), world.size()));
    /// p.send(&[7u8], 0, 3).unwrap();
    /// assert!(world.iprobe(0, 3).unwrap().is_none()); // not a message of `world`
    /// let mut b = [0u8];
    /// p.recv(&mut b, 0, 3).unwrap();
    /// assert_eq!(b, [7]);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::NoContext`] when this communicator is itself a partitioned one.
    pub fn partitioned(&self) -> Result<Communicator, MsgError> {
        let core = self.core.nonblocking().ok_or(MsgError::NoContext)?;
        Ok(Communicator { core: core.clone() })
    }

    /// Collective: a communicator with the same ranks and a new context.
    ///
    /// # Errors
    /// A dead rank; [`MsgError::NoContext`].
    pub fn dup(&self) -> Result<Communicator, MsgError> {
        let ctx = self.new_context()?;
        Communicator::from_parts(self.core.engine.clone(), ctx, self.core.ranks.clone()).ok_or(
            MsgError::Protocol {
                peer: self.core.rank,
                what: "this rank is missing from its own communicator",
            },
        )
    }

    /// Collective: splits the ranks by `color`; each new communicator orders its ranks
    /// by `key`, then by their rank here. A rank passing `None` gets no communicator.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let sub = world.split(Some(3), 0).unwrap().unwrap();
    /// assert_eq!((sub.rank(), sub.size()), (0, 1));
    /// assert!(world.split(None, 0).unwrap().is_none());
    /// ```
    ///
    /// # Errors
    /// A dead rank; [`MsgError::NoContext`].
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>, MsgError> {
        let mine = [color.map_or(u64::MAX, u64::from), key as u32 as u64];
        let mut all = vec![0u64; 2 * self.size() as usize];
        self.allgather(&mine, &mut all)?;
        let ctx = self.new_context()?;
        let Some(c) = color else {
            return Ok(None);
        };
        let mut members: Vec<(i32, u32)> = all
            .chunks_exact(2)
            .enumerate()
            .filter(|(_, x)| x[0] == u64::from(c))
            .map(|(r, x)| (x[1] as u32 as i32, r as u32))
            .collect();
        members.sort();
        let ranks = members
            .iter()
            .map(|&(_, r)| self.core.job_rank(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Communicator::from_parts(
            self.core.engine.clone(),
            ctx,
            ranks,
        ))
    }

    /// The lowest context id this rank knows to be free: ranks that share no
    /// communicator yet agree on a new one's context as the largest of their
    /// `free_context()` (exchanged by any means), claim it
    /// ([`Communicator::claim_context`]) and make it with
    /// [`Communicator::with_context`]. MPI's intercommunicators are made so. A rank
    /// that holds [`MAX_LIVE_COMMUNICATORS`] already answers an id that no claim takes, so
    /// that every member's creation fails alike.
    pub fn free_context(&self) -> u32 {
        let e = &self.core.engine;
        if e.live_comms.load(Ordering::Acquire) >= MAX_LIVE_COMMUNICATORS {
            return LEADER_BASE;
        }
        e.next_ctx.load(Ordering::Acquire)
    }

    /// A communicator of job ranks `ranks` (in this order) in context `ctx`, which its
    /// members agreed on as the largest of their [`Communicator::free_context`] and
    /// each claimed ([`Communicator::claim_context`], which threads making other
    /// communicators at once need): every
    /// member calls it with the same `ctx` and `ranks`. Not collective in itself. A
    /// communicator takes four context ids: the next free one after `ctx` is `ctx + 4`.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let ctx = world.free_context();            // on one rank: nothing to agree with
    /// let c = world.with_context(ctx, vec![world.rank()]).unwrap();
    /// assert_eq!((c.rank(), c.size()), (0, 1));
    /// assert!(world.free_context() > ctx);       // the context is taken
    /// ```
    ///
    /// # Errors
    /// [`MsgError::NoContext`] when `ctx` is out of range; [`MsgError::Protocol`] when
    /// this rank is not among `ranks`.
    pub fn with_context(&self, ctx: u32, ranks: Vec<u32>) -> Result<Communicator, MsgError> {
        if ctx >= LEADER_BASE || ctx % CTX_STRIDE != 0 {
            return Err(MsgError::NoContext);
        }
        let e = &self.core.engine;
        e.next_ctx.fetch_max(ctx + CTX_STRIDE, Ordering::AcqRel);
        Communicator::from_parts(e.clone(), ctx, ranks).ok_or(MsgError::Protocol {
            peer: self.core.rank,
            what: "this rank is missing from the communicator it makes",
        })
    }

    /// This communicator with its members in another order on this rank (the same
    /// context: a message matches in either): point-to-point ranks and statuses name
    /// members in `ranks`' order (job ranks). Collectives need the order every member
    /// uses; MPI's intercommunicators put the other group first, so that a rank of
    /// the remote group is a rank here.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let v = world.view(vec![world.rank()]).unwrap();
    /// assert_eq!(v.rank(), 0);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::Protocol`] when `ranks` are not this communicator's members.
    pub fn view(&self, ranks: Vec<u32>) -> Result<Communicator, MsgError> {
        let core = self.core.view(ranks).ok_or(MsgError::Protocol {
            peer: self.core.rank,
            what: "a view must hold the communicator's members",
        })?;
        Ok(Communicator {
            core: std::sync::Arc::new(core),
        })
    }

    /// Takes the `count` contexts from `ctx` on this rank (each communicator uses four
    /// ids: `count` communicators' worth), if no communicator made on this rank since the
    /// members read their [`Communicator::free_context`] took one of them or one above
    /// them: true when `ctx` is still at or above this rank's lowest free context,
    /// which then moves past them. Members that agreed on `ctx` each claim it and make
    /// the communicator only when every one of them could (another thread of a rank
    /// may have taken it meanwhile, for a communicator of other ranks); otherwise they
    /// agree again, above it.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let ctx = world.free_context();
    /// assert!(world.claim_context(ctx, 1).unwrap());
    /// assert!(!world.claim_context(ctx, 1).unwrap());      // taken
    /// assert_eq!(world.free_context(), ctx + 4);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::NoContext`] when no such contexts are left (the members agreed on
    /// the answer of a [`Communicator::free_context`] that had none): each member,
    /// given the same `ctx`, fails alike.
    pub fn claim_context(&self, ctx: u32, count: u32) -> Result<bool, MsgError> {
        let end = u64::from(ctx) + u64::from(CTX_STRIDE) * u64::from(count);
        if end > u64::from(LEADER_BASE) || ctx % CTX_STRIDE != 0 {
            return Err(MsgError::NoContext);
        }
        let next = &self.core.engine.next_ctx;
        Ok(next
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                (ctx >= cur).then_some(end as u32)
            })
            .is_ok())
    }

    /// Agrees on a context id unused by every member: the largest next-free id any of
    /// them knows (so it is above every context a member belongs to; the non-blocking
    /// dups' contexts, from `LEADER_BASE` up, are apart), then whether every member
    /// could claim it ([`Communicator::claim_context`]). Threads of a rank may make
    /// communicators at once: two agreements that met on one id on a rank both
    /// read it free there, and only one claims it; the other's members agree again,
    /// above it (MPICH does the same, in rounds over a mask of free ids).
    fn new_context(&self) -> Result<u32, MsgError> {
        loop {
            let mine = self.free_context();
            let mut agreed = [0u32];
            self.allreduce(&[mine], &mut agreed, &Op::Max)?;
            // The contexts from LEADER_BASE up are the non-blocking dups' (`idup.rs`);
            // a member that holds MAX_LIVE_COMMUNICATORS proposes LEADER_BASE: all fail.
            let took = self.claim_context(agreed[0], 1)?;
            let ctx = agreed[0];
            let mut all = [0u32];
            self.allreduce(&[u32::from(took)], &mut all, &Op::Min)?;
            if all[0] == 1 {
                return Ok(ctx);
            }
            // A member's other thread took `ctx` there: this rank's free context is
            // past it now if it claimed it, and the next round's maximum is above it.
        }
    }
}
