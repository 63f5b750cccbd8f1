//! Collectives of small messages through shared memory within a host (Open MPI's coll/sm,
//! MPICH's release/gather): one segment per communicator and host, holding two cache lines
//! of flags per local member (a hot one it writes at every post, a cold one), a ring of
//! [`SLOTS`] data slots per member and a ring of result slots. Allgather(v), alltoall,
//! gather and reduce-scatter are flat (`gather.rs`: every member posts its part and reads
//! everyone's; a gather's root alone reads them, and its contributors are done once posted;
//! `fold.rs`: a reduce-scatter's member folds its block of everyone's). Gatherv, scatterv
//! and alltoallv take the segment within one host whatever their lengths (`varied.rs`):
//! their posts say where the data lies, in a slot or in messages beside it. Scans (`scan.rs`)
//! are a chain among fewer than [`spools_coll::SCAN_DOUBLING_MIN`] members (`chain.rs`:
//! each member folds its part after its left neighbour's prefix and posts the result for
//! its right neighbour), recursive doubling among more that have a CPU each
//! (`doubling.rs`: a sequence number per round, `log2 P` rounds), or not through the
//! segment where the ranks outnumber the CPUs (a chain of eager messages, which lets a
//! member run ahead by many scans): `coll_sm_scan`, decided by the segment's creator,
//! [`ScanWay::choose`]. Non-blocking collectives within one host run the same machines on
//! a segment of their own (`inflight.rs`).
//!
//! Every collective of this kind has a sequence number `s` (the same on every member, as
//! they call collectives in the same order; it wraps, and comparisons are modular; a scan
//! by recursive doubling takes one per round, as many on every member).
//! Barrier, bcast, reduce, allreduce and scatter are a fan-in and a fan-out around one
//! *root* member (a scatter is a broadcast of every member's part, from which each copies
//! its own):
//!
//! - every member *posts*: it copies its contribution (reductions) into its data slot and
//!   sets its `posted` flag to `s`, which also says it has finished collective `s - 1`;
//! - the root *collects*: it waits until every `posted` reaches `s` (for a broadcast or a
//!   scatter `s - outs + 1` only: it reads no contribution, so a root may run ahead of the
//!   others by that many broadcasts) and reduces the slots in rank order;
//! - the root *publishes*: it writes the result to result slot `s % outs` and sets that
//!   slot's `ready` flag to `s`; the others wait for it and copy the result out. A
//!   reduce's contributors do not wait: they are done once posted.
//!
//! Among few members on one host, barrier and allreduce are *flat* instead: every member
//! posts, waits for every post and reduces all contributions itself, in rank order (one
//! step instead of two). Among many (`machine::TREE_MIN`), barrier, reduce and allreduce
//! gather over a tree of two levels: the members form groups of 4 in rank order, each
//! group's leader (the root in the root's group, else the group's first member) folds its
//! group's contributions in rank order into its own before it posts, and the root
//! collects the leaders' posts and its own group's; a leader that finds a disagreement
//! marks it (a failure mark, below) and posts a length that says so, which the root
//! reports as the disagreement the leader saw.
//!
//! Why no slot is overwritten while someone still reads it: every read of a slot happens
//! within its collective, before the reader posts the next one. A member has [`SLOTS`] data
//! slots (and as many length words and inline cells of 8 bytes) and writes slot `s % SLOTS`
//! only once whoever read it posted `s - SLOTS + 1` or later (finished `s - SLOTS`, the
//! last collective that wrote that slot: known without a look at anyone's line after a
//! collective that waited for every post, see [`Ledger::all_posted`]; for a slot read by
//! one member, from the last look at that member's line while it says enough, a *credit*,
//! [`SmComm::slot_free`]). Each slot and cell records the collective that wrote it last and
//! its readers: collective `s` uses the two cells of its parity, a part of up to 8 bytes
//! one of them in turn (free once the readers of `s - 4` finished it), one of up to 16 both
//! (the readers of `s - 2`). A reduce's and a gather's posts, whose contributors are
//! done once posted, go instead into each member's *deep ring* of [`RING`] entries of two
//! cache lines ([`Kind::deep`], [`SmComm::deep_len`]): the length and up to [`DEEP_DATA`]
//! bytes of the part in entry `s % RING`, the rest (if any) in the data slot. An entry is
//! reused under the same rule, once its one reader finished the collective that wrote it
//! last ([`Ledger::ring_free`]), so a contributor of up to [`DEEP_DATA`] bytes runs up
//! to `RING - 1` collectives ahead of its root (a longer one `SLOTS - 1`, its slot's) and
//! looks at the root's line about once in that many: with the root behind (busy, or
//! reading many members), its contributors go on with their own work instead of waiting
//! for it every few calls (a loop of reduces of 8 bytes on 2 cores takes about a third of
//! the time it took when they could run 3 calls ahead at 4 members, a quarter at 8). The
//! root of `s`
//! writes result slot `s % outs` only once every member posted `s - outs + 1` or later. A
//! chained scan's member reads its left neighbour's slot before it posts the scan, so there
//! the writer waits only for its reader's post of `s - SLOTS` ([`Readers::BeforePost`]). The
//! rule and its records are sans-IO, in `spools-coll`'s [`Ledger`], where loom checks them
//! against writers and readers that run ahead (`crates/spools-coll/tests/slots_model.rs`).
//!
//! Waiting goes through the active-message layer's wait (it drives progress, yields when
//! ranks outnumber cores and fails when a rank dies), then sleeps on a futex word of this
//! rank's flag line in the segment, which a member that sets a flag rings when the waiter
//! says it sleeps; that sleep is bounded ([`NAP`]) so the watchdog is re-checked often.
//! Sleepers are counted in a line of their own, so that setting a flag while nobody
//! sleeps costs one load of a line that stays in every cache ([`SmComm::wake_all`]).
//!
//! The segment is created at a communicator's first collective that could use it (or
//! the one `Communicator::defer_shared_memory` names) (of
//! any length, so that every member takes part in the handshake whatever the length it
//! was given) by its lowest member on the host and opened by the others after a
//! point-to-point handshake on the communicator, in which every member also says whether
//! it can use it: the segment is off for all if one cannot, or if their `coll_sm_limit`s
//! differ (a length would otherwise go through the segment on some members and through
//! the messages on others). Its creator unlinks it once every member answered (or the
//! handshake failed), and it is unmapped with the communicator.
//!
//! # Ranks that disagree about the path
//!
//! Each member chooses the segment or the messages from its own length (but for gatherv,
//! scatterv and alltoallv, which take the segment whatever their lengths: `varied.rs`). In an erroneous
//! program whose members pass lengths on both sides of the limit, some wait on the
//! segment for posts that never come and the others on messages that are never sent.
//! Making them agree first (a flag round, an allgather) would cost every small collective
//! a step; instead each side leaves a trace the other side looks for *while it waits*,
//! never on the way through:
//!
//! - a post carries a *record* (the collective's number, its base tag over 256, and the
//!   low bits of its sequence number) in the high half of the 64-bit `posted` word: the
//!   same store, and for readers the same load, so the fast path does no extra access.
//!   A root's publication likewise carries the number in the high half of the result
//!   slot's 64-bit `ready` word. Readers compare it on the way (a register compare): a
//!   post or result of this sequence number for another collective is a disagreement;
//!   they read nothing else;
//! - a member that runs the collective through the messages where the segment could have
//!   served it but for the length writes a record saying so, with the sequence number it
//!   would have used (its next one), and its waits in that collective (receives,
//!   rendezvous sends) watch the segment
//!   ([`SmComm::split_on_messages`]): a member that posted this collective, or a result
//!   published for it, means the others took the segment;
//! - a member waiting on the segment looks at the others' records before each nap,
//!   never while it spins ([`SmComm::split_on_segment`]): a member that runs this
//!   collective, or a later one, through the messages without having taken this
//!   sequence number never posts it;
//! - a member that fails a collective because the ranks disagree (by either check, or a
//!   message of the wrong length) leaves a sticky *failure mark* in its flag line with the
//!   disagreement it saw: every member still waiting in that collective, on the segment
//!   or on messages, fails with it, even once the marking member went on. Across hosts a
//!   host leader that fails also sends the other leaders an empty message on each tag of
//!   the phase between hosts, which none of them accepts, so they fail and mark their
//!   own hosts' segments.
//!
//! Detection takes at most a spin time and a nap ([`NAP`]) after both sides arrived; the
//! setup of the segment does not depend on the lengths (see above), so the same holds
//! at a communicator's first collective. So every member that waits for the others gets
//! [`MsgError::Mismatch`] (naming, where known, a rank whose length differs and that
//! length) instead of waiting forever; a member whose part
//! completes without waiting for the others (a broadcast's root, a contributor to a
//! reduce on either path, a member that agrees with the broadcast's root) may
//! succeed, as with messages alone. After such an error the communicator's collectives
//! are not to be used (its members may disagree about sequence numbers; a post or result
//! for another collective than the reader's is reported as [`MsgError::Mismatch`] rather
//! than read); other communicators are not affected.

