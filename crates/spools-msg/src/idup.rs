//! [`Communicator::idup`]: a communicator made without blocking, by one broadcast.
//!
//! A blocking dup agrees on the largest free context its members know, then on whether
//! each could claim it (two allreduces, `create.rs`). Non-blocking dups may overlap on a rank, on communicators that share
//! some members and not others, and the result of one agreement is known only when it
//! completes: two could then agree on the same context. So a non-blocking dup's context
//! is chosen by one member alone, the communicator's rank 0 (its *leader*), from a range
//! that is the leader's own: `LEADER_BASE + 4 (n * job size + leader's job rank)` for
//! the leader's `n`-th such dup. No other rank ever picks a context there, and the
//! blocking agreements stay below `LEADER_BASE`. The leader broadcasts it (one
//! non-blocking broadcast, which the progress engine drives while the ranks do other
//! things).

use std::sync::atomic::Ordering;

use crate::coll::CollRequest;
use crate::communicator::Communicator;
use crate::error::MsgError;
use crate::protocol::wire::CTX_STRIDE;
use crate::protocol::wire::MAX_CTX;

/// The first context of the leaders' ranges; blocking agreements stay below it.
pub(crate) const LEADER_BASE: u32 = 0x8000_0000;

/// What a leader broadcasts when its range is used up: every member fails alike.
const NONE_LEFT: u32 = u32::MAX;

/// A communicator being made by [`Communicator::idup`]; `wait` returns it.
#[derive(Debug)]
#[must_use = "a dup in flight must be waited for"]
pub struct DupRequest {
    parent: Communicator,
    ctx: CollRequest<Vec<u32>>,
}

impl Communicator {
    /// Non-blocking [`Communicator::dup`]: a communicator with the same ranks and a new
    /// context, made by one broadcast from rank 0 (which chooses the context from a
    /// range of its own), so that dups of overlapping communicators may be in flight
    /// together in any order.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let d = world.idup().unwrap();
    /// // ... other communication ...
    /// let c = d.wait().unwrap();
    /// assert_eq!((c.rank(), c.size()), (world.rank(), world.size()));
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::ibcast`]; at `wait`, [`MsgError::NoContext`] when the leader's
    /// range is used up or it holds [`crate::MAX_LIVE_COMMUNICATORS`] communicators.
    pub fn idup(&self) -> Result<DupRequest, MsgError> {
        let mine = if self.rank() == 0 {
            let engine = &self.core.engine;
            let n = engine.led_dups.fetch_add(1, Ordering::AcqRel);
            let size = u64::from(engine.worker.size());
            let me = u64::from(engine.worker.rank());
            let ctx = u64::from(LEADER_BASE) + u64::from(CTX_STRIDE) * (u64::from(n) * size + me);
            // The leader's count of communicators decides for all (crate::MAX_LIVE_COMMUNICATORS).
            let full = engine.live_comms.load(Ordering::Acquire) >= crate::MAX_LIVE_COMMUNICATORS;
            if ctx < u64::from(MAX_CTX) && !full {
                ctx as u32
            } else {
                NONE_LEFT
            }
        } else {
            0
        };
        let ctx = self.ibcast(vec![mine], 0)?;
        Ok(DupRequest {
            parent: self.clone(),
            ctx,
        })
    }
}

impl DupRequest {
    /// Runs one round of the rank's progress; whether the dup finished on this rank.
    pub fn test(&self) -> bool {
        self.ctx.test()
    }

    /// Waits for the leader's context and makes the communicator.
    ///
    /// # Errors
    /// The broadcast's errors; [`MsgError::NoContext`] when the leader had none left;
    /// [`MsgError::Protocol`] for a context outside the leaders' ranges.
    pub fn wait(self) -> Result<Communicator, MsgError> {
        let ctx = self.ctx.wait()?.first().copied().unwrap_or(NONE_LEFT);
        if ctx == NONE_LEFT {
            return Err(MsgError::NoContext);
        }
        let core = &self.parent.core;
        if !(LEADER_BASE..MAX_CTX).contains(&ctx) || ctx % CTX_STRIDE != 0 {
            return Err(MsgError::Protocol {
                peer: core.rank,
                what: "a non-blocking dup's leader sent a context outside its range",
            });
        }
        Communicator::from_parts(core.engine.clone(), ctx, core.ranks.clone()).ok_or(
            MsgError::Protocol {
                peer: core.rank,
                what: "this rank is missing from its own communicator",
            },
        )
    }
}
