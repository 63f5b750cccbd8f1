//! Non-blocking collectives: the call takes its place in the communicator's order at
//! once (so any number may be outstanding, and blocking ones may follow), builds the
//! collective's [`Schedule`] and starts it; the progress engine advances it (see
//! [`super::schedule`]), with no thread per call. [`CollRequest::wait`] gives back the
//! buffers.

use std::sync::{Arc, Mutex, PoisonError};

use super::args::{check, EVEN_SPLIT, ONE_COUNT_PER_RANK};
use super::group::Group;
use super::plans;
use super::poller::{activate, run_to_end, Shared};
use super::schedule::Schedule;
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// A started schedule and how its slots become the request's result.
struct Job<T: Element, R> {
    sched: Shared<T>,
    finish: fn(Vec<Vec<T>>) -> R,
}

/// What a request needs of its job, whatever its element type.
trait Pending<R>: Send + Sync {
    /// Advances the schedule; whether it finished.
    fn advance(&self) -> bool;
    /// One round of progress of the rank, then [`Pending::advance`].
    fn test(&self) -> bool;
    /// Advances the schedule to its end.
    fn wait(&self) -> Result<R, MsgError>;
}

impl<T: Element, R> Pending<R> for Job<T, R> {
    fn advance(&self) -> bool {
        self.sched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .advance()
    }

    fn test(&self) -> bool {
        let engine = {
            let g = self.sched.lock().unwrap_or_else(PoisonError::into_inner);
            g.core().engine.clone()
        };
        // Errors of this round stay queued for the wait that reports them.
        let _ = engine.worker.progress();
        self.advance()
    }

    fn wait(&self) -> Result<R, MsgError> {
        run_to_end(&self.sched).map(self.finish)
    }
}

/// A collective in flight; `wait` returns its result. Dropping it finishes the
/// collective first (its partners depend on it).
#[must_use = "a collective request must be waited for"]
pub struct CollRequest<R> {
    op: &'static str,
    job: Option<Box<dyn Pending<R>>>,
}

impl<R> std::fmt::Debug for CollRequest<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollRequest").field("op", &self.op).finish()
    }
}

impl<R> CollRequest<R> {
    /// Whether the collective has finished on this rank (`wait` then returns at once).
    /// Advances its schedule as far as it can without waiting.
    pub fn is_complete(&self) -> bool {
        self.job.as_ref().is_none_or(|j| j.advance())
    }

    /// Runs one round of the rank's progress, then [`CollRequest::is_complete`]: polling
    /// `test` drives the collective without a progress thread.
    pub fn test(&self) -> bool {
        self.job.as_ref().is_none_or(|j| j.test())
    }

    /// Waits for the collective and returns its result.
    ///
    /// # Errors
    /// The collective's error: a dead rank, a rank that finalised without starting it
    /// ([`MsgError::PeerFinalized`]), a message of the wrong length
    /// ([`MsgError::Mismatch`], [`MsgError::Truncated`]), transport failures.
    pub fn wait(mut self) -> Result<R, MsgError> {
        match self.job.take() {
            Some(j) => j.wait(),
            None => Err(MsgError::Panicked(self.op)),
        }
    }
}

impl<R> Drop for CollRequest<R> {
    fn drop(&mut self) {
        // The collective's partners depend on it: finish it even if nobody waits.
        if let Some(j) = self.job.take() {
            let _ = j.wait();
        }
    }
}

/// The result in slot 0.
fn first<T>(mut slots: Vec<Vec<T>>) -> Vec<T> {
    if slots.is_empty() {
        Vec::new()
    } else {
        slots.swap_remove(0)
    }
}

impl Communicator {
    /// The communicator whose collective context and count this communicator's
    /// non-blocking collectives use (`CommCore::nonblocking`); itself when it is one.
    pub(super) fn nonblocking(&self) -> Communicator {
        match self.core.nonblocking() {
            Some(core) => Communicator { core: core.clone() },
            None => self.clone(),
        }
    }

    /// An empty schedule over `slots` for the collective with base tag `tag`.
    fn schedule<T: Element>(&self, tag: u32, slots: Vec<Vec<T>>) -> Schedule<T> {
        Schedule::new(&self.core, tag, slots)
    }

    /// An empty schedule of bytes (for [`Communicator::iexchange`]).
    pub(super) fn schedule_bytes(&self, tag: u32, slots: Vec<Vec<u8>>) -> Schedule<u8> {
        Schedule::new(&self.core, tag, slots)
    }