mod chain;
mod coll;
mod doubling;
mod fold;
mod gather;
mod inflight;
mod kind;
mod machine;
mod scan;
mod setup;
mod slot;
mod varied;
mod varied_job;
mod way;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use spools_am::{SharedArea, Worker};
use spools_coll::ledger::{cells, Posts, CELL, INLINE, RING};

use crate::error::MsgError;

pub(crate) use coll::{
    allreduce, barrier, bcast, decline, failed, fits, reduce, scatter, ALLREDUCE_LEADER_TAGS,
    BCAST_LEADER_TAGS,
};
pub(crate) use fold::reduce_scatter;
pub(crate) use gather::{allgatherv, alltoall, gather};
pub(crate) use inflight::{run_segment, serving, Parts, SharedJob, SmJob};
pub(crate) use kind::Kind;
pub(crate) use machine::scratch;
pub(crate) use scan::{scan, scans_by_messages};
pub(crate) use slot::SmSlot;
pub(crate) use spools_coll::ledger::{seq_ge, Ledger, Readers, SLOTS};
pub(crate) use varied::{alltoallv, gatherv, scatterv};
pub(crate) use varied_job::Start as VariedStart;
pub(crate) use way::ScanWay;

/// Looks at a collective's flags before its wait drives progress (see [`SmComm::drive`]).
const QUICK_LOOKS: u32 = 128;

/// Longest sleep on the segment's futex before the wait looks at the job's health again.
const NAP: Duration = Duration::from_millis(2);

/// Elements of a contribution that a member copies on its stack rather than on the heap
/// (its own part, a peer's part it folds; 64 bytes of the widest element): no allocation
/// per collective for the small ones.
pub(crate) const SMALL: usize = 8;

/// The first sequence number: close to the wrap, so that any run of a few hundred
/// collectives exercises it.
const FIRST_SEQ: u32 = u32::MAX - 255;

/// Bytes of result slots a segment aims at: `outs`, the number of result slots, is this
/// over the slot size, a power of two from 8 to 64 (64 of 4 KiB by default).
const RESULT_BYTES: usize = 256 << 10;

/// `out_len` of a result slot whose collective failed at the root (the ranks disagree).
const FAILED: u32 = u32::MAX;
/// The length a tree's group leader posts when its group disagreed: its failure mark
/// names the disagreement ([`SmComm::failure_of`]).
const FAILED_PART: u32 = u32::MAX - 1;

