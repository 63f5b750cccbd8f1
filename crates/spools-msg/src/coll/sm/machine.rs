//! One collective through the segment as a resumable state machine: [`SmColl::poll`]
//! never blocks; it advances as far as the flags allow and says whether it is done.

use std::sync::atomic::Ordering;

use super::{seq_ge, SmComm, FAILED};
use crate::coll::args::{bytes, bytes_mut};
use crate::element::{Element, Op};
use crate::error::MsgError;

/// What a collective does with its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No data.
    Barrier,
    /// The root's buffer to everyone.
    Bcast,
    /// Everyone's buffer combined into the root's.
    Reduce,
    /// Everyone's buffer combined into everyone's.
    Allreduce,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "bcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
        }
    }

    fn contributes(self) -> bool {
        matches!(self, Kind::Reduce | Kind::Allreduce)
    }

    fn publishes_data(self) -> bool {
        matches!(self, Kind::Bcast | Kind::Allreduce)
    }
}

/// Where a collective is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Not yet posted.
    Post,
    /// The root waits for members' posts (and reduces them in order).
    Collect,
    /// The root has everything and is about to publish the result.
    Publish,
    /// A non-root waits for the result.
    Await,
    /// Finished on this member.
    Done,
}

/// One collective on one member.
pub(crate) struct SmColl<'a, T: Element> {
    sm: &'a SmComm,
    seq: u32,
    kind: Kind,
    /// The root's index among the local members.
    root: usize,
    /// This member's contribution in, its result out (for a broadcast, the root's data in
    /// and everyone's result out).
    buf: &'a mut [T],
    op: Option<&'a Op<T>>,
    pub(crate) stage: Stage,
    /// The next member the root collects.
    next: usize,
    /// The root's running result when it is not member 0 (reductions in rank order).
    acc: Vec<T>,
    tmp: Vec<T>,
    /// The root found a member whose length differs: (member, its bytes).
    disagree: Option<(usize, usize)>,
    /// Every member collects (and reduces) for itself and nobody publishes: one step
    /// instead of a fan-in and a fan-out (barrier and allreduce among few members).
    flat: bool,
}

impl<'a, T: Element> SmColl<'a, T> {
    /// Starts collective `kind` with sequence number `seq` (from [`SmComm::take_seq`]).
    /// `op` is needed by reductions; `buf` must fit a slot.
    pub(crate) fn new(
        sm: &'a SmComm,
        seq: u32,
        kind: Kind,
        root: usize,
        buf: &'a mut [T],
        op: Option<&'a Op<T>>,
    ) -> Self {
        debug_assert!(std::mem::size_of_val(buf) <= sm.slot);
        SmColl {
            sm,
            seq,
            kind,
            root,
            buf,
            op,
            stage: Stage::Post,
            next: 0,
            acc: Vec::new(),
            tmp: Vec::new(),
            disagree: None,
            flat: false,
        }
    }

    /// Makes a barrier or an allreduce *flat*: every member posts its contribution and
    /// waits for everyone's, reducing them itself in rank order; no root, no result slot.
    pub(crate) fn flat(mut self) -> Self {
        debug_assert!(matches!(self.kind, Kind::Barrier | Kind::Allreduce));
        self.flat = true;
        self.root = self.sm.me;
        self
    }

    /// This member's buffer (for a root between collecting and publishing, the result so
    /// far, which a hierarchical collective combines with other hosts' in between).
    pub(crate) fn buf(&mut self) -> &mut [T] {
        self.buf
    }

    fn nbytes(&self) -> usize {
        std::mem::size_of_val(self.buf)
    }

    /// Advances as far as the flags allow; `Ok(true)` once done on this member, and
    /// `Ok(false)` for a root that reached [`Stage::Publish`] (call
    /// [`SmColl::publish`] next).
    ///
    /// # Errors
    /// [`MsgError::Mismatch`] when members' lengths disagree (every member of the
    /// collective gets it).
    pub(crate) fn poll(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        if self.stage == Stage::Post {
            if self.kind.contributes() {
                // Data slot and length `s % 2` were last read in `s - 2`: everyone must
                // be past it.
                let prev = self.seq.wrapping_sub(1);
                if !(0..sm.n()).all(|m| seq_ge(sm.posted(m).load(Ordering::Acquire), prev)) {
                    return Ok(false);
                }
                if sm.me != self.root || self.flat {
                    sm.write_data(self.seq, bytes(self.buf));
                }
                sm.len_of(sm.me, self.seq)
                    .store(self.nbytes() as u32, Ordering::Relaxed);
            }
            sm.posted(sm.me).store(self.seq, Ordering::SeqCst);
            // Anyone may wait for a post (a root, a flat member, a contributor about to
            // write its slot).
            sm.wake_all();
            self.stage = if self.flat || sm.me == self.root {
                Stage::Collect
            } else {
                Stage::Await
            };
        }
        if self.stage == Stage::Collect {
            if !self.collect()? {
                return Ok(false);
            }
            if self.flat {
                self.stage = Stage::Done;
                if let Some((m, got)) = self.disagree {
                    return Err(MsgError::Mismatch {
                        op: self.kind.name(),
                        from: Some(sm.members[m]),
                        got,
                        want: self.nbytes(),
                    });
                }
                return Ok(true);
            }
            self.stage = Stage::Publish;
        }
        match self.stage {
            Stage::Publish => Ok(false),
            Stage::Await => self.await_result(),
            _ => Ok(true),
        }
    }

