//! One collective through the segment as a resumable state machine: [`SmColl::poll`]
//! never blocks; it advances as far as the flags allow and says whether it is done.

use std::sync::atomic::Ordering;

use super::kind::Kind;
use super::{halves, pair, post_record, seq_ge, SmComm, Watch, EVERYONE, FAILED, NOBODY, VALID};
use crate::coll::args::{bytes, bytes_mut};
use crate::element::{Element, Op};
use crate::error::MsgError;

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

/// Where one collective is on one member: owned, so that a non-blocking collective's
/// schedule keeps it between polls ([`SmColl::resume`], [`SmColl::into_state`]).
pub(crate) struct SmState<T: Element> {
    seq: u32,
    /// The collective's number (its base tag over 256), the same on every rank.
    no: u32,
    kind: Kind,
    /// The root's index among the local members.
    root: usize,
    pub(crate) stage: Stage,
    /// The next member the root collects.
    next: usize,
    /// The root's running result when it is not member 0 (reductions in rank order).
    acc: Vec<T>,
    tmp: Vec<T>,
    /// The root found a member whose length differs: (member, its bytes).
    disagree: Option<(usize, usize)>,
    /// The least sequence number the root saw posted while it collected (every member
    /// posted it or a later one).
    least: u32,
    /// Every member collects (and reduces) for itself and nobody publishes: one step
    /// instead of a fan-in and a fan-out (barrier and allreduce among few members).
    flat: bool,
}

/// One collective on one member: its state over the segment, the member's buffer and
/// the operator.
pub(crate) struct SmColl<'a, T: Element> {
    sm: &'a SmComm,
    /// This member's contribution in, its result out (for a broadcast, the root's data in
    /// and everyone's result out).
    buf: &'a mut [T],
    op: Option<&'a Op<T>>,
    st: SmState<T>,
}

impl<T: Element> SmState<T> {
    /// What waits for this collective watch for, with `bytes` on this member.
    pub(crate) fn watch(&self, bytes: usize) -> Watch {
        Watch {
            seq: self.seq,
            no: self.no,
            bytes,
            op: self.kind.name(),
            lens: self.kind.contributes(),
        }
    }

    /// Ends the collective on this member after an error found while waiting: once
    /// posted, the next collective may post (the communicator's collectives are not to
    /// be used after such an error, but none of this member's waits hangs on it).
    pub(crate) fn abandon(&mut self, sm: &SmComm) {
        if self.stage != Stage::Done && (self.stage != Stage::Post || sm.may_post(self.seq)) {
            sm.finished(self.seq);
        }
        self.stage = Stage::Done;
    }

    /// Collective `kind` number `no` with sequence number `seq` (from
    /// [`SmComm::take_seq`]) around member `root`, or *flat* (see [`SmColl::flat`]; its
    /// root is this member).
    pub(crate) fn new(sm: &SmComm, seq: u32, no: u32, kind: Kind, root: usize, flat: bool) -> Self {
        debug_assert!(!flat || matches!(kind, Kind::Barrier | Kind::Allreduce));
        SmState {
            seq,
            no,
            kind,
            root: if flat { sm.me } else { root },
            stage: Stage::Post,
            next: 0,
            least: seq,
            acc: Vec::new(),
            tmp: Vec::new(),
            disagree: None,
            flat,
        }
    }
}