/// Bytes of a member's flag lines: a *hot* line (its post, its contributions' lengths and
/// small contributions inline), written by its owner at every post and read by whoever
/// waits for the post, then a *cold* one (its bell, whether it sleeps, its records),
/// which nobody looks at on the fast path.
const LINE: usize = 128;
/// Bytes of a cache line.
const CACHE_LINE: usize = 64;
/// Offsets within the hot line. `POSTED`: one 64-bit word, the sequence number posted in
/// its low half and, in its high half, the *record* of that post (the collective's number,
/// see [`coll_no`], the low bits of the sequence number, [`VALID`]), set by one store and
/// read by one load: the fast path pays no extra access for the record. Then the lengths
/// of its contributions (one per data slot), and [`SLOTS`] cells of [`CELL`] bytes for
/// contributions of up to [`spools_coll::ledger::INLINE`] bytes, which a reader of the post finds in the line
/// it loaded ([`cells`]): 8 + 4 x 4 + 4 x 8 = 56 of the line's 64 bytes.
const POSTED: usize = 0;
const LEN: usize = 8;
const DATA: usize = LEN + 4 * SLOTS;
/// Bytes of a deep ring entry, two cache lines of its own (a writer running ahead does
/// not take the lines of the entry its reader reads; a part of 64 bytes with its length
/// costs a reader a pair of adjacent lines, where it took one of the data slot's before):
/// a length word, padding, and the first [`DEEP_DATA`] bytes of the contribution (see
/// [`SmComm::deep_len`], [`SmComm::write_deep`]).
const RING_ENTRY: usize = 2 * CACHE_LINE;
/// Where a ring entry's contribution begins, after its length word.
const RING_HEAD: usize = 8;
const DEEP_DATA: usize = RING_ENTRY - RING_HEAD;
/// Results of up to this many bytes ride beside their result slot's flags.
const OUT_INLINE: usize = 16;
const _: () = assert!(DATA + CELL * SLOTS <= CACHE_LINE);

/// Offsets within the cold line: the futex word the member sleeps on and whether it
/// sleeps.
const BELL: usize = 64;
const SLEEPING: usize = 68;
/// The member's latest record of a collective it runs through the messages where the
/// segment could have served it ([`MSG_PATH`], the number, [`VALID`]), its length there,
/// the sequence number it would have given it (its next one then), and its full number
/// (32 bits: see [`SmComm::full_no`]). Written on the messages' path only; read by the
/// others only while they wait.
const MREC: usize = 72;
const MREC_LEN: usize = 76;
const MREC_SEQ: usize = 80;
const MREC_FULL: usize = 100;
/// The last collective this member failed because the ranks disagree (with [`VALID`]),
/// its length there, and the disagreement it saw (the rank, `u32::MAX` if not known, and
/// its bytes), which the members it fails report in turn: sticky, so that a member still
/// waiting in it sees it.
const FAIL: usize = 84;
const FAIL_LEN: usize = 88;
const FAIL_FROM: usize = 92;
const FAIL_GOT: usize = 96;
/// Flags of a record word; a record of a post also holds the low bits of its sequence
/// number (bits 24 to 29, [`SEQ_BITS`]).
const VALID: u32 = 1 << 31;
const MSG_PATH: u32 = 1 << 30;
const SEQ_BITS: u32 = 0x3f << 24;
/// Collective numbers (a base tag over 256) have 24 bits.
const NO_MASK: u32 = (1 << 24) - 1;
/// Bytes of a result slot's flags (after the members' lines): one 64-bit word, `ready`
/// in its low half and the collective's number (with [`VALID`]) in its high half, then
/// the length, then a result of up to [`OUT_INLINE`] bytes, in a cache line of its own (a
/// reader loads one line, and a root that publishes the next result does not take the
/// line from readers still on this one).
const OUT_FLAGS: usize = CACHE_LINE;
const READY: usize = 0;
const OUT_LEN: usize = 8;
const OUT_DATA: usize = 16;
/// After the result slots' flags, a line of its own holding the number of members that
/// sleep (or are about to) on their bells: a member that sets a flag loads this one word
/// and looks at the members' `SLEEPING` words only when it is not 0, so that a post or
/// a publication costs one load of a line nobody writes while every member spins,
/// instead of a load of every member's flag line (which its owner writes at every post).
fn sleepers_at(outs: usize) -> usize {
    (OUT_FLAGS * outs).next_multiple_of(CACHE_LINE)
}

/// The record of a post of `seq` for collective `no`.
pub(crate) fn post_record(seq: u32, no: u32) -> u32 {
    VALID | (seq << 24 & SEQ_BITS) | no
}

/// A 64-bit flag word: `low` in its low half, `high` in its high half.
pub(crate) fn pair(low: u32, high: u32) -> u64 {
    u64::from(high) << 32 | u64::from(low)
}

/// The halves (low, high) of a 64-bit flag word.
pub(crate) fn halves(w: u64) -> (u32, u32) {
    (w as u32, (w >> 32) as u32)
}

/// The collective number of a base tag.
pub(crate) fn coll_no(tag: u32) -> u32 {
    (tag >> 8) & NO_MASK
}

/// `a >= b` among collective numbers (modulo 2^24).
fn no_ge(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) & NO_MASK < 1 << 23
}

/// What a waiting member watches for: the collective's sequence number on the segment,
/// its number, and this member's bytes in it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    pub(crate) seq: u32,
    pub(crate) no: u32,
    pub(crate) bytes: usize,
    pub(crate) op: &'static str,
    /// Whether members post their lengths (reductions).
    pub(crate) lens: bool,
    /// Sequence numbers the collective takes from `seq` on ([`SmComm::seqs`]: a scan by
    /// recursive doubling, one per round).
    pub(crate) span: u32,
    /// Whether its posts' lengths lie in the deep ring ([`Kind::deep`]).
    pub(crate) deep: bool,
}

impl Watch {
    /// What a collective of `kind` whose members post their lengths watches for:
    /// sequence number `seq`, number `no`, `bytes` here.
    pub(crate) fn posting(seq: u32, no: u32, kind: kind::Kind, bytes: usize) -> Watch {
        Watch {
            seq,
            no,
            bytes,
            op: kind.name(),
            lens: true,
            span: 1,
            deep: kind.deep(),
        }
    }
}

