//! One collective through the segment as a resumable state machine: [`SmColl::poll`]
//! never blocks; it advances as far as the flags allow and says whether it is done.

use std::sync::atomic::Ordering;

use super::kind::Kind;
use super::{
    halves, pair, post_record, seq_ge, Readers, SmComm, Watch, FAILED, FAILED_PART, SMALL, VALID,
};
use crate::coll::args::{bytes, bytes_mut};
use crate::element::{Element, Op};
use crate::error::MsgError;
use spools_coll::table::{locate, Block};

/// Members per group of a tree (a leader and up to three others).
const GROUP: usize = 4;
/// From this many members on a host, barrier, reduce and allreduce gather over a tree of
/// two levels: each group's leader folds its group's parts, in rank order, and posts the
/// group's part, and the root reads the leaders' (and its own group's members') lines
/// alone: about n / 4 + 3 lines instead of n - 1.
pub(crate) const TREE_MIN: usize = 8;

/// Where a collective is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// A tree's group leader folds its group's parts before it posts.
    Gather,
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

/// Where one collective is on one member (what [`SmColl`] runs over).
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
    /// The root's running result when it is not member 0 (reductions in rank order):
    /// in `acc_small` up to [`SMALL`] elements (no allocation per call), else in `acc`
    /// ([`scratch`]).
    acc: Vec<T>,
    acc_small: [T; SMALL],
    tmp: Vec<T>,
    /// The root found a member whose length differs: (member, its bytes).
    disagree: Option<(usize, usize)>,
    /// The least sequence number the root saw posted while it collected (every member
    /// posted it or a later one).
    least: u32,
    /// Every member collects (and reduces) for itself and nobody publishes: one step
    /// instead of a fan-in and a fan-out (barrier and allreduce among few members).
    flat: bool,
    /// The gather goes over a tree of groups ([`TREE_MIN`]).
    tree: bool,
    /// A scatterv: the root's publication is a package (`table.rs`) in which each member
    /// finds its block, or which says the blocks go by messages.
    varied: bool,
    /// A scatterv's member found that its block goes by messages.
    by_messages: bool,
}

