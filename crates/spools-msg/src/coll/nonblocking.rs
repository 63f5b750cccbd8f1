//! Non-blocking collectives: the call takes its place in the communicator's order at
//! once (so any number may be outstanding, and blocking ones may follow), and its
//! schedule runs on a helper thread while the caller computes; [`CollRequest::wait`]
//! gives back the buffers.

use std::thread::JoinHandle;

use super::args::{bytes_mut, check, displs, EVEN_SPLIT, ONE_COUNT_PER_RANK};
use super::group::Group;
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// A collective in flight; `wait` returns its result.
#[must_use = "a collective request must be waited for"]
pub struct CollRequest<R> {
    op: &'static str,
    handle: Option<JoinHandle<Result<R, MsgError>>>,
}

impl<R> std::fmt::Debug for CollRequest<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollRequest").field("op", &self.op).finish()
    }
}

impl<R> CollRequest<R> {
    /// Whether the collective has finished on this rank (`wait` then returns at once).
    pub fn is_complete(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the collective and returns its result.
    ///
    /// # Errors
    /// The collective's error; [`MsgError::Panicked`] if its thread panicked.
    pub fn wait(mut self) -> Result<R, MsgError> {
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| MsgError::Panicked(self.op))?,
            None => Err(MsgError::Panicked(self.op)),
        }
    }
}

impl<R> Drop for CollRequest<R> {
    fn drop(&mut self) {
        // The collective's partners depend on it: finish it even if nobody waits.
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Communicator {
    /// Runs a collective's schedule on a helper thread with the base tag `tag`, taken
    /// by the caller before any check, so that a failed check leaves every rank's call
    /// count in step.
    fn spawn<R: Send + 'static>(
        &self,
        op: &'static str,
        tag: u32,
        f: impl FnOnce(&Communicator, u32) -> Result<R, MsgError> + Send + 'static,
    ) -> Result<CollRequest<R>, MsgError> {
        let c = self.clone();
        let h = std::thread::Builder::new()
            .name(format!("spools-{op}"))
            .spawn(move || f(&c, tag))
            .map_err(|source| MsgError::Am(spools_am::AmError::ThreadSpawn { what: op, source }))?;
        Ok(CollRequest {
            op,
            handle: Some(h),
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
    /// A thread cannot be started; the barrier's errors come from `wait`.
    pub fn ibarrier(&self) -> Result<CollRequest<()>, MsgError> {
        let tag = self.core.next_coll_tag();
        self.spawn("barrier", tag, |c, tag| {
            super::barrier::barrier(&c.core, &Group::all(&c.core), &c.hosts(), tag)
        })
    }

    /// Non-blocking [`Communicator::bcast`]: `wait` returns the buffer.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`].
    pub fn ibcast<T: Element>(
        &self,
        mut buf: Vec<T>,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        self.spawn("bcast", tag, move |c, tag| {
            super::bcast::bcast(
                &c.core,
                &Group::all(&c.core),
                &c.hosts(),
                root as usize,
                tag,
                bytes_mut(&mut buf),
            )?;
            Ok(buf)
        })
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
        mut buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        self.spawn("allreduce", tag, move |c, tag| {
            super::reduce::allreduce(
                &c.core,
                &Group::all(&c.core),
                &c.hosts(),
                tag,
                &mut buf,
                &op,
            )?;
            Ok(buf)
        })
    }

    /// Non-blocking [`Communicator::reduce`]: `wait` returns the result at the root
    /// (elsewhere the buffer's contents are unspecified).
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; [`MsgError::BadRank`].
    pub fn ireduce<T: Element>(
        &self,
        mut buf: Vec<T>,
        op: Op<T>,
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        self.spawn("reduce", tag, move |c, tag| {
            super::reduce::reduce_to(
                &c.core,
                &Group::all(&c.core),
                root as usize,
                tag,
                &mut buf,
                &op,
            )?;
            Ok(buf)
        })
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
        self.spawn("gather", tag, move |c, tag| {
            let counts = vec![send.len(); n];
            let mut out = if c.rank() == root {
                vec![T::default(); n * send.len()]
            } else {
                Vec::new()
            };
            super::gather::gatherv_in(
                &c.core,
                &Group::all(&c.core),
                root as usize,
                tag,
                &send,
                &counts,
                &mut out,
            )?;
            Ok(out)
        })
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
        if self.rank() == root {
            check(
                "iscatter",
                "send must hold count elements per rank",
                send.len(),
                n * count,
            )?;
        }
        self.spawn("scatter", tag, move |c, tag| {
            let counts = vec![count; n];
            let mut out = vec![T::default(); count];
            super::gather::scatterv_in(
                &c.core,
                &Group::all(&c.core),
                root as usize,
                tag,
                &send,
                &counts,
                &mut out,
            )?;
            Ok(out)
        })
    }

    /// Non-blocking [`Communicator::allgather`]: `wait` returns every rank's block.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iallgather<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        let n = self.size() as usize;
        self.spawn("allgather", tag, move |c, tag| {
            let counts = vec![send.len(); n];
            let mut out = vec![T::default(); n * send.len()];
            let d = displs(&counts);
            let me = c.rank() as usize;
            out[d[me]..d[me] + send.len()].copy_from_slice(&send);
            super::gather::allgatherv_in(&c.core, &Group::all(&c.core), tag, &mut out, &counts)?;
            Ok(out)
        })
    }

    /// Non-blocking [`Communicator::alltoall`]: `wait` returns the received blocks.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; a `send` whose length is not a multiple of the size.
    pub fn ialltoall<T: Element>(&self, send: Vec<T>) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        let n = self.size() as usize;
        check("ialltoall", EVEN_SPLIT, send.len() % n, 0)?;
        self.spawn("alltoall", tag, move |c, tag| {
            let counts = vec![send.len() / n; n];
            let mut out = vec![T::default(); send.len()];
            super::gather::alltoallv_in(
                &c.core,
                &Group::all(&c.core),
                tag,
                &send,
                &counts,
                &mut out,
                &counts,
            )?;
            Ok(out)
        })
    }

    /// Non-blocking [`Communicator::scan`]: `wait` returns the prefix result.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    pub fn iscan<T: Element>(
        &self,
        mut buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let tag = self.core.next_coll_tag();
        self.spawn("scan", tag, move |c, tag| {
            super::reduce::scan(&c.core, &Group::all(&c.core), tag, &mut buf, &op)?;
            Ok(buf)
        })
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
        self.spawn("reduce_scatter", tag, move |c, tag| {
            let mut out = vec![T::default(); counts[c.rank() as usize]];
            super::reduce::reduce_scatter(
                &c.core,
                &Group::all(&c.core),
                tag,
                send,
                &counts,
                &op,
                &mut out,
            )?;
            Ok(out)
        })
    }
}