/// One communicator's segment on this host, as seen by one member.
pub(crate) struct SmComm {
    area: SharedArea,
    /// Local members (communicator ranks, ascending).
    pub(crate) members: Vec<u32>,
    /// This rank's index among them.
    pub(crate) me: usize,
    /// Bytes of each slot.
    pub(crate) slot: usize,
    /// Result slots (a power of two).
    pub(crate) outs: usize,
    /// Its sequence numbering and the record of what it wrote where, for whom, and
    /// what it knows of the others' progress: when a data slot or inline cell may be
    /// written over ([`Ledger`]).
    ledger: Ledger,
    /// Sequence numbers taken beyond one per collective (a scan by recursive doubling
    /// takes one per round): what the count of collectives run here leaves out
    /// ([`SmComm::ran`]), kept off the path of every other collective.
    extra: AtomicU32,
    /// How scans go: the creator's choice ([`ScanWay::choose`]), told to every member in
    /// the handshake.
    scans: ScanWay,
    /// The last collective this member finished: the next one posts only after it (a
    /// post of `s` tells the others that `s - 1` is finished here), so collectives go
    /// in call order.
    done: AtomicU32,
    /// The collective (number, with [`VALID`]) this member runs through the messages
    /// while the segment could have served it: its waits on messages watch the segment
    /// ([`SmComm::split_on_messages`]).
    watching: AtomicU32,
    /// What those waits watch for (boxed: off the fields the fast path reads).
    watch: Box<Mutex<Option<Watch>>>,
    /// The count of collectives started on this member's communicator (blocking or
    /// non-blocking, as the segment serves: the core's own count), which numbers them.
    started: Arc<AtomicU32>,
    worker: Worker,
    /// Whether every member takes part in asymmetric fences (agreed in the handshake,
    /// [`SharedArea::light_fences`]): a post or a publication is then a release store
    /// and a compiler barrier before the look at the sleepers, and a member about to
    /// sleep runs [`SharedArea::heavy_fence`] before its last look ([`SmComm::raise`]).
    light: bool,
}

impl std::fmt::Debug for SmComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmComm")
            .field("members", &self.members)
            .field("me", &self.me)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// The members' posts as the ledger reads them: their `posted` words in the segment.
impl Posts for SmComm {
    fn members(&self) -> usize {
        self.n()
    }

    fn posted(&self, m: usize) -> u32 {
        self.posted_seq(m)
    }
}

/// A length as the segment's words hold it.
pub(crate) fn clamp_len(bytes: usize) -> u32 {
    bytes.min(FAILED_PART as usize - 1) as u32
}

impl SmComm {
    /// Result slots of a segment with slots of `slot` bytes.
    pub(crate) fn outs(slot: usize) -> usize {
        (RESULT_BYTES / slot.max(1))
            .clamp(8, 64)
            .next_power_of_two()
    }

    /// Bytes of the result slots' flags, padded by a multiple of a page over the 8
    /// bytes per result slot they once took, so that the data slots keep their place
    /// within a page (the copies into and out of them are measurably slower elsewhere).
    fn flag_bytes(outs: usize) -> usize {
        let before = (8 * outs).next_multiple_of(CACHE_LINE);
        let need = sleepers_at(outs) + CACHE_LINE;
        before + (need - before).next_multiple_of(4096)
    }

    /// Bytes of a segment for `n` members with slots of `slot` bytes.
    pub(crate) fn bytes(n: usize, slot: usize) -> usize {
        let outs = Self::outs(slot);
        Self::rings_at(n, slot, outs) + n * RING * RING_ENTRY
    }

    /// Where the members' deep rings begin: after the data and result slots.
    fn rings_at(n: usize, slot: usize, outs: usize) -> usize {
        n * LINE + Self::flag_bytes(outs) + (SLOTS * n + outs) * slot
    }

    /// Lays out a fresh segment (creator only, before anyone else maps it).
    fn init(&self) {
        for i in 0..self.n() {
            self.posted(i)
                .store(pair(FIRST_SEQ.wrapping_sub(1), 0), Ordering::Relaxed);
        }
        for k in 0..self.outs {
            self.ready(k)
                .store(pair(FIRST_SEQ.wrapping_sub(1), 0), Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::Release);
    }

    pub(crate) fn n(&self) -> usize {
        self.members.len()
    }

    /// Whether collective `seq` may post: this member finished every earlier one.
    pub(crate) fn may_post(&self, seq: u32) -> bool {
        self.done.load(Ordering::Acquire) == seq.wrapping_sub(1)
    }

    /// Records that this member finished collective `seq`.
    pub(crate) fn finished(&self, seq: u32) {
        self.done.store(seq, Ordering::Release);
    }

    /// Whether this member's data slot (and length word) for collective `seq`, and the
    /// inline cells of a contribution of `len` bytes, may be written: whoever read what
    /// was written there last finished that collective ([`Ledger::slot_free`]). A
    /// reduce's contributor looks at its root's line alone, and only when its last look
    /// there no longer says enough; after a flat collective, at everyone's.
    pub(crate) fn slot_free(&self, seq: u32, len: usize) -> bool {
        self.ledger.slot_free(seq, len, self)
    }

    /// Records who reads what this member writes for collective `seq`, `len` bytes, into
    /// its data slot (or inline cells) and length word.
    pub(crate) fn slot_read_by(&self, seq: u32, len: usize, readers: Readers) {
        self.ledger.read_by(seq, len, readers);
    }

    /// Whether this member knows, without a look, that every member has posted `seq`
    /// or later.
    pub(crate) fn knows_all_posted(&self, seq: u32) -> bool {
        self.ledger.knows_all_posted(seq)
    }

    /// Records that every member has posted `seq` or later.
    pub(crate) fn saw_all_posted(&self, seq: u32) {
        self.ledger.saw_all_posted(seq);
    }

    /// The full number (32 bits, wrapping: the count of the communicator's collectives
    /// before it) of collective number `no`, one of the last 2^24 started on this member:
    /// what records compare, so that a record stays older than the collectives after it
    /// for 2^31 of them rather than 2^23 (collective numbers, [`NO_MASK`], wrap at 2^24).
    fn full_no(&self, no: u32) -> u32 {
        let last = self.started.load(Ordering::Relaxed).wrapping_sub(1);
        last.wrapping_sub(last.wrapping_sub(no) & NO_MASK)
    }

    /// Takes the next sequence number.
    pub(crate) fn take_seq(&self) -> u32 {
        self.ledger.take_seq()
    }

    /// Takes the next `count` sequence numbers for one collective: the first.
    pub(crate) fn take_seqs(&self, count: u32) -> u32 {
        self.extra
            .fetch_add(count.saturating_sub(1), Ordering::Relaxed);
        self.ledger.take_seqs(count)
    }

    /// Whether member `left`'s part of `part` bytes for collective `no` at sequence number
    /// `seq` (a scan's, which this member reads before it goes on) is posted: `Ok(false)`
    /// while it is not. A post of another collective at `seq`, a part of another length,
    /// or a post past `seq` by a member that failed this collective (it marks that before
    /// any later post of its own; what its slot holds then is not this collective's) is
    /// [`MsgError::Mismatch`].
    pub(crate) fn left_post(
        &self,
        left: usize,
        (seq, no): (u32, u32),
        op: &'static str,
        part: usize,
    ) -> Result<bool, MsgError> {
        let (posted, rec) = halves(self.posted(left).load(Ordering::Acquire));
        if !seq_ge(posted, seq) {
            return Ok(false);
        }
        if posted != seq {
            if let Some(e) = self.failed_in(left, no, op, part) {
                return Err(e);
            }
        }
        let len = self.len_of(left, seq).load(Ordering::Relaxed) as usize;
        if (posted == seq && rec != post_record(seq, no)) || len != part {
            return Err(self.mismatch(op, left, len, part));
        }
        Ok(true)
    }

    /// How scans go here (the creator's choice, [`ScanWay::choose`]).
    pub(crate) fn scan_way(&self) -> ScanWay {
        self.scans
    }

    /// Sequence numbers a collective of `kind` takes: a scan by recursive doubling one
    /// per round, every other one.
    pub(crate) fn seqs(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Scan | Kind::Exscan if self.scans == ScanWay::Doubling => {
                spools_coll::scan_rounds(self.n())
            }
            _ => 1,
        }
    }

