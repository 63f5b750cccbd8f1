//! Schedules: the state machines that run non-blocking collectives without a thread.
//!
//! A [`Schedule`] is a list of rounds of [`Step`]s over buffers it owns (its *slots*).
//! A round starts by posting all its receives and starting all its sends at once; when
//! every one of them completed, its `Reduce` steps run
//! in order and the next round starts. [`Schedule::advance`] does as much as it can
//! without ever blocking: a send the transport has no room for is left for the next call.
//!
//! Who advances: the caller's [`super::CollRequest`] (`wait`, `test`, `is_complete`), and
//! a poller registered once per engine with the active-message layer, which advances
//! every active schedule at the end of each progress round, whichever thread progresses
//! (any wait of the rank, or the progress thread when enabled): see [`super::poller`].
//!
//! Sends go out on the progress engine's lane ([`Engine::try_start_send`]), so a
//! schedule's messages to one peer arrive in the order they were sent, and messages of
//! one step between two ranks match in order, as in the blocking collectives.
//!
//! A receive of another length than its step's (the ranks disagree about the
//! collective) does not stop the schedule: it keeps the error and runs its remaining
//! rounds with empty sends, so that every rank it sends to fails too instead of waiting
//! for a block that never comes; it fails with the first error once its rounds are done.
//! The peer whose block had another length may follow another plan (its length chose
//! another algorithm), so no later step waits for it: its receives are skipped (what it
//! still sends is dropped when the schedule fails, see `group::left`). Any other error
//! (a dead rank) stops it at once.

use std::sync::Arc;

use crate::buffer::{Buf, RecvBuf};
use crate::comm_core::CommCore;
use crate::element::Element;
use crate::engine::SendStart;
use crate::error::MsgError;
use crate::protocol::{Pattern, RecvOutcome};

/// Elements `start..end` of slot `slot` of a schedule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    /// The slot (buffer) index.
    pub(crate) slot: usize,
    /// First element.
    pub(crate) start: usize,
    /// One past the last element.
    pub(crate) end: usize,
}

impl Part {
    /// Elements `start..end` of `slot`.
    pub(crate) fn new(slot: usize, start: usize, end: usize) -> Part {
        Part { slot, start, end }
    }
}

/// A local computation on the schedule's slots (a reduction, a copy).
pub(crate) type Local<T> = Box<dyn FnMut(&mut [Vec<T>]) + Send>;

/// One step of a round.
pub(crate) enum Step<T> {
    /// Send the elements of `bytes` to job rank `to` with `tag`.
    Send { to: u32, tag: u32, bytes: Part },
    /// Receive exactly the size of `into` from job rank `from` with `tag`.
    Recv { from: u32, tag: u32, into: Part },
    /// Runs once the round's communication completed, in order with the round's other
    /// `Reduce` steps.
    Reduce(Local<T>),
}

/// An operation of the current round in flight.
enum InFlight {
    /// A send the transport had no room for yet: the index of its step.
    Unsent(usize),
    /// A rendezvous send.
    Send(u64),
    /// A posted receive of `want` bytes from job rank `from`.
    Recv { id: u64, want: usize, from: u32 },
}

/// Where a schedule is.
enum State {
    Running,
    Done,
    Failed(MsgError),
    /// The result was taken.
    Taken,
}

