//! Non-blocking gatherv, scatterv and alltoallv through the segment: the same steps as
//! the blocking ones (`varied.rs`), polled by the request's test and wait and by the
//! poller (an `SmJob`, `inflight.rs`), and the blocks that do not fit a slot moved by
//! [`Schedule`]s of messages on the collective's tag, which the job runs: its sends from
//! the start, its receives once its step on the segment ended (when it knows which
//! blocks come by messages).
//!
//! Every member of a communicator within one host takes the segment whatever its counts
//! (the segment serves the collective with a length of 0, as it does for every member),
//! so the ranks never disagree about the path:
//! - gatherv: a contributor posts its part, or only its length when the part exceeds a
//!   slot and it then sends the part; the root reads the parts that fit and receives the
//!   others.
//! - scatterv: the root publishes a package (or the marker that says the blocks go by
//!   messages, and then sends them); a member reads its block or receives it.
//! - alltoallv: every member posts its package (or its length, and then sends its
//!   blocks), reads its block of every package that fits and receives the others.
//!
//! A disagreement the segment step finds is reported once the messages the member still
//! receives arrived (their senders wait for them); one that ends the step at once (a
//! gatherv root's) drains the collective's messages, as a blocking member that leaves
//! does.

use std::ops::Range;
use std::sync::Arc;

use spools_coll::table::{by_messages, pack_into, table_bytes};

use super::gather::Flat;
use super::kind::Kind;
use super::machine::{SmColl, SmState};
use super::varied::{block_mismatch, package_len, read_block, read_part, Found};
use super::{clamp_len, coll_no, SmComm, Watch};
use crate::coll::args::{block, byte_counts, bytes, bytes_mut, displs};
use crate::coll::schedule::{Part, Schedule};
use crate::comm_core::CommCore;
use crate::element::Element;
use crate::error::MsgError;

/// Which v collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Gatherv,
    Scatterv,
    Alltoallv,
}

impl Form {
    /// The non-blocking collective's name, for the errors of its messages.
    fn name(self) -> &'static str {
        match self {
            Form::Gatherv => "igatherv",
            Form::Scatterv => "iscatterv",
            Form::Alltoallv => "ialltoallv",
        }
    }
}

/// A non-blocking v collective's state on this member beside its machine, and what it
/// leaves for the messages.
pub(crate) struct Varied<T: Element> {
    form: Form,
    /// What this member posts (a gatherv's part, an alltoallv's package) or publishes (a
    /// scatterv root's package, or the marker that says the blocks go by messages); empty
    /// where a post only claims a length, and at a scatterv's member.
    post: Vec<u8>,
    /// The data this member sends by messages, and its blocks: (to member, elements of
    /// `send`).
    send: Vec<T>,
    sends: Vec<(usize, Range<usize>)>,
    /// Elements this member takes from each member (a gatherv root's counts, an
    /// alltoallv's receive counts; empty elsewhere), and where each lands in the result.
    counts: Vec<usize>,
    displs: Vec<usize>,
    /// The blocks that come by messages: (from member, elements of the result).
    late: Vec<(usize, Range<usize>)>,
    /// An alltoallv's first block of another length than this member's count for it:
    /// (member, its bytes).
    disagree: Option<(usize, usize)>,
}

impl<T: Element> Varied<T> {
    fn new(form: Form, post: Vec<u8>) -> Varied<T> {
        Varied {
            form,
            post,
            send: Vec::new(),
            sends: Vec::new(),
            counts: Vec::new(),
            displs: Vec::new(),
            late: Vec::new(),
            disagree: None,
        }
    }

    /// Sends `send` by messages: block j (`counts[j]` elements, one after the other) to
    /// member j, but this member's own.
    fn send_all(&mut self, send: Vec<T>, counts: &[usize], me: usize) {
        let d = displs(counts);
        self.sends = (0..counts.len())
            .filter(|&j| j != me)
            .map(|j| (j, d[j]..d[j] + counts[j]))
            .collect();
        self.send = send;
    }

    /// What its waits watch for: a flat step's post, a scatterv's publication (at its
    /// root; elsewhere this member's block of `bytes`).
    pub(super) fn watch_flat(&self, f: &Flat) -> Watch {
        f.watch(self.post.len())
    }