/// One collective on one member: its state over the segment, the member's buffer and
/// the operator.
pub(crate) struct SmColl<'a, T: Element> {
    sm: &'a SmComm,
    /// This member's contribution in, its result out (for a broadcast, the root's data in
    /// and everyone's result out).
    buf: &'a mut [T],
    /// A scatter's root: every member's part, which it publishes (its own part is
    /// `buf`, copied by the caller).
    whole: Option<&'a [T]>,
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
            span: 1,
            deep: self.deep(),
        }
    }

    /// Its sequence number.
    pub(crate) fn seq(&self) -> u32 {
        self.seq
    }

    /// Whether its posts go through the deep ring ([`Kind::deep`]).
    fn deep(&self) -> bool {
        self.kind.deep()
    }

    /// Its kind.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Ends the collective on this member after an error found while waiting: once
    /// posted, the next collective may post (the communicator's collectives are not to
    /// be used after such an error, but none of this member's waits hangs on it).
    pub(crate) fn abandon(&mut self, sm: &SmComm) {
        let unposted = matches!(self.stage, Stage::Gather | Stage::Post);
        if self.stage != Stage::Done && (!unposted || sm.may_post(self.seq)) {
            sm.finished(self.seq);
        }
        self.stage = Stage::Done;
    }

    /// Collective `kind` number `no` with sequence number `seq` (from
    /// [`SmComm::take_seq`]) around member `root`, or *flat* (see [`SmColl::flat`]; its
    /// root is this member).
    pub(crate) fn new(sm: &SmComm, seq: u32, no: u32, kind: Kind, root: usize, flat: bool) -> Self {
        debug_assert!(!flat || matches!(kind, Kind::Barrier | Kind::Allreduce));
        let tree = !flat && !kind.fans_out() && sm.n() >= TREE_MIN;
        let root = if flat { sm.me } else { root };
        // A group's leader is its root's member if it holds the root, else its first.
        let leads = tree && sm.me != root && leader(sm.me / GROUP, root) == sm.me;
        SmState {
            seq,
            no,
            kind,
            root,
            stage: if leads { Stage::Gather } else { Stage::Post },
            next: if leads { sm.me + 1 } else { 0 },
            least: seq,
            acc: Vec::new(),
            acc_small: [T::default(); SMALL],
            tmp: Vec::new(),
            disagree: None,
            flat,
            tree,
            varied: false,
            by_messages: false,
        }
    }

    /// Scatterv `seq` (number `no`) from member `root` (see [`SmColl::scatterv`]).
    pub(crate) fn scatterv(sm: &SmComm, seq: u32, no: u32, root: usize) -> Self {
        let mut st = SmState::new(sm, seq, no, Kind::Scatter, root, false);
        st.varied = true;
        st
    }

    /// The member whose line the root reads `i`-th, in rank order, if any: every member
    /// (flat, or no tree); over a tree, the leaders of the groups before and after the
    /// root's, and the members of the root's own group.
    fn source(&self, i: usize, n: usize) -> Option<usize> {
        if !self.tree {
            return (i < n).then_some(i);
        }
        let rg = self.root / GROUP;
        let own = (rg * GROUP..((rg + 1) * GROUP).min(n)).len();
        let m = if i < rg {
            i * GROUP
        } else if i < rg + own {
            rg * GROUP + (i - rg)
        } else {
            (rg + 1 + (i - rg - own)) * GROUP
        };
        (m < n).then_some(m)
    }

    /// Who reads this member's part: everyone (flat), nobody (the root), its group's
    /// leader (over a tree), else the root.
    fn readers(&self, me: usize) -> Readers {
        if self.flat {
            return Readers::Everyone;
        }
        if me == self.root {
            return Readers::Nobody;
        }
        if self.tree {
            let l = leader(me / GROUP, self.root);
            if l != me {
                return Readers::Member(l);
            }
        }
        Readers::Member(self.root)
    }
}

/// Scratch for `len` elements: `small` when they fit, else `heap` (grown to `len`).
pub(crate) fn scratch<'s, T: Element>(
    small: &'s mut [T; SMALL],
    heap: &'s mut Vec<T>,
    len: usize,
) -> &'s mut [T] {
    if len <= SMALL {
        &mut small[..len]
    } else {
        heap.resize(len, T::default());
        heap
    }
}

