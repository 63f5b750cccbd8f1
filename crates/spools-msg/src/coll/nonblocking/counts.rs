//! The non-blocking collectives with a count per rank (gatherv, scatterv, allgatherv,
//! alltoallv) and the exclusive scan. Each goes through the segment where one serves
//! it: an allgatherv, whose counts every rank has, when its largest part fits; an
//! exclusive scan unless the segment's creator sends scans to the messages; gatherv,
//! scatterv and alltoallv, whose counts only some ranks know, whatever their counts (a
//! rule every rank applies alike), as their blocking forms do, with the blocks that do
//! not fit a slot sent by messages afterwards (`sm/varied_job.rs`). Each takes its place
//! in the communicator's order before it checks its arguments, as the other non-blocking
//! collectives do.

use super::{first, CollRequest};
use crate::coll::args::{block, bytes, check, check_alltoallv, check_rooted, ONE_COUNT_PER_RANK};
use crate::coll::group::Group;
use crate::coll::plans;
use crate::coll::sm::{self as shm, Parts, SmJob};
use crate::communicator::Communicator;
use crate::element::{Element, Op};
use crate::error::MsgError;

impl Communicator {
    /// Non-blocking [`Communicator::gatherv`]: rank i sends `send` (`counts[i]`
    /// elements); `wait` returns every rank's block, one after the other in rank order,
    /// at the root (an empty vector elsewhere). Every rank passes `counts` (only the
    /// root's and this rank's own entry matter).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size() as usize);
    /// // Rank r sends r + 1 copies of r.
    /// let counts: Vec<usize> = (1..=n).collect();
    /// let req = world.igatherv(vec![me; me as usize + 1], &counts, 0).unwrap();
    /// let all = req.wait().unwrap();
    /// if me == 0 {
    ///     let want: Vec<u32> = (0..n as u32).flat_map(|r| vec![r; r as usize + 1]).collect();
    ///     assert_eq!(all, want);
    /// }
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`]; [`MsgError::BadBuffer`] for `counts` without one entry per
    /// rank or a `send` of another length than this rank's count; from `wait`, a
    /// block whose length differs from the root's count for it
    /// ([`MsgError::Mismatch`], at the root), a dead rank.
    pub fn igatherv<T: Element>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        let total: usize = counts.iter().sum();
        check_rooted("igatherv", &this.core, counts, send.len(), total, root)?;
        // Within one host every rank takes the segment, whatever its counts.
        if let Ok(sm) = shm::serving(&this.core, tag, shm::Kind::Gather, 0) {
            let start = shm::VariedStart::gatherv(sm, tag, root as usize, (send, counts));
            let job = SmJob::start_varied(&this.core, tag, start);
            return Ok(Self::start_job("gatherv", job, |b| b));
        }
        let out = if this.rank() == root {
            let mut out = vec![T::default(); total];
            out[block(counts, root as usize)].copy_from_slice(&send);
            out
        } else {
            Vec::new()
        };
        let mut s = this.schedule(tag, vec![out, send]);
        let g = Group::all(&this.core);
        plans::gather(&mut s, &g, root as usize, tag, (1, 0), counts);
        Self::start("gatherv", s, first)
    }

    /// Non-blocking [`Communicator::scatterv`]: block i of the root's `send` (`counts[i]`
    /// elements, one after the other) goes to rank i; `wait` returns this rank's block.
    /// Every rank passes `counts` (only the root's and this rank's own entry matter);
    /// `send` is ignored but at the root.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size() as usize);
    /// let counts: Vec<usize> = (1..=n).collect();
    /// let send: Vec<u32> = if me == 0 {
    ///     (0..n as u32).flat_map(|r| vec![r; r as usize + 1]).collect()
    /// } else {
    ///     Vec::new()
    /// };
    /// let mine = world.iscatterv(send, &counts, 0).unwrap().wait().unwrap();
    /// assert_eq!(mine, vec![me; me as usize + 1]);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::igatherv`], with the root's `send` holding the sum of the
    /// counts; from `wait`, a block whose length differs from this rank's count
    /// ([`MsgError::Mismatch`], at that rank).
    pub fn iscatterv<T: Element>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        root: u32,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        this.core.job_rank(root)?;
        check(
            "iscatterv",
            ONE_COUNT_PER_RANK,
            counts.len(),
            this.size() as usize,
        )?;
        let me = this.rank() as usize;
        if this.rank() == root {
            check_rooted(
                "iscatterv",
                &this.core,
                counts,
                counts[me],
                send.len(),
                root,
            )?;
        }
        if let Ok(sm) = shm::serving(&this.core, tag, shm::Kind::Scatter, 0) {
            let what = (send, counts, counts[me]);
            let start = shm::VariedStart::scatterv(sm, tag, root as usize, what);
            let job = SmJob::start_varied(&this.core, tag, start);
            return Ok(Self::start_job("scatterv", job, |b| b));
        }
        let mut out = vec![T::default(); counts[me]];
        if this.rank() == root {
            out.copy_from_slice(&send[block(counts, me)]);
        }
        let mut s = this.schedule(tag, vec![out, send]);
        let g = Group::all(&this.core);
        plans::scatter(&mut s, &g, root as usize, tag, (1, 0), counts);
        Self::start("scatterv", s, first)
    }

    /// Non-blocking [`Communicator::allgatherv`]: rank i sends `send` (`counts[i]`
    /// elements, the same `counts` on every rank); `wait` returns every rank's block, one
    /// after the other in rank order.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size() as usize);
    /// let counts: Vec<usize> = (1..=n).collect();
    /// let all = world.iallgatherv(vec![me; me as usize + 1], &counts).unwrap().wait().unwrap();
    /// let want: Vec<u32> = (0..n as u32).flat_map(|r| vec![r; r as usize + 1]).collect();
    /// assert_eq!(all, want);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for `counts` without one entry per rank or a `send` of
    /// another length than this rank's count; from `wait`, a rank's block of another
    /// length than its count ([`MsgError::Mismatch`]), a dead rank.
    pub fn iallgatherv<T: Element>(
        &self,
        send: Vec<T>,
        counts: &[usize],
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let n = this.size() as usize;
        let me = this.rank() as usize;
        check("iallgatherv", ONE_COUNT_PER_RANK, counts.len(), n)?;
        check(
            "iallgatherv",
            "send must hold this rank's count",
            send.len(),
            counts[me],
        )?;
        let mut out = vec![T::default(); counts.iter().sum()];
        out[block(counts, me)].copy_from_slice(&send);
        // Decided by the largest part, the same on every rank.
        let size = std::mem::size_of::<T>();
        let largest = counts.iter().copied().max().unwrap_or(0) * size;
        let split = match shm::serving(&this.core, tag, shm::Kind::Allgather, largest) {
            Ok(sm) => {
                let lens: Vec<usize> = counts.iter().map(|&k| k * size).collect();
                let parts = Parts::varied(bytes(&send).to_vec(), &lens);
                let what = (shm::Kind::Allgather, None);
                let job = SmJob::start_flat(&this.core, sm, tag, what, out, parts);
                return Ok(Self::start_job("allgatherv", job, |b| b));
            }
            Err(w) => w,
        };
        let mut s = this.schedule(tag, vec![out]);
        s.watch_segment(split);
        let g = Group::all(&this.core);
        plans::ring_allgather(&mut s, &g, tag, 0, counts);
        Self::start("allgatherv", s, first)
    }

    /// Non-blocking [`Communicator::alltoallv`]: block j of `send` (`send_counts[j]`
    /// elements, one after the other) goes to rank j; `wait` returns the blocks received,
    /// `recv_counts[i]` elements from rank i, one after the other.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size() as usize);
    /// // Rank i sends j + 1 copies of i to rank j.
    /// let send_counts: Vec<usize> = (1..=n).collect();
    /// let send: Vec<u32> = (0..n).flat_map(|j| vec![me; j + 1]).collect();
    /// let recv_counts = vec![me as usize + 1; n];
    /// let got = world.ialltoallv(send, &send_counts, &recv_counts).unwrap().wait().unwrap();
    /// let want: Vec<u32> = (0..n as u32).flat_map(|i| vec![i; me as usize + 1]).collect();
    /// assert_eq!(got, want);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for counts without one entry per rank, a `send` that does
    /// not hold the sum of `send_counts`, or a block to this rank itself whose counts
    /// differ; from `wait`, a block whose length differs from its receiver's count
    /// ([`MsgError::Mismatch`], at the receiver), a dead rank.
    pub fn ialltoallv<T: Element>(
        &self,
        send: Vec<T>,
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let n = this.size() as usize;
        let me = this.rank() as usize;
        let counts = (send_counts, recv_counts);
        check_alltoallv("ialltoallv", (n, me), send.len(), counts)?;
        if let Ok(sm) = shm::serving(&this.core, tag, shm::Kind::Alltoall, 0) {
            let start = shm::VariedStart::alltoallv(sm, tag, send, counts);
            let job = SmJob::start_varied(&this.core, tag, start);
            return Ok(Self::start_job("alltoallv", job, |b| b));
        }
        let mut out = vec![T::default(); recv_counts.iter().sum()];
        out[block(recv_counts, me)].copy_from_slice(&send[block(send_counts, me)]);
        let mut s = this.schedule(tag, vec![out, send]);
        let g = Group::all(&this.core);
        plans::alltoallv(&mut s, &g, tag, (1, 0), (send_counts, recv_counts));
        Self::start("alltoallv", s, first)
    }

    /// Non-blocking [`Communicator::exscan`]: `wait` returns the parts of ranks 0 to the
    /// one before this one combined with `op` in rank order (rank 0 gets `buf` back).
    ///
    /// ```
    /// use spools::Op;
    /// let world = spools::init().unwrap();
    /// let me = u64::from(world.rank());
    /// let below = world.iexscan(vec![me + 1], Op::Sum).unwrap().wait().unwrap();
    /// // Ranks 0 to me - 1 sent 1, 2, ..., me.
    /// assert_eq!(below, [if me == 0 { 1 } else { me * (me + 1) / 2 }]);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`]; from `wait`, a part of another length than its
    /// left neighbour's ([`MsgError::Mismatch`]), a dead rank.
    pub fn iexscan<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
    ) -> Result<CollRequest<Vec<T>>, MsgError> {
        self.nonblocking().start_scan(buf, op, shm::Kind::Exscan)
    }
}
