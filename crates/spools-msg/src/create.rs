//! Making communicators: the job's first one ([`start`]), and [`Communicator::dup`] and
//! [`Communicator::split`], which agree on a new context with a collective.

use std::sync::atomic::Ordering;

use spools_am::{Endpoint, Worker};

use crate::communicator::Communicator;
use crate::element::Op;
use crate::engine::Engine;
use crate::error::MsgError;
use crate::protocol::wire::MAX_CTX;

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
    Communicator::from_parts(engine, 0, ranks).ok_or(MsgError::Protocol {
        peer: worker.rank(),
        what: "this rank is missing from the job",
    })
}

impl Communicator {
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

    /// Agrees on a context id unused by every member: the largest next-free id any of
    /// them knows (so it is above every context a member belongs to). Communicators must
    /// be created by one thread at a time on each rank (two concurrent `dup`s of
    /// communicators sharing ranks could agree on the same id).
    fn new_context(&self) -> Result<u32, MsgError> {
        let e = &self.core.engine;
        let mine = e.next_ctx.load(Ordering::Acquire);
        let mut agreed = [0u32];
        self.allreduce(&[mine], &mut agreed, &Op::Max)?;
        let ctx = agreed[0];
        if ctx >= MAX_CTX {
            return Err(MsgError::NoContext);
        }
        e.next_ctx.fetch_max(ctx + 2, Ordering::AcqRel);
        Ok(ctx)
    }
}
