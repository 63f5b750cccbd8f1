//! Non-blocking collectives through a segment: barrier, bcast, reduce, allreduce,
//! scatter, allgather, alltoall, gather, reduce-scatter, scan, and gatherv, scatterv and
//! alltoallv (`varied_job.rs`) of a communicator whose
//! members are all on this host run the same state machines as the blocking ones
//! ([`SmColl`], `gather.rs`' flat one, with `fold.rs`' fold for a reduce-scatter,
//! `chain.rs`' link),
//! advanced by the request's test and wait and by the progress engine's poller, instead
//! of a schedule of messages.
//!
//! They go through a segment of their own: the one of the communicator's non-blocking
//! core (its collective context and count, apart from the blocking collectives', as MPI
//! orders the two apart), with sequence numbers of its own. A segment is set up in a
//! handshake in which every member takes part at the same point of the program; a
//! non-blocking call cannot wait for one, so it is set up in the handshake of the
//! blocking collectives' segment, at the communicator's first blocking collective that
//! could use one, and serves the non-blocking collectives that every member starts after
//! it (`setup.rs`). Before them, and when it is off, the messages serve.
//!
//! Each collective takes its sequence number when it is called, so any number may be in
//! flight; one posts only once the one before it finished here, which the poller sees
//! to (every job is on its list until its wait takes it off). A collective whose length
//! does not fit the segment goes through the messages and records so on the segment
//! ([`SmComm::enter_messages`]), as the blocking ones do: a member whose length fits,
//! waiting on the segment, fails with [`MsgError::Mismatch`], and the schedule of the
//! member on the messages watches the segment while it waits
//! ([`SmComm::split_on_messages`]).

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use super::coll::{fits, FLAT_MAX};
use super::fold::Folder;
use super::gather::{Flat, Taker};
use super::kind::Kind;
use super::machine::{SmColl, SmState};
use super::scan::Scanner;
use super::varied_job::{First, Start, Varied};
use super::{coll_no, SmComm, Watch};
use crate::coll::args::{block, bytes, bytes_mut};
use crate::coll::group::{coll_tags, disagreement};
use crate::coll::schedule::Schedule;
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The segment that serves a non-blocking collective of `bytes` on `nb` (a
/// communicator's non-blocking core), if one does; a length that does not fit is
/// recorded there as going through the messages, and the watch for the schedule's waits
/// comes back as the error side ([`SmComm::split_on_messages`]).
pub(crate) fn serving(
    nb: &CommCore,
    tag: u32,
    kind: Kind,
    bytes: usize,
) -> Result<&SmComm, Option<Watch>> {
    let Some(sm) = nb.sm.serving(coll_no(tag)) else {
        return Err(None);
    };
    if sm.n() != nb.size() as usize {
        return Err(None);
    }
    if !fits(nb, bytes) {
        return Err(Some(sm.enter_messages(kind, tag, bytes)));
    }
    Ok(sm)
}

impl<T: Element> Machine<T> {
    /// The collective's first and last sequence numbers (the same but for a scan by
    /// recursive doubling, which takes one per round).
    fn seqs(&self) -> (u32, u32) {
        match self {
            Machine::Elems(st) => (st.seq(), st.seq()),
            Machine::Bytes(st) => (st.seq(), st.seq()),
            Machine::Flat(f, _) | Machine::Fold(f, _, _) => (f.seq(), f.seq()),
            Machine::Scan(scan, _) => scan.seqs(),
            Machine::Varied(f, _) => (f.seq(), f.seq()),
            Machine::Scatterv(st, _) => (st.seq(), st.seq()),
        }
    }
}

/// The machine's state, over this job's buffer as elements (reductions) or as bytes, or
/// a flat collective's (allgather, alltoall, gather: `gather.rs`) with this member's part.
enum Machine<T: Element> {
    Elems(SmState<T>),
    Bytes(SmState<u8>),
    Flat(Flat, Parts),
    /// A scan's step, with this member's part.
    Scan(Scanner<T>, Vec<T>),
    /// A reduce-scatter's flat step, with this member's whole contribution and its fold
    /// of everyone's block (boxed: the largest by far).
    Fold(Flat, Vec<T>, Box<Folder<T>>),
    /// A gatherv's or an alltoallv's flat step (`varied_job.rs`).
    Varied(Flat, Box<Varied<T>>),
    /// A scatterv's step (`varied_job.rs`).
    Scatterv(SmState<u8>, Box<Varied<T>>),
}

/// A flat collective's part on this member and where the others' go.
pub(crate) struct Parts {
    /// What this member posts: its part, or an alltoall's blocks for every member.
    mine: Vec<u8>,
    /// Bytes of one member's part (of one block, for an alltoall).
    block: usize,
    /// An allgatherv's: where member m's part lands in the result, in bytes (its length
    /// is what it must post). Empty: blocks of `block` bytes.
    spans: Vec<Range<usize>>,
}

impl Parts {
    /// What a member posts for `kind`: an alltoall's every block (`mine` holds one for
    /// each member), another's part.
    pub(crate) fn new(mine: Vec<u8>, block: usize) -> Parts {
        Parts {
            mine,
            block,
            spans: Vec::new(),
        }
    }

    /// An allgatherv's part: member m's is `counts[m]` bytes (the same on every member),
    /// placed after those of the members before it.
    pub(crate) fn varied(mine: Vec<u8>, counts: &[usize]) -> Parts {
        let mut at = 0;
        let spans = counts
            .iter()
            .map(|&n| {
                at += n;
                at - n..at
            })
            .collect();
        Parts {
            mine,
            block: 0,
            spans,
        }
    }

    /// Where member m's part lands in the result.
    fn span(&self, m: usize) -> Range<usize> {
        match self.spans.get(m) {
            Some(s) => s.clone(),
            None => m * self.block..(m + 1) * self.block,
        }
    }
}

/// One non-blocking collective through the segment on this member.
pub(crate) struct SmJob<T: Element> {
    /// The communicator's non-blocking core (its segment is ready).
    core: Arc<CommCore>,
    tag: u32,
    /// This member's contribution in, its result out.
    buf: Vec<T>,
    /// A scatter's root: every member's part, which it publishes (empty elsewhere).
    whole: Vec<T>,
    op: Option<Op<T>>,
    /// `None` once finished.
    machine: Option<Machine<T>>,
    /// How it ended.
    outcome: Result<(), MsgError>,
    /// An abandoned collective that could not be marked finished here yet (one before it
    /// is in flight), by its first and last sequence numbers: its last is marked once the
    /// one before its first finished, so that the ones after it post.
    finish_later: Option<(u32, u32)>,
    /// A v collective's receives of the blocks that did not fit a slot, once its segment
    /// step ended (`varied_job.rs`). The job's buffer is the schedule's slot meanwhile.
    after: Option<Shared<T>>,
    /// A v collective's sends of its blocks that do not fit a slot, from its start.
    sending: Option<Shared<T>>,
    /// Whether the poller's list holds it.
    pub(crate) registered: bool,
}

impl<T: Element> SmJob<T> {
    /// Starts collective `kind` (barrier, bcast, reduce, allreduce or scatter) around
    /// member `root` on `sm`, the ready segment of `core` (from [`serving`]): takes its
    /// sequence number now and advances it as far as the flags allow. `whole`: a
    /// scatter's root's every part (its own is in `buf` already), else empty.
    pub(crate) fn start(
        core: &Arc<CommCore>,
        sm: &SmComm,
        tag: u32,
        (kind, root): (Kind, usize),
        (buf, whole): (Vec<T>, Vec<T>),
        op: Option<Op<T>>,
    ) -> SmJob<T> {
        let seq = sm.take_seq();
        let flat = matches!(kind, Kind::Barrier | Kind::Allreduce) && sm.n() <= FLAT_MAX;
        let no = coll_no(tag);
        let machine = if op.is_some() {
            Machine::Elems(SmState::new(sm, seq, no, kind, root, flat))
        } else {
            Machine::Bytes(SmState::new(sm, seq, no, kind, root, flat))
        };
        SmJob::new(core, tag, (buf, whole), op, machine).begun()
    }

    /// Starts flat collective `kind` (allgather, alltoall, gather to member `root`) on
    /// `sm`, the ready segment of `core`: this member posts `parts.mine`; `buf` gets
    /// member m's part (an alltoall: its block for this member) as block m, this member's
    /// own block placed there by the caller (a gather's contributor: `buf` is empty).
    pub(crate) fn start_flat(
        core: &Arc<CommCore>,
        sm: &SmComm,
        tag: u32,
        (kind, root): (Kind, Option<usize>),
        buf: Vec<T>,
        parts: Parts,
    ) -> SmJob<T> {
        let flat = Flat::new(sm, tag, kind, root);
        SmJob::new(
            core,
            tag,
            (buf, Vec::new()),
            None,
            Machine::Flat(flat, parts),
        )
        .begun()
    }

    /// Starts gatherv, scatterv or alltoallv `start` (made by [`Start`]'s functions on
    /// the ready segment of `core`) with base tag `tag`.
    pub(crate) fn start_varied(core: &Arc<CommCore>, tag: u32, start: Start<T>) -> SmJob<T> {
        let Start { out, step, mut v } = start;
        let sending = v.sends(core, tag).map(|s| Arc::new(Mutex::new(s)));
        let machine = match step {
            First::Flat(f) => Machine::Varied(f, Box::new(v)),
            First::Scatterv(st) => Machine::Scatterv(st, Box::new(v)),
        };
        let mut job = SmJob::new(core, tag, (out, Vec::new()), None, machine);
        job.sending = sending;
        // The sends go out first: their receivers take them once their step ended.
        job.begun()
    }

    /// Starts a reduce-scatter on `sm`, the ready segment of `core`: this member posts
    /// `mine` (every block, `counts` elements each, the same on every member) and folds
    /// its own block of everyone's with `op`, in rank order; its block of `mine` is its
    /// result's start.
    pub(crate) fn start_fold(
        core: &Arc<CommCore>,
        sm: &SmComm,
        tag: u32,
        (mine, counts): (Vec<T>, &[usize]),
        op: Op<T>,
    ) -> SmJob<T> {
        // One host: a member's index is its rank.
        let me = sm.me;
        let own = block(counts, me);
        let at = own.start * std::mem::size_of::<T>();
        let out = mine[own].to_vec();
        let fold = Box::new(Folder::block(op, me, at, &mine));
        let flat = Flat::new(sm, tag, Kind::ReduceScatter, None);
        SmJob::new(
            core,
            tag,
            (out, Vec::new()),
            None,
            Machine::Fold(flat, mine, fold),
        )
        .begun()
    }

    /// Starts a scan (`kind`: inclusive or exclusive) of `mine` with `op` on `sm`, the
    /// ready segment of `core`: the result is the fold of members 0 to this one (to the
    /// one before it, exclusive: member 0 gets `mine` back), in rank order.
    pub(crate) fn start_scan(
        core: &Arc<CommCore>,
        sm: &SmComm,
        (tag, kind): (u32, Kind),
        mine: Vec<T>,
        op: Op<T>,
    ) -> SmJob<T> {
        let scan = Scanner::new(sm, tag, kind);
        let buf = mine.clone();
        SmJob::new(
            core,
            tag,
            (buf, Vec::new()),
            Some(op),
            Machine::Scan(scan, mine),
        )
        .begun()
    }

    /// The job advanced as far as the flags allow.
    fn begun(mut self) -> SmJob<T> {
        self.advance();
        self
    }

    /// A job at `machine` over `buf` (and a scatter root's `whole`), not advanced yet.
    fn new(
        core: &Arc<CommCore>,
        tag: u32,
        (buf, whole): (Vec<T>, Vec<T>),
        op: Option<Op<T>>,
        machine: Machine<T>,
    ) -> SmJob<T> {
        SmJob {
            core: core.clone(),
            tag,
            buf,
            whole,
            op,
            machine: Some(machine),
            outcome: Ok(()),
            finish_later: None,
            after: None,
            sending: None,
            registered: false,
        }
    }

    /// The engine it runs on.
    pub(crate) fn engine(&self) -> Arc<crate::engine::Engine> {
        self.core.engine.clone()
    }

    /// Whether it finished and nothing is left to do on the segment (see
    /// [`SmJob::finish_later`]): the poller may drop it.
    pub(crate) fn settled(&self) -> bool {
        self.machine.is_none()
            && self.finish_later.is_none()
            && self.after.is_none()
            && self.sending.is_none()
    }

    /// What its waits watch for.
    fn watch(&self) -> Option<Watch> {
        let bytes = std::mem::size_of_val(self.buf.as_slice());
        Some(match self.machine.as_ref()? {
            Machine::Elems(st) => st.watch(bytes),
            // A scatter's waits watch for what its root publishes: every member's part.
            Machine::Bytes(st) if st.kind() == Kind::Scatter => {
                st.watch(bytes * self.core.size() as usize)
            }
            Machine::Bytes(st) => st.watch(bytes),
            Machine::Flat(f, parts) => f.watch(parts.mine.len()),
            Machine::Fold(f, mine, _) => f.watch(std::mem::size_of_val(mine.as_slice())),
            Machine::Scan(scan, _) => scan.watch(bytes),
            Machine::Varied(f, v) => v.watch_flat(f),
            Machine::Scatterv(st, v) => v.watch_scatterv(st, bytes),
        })
    }

    /// Advances as far as the flags and the messages allow; whether it finished (with or
    /// without an error, which [`SmJob::take`] gives).
    pub(crate) fn advance(&mut self) -> bool {
        let sent = self.advance_sending();
        self.advance_segment() && self.advance_receives() && sent
    }

    /// Advances its sends, if it has any left; whether they ended.
    fn advance_sending(&mut self) -> bool {
        match advanced(self.sending.as_ref()) {
            Some(r) => {
                self.end_sending(r);
                true
            }
            None => self.sending.is_none(),
        }
    }

    /// Advances its receives, if it has any left; whether they ended.
    fn advance_receives(&mut self) -> bool {
        match advanced(self.after.as_ref()) {
            Some(r) => {
                self.end_receives(r);
                true
            }
            None => self.after.is_none(),
        }
    }

    /// Its messages, if it has any left, taken off the job (a poller that still holds
    /// the job no longer advances them): its sends and its receives. The caller's wait
    /// runs each to its end, then gives its outcome to [`SmJob::end_sending`] and
    /// [`SmJob::end_receives`].
    pub(crate) fn take_messages(&mut self) -> (Option<Shared<T>>, Option<Shared<T>>) {
        (self.sending.take(), self.after.take())
    }

    /// Ends its sends with `r`, their outcome: the first error is the job's.
    pub(crate) fn end_sending(&mut self, r: Result<Vec<Vec<T>>, MsgError>) {
        self.sending = None;
        if let Err(e) = r {
            self.keep_first(e);
        }
    }

    /// Ends its receives with `r`, their outcome: the buffer comes back, and the first
    /// error is the job's.
    pub(crate) fn end_receives(&mut self, r: Result<Vec<Vec<T>>, MsgError>) {
        self.after = None;
        match r {
            Ok(mut slots) => {
                if !slots.is_empty() {
                    self.buf = slots.swap_remove(0);
                }
            }
            Err(e) => self.keep_first(e),
        }
    }

    /// Advances its segment step as far as the flags allow; whether it ended (its
    /// messages, if it left any, are started).
    pub(crate) fn advance_segment(&mut self) -> bool {
        let Some(sm) = self.core.sm.ready() else {
            // Never: a job starts on a ready segment, which stays with its core.
            if self.machine.take().is_some() {
                self.outcome = Err(MsgError::Panicked("non-blocking collective"));
            }
            return true;
        };
        let Some(machine) = self.machine.take() else {
            if let Some((_, last)) = self.finish_later.filter(|&(first, _)| sm.may_post(first)) {
                sm.finished(last);
                self.finish_later = None;
            }
            return true;
        };
        let seqs = machine.seqs();
        let vary = matches!(machine, Machine::Varied(..) | Machine::Scatterv(..));
        // A v collective that ended its step: what it leaves for the messages.
        let mut ended = None;
        let (polled, bytes) = match machine {
            Machine::Varied(mut f, mut v) => {
                let r = v.poll_flat(&mut f, sm, &mut self.buf);
                if r.is_err() {
                    f.abandon(sm);
                }
                let bytes = v.watch_flat(&f).bytes;
                let next = varied_next(r, v, &mut ended, |v| Machine::Varied(f, v));
                (next, bytes)
            }
            Machine::Scatterv(st, mut v) => {
                let bytes = v
                    .watch_scatterv(&st, std::mem::size_of_val(self.buf.as_slice()))
                    .bytes;
                let (st, r) = v.poll_scatterv(st, sm, &mut self.buf);
                let next = varied_next(r, v, &mut ended, |v| Machine::Scatterv(st, v));
                (next, bytes)
            }
            Machine::Elems(st) => {
                let mut m = SmColl::resume(sm, &mut self.buf, self.op.as_ref(), st);
                let r = m.poll_through();
                if r.is_err() {
                    m.abandon();
                }
                let bytes = m.watch().bytes;
                (
                    r.map(|done| (!done).then(|| Machine::Elems(m.into_state()))),
                    bytes,
                )
            }
            Machine::Bytes(st) => {
                let mut m = SmColl::resume(sm, bytes_mut(&mut self.buf), None, st);
                if st_is_scatter_root(&m, sm) {
                    m = m.scatters(bytes(&self.whole));
                }
                let r = m.poll_through();
                if r.is_err() {
                    m.abandon();
                }
                let bytes = m.watch().bytes;
                (
                    r.map(|done| (!done).then(|| Machine::Bytes(m.into_state()))),
                    bytes,
                )
            }
            Machine::Flat(mut f, parts) => {
                let out = bytes_mut(&mut self.buf);
                let (block, total) = (parts.block, parts.mine.len());
                let (me, alltoall, deep) = (sm.me, f.kind() == Kind::Alltoall, f.kind().deep());
                let want = |m: usize| if alltoall { total } else { parts.span(m).len() };
                // One host: member m is communicator rank m.
                let r = f.poll(sm, &parts.mine, want, |sm, m, seq| {
                    let to = &mut out[parts.span(m)];
                    if alltoall {
                        sm.read_part(m, seq, total, me * block, to);
                    } else {
                        sm.read_post(m, seq, deep, to);
                    }
                });
                if r.is_err() {
                    f.abandon(sm);
                }
                (
                    r.map(|done| (!done).then_some(Machine::Flat(f, parts))),
                    total,
                )
            }
            Machine::Fold(mut f, mine, mut fold) => {
                let out = &mut self.buf;
                let whole = std::mem::size_of_val(mine.as_slice());
                let r = f.poll(
                    sm,
                    bytes(&mine),
                    |_| whole,
                    |sm, m, seq| {
                        fold.take(sm, (m, seq), whole, out);
                    },
                );
                match r {
                    Ok(true) => fold.end(out),
                    Ok(false) => {}
                    Err(_) => f.abandon(sm),
                }
                (
                    r.map(|done| (!done).then_some(Machine::Fold(f, mine, fold))),
                    whole,
                )
            }
            Machine::Scan(mut scan, mine) => {
                let part = std::mem::size_of_val(mine.as_slice());
                let Some(op) = self.op.as_ref() else {
                    self.outcome = Err(MsgError::Panicked("scan without an operator"));
                    return true;
                };
                match scan.poll(sm, &mine, &mut self.buf, op) {
                    Ok(done) => (Ok((!done).then_some(Machine::Scan(scan, mine))), part),
                    Err(e) => {
                        // Ends the step here and marks a disagreement.
                        scan.abandon(sm, part, &e);
                        self.outcome = Err(e);
                        self.finish_later = unfinished(sm, seqs);
                        return true;
                    }
                }
            }
        };
        match polled {
            Ok(next) => {
                self.machine = next;
                if let Some(v) = ended {
                    if let (Err(e), Ok(())) = (v.verdict(), &self.outcome) {
                        self.outcome = Err(e);
                    }
                    self.after = v
                        .receives(&self.core, self.tag, &mut self.buf)
                        .map(|s| Arc::new(Mutex::new(s)));
                    // Started at once: the receives posted.
                    self.advance_receives();
                }
                self.machine.is_none()
            }
            Err(e) => {
                // The machine was abandoned. A disagreement is marked on the segment, so
                // that every member still waiting in it fails too.
                if disagreement(&e) {
                    sm.mark_failed(coll_no(self.tag), bytes, &e);
                    if vary {
                        self.drain();
                    }
                }
                self.finish_later = unfinished(sm, seqs);
                self.keep_first(e);
                true
            }
        }
    }

    /// A v collective's member that leaves it on a disagreement: the parts sent to it
    /// by messages are dropped here, their senders released (as a blocking member that
    /// leaves does, `group::left`).
    fn drain(&self) {
        self.core
            .engine
            .drain(self.core.coll_ctx(), coll_tags(self.tag));
    }

    /// Makes `e` the job's error unless it has one already (the first is reported).
    fn keep_first(&mut self, e: MsgError) {
        if self.outcome.is_ok() {
            self.outcome = Err(e);
        }
    }

    /// Whether it has sends by messages left (`varied_job.rs`).
    pub(crate) fn sends_pending(&self) -> bool {
        self.sending.is_some()
    }

    /// Ends it with `e` found while waiting (the machine is abandoned first).
    fn abandon(&mut self, e: MsgError) {
        let Some(sm) = self.core.sm.ready() else {
            self.machine = None;
            self.keep_first(e);
            return;
        };
        let vary = matches!(
            self.machine,
            Some(Machine::Varied(..) | Machine::Scatterv(..))
        );
        if vary && disagreement(&e) {
            self.drain();
        }
        let seqs = self.machine.as_ref().map(Machine::seqs);
        match self.machine.take() {
            Some(Machine::Elems(mut st)) => st.abandon(sm),
            Some(Machine::Bytes(mut st)) => st.abandon(sm),
            Some(
                Machine::Flat(mut f, _) | Machine::Fold(mut f, _, _) | Machine::Varied(mut f, _),
            ) => f.abandon(sm),
            Some(Machine::Scatterv(mut st, _)) => st.abandon(sm),
            Some(Machine::Scan(scan, mine)) => {
                scan.abandon(sm, std::mem::size_of_val(mine.as_slice()), &e);
            }
            None => {}
        }
        if let Some(seqs) = seqs {
            self.finish_later = unfinished(sm, seqs);
        }
        self.keep_first(e);
    }

    /// Whether its collective must still be marked finished here (see [`unfinished`]).
    pub(crate) fn finishes_later(&self) -> bool {
        self.finish_later.is_some()
    }

    /// The result once finished: this member's buffer, or the collective's error.
    pub(crate) fn take(&mut self) -> Result<Vec<T>, MsgError> {
        std::mem::replace(
            &mut self.outcome,
            Err(MsgError::Panicked("collective request")),
        )
        .map(|()| std::mem::take(&mut self.buf))
    }
}

/// A v collective's step polled to `r`: ended (its state kept in `ended`, for its
/// messages), going on (`again` makes the machine of its next poll), or failed.
fn varied_next<T: Element>(
    r: Result<bool, MsgError>,
    v: Box<Varied<T>>,
    ended: &mut Option<Box<Varied<T>>>,
    again: impl FnOnce(Box<Varied<T>>) -> Machine<T>,
) -> Result<Option<Machine<T>>, MsgError> {
    match r {
        Ok(true) => {
            *ended = Some(v);
            Ok(None)
        }
        Ok(false) => Ok(Some(again(v))),
        Err(e) => Err(e),
    }
}

/// Whether `m` is a scatter's and this member its root (which publishes every part).
fn st_is_scatter_root<T: Element>(m: &SmColl<'_, T>, sm: &SmComm) -> bool {
    m.kind() == Kind::Scatter && m.root() == sm.me
}

/// After the collective of sequence numbers `(first, last)` was abandoned here: `Some`
/// of them if it could not be marked finished (one before it is still in flight on this
/// member); the job marks its last once that one finished ([`SmJob::advance`]), staying
/// on the poller's list until then.
fn unfinished(sm: &SmComm, (first, last): (u32, u32)) -> Option<(u32, u32)> {
    (!sm.may_post(last.wrapping_add(1))).then_some((first, last))
}

/// A schedule of a v collective's messages, which its job advances.
type Shared<T> = Arc<Mutex<Schedule<T>>>;

/// Advances schedule `s`, if any: its outcome once it finished (taken), else `None`.
fn advanced<T: Element>(s: Option<&Shared<T>>) -> Option<Result<Vec<Vec<T>>, MsgError>> {
    let mut g = s?.lock().unwrap_or_else(PoisonError::into_inner);
    g.advance().then(|| g.take())
}

/// A job shared between its request and the poller.
pub(crate) type SharedJob<T> = Arc<Mutex<SmJob<T>>>;

fn lock<T: Element>(j: &SharedJob<T>) -> std::sync::MutexGuard<'_, SmJob<T>> {
    j.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Advances `j`'s segment step until it ends (the caller's wait; the job is off the
/// poller's list): through the segment's wait ([`SmComm::drive`]: progress, which advances
/// the collectives in flight before it, yielding, the watchdog, sleep). What it leaves for
/// the messages ([`SmJob::take_messages`]) is the caller's to run; an error ends the job here
/// ([`SmJob::take`] gives it).
pub(crate) fn run_segment<T: Element>(j: &SharedJob<T>) {
    let (core, tag, watch) = {
        let mut g = lock(j);
        if g.advance_segment() {
            return;
        }
        (g.core.clone(), g.tag, g.watch())
    };

    if let (Some(sm), Some(w)) = (core.sm.ready(), watch) {
        // Finished with an error too: `take` gives it.
        let r = sm.drive((core.coll_ctx(), &core.ranks), tag, w, || {
            let mut g = lock(j);
            // A v collective's sends that the transport could not take yet are retried.
            g.advance_sending();
            Ok(g.advance_segment())
        });
        if let Err(e) = r {
            let mut g = lock(j);
            if g.machine.is_some() {
                g.abandon(e);
            }
        }
    }
}