/// The leader of group `g` of a tree around `root`.
fn leader(g: usize, root: usize) -> usize {
    if root / GROUP == g {
        root
    } else {
        g * GROUP
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
        SmColl::resume(sm, buf, op, st)
    }

    /// A collective at state `st`, over `buf` and `op` (a non-blocking one between two
    /// polls keeps its state alone: [`SmColl::into_state`]).
    pub(crate) fn resume(
        sm: &'a SmComm,
        buf: &'a mut [T],
        op: Option<&'a Op<T>>,
        st: SmState<T>,
    ) -> Self {
        SmColl {
            sm,
            buf,
            whole: None,
            op,
            st,
        }
    }

    /// Starts scatterv `seq` (number `no`) from `root`, receiving into `buf` (of any
    /// length). The root then publishes a package ([`SmColl::scatters`] with what
    /// `spools_coll::table` packs), or, where the package (the table and every block)
    /// exceeds a slot, one that says the blocks come by messages.
    pub(crate) fn scatterv(
        sm: &'a SmComm,
        seq: u32,
        no: u32,
        root: usize,
        buf: &'a mut [T],
    ) -> Self {
        SmColl::resume(sm, buf, None, SmState::scatterv(sm, seq, no, root))
    }

    /// Whether this scatterv member's block goes by messages (see [`SmColl::scatterv`]),
    /// once done.
    pub(crate) fn by_messages(&self) -> bool {
        self.st.by_messages
    }

    /// Its state, to resume it later over the same buffer and operator.
    pub(crate) fn into_state(self) -> SmState<T> {
        self.st
    }

    /// Its kind.
    pub(crate) fn kind(&self) -> Kind {
        self.st.kind
    }

    /// Its root (for a flat one, this member).
    pub(crate) fn root(&self) -> usize {
        self.st.root
    }

    /// Where it is.
    pub(crate) fn stage(&self) -> Stage {
        self.st.stage
    }

    /// What its waits watch for (see [`SmComm::drive`]): the bytes of the collective
    /// here (of a scatter, every member's part: what it publishes).
    pub(crate) fn watch(&self) -> Watch {
        self.st.watch(self.published())
    }

    /// Makes this member a scatter's root, publishing `whole` (every member's part, in
    /// member order; its own part is in `buf` already).
    pub(crate) fn scatters(mut self, whole: &'a [T]) -> Self {
        debug_assert!(
            self.st.kind == Kind::Scatter && std::mem::size_of_val(whole) <= self.sm.slot
        );
        self.whole = Some(whole);
        self
    }

    /// Bytes of the result the root publishes: of a scatter, every member's part.
    fn published(&self) -> usize {
        match self.st.kind {
            Kind::Scatter if self.st.varied => self
                .whole
                .map_or_else(|| self.nbytes(), std::mem::size_of_val),
            Kind::Scatter => self.nbytes() * self.sm.n(),
            _ => self.nbytes(),
        }
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

    /// The length member `m` posted to this collective (see [`SmComm::post_len`]).
    fn posted_len(&self, m: usize) -> u32 {
        self.sm
            .post_len(m, self.st.seq, self.st.deep())
            .load(Ordering::Relaxed)
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
        if self.st.stage == Stage::Gather {
            // Nothing of this collective before the last one is finished here.
            if !sm.may_post(self.st.seq) || !self.gather()? {
                return Ok(false);
            }
            self.st.stage = Stage::Post;
        }
        if self.st.stage == Stage::Post {
            // Posting `s` says `s - 1` is finished here: it must be.
            if !sm.may_post(self.st.seq) {
                return Ok(false);
            }
            if self.st.kind.contributes() {
                // Whoever read what this member wrote last in the data slot, cells or
                // deep ring entry (a reduce's) and length word that `s` takes must be
                // past that collective.
                let (seq, nbytes, deep) = (self.st.seq, self.nbytes(), self.st.deep());
                if !sm.part_free(seq, nbytes, deep) {
                    return Ok(false);
                }
                // A leader whose group disagreed posts that instead of a length (its
                // failure mark says what it saw). The root's own part, read by nobody
                // (but a flat one's), is not copied.
                let len = match self.st.disagree {
                    Some(_) => FAILED_PART,
                    None => nbytes as u32,
                };
                sm.put_part(seq, bytes(self.buf), self.st.readers(sm.me), deep, len);
            } else if self.st.disagree.is_some() {
                // A barrier's leader whose group disagreed (after such an error the
                // communicator's collectives are not to be used: no slot to spare).
                sm.len_of(sm.me, self.st.seq)
                    .store(FAILED_PART, Ordering::Relaxed);
            }
            sm.post(self.st.seq, self.st.no);
            if let (false, Some((m, got))) = (self.st.flat, self.st.disagree) {
                // A leader whose group disagreed: its error (the root fails the others).
                self.st.stage = Stage::Done;
                sm.finished(self.st.seq);
                return Err(sm.mismatch(self.st.kind.name(), m, got, self.nbytes()));
            }
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
        let need = if self.st.kind.fans_out() {
            self.st.seq.wrapping_sub(sm.outs as u32 - 1)
        } else {
            self.st.seq
        };
        let mine = self.nbytes();
        // A broadcast's root, which reads no contribution, knows without a look that
        // every member is far enough along when an earlier look showed it (it runs
        // ahead of them by up to `outs - 1` broadcasts, looking at their lines once in
        // that many).
        if self.st.kind.fans_out() && self.st.next == 0 && sm.knows_all_posted(need) {
            self.st.next = sm.n();
            self.st.least = need;
        }
        // Touch every line still to be read first: their loads overlap, instead of one
        // line transfer after another in the loop below.
        let n = sm.n();
        if (self.st.next..)
            .map_while(|i| self.st.source(i, n))
            .nth(2)
            .is_some()
        {
            for m in (self.st.next..).map_while(|i| self.st.source(i, n)) {
                std::hint::black_box(sm.posted(m).load(Ordering::Relaxed));
            }
        }
        while let Some(m) = self.st.source(self.st.next, n) {
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
                    self.posted_len(m) as usize
                } else {
                    0
                };
                self.st.disagree = Some((m, len));
            }
            if self.st.kind.contributes() {
                let len = self.posted_len(m);
                if len == FAILED_PART && self.st.disagree.is_none() {
                    // A leader whose group disagreed: what it saw.
                    self.st.disagree = Some(sm.failure_of(m));
                } else if len as usize != mine && self.st.disagree.is_none() {
                    self.st.disagree = Some((m, len as usize));
                }
                if self.st.disagree.is_none() {
                    self.combine(m);
                }
            } else if self.st.tree
                && sm.len_of(m, self.st.seq).load(Ordering::Relaxed) == FAILED_PART
                && self.st.disagree.is_none()
            {
                self.st.disagree = Some(sm.failure_of(m));
            }
            self.st.next += 1;
        }
        let first = self.st.source(0, n);
        if self.st.kind.contributes() && first != Some(sm.me) && self.st.disagree.is_none() {
            let len = self.buf.len();
            self.buf
                .copy_from_slice(scratch(&mut self.st.acc_small, &mut self.st.acc, len));
        }
        sm.saw_all_posted(self.st.least);
        Ok(true)
    }

    /// A tree's group leader (the first member of its group): folds the others' parts
    /// into its own buffer in rank order as their posts arrive. `Ok(true)` once all are.
    fn gather(&mut self) -> Result<bool, MsgError> {
        let sm = self.sm;
        let end = ((sm.me / GROUP + 1) * GROUP).min(sm.n());
        let mine = self.nbytes();
        if end - self.st.next > 2 {
            for m in self.st.next..end {
                std::hint::black_box(sm.posted(m).load(Ordering::Relaxed));
            }
        }
        while self.st.next < end {
            let m = self.st.next;
            let (posted, rec) = halves(sm.posted(m).load(Ordering::Acquire));
            if !seq_ge(posted, self.st.seq) {
                return Ok(false);
            }
            if self.st.disagree.is_none() {
                let len = if self.st.kind.contributes() {
                    self.posted_len(m) as usize
                } else {
                    mine
                };
                if (posted == self.st.seq && rec != post_record(self.st.seq, self.st.no))
                    || len != mine
                {
                    self.st.disagree = Some((m, len));
                } else {
                    self.fold(m);
                }
            }
            self.st.next += 1;
        }
        if let Some((m, got)) = self.st.disagree {
            // Marked before the post that carries it: the root, on seeing the post, finds
            // what this leader saw; the members still waiting fail too.
            let e = sm.mismatch(self.st.kind.name(), m, got, mine);
            sm.mark_failed(self.st.no, mine, &e);
        }
        Ok(true)
    }

    /// Folds member `m`'s contribution into this member's own buffer (which holds the
    /// running result of the lower ranks).
    fn fold(&mut self, m: usize) {
        let Some(op) = self.op else { return };
        let mut small = [T::default(); SMALL];
        let (deep, seq) = (self.st.deep(), self.st.seq);
        let part = scratch(&mut small, &mut self.st.tmp, self.buf.len());
        self.sm.read_post(m, seq, deep, bytes_mut(part));
        op.combine(self.buf, part, true);
    }

    /// Folds source `m`'s contribution (a member's, or over a tree a group's) into the
    /// running result, in rank order.
    fn combine(&mut self, m: usize) {
        let sm = self.sm;
        let Some(op) = self.op else { return };
        let me = sm.me;
        let first = self.st.source(0, sm.n()).unwrap_or(0);
        if me == first {
            // The running result lives in this member's own buffer (it comes first).
            if m != me {
                self.fold(m);
            }
            return;
        }
        let mut small = [T::default(); SMALL];
        let contribution: &[T] = if m == me {
            self.buf
        } else {
            let (deep, seq) = (self.st.deep(), self.st.seq);
            let part = scratch(&mut small, &mut self.st.tmp, self.buf.len());
            sm.read_post(m, seq, deep, bytes_mut(part));
            part
        };
        let acc = scratch(&mut self.st.acc_small, &mut self.st.acc, contribution.len());
        if m == first {
            acc.copy_from_slice(contribution);
        } else {
            op.combine(acc, contribution, true);
        }
    }

    /// The root publishes the result (or the members' disagreement) and is done. A
    /// reduce's root publishes nothing: nobody waits for it ([`Kind::awaited`]).
    ///
    /// # Errors
    /// [`MsgError::Mismatch`] when a member's length differed from the root's.
    pub(crate) fn publish(&mut self) -> Result<(), MsgError> {
        let sm = self.sm;
        if self.st.kind.awaited() {
            let k = self.st.seq as usize % sm.outs;
            let len = match self.st.disagree {
                Some(_) => FAILED,
                None => {
                    let data = self.whole.unwrap_or(self.buf);
                    if self.st.kind.publishes_data() {
                        sm.write_out(k, bytes(data));
                    }
                    std::mem::size_of_val(data) as u32
                }
            };
            sm.out_len(k).store(len, Ordering::Relaxed);
            // `ready` and the collective's number in one store.
            sm.raise(sm.ready(k), pair(self.st.seq, VALID | self.st.no));
        }
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
        // Finished only once the result is out: finishing lets this member post the next
        // collective, after which the root may reuse the slot.
        let r = self.take_result(k, no);
        self.sm.finished(self.st.seq);
        r
    }

    /// A non-root's result from result slot `k`, published for collective number `no`.
    fn take_result(&mut self, k: usize, no: u32) -> Result<bool, MsgError> {
        let sm = self.sm;
        let len = sm.out_len(k).load(Ordering::Relaxed);
        let mine = self.published();
        // Published for another collective: the members' numbering split earlier.
        if no != VALID | self.st.no {
            return Err(MsgError::Mismatch {
                op: self.st.kind.name(),
                from: Some(sm.members[self.st.root]),
                got: if len == FAILED { 0 } else { len as usize },
                want: mine,
            });
        }
        if self.st.varied && len != FAILED {
            return self.take_block(k, len as usize);
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
        if self.st.kind == Kind::Scatter {
            let at = sm.me * self.nbytes();
            sm.read_out_part(k, mine, at, bytes_mut(self.buf));
        } else if self.st.kind.publishes_data() {
            sm.read_out(k, bytes_mut(self.buf));
        }
        // The root published only once every member posted this collective (a
        // broadcast's or a scatter's root waits for less).
        if !self.st.kind.fans_out() {
            sm.saw_all_posted(self.st.seq);
        }
        Ok(true)
    }

    /// A scatterv member's block from the package of `len` bytes in result slot `k`.
    fn take_block(&mut self, k: usize, len: usize) -> Result<bool, MsgError> {
        let sm = self.sm;
        let mine = self.nbytes();
        let read = |at: usize, dst: &mut [u8]| sm.read_out_part(k, len, at, dst);
        let got = match locate(len, sm.n(), sm.me, read) {
            Block::ByMessages => {
                self.st.by_messages = true;
                return Ok(true);
            }
            Block::At { at, len: got } if got == mine => {
                sm.read_out_part(k, len, at, bytes_mut(self.buf));
                return Ok(true);
            }
            Block::At { len: got, .. } => got,
            Block::Bad => 0,
        };
        Err(MsgError::Mismatch {
            op: "scatterv",
            from: Some(sm.members[self.st.root]),
            got,
            want: mine,
        })
    }
}
