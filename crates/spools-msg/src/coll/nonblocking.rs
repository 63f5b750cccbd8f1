//! Non-blocking collectives: the call takes its place in the communicator's order at
//! once (so any number may be outstanding, and blocking ones may follow), builds the
//! collective's [`Schedule`] and starts it; the progress engine advances it (see
//! [`super::schedule`]), with no thread per call. [`CollRequest::wait`] gives back the
//! buffers. Barrier, bcast, reduce, allreduce, scatter, allgather, alltoall, gather,
//! reduce-scatter and scan of a communicator whose members share this host go through a
//! segment in shared memory instead, once one is set up ([`super::sm::SmJob`]). Those
//! with a count per rank and the exclusive scan are in `counts.rs`, those between the
//! two groups of an intercommunicator ([`Sides`]) in `inter.rs`.

use std::sync::{Arc, Mutex, PoisonError};

use super::args::{block, check, EVEN_SPLIT, ONE_COUNT_PER_RANK};
use super::group::Group;
use super::plans;
use super::poller::{activate, activate_job, deactivate_job, run_to_end, Shared};
use super::schedule::Schedule;
use super::sm::{self as shm, SharedJob, SmJob};
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

mod counts;
mod inter;

pub use inter::{InterRoot, Sides, INTER_FLAT_PAIRS};

/// An exclusive scan's shift of results to the right (through the messages): past every
/// step of the scan.
const SHIFT_TAG: u32 = 100;

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

/// A started collective through a segment and how its buffer becomes the result.
struct SmPending<T: Element, R> {
    job: SharedJob<T>,
    finish: fn(Vec<T>) -> R,
}

impl<T: Element, R> Pending<R> for SmPending<T, R> {
    fn advance(&self) -> bool {
        self.job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .advance()
    }

    fn test(&self) -> bool {
        let engine = self
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .engine();
        // Errors of this round stay queued for the wait that reports them.
        let _ = engine.worker.progress();
        self.advance()
    }

    fn wait(&self) -> Result<R, MsgError> {
        deactivate_job(&self.job);
        shm::run_segment(&self.job);
        let lock = || self.job.lock().unwrap_or_else(PoisonError::into_inner);
        // A v collective's blocks that do not fit a slot: its sends, then its receives
        // (posted once its step ended), to their end.
        let (sending, receiving) = lock().take_messages();
        if let Some(s) = sending {
            let r = run_to_end(&s);
            lock().end_sending(r);
        }
        if let Some(s) = receiving {
            let r = run_to_end(&s);
            lock().end_receives(r);
        }
        let mut g = lock();
        let r = g.take();
        // Abandoned before one in flight before it finished: the poller marks it
        // finished later, so that the ones after it post.
        let later = g.finishes_later();
        drop(g);
        if later {
            activate_job(&self.job);
        }
        r.map(self.finish)
    }
}

/// A collective in flight; `wait` returns its result. Dropping it finishes the
/// collective first (its partners depend on it).
#[must_use = "a collective request must be waited for"]
pub struct CollRequest<R> {
    op: &'static str,
    job: Option<State<R>>,
}

/// Where a request's collective stands.
enum State<R> {
    /// Running: its job.
    Running(Box<dyn Pending<R>>),
    /// It finished as it started (a broadcast's root, a reduce's contributor, a member
    /// that found its result published already): its result, held in the request itself.
    Finished(Result<R, MsgError>),
}

impl<R> std::fmt::Debug for CollRequest<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollRequest").field("op", &self.op).finish()
    }
}

impl<R> CollRequest<R> {
    /// A request for `job`, running.
    fn running(op: &'static str, job: Box<dyn Pending<R>>) -> CollRequest<R> {
        CollRequest {
            op,
            job: Some(State::Running(job)),
        }
    }

    /// Whether the collective has finished on this rank (`wait` then returns at once).
    /// Advances its schedule as far as it can without waiting.
    pub fn is_complete(&self) -> bool {
        match &self.job {
            Some(State::Running(j)) => j.advance(),
            _ => true,
        }
    }

    /// Runs one round of the rank's progress, then [`CollRequest::is_complete`]: polling
    /// `test` drives the collective without a progress thread.
    pub fn test(&self) -> bool {
        match &self.job {
            Some(State::Running(j)) => j.test(),
            _ => true,
        }
    }