    /// Polls to the end, publishing when this member is the root.
    ///
    /// # Errors
    /// As [`SmColl::poll`].
    pub(crate) fn poll_through(&mut self) -> Result<bool, MsgError> {
        if self.poll()? {
            return Ok(true);
        }
        if self.stage == Stage::Publish {
            self.publish()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The root's collection: members in rank order as their posts arrive.
    fn collect(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        let need = if self.kind == Kind::Bcast {
            self.seq.wrapping_sub(sm.outs as u32 - 1)
        } else {
            self.seq
        };
        let mine = self.nbytes();
        while self.next < sm.n() {
            let m = self.next;
            if !seq_ge(sm.posted(m).load(Ordering::Acquire), need) {
                return Ok(false);
            }
            if self.kind.contributes() {
                let len = sm.len_of(m, self.seq).load(Ordering::Relaxed) as usize;
                if len != mine && self.disagree.is_none() {
                    self.disagree = Some((m, len));
                }
                if self.disagree.is_none() {
                    self.combine(m);
                }
            }
            self.next += 1;
        }
        if self.kind.contributes() && sm.me != 0 && self.disagree.is_none() {
            self.buf.copy_from_slice(&self.acc);
        }
        Ok(true)
    }

    /// Folds member `m`'s contribution into the running result, in rank order.
    fn combine(&mut self, m: usize) {
        let sm = self.sm;
        let Some(op) = self.op else { return };
        let me = sm.me;
        if me == 0 {
            // The running result lives in this member's own buffer (member 0 first).
            if m == 0 {
                return;
            }
            self.tmp.resize(self.buf.len(), T::default());
            sm.read_data(m, self.seq, bytes_mut(&mut self.tmp));
            op.combine(self.buf, &self.tmp, true);
            return;
        }
        let contribution: &[T] = if m == me {
            self.buf
        } else {
            self.tmp.resize(self.buf.len(), T::default());
            sm.read_data(m, self.seq, bytes_mut(&mut self.tmp));
            &self.tmp
        };
        if m == 0 {
            self.acc = contribution.to_vec();
        } else {
            op.combine(&mut self.acc, contribution, true);
        }
    }

    /// The root publishes the result (or the members' disagreement) and is done.
    ///
    /// # Errors
    /// [`MsgError::Mismatch`] when a member's length differed from the root's.
    pub(crate) fn publish(&mut self) -> Result<(), MsgError> {
        let sm = self.sm;
        let k = self.seq as usize % sm.outs;
        let len = match self.disagree {
            Some(_) => FAILED,
            None => {
                if self.kind.publishes_data() {
                    sm.write_out(k, bytes(self.buf));
                }
                self.nbytes() as u32
            }
        };
        sm.out_len(k).store(len, Ordering::Relaxed);
        sm.ready(k).store(self.seq, Ordering::SeqCst);
        sm.wake_all();
        self.stage = Stage::Done;
        match self.disagree {
            Some((m, got)) => Err(MsgError::Mismatch {
                op: self.kind.name(),
                from: Some(sm.members[m]),
                got,
                want: self.nbytes(),
            }),
            None => Ok(()),
        }
    }

    /// The root tells the members that the collective failed (they get
    /// [`MsgError::Mismatch`]) and is done.
    pub(crate) fn fail(&mut self) {
        if self.disagree.is_none() {
            self.disagree = Some((self.sm.me, 0));
        }
        // The root's own error is the caller's.
        let _ = self.publish();
    }

    /// A non-root waits for the root's result.
    fn await_result(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        let k = self.seq as usize % sm.outs;
        if sm.ready(k).load(Ordering::Acquire) != self.seq {
            return Ok(false);
        }
        self.stage = Stage::Done;
        let len = sm.out_len(k).load(Ordering::Relaxed);
        let mine = self.nbytes();
        if len == FAILED
            || (self.kind.publishes_data() || self.kind.contributes()) && len as usize != mine
        {
            return Err(MsgError::Mismatch {
                op: self.kind.name(),
                from: Some(sm.members[self.root]),
                got: if len == FAILED { 0 } else { len as usize },
                want: mine,
            });
        }
        if self.kind.publishes_data() {
            sm.read_out(k, bytes_mut(self.buf));
        }
        Ok(true)
    }
}