    /// [`Varied::watch_flat`] of a scatterv.
    pub(super) fn watch_scatterv(&self, st: &SmState<u8>, bytes: usize) -> Watch {
        st.watch(if self.post.is_empty() {
            bytes
        } else {
            self.post.len()
        })
    }

    /// Polls a gatherv's or an alltoallv's flat step `f` into `out` (this member's
    /// result); whether it ended.
    ///
    /// # Errors
    /// A gatherv's part of another length than the root's count for it, a post for
    /// another collective ([`MsgError::Mismatch`]).
    pub(super) fn poll_flat(
        &mut self,
        f: &mut Flat,
        sm: &SmComm,
        out: &mut [T],
    ) -> Result<bool, MsgError> {
        let size = std::mem::size_of::<T>();
        let seq = f.seq();
        let out = bytes_mut(out);
        let me = sm.me;
        let Varied {
            post,
            counts,
            displs,
            late,
            disagree,
            form,
            ..
        } = self;
        let at = |m: usize| displs[m] * size..(displs[m] + counts[m]) * size;
        let within = |m: usize| displs[m]..displs[m] + counts[m];
        if *form == Form::Gatherv {
            // One host: member m is communicator rank m.
            let want = |m: usize| counts.get(m).map_or(0, |&k| clamp_len(k * size) as usize);
            return f.poll(sm, post, want, |sm, m, seq| {
                if read_part(sm, (m, seq), &mut out[at(m)]) == Found::Late {
                    late.push((m, within(m)));
                }
            });
        }
        f.poll(
            sm,
            post,
            |m| package_len(sm, m, seq),
            |sm, m, seq| match read_block(sm, (m, seq), me, &mut out[at(m)]) {
                Found::Read => {}
                Found::Late => late.push((m, within(m))),
                Found::Differs(len) => {
                    disagree.get_or_insert((m, len));
                }
            },
        )
    }

    /// Polls a scatterv's step at `st` into `out` (this member's block); the state
    /// back, and whether it ended.
    ///
    /// # Errors
    /// A block of another length than this member's count, a publication for another
    /// collective ([`MsgError::Mismatch`]).
    pub(super) fn poll_scatterv(
        &mut self,
        st: SmState<u8>,
        sm: &SmComm,
        out: &mut [T],
    ) -> (SmState<u8>, Result<bool, MsgError>) {
        let whole = out.len();
        let mut m = SmColl::resume(sm, bytes_mut(out), None, st);
        if !self.post.is_empty() {
            m = m.scatters(&self.post);
        }
        let r = m.poll_through();
        if r.is_err() {
            m.abandon();
        }
        if matches!(r, Ok(true)) && m.by_messages() {
            self.late.push((m.root(), 0..whole));
        }
        (m.into_state(), r)
    }

    /// The sends of the blocks that do not fit a slot, started with the collective
    /// (their receivers take them once their step on the segment ended), if any.
    pub(super) fn sends(&mut self, core: &Arc<CommCore>, tag: u32) -> Option<Schedule<T>> {
        if self.sends.is_empty() {
            return None;
        }
        let mut s = Schedule::new(core, tag, vec![std::mem::take(&mut self.send)]);
        s.name(self.form.name());
        s.round();
        // One host: member m is communicator rank m.
        for (m, r) in &self.sends {
            s.send(core.ranks[*m], tag, Part::new(0, r.start, r.end));
        }
        Some(s)
    }

    /// The receives of the blocks that did not fit a slot, once the step ended, into
    /// `buf` (this member's result, moved into the schedule's only slot and given back by
    /// it), if any.
    pub(super) fn receives(
        &self,
        core: &Arc<CommCore>,
        tag: u32,
        buf: &mut Vec<T>,
    ) -> Option<Schedule<T>> {
        if self.late.is_empty() {
            return None;
        }
        let mut s = Schedule::new(core, tag, vec![std::mem::take(buf)]);
        s.name(self.form.name());
        s.round();
        for (m, r) in &self.late {
            s.recv(core.ranks[*m], tag, Part::new(0, r.start, r.end));
        }
        Some(s)
    }

    /// The step's own verdict once it ended: an alltoallv's block of another length.
    pub(super) fn verdict(&self) -> Result<(), MsgError> {
        let size = std::mem::size_of::<T>();
        match self.disagree {
            Some((m, got)) => Err(block_mismatch(m, got, self.counts[m] * size)),
            None => Ok(()),
        }
    }
}