    /// Waits for the collective and returns its result.
    ///
    /// # Errors
    /// The collective's error: a dead rank, a rank that finalised without starting it
    /// ([`MsgError::PeerFinalized`]), a message of the wrong length
    /// ([`MsgError::Mismatch`], [`MsgError::Truncated`]), transport failures.
    pub fn wait(mut self) -> Result<R, MsgError> {
        match self.job.take() {
            Some(State::Running(j)) => j.wait(),
            Some(State::Finished(r)) => r,
            None => Err(MsgError::Panicked(self.op)),
        }
    }
}

impl<R> Drop for CollRequest<R> {
    fn drop(&mut self) {
        // The collective's partners depend on it: finish it even if nobody waits.
        if let Some(State::Running(j)) = self.job.take() {
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

    /// Starts collective `kind` (barrier, bcast, reduce, allreduce) around `root` with
    /// base tag `tag` on this (non-blocking) core's segment if one serves it; else gives
    /// `buf` back, with what the schedule's waits watch for when the length alone kept
    /// it off the segment. An operator with a [`Verdict`](crate::Verdict) goes through
    /// the messages (its agreement is a step of the schedule).
    #[allow(clippy::type_complexity)]
    fn start_sm<T: Element, R: Send + 'static>(
        &self,
        op_name: &'static str,
        (tag, kind, root): (u32, shm::Kind, usize),
        buf: Vec<T>,
        op: Option<&Op<T>>,
        finish: fn(Vec<T>) -> R,
    ) -> Result<CollRequest<R>, (Vec<T>, Option<shm::Watch>)> {
        self.start_sm_parts(op_name, (tag, kind, root), (buf, Vec::new()), op, finish)
            .map_err(|(buf, _, w)| (buf, w))
    }

    /// [`Communicator::start_sm`] with a scatter's root's every part (`whole`; empty
    /// elsewhere), given back too when the segment does not serve it; a scatter's bytes
    /// are every member's part.
    #[allow(clippy::type_complexity)]
    fn start_sm_parts<T: Element, R: Send + 'static>(
        &self,
        op_name: &'static str,
        (tag, kind, root): (u32, shm::Kind, usize),
        (buf, whole): (Vec<T>, Vec<T>),
        op: Option<&Op<T>>,
        finish: fn(Vec<T>) -> R,
    ) -> Result<CollRequest<R>, (Vec<T>, Vec<T>, Option<shm::Watch>)> {
        if op.is_some_and(|o| o.verdict().is_some()) {
            return Err((buf, whole, None));
        }
        let mut bytes = std::mem::size_of_val(buf.as_slice());
        if kind == shm::Kind::Scatter {
            bytes *= self.size() as usize;
        }
        let sm = match shm::serving(&self.core, tag, kind, bytes) {
            Ok(sm) => sm,
            Err(w) => return Err((buf, whole, w)),
        };
        let job = SmJob::start(&self.core, sm, tag, (kind, root), (buf, whole), op.cloned());
        Ok(Self::start_job(op_name, job, finish))
    }

    /// Starts a scan or a reduce-scatter (`kind`) of `mine` with `op` and base tag `tag`
    /// on this (non-blocking) core's segment if one serves it and `op` has no verdict to
    /// agree on: `start` makes the job there. Else gives `mine` and `op` back, with what
    /// the schedule's waits watch for when the length alone kept it off the segment.
    #[allow(clippy::type_complexity)]
    fn start_fold_sm<T: Element>(
        &self,
        (tag, kind): (u32, shm::Kind),
        mine: Vec<T>,
        op: Op<T>,
        start: impl FnOnce(&shm::SmComm, Vec<T>, Op<T>) -> SmJob<T>,
    ) -> Result<CollRequest<Vec<T>>, (Vec<T>, Op<T>, Option<shm::Watch>)> {
        if op.verdict().is_some() {
            return Err((mine, op, None));
        }
        let bytes = std::mem::size_of_val(mine.as_slice());
        match shm::serving(&self.core, tag, kind, bytes) {
            Ok(sm) => Ok(Self::start_job(kind.name(), start(sm, mine, op), |b| b)),
            Err(w) => Err((mine, op, w)),
        }
    }