    /// Starts a schedule of bytes whose first `keep` slots are the result.
    pub(super) fn start_bytes(
        op: &'static str,
        s: Schedule<u8>,
        keep: usize,
    ) -> Result<CollRequest<Vec<Vec<u8>>>, MsgError> {
        let mut s = s;
        s.keep_slots(keep);
        Self::start(op, s, |v| v)
    }

    /// `s` with the agreement of `op`'s [`Verdict`](crate::Verdict) at its end, if it has
    /// one ([`Op::with_verdict`]).
    fn agree<T: Element>(&self, mut s: Schedule<T>, tag: u32, op: &Op<T>) -> Schedule<T> {
        if let Some(v) = op.verdict() {
            super::verdict::append(&mut s, &Group::all(&self.core), tag, v);
        }
        s
    }

    /// Starts `s` (its first round goes out now) and hands it to the progress engine.
    fn start<T: Element, R: 'static>(
        op: &'static str,
        s: Schedule<T>,
        finish: fn(Vec<Vec<T>>) -> R,
    ) -> Result<CollRequest<R>, MsgError> {
        let sched = Arc::new(Mutex::new(s));
        let done = sched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .advance();
        if !done {
            activate(&sched);
        }
        Ok(CollRequest {
            op,
            job: Some(Box::new(Job { sched, finish })),
        })
    }

    /// Non-blocking [`Communicator::barrier`].
    ///
    /// The barrier takes its place in the communicator's order at once: a blocking
    /// collective can run while it is in flight.
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let n = u64::from(world.size());
    /// let pending = world.ibarrier().unwrap();
    /// let mut total = [0u64];
    /// world
    ///     .allreduce(&[u64::from(world.rank()) + 1], &mut total, &Op::Sum)
    ///     .unwrap();
    /// assert_eq!(total[0], n * (n + 1) / 2);
    /// pending.wait().unwrap();
    /// ```
    ///
    /// # Errors
    /// Transport failures while starting; the barrier's own errors come from `wait`.
    pub fn ibarrier(&self) -> Result<CollRequest<()>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let mut s = this.schedule::<u8>(tag, vec![Vec::new()]);
        plans::barrier(&mut s, &Group::all(&this.core), &this.hosts(), tag);
        Self::start("barrier", s, |_| ())
    }

    /// Non-blocking [`Communicator::bcast`]: `wait` returns the buffer.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`].
    pub fn ibcast<T: Element>(
        &self,
        buf: Vec<T>,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        let mut s = this.schedule(tag, vec![buf]);
        let g = Group::all(&this.core);
        plans::bcast(&mut s, &g, &this.hosts(), root as usize, tag, 0);
        Self::start("bcast", s, first)
    }

    /// Non-blocking [`Communicator::allreduce`]: `wait` returns the result.
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let (me, n) = (u64::from(world.rank()), u64::from(world.size()));
    /// let r = world.iallreduce(vec![me + 1, me * me], Op::Sum).unwrap();
    /// // ... compute while it runs ...
    /// assert_eq!(r.wait().unwrap(), [n * (n + 1) / 2, (n - 1) * n * (2 * n - 1) / 6]);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iallreduce<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        if this.size() == 1 {
            let s = this.agree(this.schedule(tag, vec![buf]), tag, &op);
            return Self::start("allreduce", s, first);
        }
        let (g, hosts) = (Group::all(&this.core), this.hosts());
        let tmp = vec![T::default(); plans::allreduce_scratch(&g, &hosts, buf.len(), &op)];
        let mut s = this.schedule(tag, vec![buf, tmp]);
        plans::allreduce(&mut s, &g, &hosts, tag, (0, 1), &op);
        Self::start("allreduce", this.agree(s, tag, &op), first)
    }

    /// Non-blocking [`Communicator::reduce`]: `wait` returns the result at the root
    /// (elsewhere the buffer's contents are unspecified).
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`].
    pub fn ireduce<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        let tmp = vec![T::default(); buf.len()];
        let mut s = this.schedule(tag, vec![buf, tmp]);
        let g = Group::all(&this.core);
        plans::reduce_to(&mut s, &g, root as usize, tag, 0, 1, &op);
        Self::start("reduce", this.agree(s, tag, &op), first)
    }

    /// Non-blocking [`Communicator::gather`]: `wait` returns all blocks at the root (an
    /// empty vector elsewhere).
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`].
    pub fn igather<T: Element>(
        &self,
        send: Vec<T>,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        let n = this.size() as usize;
        let len = send.len();
        let out = if this.rank() == root {
            let mut out = vec![T::default(); n * len];
            let at = root as usize * len;
            out[at..at + len].copy_from_slice(&send);
            out
        } else {
            Vec::new()
        };
        let mut s = this.schedule(tag, vec![out, send]);
        // Every rank's part has one length (the call's contract): every rank takes the
        // same path.
        let g = Group::all(&this.core);
        plans::gather(&mut s, &g, root as usize, tag, (1, 0), &vec![len; n]);
        Self::start("gather", s, first)
    }

    /// Non-blocking [`Communicator::scatter`] of blocks of `count` elements: `wait`
    /// returns this rank's block.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`]; a root `send` that is not
    /// `size × count` elements.
    pub fn iscatter<T: Element>(
        &self,
        send: Vec<T>,
        count: usize,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        let n = this.size() as usize;
        let mut out = vec![T::default(); count];
        if this.rank() == root {
            check(
                "iscatter",
                "send must hold count elements per rank",
                send.len(),
                n * count,
            )?;
            let at = root as usize * count;
            out.copy_from_slice(&send[at..at + count]);
        }
        let mut s = this.schedule(tag, vec![out, send]);
        let g = Group::all(&this.core);
        plans::scatter(&mut s, &g, root as usize, tag, (1, 0), &vec![count; n]);
        Self::start("scatter", s, first)
    }

    /// Non-blocking [`Communicator::allgather`]: `wait` returns every rank's block.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iallgather<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let n = this.size() as usize;
        let len = send.len();
        let mut out = vec![T::default(); n * len];
        let at = this.rank() as usize * len;
        out[at..at + len].copy_from_slice(&send);
        let mut s = this.schedule(tag, vec![out, send]);
        // Every rank's part has one length (the call's contract): every rank takes the
        // same path.
        let g = Group::all(&this.core);
        plans::ring_allgather(&mut s, &g, tag, 0, &vec![len; n]);
        Self::start("allgather", s, first)
    }

    /// Non-blocking [`Communicator::alltoall`]: `wait` returns the received blocks.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; a `send` whose length is not a multiple of the size.
    pub fn ialltoall<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let n = this.size() as usize;
        check("ialltoall", EVEN_SPLIT, send.len() % n, 0)?;
        let block = send.len() / n;
        let mut out = vec![T::default(); send.len()];
        let at = this.rank() as usize * block;
        out[at..at + block].copy_from_slice(&send[at..at + block]);
        let mut s = this.schedule(tag, vec![out, send]);
        let g = Group::all(&this.core);
        plans::alltoall(&mut s, &g, tag, (1, 0), block);
        Self::start("alltoall", s, first)
    }

    /// Non-blocking [`Communicator::scan`]: `wait` returns the prefix result.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iscan<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let partial = buf.clone();
        let tmp = vec![T::default(); buf.len()];
        // Slot 0: the result, from this rank's own part; slot 1: the partial fold.
        let mut s = this.schedule(tag, vec![buf, partial, tmp]);
        let g = Group::all(&this.core);
        plans::scan(&mut s, &g, tag, (0, 1, 2), &op);
        Self::start("scan", this.agree(s, tag, &op), first)
    }

    /// Non-blocking [`Communicator::reduce_scatter`]: `wait` returns this rank's block.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; lengths that do not fit `counts`.
    pub fn ireduce_scatter<T: Element>(
        &self,
        send: Vec<T>,
        counts: Vec<usize>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let n = this.size() as usize;
        let total: usize = counts.iter().sum();
        check("ireduce_scatter", ONE_COUNT_PER_RANK, counts.len(), n)?;
        check(
            "ireduce_scatter",
            "send must hold the sum of the counts",
            send.len(),
            total,
        )?;
        let me = this.rank() as usize;
        let from: usize = counts[..me].iter().sum();
        // This rank's block of the result (the plan overwrites it).
        let out = send[from..from + counts[me]].to_vec();
        let tmp = vec![T::default(); total];
        let mut s = this.schedule(tag, vec![out, send, tmp]);
        let g = Group::all(&this.core);
        plans::reduce_scatter(&mut s, &g, tag, (1, 2, 0), &counts, &op);
        Self::start("reduce_scatter", this.agree(s, tag, &op), first)
    }
}