    /// Collectives run on this segment by this member.
    pub(crate) fn ran(&self) -> u32 {
        (self.ledger.next())
            .wrapping_sub(FIRST_SEQ)
            .wrapping_sub(self.extra.load(Ordering::Relaxed))
    }

    fn word(&self, member: usize, field: usize) -> &AtomicU32 {
        self.area.u32_at(member * LINE + field)
    }

    fn shared(&self, field: usize) -> &AtomicU32 {
        self.area.u32_at(self.n() * LINE + field)
    }

    /// Member `member`'s `posted` word: the sequence number it posted last and that
    /// post's record (see [`POSTED`]; [`halves`]).
    pub(crate) fn posted(&self, member: usize) -> &AtomicU64 {
        self.area.u64_at(member * LINE + POSTED)
    }

    /// Posts collective `seq` (number `no`) for this member: the post and its record in
    /// one store; then wakes whoever sleeps (anyone may wait for a post: a root, a flat
    /// member, a contributor about to write its slot).
    pub(crate) fn post(&self, seq: u32, no: u32) {
        self.raise(self.posted(self.me), pair(seq, post_record(seq, no)));
    }

    /// Whether this segment's flags go with light fences (agreed by its members).
    pub(crate) fn light(&self) -> bool {
        self.light
    }

    /// Sets a flag word others wait for (a post, a publication) to `value` and wakes whoever
    /// sleeps. With light fences ([`SmComm::light`]) a release store, then only a compiler
    /// barrier before the look at the sleepers (a sleeper's heavy fence, in
    /// [`SmComm::drive`], orders the pair); else a sequentially consistent store, which on
    /// x86 waits for the flag's line to come back from the members polling it (most of a
    /// broadcast root's time in a loop of small ones).
    pub(crate) fn raise(&self, word: &AtomicU64, value: u64) {
        if self.light {
            word.store(value, Ordering::Release);
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        } else {
            word.store(value, Ordering::SeqCst);
        }
        self.wake_all();
    }

    /// The sequence number member `member` posted last.
    pub(crate) fn posted_seq(&self, member: usize) -> u32 {
        halves(self.posted(member).load(Ordering::Acquire)).0
    }

    /// The length of member `member`'s contribution to collective `seq`.
    pub(crate) fn len_of(&self, member: usize, seq: u32) -> &AtomicU32 {
        self.word(member, LEN + 4 * (seq as usize % SLOTS))
    }

    /// Result slot `k`'s `ready` word: the sequence number published there last, and
    /// that collective's number with [`VALID`] (see [`OUT_FLAGS`]; [`halves`]).
    pub(crate) fn ready(&self, k: usize) -> &AtomicU64 {
        self.area.u64_at(self.n() * LINE + OUT_FLAGS * k + READY)
    }

    pub(crate) fn out_len(&self, k: usize) -> &AtomicU32 {
        self.shared(OUT_FLAGS * k + OUT_LEN)
    }

    /// The segment's record (read by a member that waits) of collective `no` from tag
    /// `tag`: this member runs it through the messages with `bytes` (the segment could
    /// have served it but for the length), and its waits on messages watch the segment.
    /// Returns what this member's waits in it watch for ([`SmComm::split_on_messages`]):
    /// the sequence number it would have had here is the next one, now.
    pub(crate) fn enter_messages(&self, kind: Kind, tag: u32, bytes: usize) -> Watch {
        let no = coll_no(tag);
        let w = Watch {
            seq: self.ledger.next(),
            no,
            bytes,
            op: kind.name(),
            lens: kind.contributes(),
            span: self.seqs(kind),
            deep: kind.deep(),
        };
        self.word(self.me, MREC_LEN)
            .store(clamp_len(bytes), Ordering::Relaxed);
        self.word(self.me, MREC_SEQ).store(w.seq, Ordering::Relaxed);
        self.word(self.me, MREC_FULL)
            .store(self.full_no(no), Ordering::Relaxed);
        self.word(self.me, MREC)
            .store(VALID | MSG_PATH | no, Ordering::SeqCst);
        *self.watch.lock().unwrap_or_else(PoisonError::into_inner) = Some(w);
        self.watching.store(VALID | no, Ordering::Release);
        // Members waiting in this collective on the segment look at records only
        // between naps: wake them.
        self.wake_all();
        w
    }

    /// What a blocking collective `no` that this member runs through the messages
    /// watches for (see [`SmComm::enter_messages`]), if it is that.
    pub(crate) fn watch_for(&self, no: u32) -> Option<Watch> {
        if self.watching.load(Ordering::Acquire) != VALID | no {
            return None;
        }
        let w = *self.watch.lock().unwrap_or_else(PoisonError::into_inner);
        w.filter(|w| w.no == no)
    }