impl<'a, T: Element> SmColl<'a, T> {
    /// Starts collective `kind` with sequence number `seq` (from [`SmComm::take_seq`]).
    /// `op` is needed by reductions; `buf` must fit a slot.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        sm: &'a SmComm,
        seq: u32,
        no: u32,
        kind: Kind,
        root: usize,
        buf: &'a mut [T],
        op: Option<&'a Op<T>>,
    ) -> Self {
        debug_assert!(std::mem::size_of_val(buf) <= sm.slot);
        let st = SmState::new(sm, seq, no, kind, root, false);
        SmColl { sm, buf, op, st }
    }

    /// Picks a collective up where [`SmColl::into_state`] left it, over the same segment,
    /// buffer contents and operator.
    pub(crate) fn resume(
        sm: &'a SmComm,
        buf: &'a mut [T],
        op: Option<&'a Op<T>>,
        st: SmState<T>,
    ) -> Self {
        SmColl { sm, buf, op, st }
    }

    /// The collective's state, to resume later.
    pub(crate) fn into_state(self) -> SmState<T> {
        self.st
    }

    /// Where it is.
    pub(crate) fn stage(&self) -> Stage {
        self.st.stage
    }

    /// What its waits watch for (see [`SmComm::drive`]).
    pub(crate) fn watch(&self) -> Watch {
        self.st.watch(self.nbytes())
    }

    /// Ends the collective on this member after an error found while waiting (see
    /// [`SmState::abandon`]).
    pub(crate) fn abandon(&mut self) {
        self.st.abandon(self.sm);
    }

    /// Makes a barrier or an allreduce *flat*: every member posts its contribution and
    /// waits for everyone's, reducing them itself in rank order; no root, no result slot.
    pub(crate) fn flat(mut self) -> Self {
        debug_assert!(matches!(self.st.kind, Kind::Barrier | Kind::Allreduce));
        self.st.flat = true;
        self.st.root = self.sm.me;
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
        if self.st.stage == Stage::Post {
            // Posting `s` says `s - 1` is finished here: a non-blocking collective still in
            // flight before this one must finish first.
            if !sm.may_post(self.st.seq) {
                return Ok(false);
            }
            if self.st.kind.contributes() {
                // Data slot and length `s % 2` were last read in `s - 2` or before:
                // whoever read them must be past it.
                if !sm.slot_free(self.st.seq) {
                    return Ok(false);
                }
                let readers = if self.st.flat {
                    EVERYONE
                } else if sm.me == self.st.root {
                    NOBODY
                } else {
                    self.st.root as u32
                };
                sm.slot_read_by(self.st.seq, readers);
                if sm.me != self.st.root || self.st.flat {
                    sm.write_data(self.st.seq, bytes(self.buf));
                }
                sm.len_of(sm.me, self.st.seq)
                    .store(self.nbytes() as u32, Ordering::Relaxed);
            }
            // The post and its record in one store.
            let rec = post_record(self.st.seq, self.st.no);
            sm.posted(sm.me)
                .store(pair(self.st.seq, rec), Ordering::SeqCst);
            // Anyone may wait for a post (a root, a flat member, a contributor about to
            // write its slot).
            sm.wake_all();
            self.st.stage = if self.st.flat || sm.me == self.st.root {
                Stage::Collect
            } else if self.st.kind == Kind::Reduce {
                // A contributor is done once its part is in its slot, which it reuses
                // only once every member posted a later collective (the root reads the
                // slot before it posts its next one).
                self.sm.finished(self.st.seq);
                Stage::Done
            } else {
                Stage::Await
            };
        }
        if self.st.stage == Stage::Collect {
            if !self.collect()? {
                return Ok(false);
            }
            if self.st.flat {
                self.st.stage = Stage::Done;
                self.sm.finished(self.st.seq);
                if let Some((m, got)) = self.st.disagree {
                    return Err(MsgError::Mismatch {
                        op: self.st.kind.name(),
                        from: Some(sm.members[m]),
                        got,
                        want: self.nbytes(),
                    });
                }
                return Ok(true);
            }
            self.st.stage = Stage::Publish;
        }
        match self.st.stage {
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
        if self.st.stage == Stage::Publish {
            self.publish()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The root's collection: members in rank order as their posts arrive.
    fn collect(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        let need = if self.st.kind == Kind::Bcast {
            self.st.seq.wrapping_sub(sm.outs as u32 - 1)
        } else {
            self.st.seq
        };
        let mine = self.nbytes();
        // A broadcast's root, which reads no contribution, knows without a look that
        // every member is far enough along when an earlier look showed it (it runs
        // ahead of them by up to `outs - 1` broadcasts, looking at their lines once in
        // that many).
        if self.st.kind == Kind::Bcast && self.st.next == 0 && sm.knows_all_posted(need) {
            self.st.next = sm.n();
            self.st.least = need;
        }
        // Touch every line still to be read first: their loads overlap, instead of one
        // line transfer after another in the loop below.
        if sm.n() - self.st.next > 2 {
            for m in self.st.next..sm.n() {
                std::hint::black_box(sm.posted(m).load(Ordering::Relaxed));
            }
        }
        while self.st.next < sm.n() {
            let m = self.st.next;
            let (posted, rec) = halves(sm.posted(m).load(Ordering::Acquire));
            if !seq_ge(posted, need) {
                return Ok(false);
            }
            if seq_ge(self.st.least, posted) {
                self.st.least = posted;
            }
            // A post of this sequence number for another collective (its record came
            // with it): the members' numbering split at an earlier collective whose
            // paths disagreed.
            if posted == self.st.seq
                && rec != post_record(self.st.seq, self.st.no)
                && self.st.disagree.is_none()
            {
                let len = if self.st.kind.contributes() {
                    sm.len_of(m, self.st.seq).load(Ordering::Relaxed) as usize
                } else {
                    0
                };
                self.st.disagree = Some((m, len));
            }
            if self.st.kind.contributes() {
                let len = sm.len_of(m, self.st.seq).load(Ordering::Relaxed) as usize;
                if len != mine && self.st.disagree.is_none() {
                    self.st.disagree = Some((m, len));
                }
                if self.st.disagree.is_none() {
                    self.combine(m);
                }
            }
            self.st.next += 1;
        }
        if self.st.kind.contributes() && sm.me != 0 && self.st.disagree.is_none() {
            self.buf.copy_from_slice(&self.st.acc);
        }
        sm.saw_all_posted(self.st.least);
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
            self.st.tmp.resize(self.buf.len(), T::default());
            sm.read_data(m, self.st.seq, bytes_mut(&mut self.st.tmp));
            op.combine(self.buf, &self.st.tmp, true);
            return;
        }
        let contribution: &[T] = if m == me {
            self.buf
        } else {
            self.st.tmp.resize(self.buf.len(), T::default());
            sm.read_data(m, self.st.seq, bytes_mut(&mut self.st.tmp));
            &self.st.tmp
        };
        if m == 0 {
            self.st.acc = contribution.to_vec();
        } else {
            op.combine(&mut self.st.acc, contribution, true);
        }
    }

    /// The root publishes the result (or the members' disagreement) and is done.
    ///
    /// # Errors
    /// [`MsgError::Mismatch`] when a member's length differed from the root's.
    pub(crate) fn publish(&mut self) -> Result<(), MsgError> {
        let sm = self.sm;
        let k = self.st.seq as usize % sm.outs;
        let len = match self.st.disagree {
            Some(_) => FAILED,
            None => {
                if self.st.kind.publishes_data() {
                    sm.write_out(k, bytes(self.buf));
                }
                self.nbytes() as u32
            }
        };
        sm.out_len(k).store(len, Ordering::Relaxed);
        // `ready` and the collective's number in one store.
        sm.ready(k)
            .store(pair(self.st.seq, VALID | self.st.no), Ordering::SeqCst);
        sm.wake_all();
        self.st.stage = Stage::Done;
        self.sm.finished(self.st.seq);
        match self.st.disagree {
            Some((m, got)) => Err(MsgError::Mismatch {
                op: self.st.kind.name(),
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
        if self.st.disagree.is_none() {
            self.st.disagree = Some((self.sm.me, 0));
        }
        // The root's own error is the caller's.
        let _ = self.publish();
    }

    /// A non-root waits for the root's result.
    fn await_result(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        let k = self.st.seq as usize % sm.outs;
        let (ready, no) = halves(sm.ready(k).load(Ordering::Acquire));
        if ready != self.st.seq {
            return Ok(false);
        }
        self.st.stage = Stage::Done;
        self.sm.finished(self.st.seq);
        let len = sm.out_len(k).load(Ordering::Relaxed);
        let mine = self.nbytes();
        // Published for another collective: the members' numbering split earlier.
        if no != VALID | self.st.no {
            return Err(MsgError::Mismatch {
                op: self.st.kind.name(),
                from: Some(sm.members[self.st.root]),
                got: if len == FAILED { 0 } else { len as usize },
                want: mine,
            });
        }
        if len == FAILED
            || (self.st.kind.publishes_data() || self.st.kind.contributes()) && len as usize != mine
        {
            return Err(MsgError::Mismatch {
                op: self.st.kind.name(),
                from: Some(sm.members[self.st.root]),
                got: if len == FAILED { 0 } else { len as usize },
                want: mine,
            });
        }
        if self.st.kind.publishes_data() {
            sm.read_out(k, bytes_mut(self.buf));
        }
        // The root published only once every member posted this collective (a
        // broadcast's root waits for less).
        if self.st.kind != Kind::Bcast {
            sm.saw_all_posted(self.st.seq);
        }
        Ok(true)
    }
}