/// A collective as a state machine of rounds (see the module's documentation).
pub(crate) struct Schedule<T: Element> {
    pub(super) core: Arc<CommCore>,
    /// The base tag (its collective number is `tag >> 8`).
    pub(super) tag: u32,
    /// The buffers; never resized while an operation is in flight (only `Reduce` steps,
    /// which run when none is, get them mutably).
    slots: Vec<Vec<T>>,
    rounds: Vec<Vec<Step<T>>>,
    round: usize,
    started: bool,
    in_flight: Vec<InFlight>,
    /// The engine's generation when the in-flight operations were last looked at.
    seen: u64,
    state: State,
    /// Whether the poller's list holds it.
    pub(super) registered: bool,
    /// How many of the slots are the result (all when `None`).
    keep: Option<usize>,
    /// The first disagreement a receive found: the schedule's rounds go on with empty
    /// sends, and it fails with this error at the end.
    poisoned: Option<MsgError>,
    /// The job ranks whose block had another length: no later step waits for them.
    gone: Vec<u32>,
    /// What its waits watch for on the segment of its core, where the length alone kept
    /// it off that segment ([`super::sm::SmComm::split_on_messages`]).
    pub(super) split: Option<super::sm::Watch>,
    /// Messages that came early and that a later step receives (job rank, tag, bytes),
    /// looked up once.
    early: Vec<(u32, u32, usize)>,
    /// The engine's count of early collective messages and the round when
    /// [`Schedule::spot_gone`] last looked.
    probed: Option<(u64, usize)>,
    /// The collective's name, for its errors (`Communicator::start` and the v jobs set
    /// it).
    op: &'static str,
}

impl<T: Element> Schedule<T> {
    /// An empty schedule of the collective with base tag `tag` over `slots`.
    pub(crate) fn new(core: &Arc<CommCore>, tag: u32, slots: Vec<Vec<T>>) -> Schedule<T> {
        Schedule {
            core: core.clone(),
            tag,
            slots,
            rounds: Vec::with_capacity(8),
            round: 0,
            started: false,
            in_flight: Vec::with_capacity(4),
            seen: u64::MAX,
            state: State::Running,
            registered: false,
            split: None,
            keep: None,
            poisoned: None,
            gone: Vec::new(),
            early: Vec::new(),
            probed: None,
            op: "non-blocking collective",
        }
    }

    /// Names the collective in its errors (a disagreement on a length).
    pub(crate) fn name(&mut self, op: &'static str) {
        self.op = op;
    }

    /// The communicator's shared state.
    pub(crate) fn core(&self) -> &CommCore {
        &self.core
    }

    /// Adds slot `v`; its index.
    pub(crate) fn add_slot(&mut self, v: Vec<T>) -> usize {
        self.slots.push(v);
        self.slots.len() - 1
    }

    /// The length of slot `s`.
    pub(crate) fn slot_len(&self, s: usize) -> usize {
        self.slots[s].len()
    }

    /// Starts a new round (steps added next belong to it).
    pub(crate) fn round(&mut self) -> &mut Self {
        self.rounds.push(Vec::new());
        self
    }

    fn push(&mut self, s: Step<T>) -> &mut Self {
        if self.rounds.is_empty() {
            self.rounds.push(Vec::new());
        }
        if let Some(r) = self.rounds.last_mut() {
            r.push(s);
        }
        self
    }

    /// Adds a send of `bytes` to job rank `to` to the current round.
    pub(crate) fn send(&mut self, to: u32, tag: u32, bytes: Part) -> &mut Self {
        self.push(Step::Send { to, tag, bytes })
    }

    /// Adds a receive into `into` from job rank `from` to the current round.
    pub(crate) fn recv(&mut self, from: u32, tag: u32, into: Part) -> &mut Self {
        self.push(Step::Recv { from, tag, into })
    }

    /// Adds a local step to the current round (run after its communication).
    pub(crate) fn reduce(&mut self, f: impl FnMut(&mut [Vec<T>]) + Send + 'static) -> &mut Self {
        self.push(Step::Reduce(Box::new(f)))
    }

    /// Makes its waits watch the segment of its core for members that took it (see
    /// [`Schedule::split`]).
    pub(crate) fn watch_segment(&mut self, w: Option<super::sm::Watch>) {
        self.split = w;
    }

    /// Whether only a completion in the engine can move the schedule (no send to retry,
    /// no step to poll): then it need not be looked at until the engine's generation moves.
    pub(crate) fn quiet(&self) -> bool {
        !self
            .in_flight
            .iter()
            .any(|o| matches!(o, InFlight::Unsent(_)))
    }

