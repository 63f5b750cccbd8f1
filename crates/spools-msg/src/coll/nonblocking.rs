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
use super::sm;
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

/// Puts a collective on its path: the segment's step, or the messages' plan (`plan`),
/// whose waits watch the segment where it could have served but for the length.
fn route<T: Element>(
    s: &mut Schedule<T>,
    path: sm::Path<impl FnMut(&mut [Vec<T>]) -> Result<bool, MsgError> + Send + 'static>,
    plan: impl FnOnce(&mut Schedule<T>),
) {
    match path {
        sm::Path::Segment(f, w) => {
            s.poll(true, f).watch(w);
        }
        sm::Path::Messages(w) => {
            plan(s);
            if let Some(w) = w {
                s.watch(w);
            }
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

    /// The segment's schedule of reduction `kind` of `buf` (around `root`), with `op`'s
    /// agreement after it, when the segment serves it; else `buf` back, with what the
    /// messages' wait watches the segment for. An operator with an agreement takes the
    /// messages throughout (on every rank alike, as every rank's operator has its
    /// verdict): the agreement's messages would wait in the segment's naps.
    fn reduction_path<T: Element>(
        &self,
        tag: u32,
        buf: Vec<T>,
        kind: sm::Kind,
        root: usize,
        op: &Op<T>,
    ) -> Result<Schedule<T>, (Vec<T>, Option<sm::Watch>)> {
        if op.verdict().is_some() {
            return Err((buf, None));
        }
        let bytes = std::mem::size_of_val(buf.as_slice());
        match sm::step(&self.core, tag, bytes, kind, root, Some(op.clone())) {
            sm::Path::Segment(f, w) => {
                let mut s = self.schedule(tag, vec![buf]);
                s.poll(true, f).watch(w);
                Ok(self.agree(s, tag, op))
            }
            sm::Path::Messages(w) => Err((buf, w)),
        }
    }

    /// The segment's flat step of fold `kind` (a scan or a reduce-scatter, every rank
    /// posting `part` bytes), unless its operator ends with an agreement: that takes
    /// the messages throughout, on every rank alike (see [`Communicator::reduction_path`]).
    fn fold_path<T: Element>(
        &self,
        tag: u32,
        (kind, part): (sm::Kind, usize),
        fold: sm::Folder<T>,
    ) -> sm::Path<impl FnMut(&mut [Vec<T>]) -> Result<bool, MsgError> + Send + 'static> {
        if fold.agrees() {
            return sm::Path::Messages(None);
        }
        sm::flat_step(&self.core, tag, (kind, None), part, fold)
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
        let tag = self.core.next_coll_tag();
        let mut s = self.schedule::<u8>(tag, vec![Vec::new()]);
        route(
            &mut s,
            sm::step(&self.core, tag, 0, sm::Kind::Barrier, 0, None),
            |s| {
                plans::barrier(s, &Group::all(&self.core), &self.hosts(), tag);
            },
        );
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
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        let bytes = std::mem::size_of_val(buf.as_slice());
        let mut s = self.schedule(tag, vec![buf]);
        route(
            &mut s,
            sm::step(&self.core, tag, bytes, sm::Kind::Bcast, root as usize, None),
            |s| {
                let g = Group::all(&self.core);
                plans::bcast(s, &g, &self.hosts(), root as usize, tag, 0);
            },
        );
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
        let tag = self.core.next_coll_tag();
        if self.size() == 1 {
            let s = self.agree(self.schedule(tag, vec![buf]), tag, &op);
            return Self::start("allreduce", s, first);
        }
        let (buf, watch) = match self.reduction_path(tag, buf, sm::Kind::Allreduce, 0, &op) {
            Ok(s) => return Self::start("allreduce", s, first),
            Err(messages) => messages,
        };
        let (g, hosts) = (Group::all(&self.core), self.hosts());
        let tmp = vec![T::default(); plans::allreduce_scratch(&g, &hosts, buf.len(), &op)];
        let mut s = self.schedule(tag, vec![buf, tmp]);
        plans::allreduce(&mut s, &g, &hosts, tag, (0, 1), &op);
        if let Some(w) = watch {
            s.watch(w);
        }
        Self::start("allreduce", self.agree(s, tag, &op), first)
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
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        let (buf, watch) = match self.reduction_path(tag, buf, sm::Kind::Reduce, root as usize, &op)
        {
            Ok(s) => return Self::start("reduce", s, first),
            Err(messages) => messages,
        };
        let tmp = vec![T::default(); buf.len()];
        let mut s = self.schedule(tag, vec![buf, tmp]);
        let g = Group::all(&self.core);
        plans::reduce_to(&mut s, &g, root as usize, tag, 0, 1, &op);
        if let Some(w) = watch {
            s.watch(w);
        }
        Self::start("reduce", self.agree(s, tag, &op), first)
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
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        let n = self.size() as usize;
        let len = send.len();
        let out = if self.rank() == root {
            let mut out = vec![T::default(); n * len];
            let at = root as usize * len;
            out[at..at + len].copy_from_slice(&send);
            out
        } else {
            Vec::new()
        };
        let part = std::mem::size_of_val(send.as_slice());
        let mut s = self.schedule(tag, vec![out, send]);
        // Every rank's part has one length (the call's contract): every rank takes the
        // same path.
        route(
            &mut s,
            sm::flat_step(
                &self.core,
                tag,
                (sm::Kind::Gather, Some(root as usize)),
                part,
                sm::Blocks,
            ),
            |s| {
                let g = Group::all(&self.core);
                plans::gather(s, &g, root as usize, tag, (1, 0), &vec![len; n]);
            },
        );
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
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        let n = self.size() as usize;
        let mut out = vec![T::default(); count];
        if self.rank() == root {
            check(
                "iscatter",
                "send must hold count elements per rank",
                send.len(),
                n * count,
            )?;
            let at = root as usize * count;
            out.copy_from_slice(&send[at..at + count]);
        }
        let whole = n * count * std::mem::size_of::<T>();
        let mut s = self.schedule(tag, vec![out, send]);
        let kind = sm::Kind::Scatter;
        route(
            &mut s,
            sm::step(&self.core, tag, whole, kind, root as usize, None),
            |s| {
                let g = Group::all(&self.core);
                plans::scatter(s, &g, root as usize, tag, (1, 0), &vec![count; n]);
            },
        );
        Self::start("scatter", s, first)
    }

    /// Non-blocking [`Communicator::allgather`]: `wait` returns every rank's block.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iallgather<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        let n = self.size() as usize;
        let len = send.len();
        let mut out = vec![T::default(); n * len];
        let at = self.rank() as usize * len;
        out[at..at + len].copy_from_slice(&send);
        let part = std::mem::size_of_val(send.as_slice());
        let mut s = self.schedule(tag, vec![out, send]);
        // Every rank's part has one length (the call's contract): every rank takes the
        // same path.
        route(
            &mut s,
            sm::flat_step(
                &self.core,
                tag,
                (sm::Kind::Allgather, None),
                part,
                sm::Blocks,
            ),
            |s| {
                let g = Group::all(&self.core);
                plans::ring_allgather(s, &g, tag, 0, &vec![len; n]);
            },
        );
        Self::start("allgather", s, first)
    }

    /// Non-blocking [`Communicator::alltoall`]: `wait` returns the received blocks.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; a `send` whose length is not a multiple of the size.
    pub fn ialltoall<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        let n = self.size() as usize;
        check("ialltoall", EVEN_SPLIT, send.len() % n, 0)?;
        let block = send.len() / n;
        let mut out = vec![T::default(); send.len()];
        let at = self.rank() as usize * block;
        out[at..at + block].copy_from_slice(&send[at..at + block]);
        let whole = std::mem::size_of_val(send.as_slice());
        let mut s = self.schedule(tag, vec![out, send]);
        route(
            &mut s,
            sm::flat_step(
                &self.core,
                tag,
                (sm::Kind::Alltoall, None),
                whole,
                sm::Column(self.rank() as usize),
            ),
            |s| {
                let g = Group::all(&self.core);
                plans::alltoall(s, &g, tag, (1, 0), block);
            },
        );
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
        let tag = self.core.next_coll_tag();
        let part = std::mem::size_of_val(buf.as_slice());
        let partial = buf.clone();
        let tmp = vec![T::default(); buf.len()];
        // Slot 1 is what the segment's members post, slot 0 the result from their own.
        let mut s = self.schedule(tag, vec![buf, partial, tmp]);
        let me = self.rank() as usize;
        route(
            &mut s,
            self.fold_path(
                tag,
                (sm::Kind::Scan, part),
                sm::Folder::scan(op.clone(), me, true),
            ),
            |s| {
                let g = Group::all(&self.core);
                plans::scan(s, &g, tag, (0, 1, 2), &op);
            },
        );
        Self::start("scan", self.agree(s, tag, &op), first)
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
        let tag = self.core.next_coll_tag();
        let n = self.size() as usize;
        let total: usize = counts.iter().sum();
        check("ireduce_scatter", ONE_COUNT_PER_RANK, counts.len(), n)?;
        check(
            "ireduce_scatter",
            "send must hold the sum of the counts",
            send.len(),
            total,
        )?;
        let me = self.rank() as usize;
        let from: usize = counts[..me].iter().sum();
        // This rank's own block, where the segment's fold starts (the messages' plan
        // overwrites it).
        let out = send[from..from + counts[me]].to_vec();
        let whole = std::mem::size_of_val(send.as_slice());
        let tmp = vec![T::default(); total];
        let at = from * std::mem::size_of::<T>();
        let fold = sm::Folder::block(op.clone(), me, at, &send);
        let mut s = self.schedule(tag, vec![out, send, tmp]);
        route(
            &mut s,
            self.fold_path(tag, (sm::Kind::ReduceScatter, whole), fold),
            |s| {
                let g = Group::all(&self.core);
                plans::reduce_scatter(s, &g, tag, (1, 2, 0), &counts, &op);
            },
        );
        Self::start("reduce_scatter", self.agree(s, tag, &op), first)
    }
}