    /// Leaves a sticky mark that this member failed collective `no` (of `bytes` here)
    /// because the ranks disagree: every member still waiting in it, on the segment or
    /// on messages, fails too.
    pub(crate) fn mark_failed(&self, no: u32, bytes: usize, e: &MsgError) {
        let (from, got) = match e {
            MsgError::Mismatch { from, got, .. } => (from.unwrap_or(u32::MAX), *got),
            MsgError::Truncated {
                len, source_rank, ..
            } => (*source_rank, *len),
            _ => (u32::MAX, bytes),
        };
        self.word(self.me, FAIL_LEN)
            .store(clamp_len(bytes), Ordering::Relaxed);
        self.word(self.me, FAIL_FROM).store(from, Ordering::Relaxed);
        self.word(self.me, FAIL_GOT)
            .store(clamp_len(got), Ordering::Relaxed);
        self.word(self.me, FAIL).store(VALID | no, Ordering::SeqCst);
        self.wake_all();
    }

    /// Member `m`'s mark that it failed collective `no`, as the error of a member with
    /// `want` bytes: the disagreement `m` saw, or (when that rank's length is this
    /// member's own, or not known) `m`'s own length.
    pub(crate) fn failed_in(
        &self,
        m: usize,
        no: u32,
        op: &'static str,
        want: usize,
    ) -> Option<MsgError> {
        if self.word(m, FAIL).load(Ordering::Acquire) != VALID | no {
            return None;
        }
        let from = self.word(m, FAIL_FROM).load(Ordering::Relaxed);
        let got = self.word(m, FAIL_GOT).load(Ordering::Relaxed) as usize;
        if from != u32::MAX && got != want {
            return Some(MsgError::Mismatch {
                op,
                from: Some(from),
                got,
                want,
            });
        }
        let own = self.word(m, FAIL_LEN).load(Ordering::Relaxed) as usize;
        Some(self.mismatch(op, m, own, want))
    }

    /// The disagreement member `m` marked last (see [`SmComm::mark_failed`]): the
    /// member it names (or `m` itself when it names none on this host) and its bytes.
    pub(crate) fn failure_of(&self, m: usize) -> (usize, usize) {
        let from = self.word(m, FAIL_FROM).load(Ordering::Acquire);
        let got = self.word(m, FAIL_GOT).load(Ordering::Relaxed) as usize;
        let at = self.members.iter().position(|&r| r == from).unwrap_or(m);
        (at, got)
    }

    pub(crate) fn mismatch(&self, op: &'static str, m: usize, got: usize, want: usize) -> MsgError {
        MsgError::Mismatch {
            op,
            from: self.members.get(m).copied(),
            got,
            want,
        }
    }

    /// For a member waiting on the segment in collective `w.no` (sequence `w.seq`): a
    /// member that failed it, or that runs it (or a later one) through the messages
    /// without having taken its sequence number, never posts it: the ranks chose their
    /// paths from lengths that disagree. Read only while waiting. Whether a record is of
    /// this collective or a later one is judged by full numbers ([`SmComm::full_no`]): a
    /// record of long ago is never taken for a later one.
    pub(crate) fn split_on_segment(&self, w: &Watch) -> Option<MsgError> {
        let full = self.full_no(w.no);
        for m in (0..self.n()).filter(|&m| m != self.me) {
            if let Some(e) = self.failed_in(m, w.no, w.op, w.bytes) {
                return Some(e);
            }
            let rec = self.word(m, MREC).load(Ordering::Acquire);
            if rec & (VALID | MSG_PATH) == VALID | MSG_PATH
                && seq_ge(self.word(m, MREC_FULL).load(Ordering::Relaxed), full)
                && !seq_ge(
                    self.word(m, MREC_SEQ).load(Ordering::Relaxed),
                    w.seq.wrapping_add(1),
                )
            {
                let got = self.word(m, MREC_LEN).load(Ordering::Relaxed) as usize;
                return Some(self.mismatch(w.op, m, got, w.bytes));
            }
        }
        None
    }

    /// For a member waiting on messages in collective `no` (of `bytes` here, which it
    /// runs through the messages): a member that failed it, that posted it on the segment
    /// (at the sequence number this member would have given it, the next one), or a
    /// result published there for it: the ranks chose their paths from lengths that
    /// disagree. Read only while waiting.
    pub(crate) fn split_on_messages(&self, w: &Watch) -> Option<MsgError> {
        let (op, no, bytes, seq) = (w.op, w.no, w.bytes, w.seq);
        for m in (0..self.n()).filter(|&m| m != self.me) {
            if let Some(e) = self.failed_in(m, no, op, bytes) {
                return Some(e);
            }
            // A contribution posted here for this collective, at any of its sequence
            // numbers (a broadcast's members either fail, which marks it, or get a
            // result published).
            let (at, rec) = halves(self.posted(m).load(Ordering::Acquire));
            if w.lens && at.wrapping_sub(seq) < w.span && rec == post_record(at, no) {
                let got = self.post_len(m, at, w.deep).load(Ordering::Relaxed) as usize;
                return Some(self.mismatch(op, m, got, bytes));
            }
        }
        let k = seq as usize % self.outs;
        if self.ready(k).load(Ordering::Acquire) == pair(seq, VALID | no) {
            let len = self.out_len(k).load(Ordering::Relaxed);
            let got = if len == FAILED { 0 } else { len as usize };
            return Some(MsgError::Mismatch {
                op,
                from: None,
                got,
                want: bytes,
            });
        }
        None
    }

    /// Member `m`'s deep ring entry for collective `seq` ([`RING`] per member, in turn):
    /// its length word, then [`DEEP_DATA`] bytes of contribution.
    fn ring_off(&self, m: usize, seq: u32) -> usize {
        Self::rings_at(self.n(), self.slot, self.outs)
            + (RING * m + seq as usize % RING) * RING_ENTRY
    }