    /// Whether the schedule has finished (successfully or not).
    pub(crate) fn finished(&self) -> bool {
        !matches!(self.state, State::Running)
    }

    /// Makes [`Schedule::take`] give only the first `n` slots (the others are scratch).
    pub(crate) fn keep_slots(&mut self, n: usize) {
        self.keep = Some(n);
    }

    /// The slots, or the error that stopped the schedule; once.
    pub(crate) fn take(&mut self) -> Result<Vec<Vec<T>>, MsgError> {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Done => {
                let mut v = std::mem::take(&mut self.slots);
                if let Some(n) = self.keep {
                    v.truncate(n);
                }
                Ok(v)
            }
            State::Failed(e) => Err(e),
            State::Running | State::Taken => Err(MsgError::Protocol {
                peer: self.core.rank,
                what: "collective result taken before it finished",
            }),
        }
    }

    /// Does what can be done now without blocking; `true` once finished (then
    /// [`Schedule::take`] gives the result or the error).
    pub(crate) fn advance(&mut self) -> bool {
        if self.finished() {
            return true;
        }
        if let Err(e) = self.step() {
            self.fail(e);
        }
        self.finished()
    }

    /// Ends the schedule with `e`: nothing of it stays in the engine, and when the ranks
    /// disagree, this rank leaves the collective (see `group::left`).
    pub(super) fn fail(&mut self, e: MsgError) {
        self.release_all();
        if super::group::disagreement(&e) {
            let tags = super::group::coll_tags(self.tag);
            self.core.engine.drain(self.core.coll_ctx(), tags);
        }
        self.state = State::Failed(e);
    }

    fn step(&mut self) -> Result<(), MsgError> {
        loop {
            if self.round == self.rounds.len() {
                if let Some(e) = self.poisoned.take() {
                    return Err(e);
                }
                self.state = State::Done;
                return Ok(());
            }
            if !self.started {
                self.seen = self.core.engine.generation();
                self.start_round()?;
                self.started = true;
            } else {
                let g = self.core.engine.generation();
                if g == self.seen && self.quiet() {
                    return Ok(());
                }
                self.seen = g;
            }
            self.check_in_flight()?;
            if !self.in_flight.is_empty() && self.spot_gone() {
                self.check_in_flight()?;
            }
            if !self.in_flight.is_empty() {
                return Ok(());
            }
            let Schedule { rounds, slots, .. } = self;
            for s in &mut rounds[self.round] {
                if let Step::Reduce(f) = s {
                    f(slots);
                }
            }
            self.round += 1;
            self.started = false;
        }
    }

    /// Posts the round's receives, then starts its sends.
    fn start_round(&mut self) -> Result<(), MsgError> {
        let ctx = self.core.coll_ctx();
        for i in 0..self.rounds[self.round].len() {
            if let Step::Recv { from, tag, into } = self.rounds[self.round][i] {
                if self.gone.contains(&from) {
                    continue;
                }
                // SAFETY: the slot's heap block stays put (slots are not resized while
                // operations are in flight) and is not read or written until the
                // receive is released (`check_in_flight` or `release_all`, also run on
                // drop), which removes it from the engine under its lock.
                let buf = unsafe { self.part_buf(into) };
                let p = Pattern {
                    ctx,
                    src: Some(from),
                    tag: Some(tag),
                };
                let id = self.core.engine.post_recv(p, RecvBuf::Fixed(buf));
                let want = (into.end - into.start) * std::mem::size_of::<T>();
                self.in_flight.push(InFlight::Recv { id, want, from });
            }
        }
        for i in 0..self.rounds[self.round].len() {
            if let Step::Send { .. } = self.rounds[self.round][i] {
                if let Some(o) = self.try_send(i)? {
                    self.in_flight.push(o);
                }
            }
        }
        Ok(())
    }

    /// A buffer over `p`'s bytes for the engine.
    ///
    /// # Safety
    /// The caller keeps the slot alive, unmoved and untouched until the engine's
    /// operation on it is released.
    unsafe fn part_buf(&mut self, p: Part) -> Buf {
        let size = std::mem::size_of::<T>();
        let v = &mut self.slots[p.slot];
        assert!(p.start <= p.end && p.end <= v.len(), "part out of its slot");
        // A pointer to the heap block without a reference to its elements (parts of
        // one slot may be in flight at once).
        let base = v.as_mut_ptr().cast::<u8>();
        // SAFETY: `start..end` lies within the slot (checked above), and the caller keeps
        // it alive as the engine uses it.
        unsafe {
            let s =
                std::slice::from_raw_parts_mut(base.add(p.start * size), (p.end - p.start) * size);
            Buf::borrowed(s)
        }
    }

    /// A read-only buffer over `p`'s bytes for a send: several sends may read one part at
    /// once (a broadcast root's slot to each child), so none holds it mutably.
    ///
    /// # Safety
    /// The caller keeps the slot alive, unmoved and unwritten until the engine's send
    /// from it is released.
    unsafe fn part_buf_ro(&self, p: Part) -> Buf {
        let size = std::mem::size_of::<T>();
        let v = &self.slots[p.slot];
        assert!(p.start <= p.end && p.end <= v.len(), "part out of its slot");
        let base = v.as_ptr().cast::<u8>();
        // SAFETY: `start..end` lies within the slot (checked above), and the caller keeps
        // it alive and unwritten as the engine reads it.
        unsafe {
            let s = std::slice::from_raw_parts(base.add(p.start * size), (p.end - p.start) * size);
            Buf::borrowed_ro(s)
        }
    }

    /// Starts send step `i`: `None` when it completed at once.
    fn try_send(&mut self, i: usize) -> Result<Option<InFlight>, MsgError> {
        let Step::Send { to, tag, bytes } = self.rounds[self.round][i] else {
            return Ok(None);
        };
        let buf = if self.poisoned.is_some() {
            // SAFETY: an empty static slice: the engine reads nothing through it.
            unsafe { Buf::borrowed_ro(&[]) }
        } else {
            // SAFETY: as in `start_round`: the engine only reads the part, and a
            // rendezvous send is released before the slot is touched again.
            unsafe { self.part_buf_ro(bytes) }
        };
        let ctx = self.core.coll_ctx();
        Ok(match self.core.engine.try_start_send(to, ctx, tag, buf)? {
            None => Some(InFlight::Unsent(i)),
            Some(SendStart::Complete(_)) => None,
            Some(SendStart::Rendezvous(id)) => Some(InFlight::Send(id)),
        })
    }

    /// Retries unsent sends and drops what completed (and the
    /// receives from peers found gone).
    fn check_in_flight(&mut self) -> Result<(), MsgError> {
        loop {
            let gone = self.gone.len();
            self.check_in_flight_once()?;
            if self.gone.len() == gone {
                return Ok(());
            }
        }
    }

    fn check_in_flight_once(&mut self) -> Result<(), MsgError> {
        let mut k = 0;
        while k < self.in_flight.len() {
            let done = match self.in_flight[k] {
                InFlight::Unsent(i) => match self.try_send(i)? {
                    None => true,
                    Some(o) => {
                        self.in_flight[k] = o;
                        false
                    }
                },
                InFlight::Send(id) => {
                    let e = &self.core.engine;
                    if e.send_complete(id) {
                        e.release_send(id);
                        true
                    } else {
                        false
                    }
                }
                InFlight::Recv { id, from, .. } if self.gone.contains(&from) => {
                    self.core.engine.release_recv(id);
                    true
                }
                InFlight::Recv { id, want, from } => self.check_recv(id, want, from)?,
            };
            if done {
                self.in_flight.swap_remove(k);
            } else {
                k += 1;
            }
        }
        Ok(())
    }

    /// Looks at what came from the peers this round waits for and nobody received: a
    /// message of this collective that no later step receives (its tag or its length)
    /// proves the peer follows another plan (its length chose another algorithm), so
    /// its block may never come. Such a peer is gone and the schedule poisoned; `true`
    /// when one was found. (In a correct program every message of the collective from a
    /// peer is one a step of this rank receives, so this never fires.)
    fn spot_gone(&mut self) -> bool {
        // Only when a collective's message came early, or this round's receives are new.
        let now = (self.core.engine.early_count(), self.round);
        if self.probed == Some(now) {
            return false;
        }
        self.probed = Some(now);
        let mut peers: Vec<(u32, usize)> = Vec::new();
        for o in &self.in_flight {
            if let InFlight::Recv { from, want, .. } = *o {
                if !self.gone.contains(&from) && !peers.iter().any(|p| p.0 == from) {
                    peers.push((from, want));
                }
            }
        }
        if peers.is_empty() {
            return false;
        }
        let srcs: Vec<u32> = peers.iter().map(|p| p.0).collect();
        let tags = super::group::coll_tags(self.tag);
        let firsts = self
            .core
            .engine
            .probe_tags(self.core.coll_ctx(), &srcs, tags);
        let mut found = false;
        for ((from, want), first) in peers.into_iter().zip(firsts) {
            let Some((env, len)) = first else {
                continue;
            };
            if self.early.contains(&(from, env.tag, len)) {
                continue;
            }
            if self.expected(from, env.tag, len) {
                self.early.push((from, env.tag, len));
                continue;
            }
            self.gone.push(from);
            found = true;
            if self.poisoned.is_none() {
                self.poisoned = Some(MsgError::Mismatch {
                    op: self.op,
                    from: Some(self.core.comm_rank(from)),
                    got: len,
                    want,
                });
            }
        }
        found
    }

    /// Whether a step after this round receives `len` bytes with `tag` from `from`.
    fn expected(&self, from: u32, tag: u32, len: usize) -> bool {
        let size = std::mem::size_of::<T>();
        self.rounds[self.round + 1..].iter().flatten().any(|s| {
            matches!(s, Step::Recv { from: f, tag: t, into }
                if *f == from && *t == tag && (into.end - into.start) * size == len)
        })
    }

    /// Whether receive `id` from job rank `peer` completed (then released), with its
    /// length checked: one of another length poisons the schedule, and `peer` is gone.
    fn check_recv(&mut self, id: u64, want: usize, peer: u32) -> Result<bool, MsgError> {
        let e = &self.core.engine;
        let Some(o) = e.recv_outcome(id) else {
            return Ok(false);
        };
        e.release_recv(id);
        let received = matches!(o, RecvOutcome::Received(_));
        let (got, from) = match self.core.outcome(o) {
            Ok(st) => (st.len, received.then_some(st.source)),
            Err(MsgError::Truncated {
                len, source_rank, ..
            }) => (len, Some(source_rank)),
            Err(e) => return Err(e),
        };
        if got != want {
            self.gone.push(peer);
        }
        if got != want && self.poisoned.is_none() {
            self.poisoned = Some(MsgError::Mismatch {
                op: self.op,
                from,
                got,
                want,
            });
        }
        Ok(true)
    }

    /// Removes every in-flight operation from the engine (on failure and on drop), so
    /// that the engine never touches the slots afterwards.
    fn release_all(&mut self) {
        let e = &self.core.engine;
        for o in self.in_flight.drain(..) {
            match o {
                InFlight::Send(id) => {
                    e.release_send(id);
                }
                InFlight::Recv { id, .. } => {
                    e.release_recv(id);
                }
                InFlight::Unsent(_) => {}
            }
        }
    }
}

impl<T: Element> Drop for Schedule<T> {
    fn drop(&mut self) {
        self.release_all();
    }
}