    /// Whether this (non-blocking) core's scans go as a chain of messages: its segment
    /// serves collective `tag` and its creator chose so ([`shm::ScanWay::Messages`]).
    /// Asked before the segment is asked whether a length fits: every member decides
    /// alike.
    fn scans_by_messages(&self, tag: u32) -> bool {
        self.core.sm.serving(shm::coll_no(tag)).is_some_and(|sm| {
            sm.n() == self.size() as usize && sm.scan_way() == shm::ScanWay::Messages
        })
    }

    /// A request for `job`, started: on the poller's list, or (when it finished as it
    /// started, as a broadcast's root and a reduce's contributors mostly do, and members
    /// that find their result published already) holding its result alone.
    fn start_job<T: Element, R: Send + 'static>(
        op_name: &'static str,
        mut job: SmJob<T>,
        finish: fn(Vec<T>) -> R,
    ) -> CollRequest<R> {
        if job.settled() {
            let r = job.take().map(finish);
            return CollRequest {
                op: op_name,
                job: Some(State::Finished(r)),
            };
        }
        let job = Arc::new(Mutex::new(job));
        activate_job(&job);
        CollRequest::running(op_name, Box::new(SmPending { job, finish }))
    }

    /// Starts flat collective `kind` (allgather, alltoall, gather to `root`) with base
    /// tag `tag` on this (non-blocking) core's segment if one serves it: this member
    /// posts `mine` (`bytes` long; its part, or an alltoall's blocks), `out` (this
    /// member's own block in place) gets the parts in blocks of `block` bytes. Else gives
    /// `out` and `mine` back, with what the schedule's waits watch for when the length
    /// alone kept it off the segment.
    #[allow(clippy::type_complexity)]
    fn start_flat_sm<T: Element>(
        &self,
        op_name: &'static str,
        (tag, kind, root): (u32, shm::Kind, Option<usize>),
        out: Vec<T>,
        mine: Vec<T>,
        block: usize,
    ) -> Result<CollRequest<Vec<T>>, (Vec<T>, Vec<T>, Option<shm::Watch>)> {
        let bytes = std::mem::size_of_val(mine.as_slice());
        let sm = match shm::serving(&self.core, tag, kind, bytes) {
            Ok(sm) => sm,
            Err(w) => return Err((out, mine, w)),
        };
        let parts = shm::Parts::new(super::args::bytes(&mine).to_vec(), block);
        let job = SmJob::start_flat(&self.core, sm, tag, (kind, root), out, parts);
        Ok(Self::start_job(op_name, job, |b| b))
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
        let mut s = s;
        s.name(op);
        if s.advance() {
            // Finished as it started (a communicator of one rank, a root whose sends all
            // went out at once): its result, held in the request.
            return Ok(CollRequest {
                op,
                job: Some(State::Finished(s.take().map(finish))),
            });
        }
        let sched = Arc::new(Mutex::new(s));
        activate(&sched);
        Ok(CollRequest::running(op, Box::new(Job { sched, finish })))
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
        let what = (tag, shm::Kind::Barrier, 0);
        let split = match this.start_sm::<u8, ()>("barrier", what, Vec::new(), None, |_| ()) {
            Ok(r) => return Ok(r),
            Err((_, w)) => w,
        };
        let mut s = this.schedule::<u8>(tag, vec![Vec::new()]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Bcast, root as usize);
        let (buf, split) = match this.start_sm("bcast", what, buf, None, |b| b) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let mut s = this.schedule(tag, vec![buf]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Allreduce, 0);
        let (buf, split) = match this.start_sm("allreduce", what, buf, Some(&op), |b| b) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let (g, hosts) = (Group::all(&this.core), this.hosts());
        let tmp = vec![T::default(); plans::allreduce_scratch(&g, &hosts, buf.len(), &op)];
        let mut s = this.schedule(tag, vec![buf, tmp]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Reduce, root as usize);
        let (buf, split) = match this.start_sm("reduce", what, buf, Some(&op), |b| b) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let tmp = vec![T::default(); buf.len()];
        let mut s = this.schedule(tag, vec![buf, tmp]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Gather, Some(root as usize));
        let block = std::mem::size_of_val(send.as_slice());
        let (out, send, split) = match this.start_flat_sm("gather", what, out, send, block) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let mut s = this.schedule(tag, vec![out, send]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Scatter, root as usize);
        let (out, send, split) =
            match this.start_sm_parts("scatter", what, (out, send), None, |b| b) {
                Ok(r) => return Ok(r),
                Err(back) => back,
            };
        let mut s = this.schedule(tag, vec![out, send]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Allgather, None);
        let block = std::mem::size_of_val(send.as_slice());
        let (out, send, split) = match this.start_flat_sm("allgather", what, out, send, block) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let mut s = this.schedule(tag, vec![out, send]);
        s.watch_segment(split);
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
        let what = (tag, shm::Kind::Alltoall, None);
        let bytes = block * std::mem::size_of::<T>();
        let (out, send, split) = match this.start_flat_sm("alltoall", what, out, send, bytes) {
            Ok(r) => return Ok(r),
            Err(back) => back,
        };
        let mut s = this.schedule(tag, vec![out, send]);
        s.watch_segment(split);
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
        self.nonblocking().start_scan(buf, op, shm::Kind::Scan)
    }

    /// Starts scan `kind` (inclusive or exclusive) of `buf` with `op` on this
    /// (non-blocking) core: as a chain of messages where its segment's creator chose so,
    /// else through the segment if one serves it, else by recursive doubling over the
    /// messages (and, exclusive, a shift of the results to the right).
    fn start_scan<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
        kind: shm::Kind,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        let on_segment =
            |sm: &shm::SmComm, buf, op| SmJob::start_scan(&self.core, sm, (tag, kind), buf, op);
        let chain = self.scans_by_messages(tag);
        let (buf, op, split) = if chain {
            (buf, op, None)
        } else {
            match self.start_fold_sm((tag, kind), buf, op, on_segment) {
                Ok(request) => return Ok(request),
                Err(back) => back,
            }
        };
        // Between 2 members, the chain too: one message where doubling swaps two (and
        // an exclusive scan needs no shift), as the blocking scans.
        let chain = chain || self.size() == 2;
        let tmp = vec![T::default(); buf.len()];
        let inclusive = kind == shm::Kind::Scan;
        // Slot 0: the result, from this rank's own part (which an exclusive scan leaves
        // on rank 0); then the chain's prefix or the partial fold, and scratch; an
        // exclusive scan by doubling folds its inclusive one in slot 1 and shifts it.
        let slots = if inclusive || chain {
            vec![buf.clone(), buf, tmp]
        } else {
            vec![buf.clone(), buf.clone(), buf, tmp]
        };
        let mut s = self.schedule(tag, slots);
        s.watch_segment(split);
        let g = Group::all(&self.core);
        if chain {
            plans::scan_chain(&mut s, &g, tag, (0, 1, 2), &op, inclusive);
        } else if inclusive {
            plans::scan(&mut s, &g, tag, (0, 1, 2), &op);
        } else {
            plans::scan(&mut s, &g, tag, (1, 2, 3), &op);
            plans::shift_right(&mut s, &g, tag + SHIFT_TAG, (1, 0));
        }
        Self::start(kind.name(), self.agree(s, tag, &op), first)
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
        let kind = shm::Kind::ReduceScatter;
        let on_segment = |sm: &shm::SmComm, send, op| {
            SmJob::start_fold(&this.core, sm, tag, (send, &counts), op)
        };
        let (send, op, split) = match this.start_fold_sm((tag, kind), send, op, on_segment) {
            Ok(request) => return Ok(request),
            Err(back) => back,
        };
        // This rank's block of the result (the plan overwrites it).
        let out = send[block(&counts, this.rank() as usize)].to_vec();
        let tmp = vec![T::default(); total];
        let mut s = this.schedule(tag, vec![out, send, tmp]);
        s.watch_segment(split);
        let g = Group::all(&this.core);
        plans::reduce_scatter(&mut s, &g, tag, (1, 2, 0), &counts, &op);
        Self::start("reduce_scatter", this.agree(s, tag, &op), first)
    }
}
