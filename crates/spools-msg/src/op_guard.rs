//! The guard that keeps the borrowed buffer of a blocking operation safe, and waits for
//! the operation.

use std::cell::Cell;
use std::marker::PhantomData;

use crate::engine::Engine;
use crate::error::MsgError;
use crate::protocol::RecvOutcome;

/// A blocking operation's hold on the engine: removes the operation, under the engine's
/// lock, when dropped, so that a borrowed buffer is never touched after the call returns
/// (on success, error or panic alike).
pub(crate) struct OpGuard<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) id: u64,
    pub(crate) recv: bool,
    /// The job rank a receive waits for a message from (None: any source, or a send):
    /// its wait reads that rank's messages first.
    pub(crate) source: Option<u32>,
    /// The collective (context, number) this operation is a step of, if any, and the
    /// job ranks of its communicator.
    pub(crate) collective: Option<(u32, u32, &'a [u32])>,
    /// A receive's outcome, once it completed and was removed from the engine (then
    /// nothing is left to release).
    pub(crate) finished: Cell<Option<RecvOutcome>>,
    /// The engine's generation read before the operation was started, if known: the
    /// operation cannot have completed while it has not moved, so the first look-up waits
    /// for a completion too.
    pub(crate) generation_at_start: Option<u64>,
    pub(crate) _buf: PhantomData<&'a mut [u8]>,
}

impl OpGuard<'_> {
    /// Whether the operation completed; a completed receive is removed from the engine at
    /// once, its outcome kept (one lock for the check, the outcome and the release).
    pub(crate) fn is_complete(&self) -> bool {
        if self.recv {
            if self.finished.get().is_some() {
                return true;
            }
            // A blocking receive's buffer is borrowed: the engine gives nothing back.
            let done = self.engine.finish_recv(self.id).map(|(o, _)| o);
            self.finished.set(done);
            done.is_some()
        } else {
            self.engine.send_complete(self.id)
        }
    }

    /// Waits until the operation completes, or fails when a rank that finalised without
    /// starting this operation's collective makes it impossible.
    pub(crate) fn wait(&self) -> Result<(), MsgError> {
        let mut seen = self.generation_at_start;
        let mut blocker = None;
        let mut orphaned = None;
        let state = self.engine.worker.bootstrap().state();
        let cond = || {
            // Look the operation up only after some operation completed.
            let g = self.engine.generation();
            if seen == Some(g) {
                return false;
            }
            seen = Some(g);
            self.is_complete()
        };
        let stop = || {
            // A rank that finalised before starting this collective never will.
            blocker = self.collective.and_then(|(ctx, k, members)| {
                state.collective_blocker(ctx, k, members).map(|b| (b, k))
            });
            // A receive from a rank that finalised, all its messages in and none
            // matching, never completes (end of data).
            if blocker.is_none() && self.recv && state.any_finalizing() {
                orphaned = self.engine.orphaned_recv(self.id);
            }
            blocker.is_some() || orphaned.is_some()
        };
        let worker = &self.engine.worker;
        let done = match self.source {
            Some(src) => worker.wait_for_from(src, cond, stop)?,
            None => worker.wait_for_or(cond, stop)?,
        };
        if let (Some((rank, sent)), false) = (orphaned, done) {
            // An interrupt that came meanwhile (Ctrl-C) wins: the wait would have ended
            // with it had it slept once more.
            self.engine.worker.check_interrupt()?;
            return Err(MsgError::SourceFinalized { rank, sent });
        }
        match blocker {
            Some(((rank, started), waiting)) if !done => {
                let e = MsgError::PeerFinalized {
                    rank,
                    started,
                    waiting,
                };
                // The job is over: end it in the name of the rank at fault.
                self.engine.worker.bootstrap().blame(
                    rank,
                    &format!(
                        "it finalised after {started} collective(s) on a communicator whose collective #{waiting} other ranks wait in"
                    ),
                );
                Err(e)
            }
            _ => Ok(()),
        }
    }

    /// The receive's outcome once complete.
    pub(crate) fn outcome(&self) -> Option<RecvOutcome> {
        self.finished
            .get()
            .or_else(|| self.engine.recv_outcome(self.id))
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        if self.recv {
            if self.finished.get().is_none() {
                self.engine.release_recv(self.id);
            }
        } else {
            self.engine.release_send(self.id);
        }
    }
}