    /// The length of member `m`'s post to reduce or gather `seq` ([`FAILED_PART`] from a
    /// leader whose group disagreed): in its deep ring ([`Kind::deep`]), so that a
    /// contributor of up to [`DEEP_DATA`] bytes runs up to [`RING`] - 1 collectives ahead
    /// of its reader rather than [`SLOTS`] - 1.
    fn deep_len(&self, m: usize, seq: u32) -> &AtomicU32 {
        self.area.u32_at(self.ring_off(m, seq))
    }

    /// Whether this member may write its post of `len` bytes to collective `seq`, deep
    /// (`deep`, [`Kind::deep`]: [`SmComm::deep_free`]) or not ([`SmComm::slot_free`]).
    pub(crate) fn part_free(&self, seq: u32, len: usize, deep: bool) -> bool {
        if deep {
            self.deep_free(seq, len)
        } else {
            self.slot_free(seq, len)
        }
    }

    /// Writes this member's post to collective `seq` where `readers` look (call once
    /// [`SmComm::part_free`] said yes): records them, copies `part` unless nobody reads
    /// it, and stores `len` (its length, or [`FAILED_PART`]) in the length word; the post
    /// itself comes after ([`SmComm::post`]).
    pub(crate) fn put_part(&self, seq: u32, part: &[u8], readers: Readers, deep: bool, len: u32) {
        let word = if deep {
            self.deep_read_by(seq, part.len(), readers);
            if readers != Readers::Nobody {
                self.write_deep(seq, part);
            }
            self.deep_len(self.me, seq)
        } else {
            self.slot_read_by(seq, part.len(), readers);
            if readers != Readers::Nobody {
                self.write_data(seq, part);
            }
            self.len_of(self.me, seq)
        };
        word.store(len, Ordering::Relaxed);
    }

    /// The length word of member `m`'s post to collective `seq`: in its deep ring entry
    /// for a deep collective (`deep`, [`Kind::deep`]), else in its flag line.
    pub(crate) fn post_len(&self, m: usize, seq: u32, deep: bool) -> &AtomicU32 {
        if deep {
            self.deep_len(m, seq)
        } else {
            self.len_of(m, seq)
        }
    }

    /// Copies member `m`'s part of collective `seq` out (its length is `dst`'s): from its
    /// deep ring entry (and data slot) for a deep collective, else from its cells or slot.
    pub(crate) fn read_post(&self, m: usize, seq: u32, deep: bool, dst: &mut [u8]) {
        if deep {
            self.read_deep(m, seq, dst);
        } else {
            self.read_data(m, seq, dst);
        }
    }

    /// Whether this member may post `len` bytes to deep collective `seq`: its ring entry
    /// and, for more than [`DEEP_DATA`] bytes, its data slot are free
    /// ([`Ledger::ring_free`], [`Ledger::slot_free`]).
    fn deep_free(&self, seq: u32, len: usize) -> bool {
        self.ledger.ring_free(seq, self)
            && (len <= DEEP_DATA || self.ledger.slot_free(seq, INLINE + 1, self))
    }

    /// Records who reads this member's post of `len` bytes to deep collective `seq` (its ring
    /// entry, and its data slot for more than [`DEEP_DATA`] bytes).
    fn deep_read_by(&self, seq: u32, len: usize, readers: Readers) {
        self.ledger.ring_read_by(seq, readers);
        if len > DEEP_DATA {
            self.ledger.read_by(seq, INLINE + 1, readers);
        }
    }

    /// Copies this member's contribution to deep collective `seq` where its reader finds
    /// it: its first [`DEEP_DATA`] bytes beside its length in the ring entry, the rest
    /// (if any) in its data slot. A reader loads the flag line and the entry's pair of
    /// lines (for a longer part, less of the slot than before): one pair more than when a
    /// part of up to 16 bytes rode in the flag line (gathers of 64 bytes at 2 ranks took
    /// 1.09 times as long), for a contributor that runs up to [`RING`] - 1 calls ahead.
    fn write_deep(&self, seq: u32, bytes: &[u8]) {
        let (head, tail) = bytes.split_at(bytes.len().min(DEEP_DATA));
        self.area
            .write(self.ring_off(self.me, seq) + RING_HEAD, head);
        if !tail.is_empty() {
            self.area.write(self.data_off(self.me, seq), tail);
        }
    }

    /// Copies member `m`'s contribution to deep collective `seq` out (its length is
    /// `dst`'s; see [`SmComm::write_deep`]).
    fn read_deep(&self, m: usize, seq: u32, dst: &mut [u8]) {
        let n = dst.len().min(DEEP_DATA);
        let (head, tail) = dst.split_at_mut(n);
        self.area.read(self.ring_off(m, seq) + RING_HEAD, head);
        if !tail.is_empty() {
            self.area.read(self.data_off(m, seq), tail);
        }
    }

    /// Member `member`'s data slot for collective `seq` ([`SLOTS`] per member, in turn).
    fn data_off(&self, member: usize, seq: u32) -> usize {
        self.n() * LINE
            + Self::flag_bytes(self.outs)
            + (SLOTS * member + seq as usize % SLOTS) * self.slot
    }

    fn out_off(&self, k: usize) -> usize {
        self.n() * LINE + Self::flag_bytes(self.outs) + (SLOTS * self.n() + k) * self.slot
    }

    /// Where member `m`'s contribution of `len` bytes to collective `seq` lies: in its
    /// hot flag line's cells when it fits there ([`cells`]), else in its data slot.
    /// Writer and reader agree (a reader reads a contribution only when its length is the
    /// reader's own).
    fn contribution_at(&self, m: usize, seq: u32, len: usize) -> usize {
        match cells(seq, len) {
            Some(taken) => m * LINE + DATA + CELL * taken.start,
            None => self.data_off(m, seq),
        }
    }

    /// Where result slot `k`'s `len` bytes lie: beside its flags when they fit there.
    fn result_at(&self, k: usize, len: usize) -> usize {
        if len <= OUT_INLINE {
            self.n() * LINE + OUT_FLAGS * k + OUT_DATA
        } else {
            self.out_off(k)
        }
    }

    /// Copies this member's contribution to collective `seq` into its data slot.
    pub(crate) fn write_data(&self, seq: u32, bytes: &[u8]) {
        let at = self.contribution_at(self.me, seq, bytes.len());
        self.area.write(at, bytes);
    }