/// Where a v collective starts on this member (`inflight.rs`: `SmJob::start_varied`).
pub(crate) struct Start<T: Element> {
    /// This member's result buffer.
    pub(super) out: Vec<T>,
    /// Its step on the segment.
    pub(super) step: First,
    /// What it reads, sends and receives.
    pub(super) v: Varied<T>,
}

/// A v collective's step on the segment.
pub(super) enum First {
    /// A gatherv's or an alltoallv's flat step.
    Flat(Flat),
    /// A scatterv's.
    Scatterv(SmState<u8>),
}

impl<T: Element> Start<T> {
    /// A gatherv to member `root` on `sm`, a ready segment: this
    /// member's part is `send` (`counts[i]` elements from member i at the root, which
    /// alone reads `counts`); the result is every part at the root, nothing elsewhere.
    pub(crate) fn gatherv(
        sm: &SmComm,
        tag: u32,
        root: usize,
        (send, counts): (Vec<T>, &[usize]),
    ) -> Start<T> {
        let me = sm.me;
        let fits = std::mem::size_of_val(send.as_slice()) <= sm.slot;
        let mut f = Flat::new(sm, tag, Kind::Gather, Some(root)).named("gatherv");
        if !fits {
            f = f.by_messages(std::mem::size_of_val(send.as_slice()));
        }
        let post = if fits {
            bytes(&send).to_vec()
        } else {
            Vec::new()
        };
        let mut v = Varied::new(Form::Gatherv, post);
        let mut out = Vec::new();
        if me == root {
            out = vec![T::default(); counts.iter().sum()];
            out[block(counts, me)].copy_from_slice(&send);
            v.counts = counts.to_vec();
            v.displs = displs(counts);
        } else if !fits {
            v.sends.push((root, 0..send.len()));
            v.send = send;
        }
        Start {
            out,
            step: First::Flat(f),
            v,
        }
    }

    /// A scatterv from member `root` on `sm`, a ready segment: at the
    /// root, `send` holds `counts[i]` elements for member i one after the other (neither
    /// is read elsewhere); the result is this member's block of `mine` elements.
    pub(crate) fn scatterv(
        sm: &SmComm,
        tag: u32,
        root: usize,
        (send, counts, mine): (Vec<T>, &[usize], usize),
    ) -> Start<T> {
        let me = sm.me;
        let st = SmState::scatterv(sm, sm.take_seq(), coll_no(tag), root);
        let mut out = vec![T::default(); mine];
        let mut v = Varied::new(Form::Scatterv, Vec::new());
        if me == root {
            out.copy_from_slice(&send[block(counts, me)]);
            if !pack_into(
                &mut v.post,
                bytes(&send),
                &byte_counts::<T>(counts),
                sm.slot,
            ) {
                v.post = by_messages().to_vec();
                v.send_all(send, counts, me);
            }
        }
        Start {
            out,
            step: First::Scatterv(st),
            v,
        }
    }

    /// An alltoallv on `sm`, a ready segment: `send` holds
    /// `send_counts[j]` elements for member j one after the other; the result holds
    /// `recv_counts[i]` elements from member i one after the other.
    pub(crate) fn alltoallv(
        sm: &SmComm,
        tag: u32,
        send: Vec<T>,
        (send_counts, recv_counts): (&[usize], &[usize]),
    ) -> Start<T> {
        let (me, n) = (sm.me, sm.n());
        let mut out = vec![T::default(); recv_counts.iter().sum()];
        out[block(recv_counts, me)].copy_from_slice(&send[block(send_counts, me)]);
        let mut v = Varied::new(Form::Alltoallv, Vec::new());
        let lens = byte_counts::<T>(send_counts);
        let packed = pack_into(&mut v.post, bytes(&send), &lens, sm.slot);
        let mut f = Flat::new(sm, tag, Kind::Alltoall, None).named("alltoallv");
        v.counts = recv_counts.to_vec();
        v.displs = displs(recv_counts);
        if !packed {
            f = f.by_messages(table_bytes(n) + std::mem::size_of_val(send.as_slice()));
            v.send_all(send, send_counts, me);
        }
        Start {
            out,
            step: First::Flat(f),
            v,
        }
    }
}