    /// Copies member `m`'s contribution to collective `seq` out of its slot.
    pub(crate) fn read_data(&self, m: usize, seq: u32, dst: &mut [u8]) {
        self.area.read(self.contribution_at(m, seq, dst.len()), dst);
    }

    /// Copies `dst.len()` bytes from `at` into member `m`'s contribution of `total` bytes
    /// to collective `seq` out of its slot.
    pub(crate) fn read_part(&self, m: usize, seq: u32, total: usize, at: usize, dst: &mut [u8]) {
        self.area
            .read(self.contribution_at(m, seq, total) + at, dst);
    }

    /// Copies a result into result slot `k`.
    pub(crate) fn write_out(&self, k: usize, bytes: &[u8]) {
        self.area.write(self.result_at(k, bytes.len()), bytes);
    }

    /// Copies result slot `k` out.
    pub(crate) fn read_out(&self, k: usize, dst: &mut [u8]) {
        self.area.read(self.result_at(k, dst.len()), dst);
    }

    /// Copies `dst.len()` bytes from `at` into result slot `k`, which holds `total`
    /// bytes, out.
    pub(crate) fn read_out_part(&self, k: usize, total: usize, at: usize, dst: &mut [u8]) {
        self.area.read(self.result_at(k, total) + at, dst);
    }

    /// Wakes member `m` if it sleeps (call after setting a flag it may wait for).
    pub(crate) fn wake(&self, m: usize) {
        if self.word(m, SLEEPING).load(Ordering::SeqCst) != 0 {
            self.word(m, BELL).fetch_add(1, Ordering::SeqCst);
            self.area.wake(m * LINE + BELL);
        }
    }

    /// The number of members that sleep or are about to (see [`sleepers_at`]).
    fn sleepers(&self) -> &AtomicU32 {
        self.shared(sleepers_at(self.outs))
    }

    /// Wakes every other member that sleeps (call after setting a flag, as
    /// [`SmComm::raise`] does): one load when none sleeps. A member about to sleep counts
    /// itself in [`SmComm::sleepers`] before its last look at the flags (and with light
    /// fences runs the heavy one between), so either that look sees the flag or this load
    /// sees the count.
    pub(crate) fn wake_all(&self) {
        if self.sleepers().load(Ordering::SeqCst) == 0 {
            return;
        }
        for m in 0..self.n() {
            if m != self.me {
                self.wake(m);
            }
        }
    }

    /// Runs `poll` until it returns `Ok(true)`: through the active-message layer's wait
    /// (progress, yielding, the watchdog) for the spin time, then sleeping on this
    /// member's bell, woken by whoever sets a flag, at most [`NAP`] at a time. Before
    /// each sleep (never while it spins), it looks for members that took the messages
    /// for this collective, `w` ([`SmComm::split_on_segment`]): then it marks the
    /// collective failed here and returns [`MsgError::Mismatch`].
    pub(crate) fn drive(
        &self,
        (coll_ctx, ranks): (u32, &[u32]),
        tag: u32,
        w: Watch,
        mut poll: impl FnMut() -> Result<bool, MsgError>,
    ) -> Result<(), MsgError> {
        // The flags of a collective among ranks that arrive together are set within a
        // few hundred nanoseconds: look at them alone first, before a progress round
        // (which polls every transport) gets between two looks. Not when ranks outnumber
        // CPUs: the others need this CPU to get there (as the last look at the machine
        // saw it: a new look reads every local rank's segment, a line transfer each).
        let quick = if self.worker.seemed_oversubscribed() {
            0
        } else {
            QUICK_LOOKS
        };
        for _ in 0..quick {
            if poll()? {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let state = self.worker.bootstrap().state().clone();
        let collective = (coll_ctx, tag >> 8);
        loop {
            let mut err = None;
            let mut blocker = None;
            let done = self.worker.wait_for_flags(
                || match poll() {
                    Ok(d) => d,
                    Err(e) => {
                        err = Some(e);
                        true
                    }
                },
                || {
                    blocker = state.collective_blocker(collective.0, collective.1, ranks);
                    blocker.is_some()
                },
            )?;
            if let Some(e) = err {
                return Err(e);
            }
            if done {
                return Ok(());
            }
            // Before sleeping (never while spinning): members that took the messages.
            if let Some(e) = self.split_on_segment(&w) {
                self.mark_failed(w.no, w.bytes, &e);
                return Err(e);
            }
            if let Some((rank, started)) = blocker {
                let waiting = collective.1;
                self.worker.bootstrap().blame(
                    rank,
                    &format!(
                        "it finalised after {started} collective(s) on a communicator whose collective #{waiting} other ranks wait in"
                    ),
                );
                return Err(MsgError::PeerFinalized {
                    rank,
                    started,
                    waiting,
                });
            }
            // A signal (Ctrl-C in a language binding) ends the wait before it sleeps.
            self.worker.check_interrupt()?;
            // Sleep: say so, then look once more (a flag set before the waker saw us
            // sleeping is seen here), then sleep unless the bell rang since.
            let sleeping = self.word(self.me, SLEEPING);
            let bell = self.word(self.me, BELL);
            sleeping.store(1, Ordering::SeqCst);
            self.sleepers().fetch_add(1, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Members that set flags with light fences ([`SmComm::raise`]): a barrier on
            // each, so that each either sees this member counted or set its flag before
            // the look below. (Were it refused, a flag set just now would be seen after
            // the nap: late, never lost.)
            if self.light {
                let _ = SharedArea::heavy_fence();
            }
            let ticket = bell.load(Ordering::SeqCst);
            let awake = || {
                sleeping.store(0, Ordering::SeqCst);
                self.sleepers().fetch_sub(1, Ordering::SeqCst);
            };
            // One more progress round too: the pollers advance the non-blocking
            // collectives in flight, which other ranks may finish before they join this one.
            if let Err(e) = self.worker.progress() {
                awake();
                return Err(e.into());
            }
            let now = poll();
            if !matches!(now, Ok(false)) {
                awake();
                return now.map(|_| ());
            }
            (self.worker).nap(|| self.area.wait(self.me * LINE + BELL, ticket, NAP));
            awake();
        }
    }
}
