//! When a member may write over its data slots and inline cells: the reuse rule of the
//! messaging layer's shared-memory engine (`spools-msg`'s `coll/sm`), sans-IO.
//!
//! Each member of a segment writes its contributions into a ring of [`SLOTS`] data slots
//! (collective `s` takes slot `s % SLOTS`) and, for contributions of up to [`INLINE`]
//! bytes, into inline cells of its flag line ([`cells`]), then *posts* `s`: it stores `s`
//! in its flag line with release order, which also says that it finished collective
//! `s - 1`. Whoever reads what it wrote reads it within that collective, after it saw the
//! post, and before it posts the next one; a chained scan's reader reads it before it
//! posts the same collective ([`Readers::BeforePost`]). So what a member wrote in
//! collective `w` may be written over once its readers posted `w + 1` (or `w`).
//!
//! A [`Ledger`] is one member's record of that: per slot and per cell, the collective that
//! wrote it last and who reads it; what it knows without a look (every member posted
//! some collective, learnt at the end of a collective that waited for every post); and a
//! *credit*, the last look at one reader's line, which stays good while it says enough,
//! so that a reduce's contributor that runs ahead of its root looks at the root's line
//! about once in [`SLOTS`] collectives. A reduce's and a gather's posts go instead into a
//! *deep ring* of [`RING`] entries under the same rule ([`Ledger::ring_free`]), so that
//! their contributors, done once posted, run up to `RING - 1` collectives ahead of their
//! root. It loads other members' lines only through
//! [`Posts`]; the engine supplies the segment, the model checks (`tests/slots_model.rs`)
//! supply loom's atomics.
//!
//! ```
//! use spools_coll::ledger::{Ledger, Posts, Readers};
//! // Two members: this one (0) contributes, member 1 (a root) reads.
//! struct Seen([u32; 2]);
//! impl Posts for Seen {
//!     fn members(&self) -> usize { 2 }
//!     fn posted(&self, m: usize) -> u32 { self.0[m] }
//! }
//! let book = Ledger::new(100);
//! let mut lines = Seen([99, 99]);
//! for s in 100..104 {
//!     // Four collectives ahead of a root that posted none: one per slot.
//!     assert_eq!(book.take_seq(), s);
//!     assert!(book.slot_free(s, 8, &lines));
//!     book.read_by(s, 8, Readers::Member(1));
//!     lines.0[0] = s;
//! }
//! // The fifth reuses collective 100's slot: not before the root finished 100.
//! assert_eq!(book.take_seq(), 104);
//! assert!(!book.slot_free(104, 8, &lines));
//! lines.0[1] = 101;
//! assert!(book.slot_free(104, 8, &lines));
//! ```

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Data slots (with their length words and inline cells) per member: a power of two, so
/// that `s % SLOTS` follows the sequence numbers across their wrap.
pub const SLOTS: usize = 4;

/// Bytes of an inline cell.
pub const CELL: usize = 8;

/// Entries of a member's *deep ring*, where a reduce's and a gather's posts go (each entry: the
/// contribution's length and a small contribution): a power of two.
/// A reduce's contributor is done once it posted, and reuses entry `s % RING` once the
/// one member that read it last finished that collective ([`Ledger::ring_free`]), so it
/// runs up to `RING - 1` reduces ahead of its root (a larger contribution also takes its
/// data slot, [`SLOTS`] apart) instead of [`SLOTS`] - 1: a root that falls behind in a
/// loop of reduces (on a busy core, or with many contributors) no longer holds every
/// contributor within a few calls of it.
pub const RING: usize = 32;

/// Contributions of up to this many bytes ride in the flag line: in one cell (up to
/// [`CELL`] bytes) or two ([`cells`]).
pub const INLINE: usize = 2 * CELL;

/// How far behind a member's next sequence number a recorded fact may be and still
/// count: a member that records none for a long time (a reduce's contributor, a bcast's
/// member) would otherwise find an old one ahead of it again after 2^31 collectives.
const FRESH: u32 = 1 << 20;

/// A record further back than this many collectives (a slot, cell or ring entry nothing
/// wrote for that long) is taken for `seq - period` instead (the resource's turn: [`SLOTS`],
/// or the ring's entries), which is later.
const ANCIENT: u32 = 1 << 30;

/// Readers' encodings in a record's high half.
const EVERYONE: u32 = u32::MAX;
const NOBODY: u32 = u32::MAX - 1;
const BEFORE_POST: u32 = 1 << 30;

/// `a >= b` in sequence order (modulo 2^32).
///
/// ```
/// assert!(spools_coll::ledger::seq_ge(3, u32::MAX));
/// assert!(!spools_coll::ledger::seq_ge(u32::MAX, 3));
/// ```
#[must_use]
pub fn seq_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// The inline cells a contribution of `len` bytes to collective `seq` takes, if it rides
/// inline (see [`INLINE`]): collective `s` uses the two cells of its parity (0 and 1 for
/// an even `s`, 2 and 3 for an odd one), a part of up to 8 bytes one of them in turn (a
/// cell comes back every 4 collectives, as a data slot does), one of up to 16 both (every
/// 2). So the cells of `s` are never those of `s - 1`: a chained scan's reader posts `s`
/// only after the writer's post of `s`, so a write for `s` must not wait for it.
///
/// ```
/// use spools_coll::ledger::cells;
/// assert_eq!(cells(0, 8), Some(0..1));
/// assert_eq!(cells(2, 8), Some(1..2));
/// assert_eq!(cells(1, 16), Some(2..4));
/// assert_eq!(cells(1, 17), None);
/// ```
#[must_use]
pub fn cells(seq: u32, len: usize) -> Option<Range<usize>> {
    let pair = 2 * (seq as usize % 2);
    if len <= CELL {
        let at = pair + (seq as usize / 2) % 2;
        Some(at..at + 1)
    } else if len <= INLINE {
        Some(pair..pair + 2)
    } else {
        None
    }
}

/// Who reads what a member writes for a collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// Nobody (a root's own part, which it folds from its own buffer).
    Nobody,
    /// Every member (a flat collective).
    Everyone,
    /// One member, after it saw the post and before it posts the next collective (a
    /// reduce's or gather's root).
    Member(usize),
    /// One member, before it posts the same collective (a chained scan's right
    /// neighbour): its post of that collective says it is done.
    BeforePost(usize),
}

impl Readers {
    fn encode(self) -> u32 {
        match self {
            Readers::Nobody => NOBODY,
            Readers::Everyone => EVERYONE,
            Readers::Member(m) => {
                debug_assert!(m < BEFORE_POST as usize, "member {m}");
                m as u32
            }
            Readers::BeforePost(m) => {
                debug_assert!(m < BEFORE_POST as usize, "member {m}");
                m as u32 | BEFORE_POST
            }
        }
    }

    fn decode(r: u32) -> Readers {
        match r {
            NOBODY => Readers::Nobody,
            EVERYONE => Readers::Everyone,
            r if r & BEFORE_POST != 0 => Readers::BeforePost((r & !BEFORE_POST) as usize),
            r => Readers::Member(r as usize),
        }
    }
}

/// The members' posts as a ledger sees them: the engine's segment, or a model's.
pub trait Posts {
    /// Members of the segment.
    fn members(&self) -> usize;
    /// The sequence number member `m` posted last, loaded with acquire order (what it
    /// read before that post happened before what the caller does next).
    fn posted(&self, m: usize) -> u32;
}

/// One member's record of what it wrote where, who reads it, and what it knows of the
/// others' progress (see the module's documentation). Its words are atomics so that the
/// member's threads (a caller's and a progress thread's, which run its collectives in
/// turn) may share it; it orders nothing between members.
#[derive(Debug)]
pub struct Ledger {
    /// The next collective's sequence number.
    next: AtomicU32,
    /// A sequence number every member has posted (or a later one).
    synced: AtomicU32,
    /// Per data slot and per inline cell: the collective that wrote it last (low half)
    /// and its readers (high half, [`Readers::encode`]).
    slot_last: [AtomicU64; SLOTS],
    cell_last: [AtomicU64; SLOTS],
    /// Per deep ring entry, the same record ([`RING`] of them, or a model's count).
    ring_last: Box<[AtomicU64]>,
    /// The last look at a reader's line: the sequence number it had posted (low half) and
    /// the member (high half; `u32::MAX`: none yet).
    credit: AtomicU64,
}

/// A 64-bit record: `low` in its low half, `high` in its high half.
fn pair(low: u32, high: u32) -> u64 {
    u64::from(high) << 32 | u64::from(low)
}

/// The halves (low, high) of a record.
fn halves(w: u64) -> (u32, u32) {
    (w as u32, (w >> 32) as u32)
}

impl Ledger {
    /// The ledger of a member whose first collective is `first`, on a segment whose
    /// members all posted `first - 1`.
    #[must_use]
    pub fn new(first: u32) -> Ledger {
        Ledger::with_ring(first, RING)
    }

    /// [`Ledger::new`] with a deep ring of `ring` entries (a power of two; at least 1)
    /// rather than [`RING`]: what a model checker explores in few calls.
    ///
    /// ```
    /// let book = spools_coll::ledger::Ledger::with_ring(0, 2);
    /// assert_eq!(book.take_seq(), 0);
    /// ```
    #[must_use]
    pub fn with_ring(first: u32, ring: usize) -> Ledger {
        let before = first.wrapping_sub(1);
        let unread = || AtomicU64::new(pair(before, NOBODY));
        Ledger {
            next: AtomicU32::new(first),
            synced: AtomicU32::new(before),
            slot_last: std::array::from_fn(|_| unread()),
            cell_last: std::array::from_fn(|_| unread()),
            ring_last: (0..ring.max(1).next_power_of_two())
                .map(|_| unread())
                .collect(),
            credit: AtomicU64::new(pair(0, u32::MAX)),
        }
    }

    /// Takes the next sequence number.
    pub fn take_seq(&self) -> u32 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes the next `count` sequence numbers (a collective in rounds, one each): the
    /// first.
    ///
    /// ```
    /// let book = spools_coll::ledger::Ledger::new(7);
    /// assert_eq!((book.take_seqs(3), book.take_seq()), (7, 10));
    /// ```
    pub fn take_seqs(&self, count: u32) -> u32 {
        self.next.fetch_add(count, Ordering::Relaxed)
    }

    /// The next sequence number (not taken).
    #[must_use]
    pub fn next(&self) -> u32 {
        self.next.load(Ordering::Relaxed)
    }

    /// Whether every member has posted `seq` or later: from what this member knows
    /// already ([`Ledger::knows_all_posted`]), else by a look at every member's line
    /// (kept when it says so).
    pub fn all_posted(&self, seq: u32, lines: &impl Posts) -> bool {
        if self.knows_all_posted(seq) {
            return true;
        }
        if !(0..lines.members()).all(|m| seq_ge(lines.posted(m), seq)) {
            return false;
        }
        self.saw_all_posted(seq);
        true
    }

    /// Whether this member's data slot (and length word) for collective `seq` may be
    /// written: whoever read what it wrote there last finished that collective. A
    /// contribution of `len` bytes that rides inline also takes its cells ([`cells`]),
    /// likewise free once whoever read what was written there last finished it. Looks
    /// at one reader's line only when the last look there ([`Ledger`]'s credit) no
    /// longer says enough; at everyone's after a flat collective, unless this member
    /// knows already that everyone posted enough.
    pub fn slot_free(&self, seq: u32, len: usize, lines: &impl Posts) -> bool {
        let slot = self.slot_last[seq as usize % SLOTS].load(Ordering::Relaxed);
        self.written_free(seq, slot, SLOTS, lines)
            && cells(seq, len).is_none_or(|taken| {
                taken.into_iter().all(|c| {
                    let rec = self.cell_last[c].load(Ordering::Relaxed);
                    self.written_free(seq, rec, SLOTS, lines)
                })
            })
    }

    /// Whether this member's deep ring entry for collective `seq` may be written:
    /// whoever read what it wrote there last ([`RING`] collectives or more before)
    /// finished that collective. Looks at lines as [`Ledger::slot_free`] does.
    ///
    /// ```
    /// use spools_coll::ledger::{Ledger, Posts, Readers, RING};
    /// struct Seen([u32; 2]);
    /// impl Posts for Seen {
    ///     fn members(&self) -> usize { 2 }
    ///     fn posted(&self, m: usize) -> u32 { self.0[m] }
    /// }
    /// let book = Ledger::new(0);
    /// let mut lines = Seen([u32::MAX; 2]);
    /// // A contributor (0) runs RING reduces ahead of a root (1) that posted none.
    /// for s in 0..RING as u32 {
    ///     assert!(book.ring_free(book.take_seq(), &lines));
    ///     book.ring_read_by(s, Readers::Member(1));
    /// }
    /// let s = book.take_seq();
    /// assert!(!book.ring_free(s, &lines));
    /// lines.0[1] = 1; // The root finished reduce 0.
    /// assert!(book.ring_free(s, &lines));
    /// ```
    pub fn ring_free(&self, seq: u32, lines: &impl Posts) -> bool {
        let ring = self.ring_last.len();
        let rec = self.ring_last[seq as usize % ring].load(Ordering::Relaxed);
        self.written_free(seq, rec, ring, lines)
    }

    /// Records who reads what this member writes into its deep ring entry for
    /// collective `seq`. Called once [`Ledger::ring_free`] said yes, before the writes.
    pub fn ring_read_by(&self, seq: u32, readers: Readers) {
        let ring = self.ring_last.len();
        self.ring_last[seq as usize % ring].store(pair(seq, readers.encode()), Ordering::Relaxed);
    }

    /// Whether what this member wrote in collective `w` for its readers (`rec`) may be
    /// written over for collective `seq`, `period` collectives after the last write
    /// there at the latest: they finished `w`.
    fn written_free(&self, seq: u32, rec: u64, period: usize, lines: &impl Posts) -> bool {
        let (w, readers) = halves(rec);
        let back = seq.wrapping_sub(w);
        let last = if back == 0 || back >= ANCIENT {
            seq.wrapping_sub(period as u32)
        } else {
            w
        };
        let after = last.wrapping_add(1);
        match Readers::decode(readers) {
            Readers::Nobody => true,
            Readers::Everyone => self.all_posted(after, lines),
            Readers::BeforePost(r) => {
                self.knows_all_posted(last) || self.reader_posted(r, last, lines)
            }
            Readers::Member(r) => {
                self.knows_all_posted(after) || self.reader_posted(r, after, lines)
            }
        }
    }

    /// Whether member `r` posted `seq` or later: from the last look at its line when that
    /// says so (a credit: what a member posted only grows), else from a new look, which
    /// is kept.
    fn reader_posted(&self, r: usize, seq: u32, lines: &impl Posts) -> bool {
        let (seen, who) = halves(self.credit.load(Ordering::Relaxed));
        if who as usize == r && self.fresh(seen) && seq_ge(seen, seq) {
            return true;
        }
        let now = lines.posted(r);
        self.credit.store(pair(now, r as u32), Ordering::Relaxed);
        seq_ge(now, seq)
    }

    /// Records who reads what this member writes for collective `seq`, `len` bytes, into
    /// its data slot (or inline cells) and length word. Called once
    /// [`Ledger::slot_free`] said yes, before the writes.
    pub fn read_by(&self, seq: u32, len: usize, readers: Readers) {
        let rec = pair(seq, readers.encode());
        self.slot_last[seq as usize % SLOTS].store(rec, Ordering::Relaxed);
        for c in cells(seq, len).into_iter().flatten() {
            self.cell_last[c].store(rec, Ordering::Relaxed);
        }
    }

    /// Whether this member knows, without a look, that every member has posted `seq`
    /// or later.
    #[must_use]
    pub fn knows_all_posted(&self, seq: u32) -> bool {
        let synced = self.synced.load(Ordering::Relaxed);
        self.fresh(synced) && seq_ge(synced, seq)
    }

    /// Whether a fact recorded at sequence number `synced` is recent enough to compare
    /// with the sequence numbers in use ([`FRESH`]).
    fn fresh(&self, synced: u32) -> bool {
        self.next().wrapping_sub(synced) < FRESH
    }

    /// Records that every member has posted `seq` or later (a fact this member learnt,
    /// at the end of a collective that waited for every post or for a root that did; an
    /// older fact stored over a newer one only costs a look later).
    pub fn saw_all_posted(&self, seq: u32) {
        let synced = self.synced.load(Ordering::Relaxed);
        if seq_ge(seq, synced) || !self.fresh(synced) {
            self.synced.store(seq, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Seen(Vec<u32>);
    impl Posts for Seen {
        fn members(&self) -> usize {
            self.0.len()
        }
        fn posted(&self, m: usize) -> u32 {
            self.0[m]
        }
    }

    #[test]
    fn the_cells_of_a_collective_are_never_those_of_the_one_before() {
        for s in [0u32, 1, 2, 3, u32::MAX - 1, u32::MAX] {
            for a in [1, 8, 9, 16] {
                for b in [1, 8, 9, 16] {
                    let mine = cells(s, a).unwrap();
                    let before = cells(s.wrapping_sub(1), b).unwrap();
                    assert!(mine.end <= before.start || before.end <= mine.start);
                }
            }
        }
        assert_eq!(cells(5, 0), Some(2..3));
        assert_eq!(cells(5, INLINE + 1), None);
    }

    #[test]
    fn a_before_post_reader_frees_at_its_post_of_the_same_collective() {
        let book = Ledger::new(10);
        let mut lines = Seen(vec![9, 9]);
        for s in 10..14 {
            assert_eq!(book.take_seq(), s);
            assert!(book.slot_free(s, 32, &lines));
            book.read_by(s, 32, Readers::BeforePost(1));
        }
        assert_eq!(book.take_seq(), 14);
        assert!(!book.slot_free(14, 32, &lines));
        lines.0[1] = 10;
        assert!(book.slot_free(14, 32, &lines));
    }

    #[test]
    fn everyone_frees_once_all_posted_and_the_fact_is_kept() {
        let book = Ledger::new(0);
        let mut lines = Seen(vec![u32::MAX; 3]);
        for s in 0..4 {
            book.take_seq();
            assert!(book.slot_free(s, 64, &lines));
            book.read_by(s, 64, Readers::Everyone);
        }
        book.take_seq();
        lines.0 = vec![1, 1, 0];
        assert!(!book.slot_free(4, 64, &lines));
        lines.0[2] = 1;
        assert!(book.slot_free(4, 64, &lines));
        assert!(book.knows_all_posted(1));
        // Known now: no look needed even if the lines said otherwise.
        lines.0 = vec![0; 3];
        assert!(book.slot_free(4, 64, &lines));
    }

    #[test]
    fn a_credit_is_used_until_it_no_longer_says_enough() {
        struct Counting(std::cell::Cell<u32>, u32);
        impl Posts for Counting {
            fn members(&self) -> usize {
                2
            }
            fn posted(&self, _: usize) -> u32 {
                self.0.set(self.0.get() + 1);
                self.1
            }
        }
        let book = Ledger::new(0);
        let lines = Counting(std::cell::Cell::new(0), 3);
        for s in 0..7 {
            book.take_seq();
            assert!(book.slot_free(s, 64, &lines), "collective {s}");
            book.read_by(s, 64, Readers::Member(1));
        }
        // Slots were unwritten for 0 to 3; 4, 5 and 6 need the root's posts of 1, 2
        // and 3, all known from the one look (at 4) that saw 3.
        assert_eq!(lines.0.get(), 1);
        // 7 needs a post of 4, which the credit does not say: a new look, which fails.
        book.take_seq();
        assert!(!book.slot_free(7, 64, &lines));
        assert_eq!(lines.0.get(), 2);
    }

    #[test]
    fn a_record_of_long_ago_asks_for_the_slots_turn_before() {
        let book = Ledger::new(0);
        book.read_by(0, 64, Readers::Member(1));
        // Skip far ahead: the record of collective 0 is more than 2^30 back.
        let far = 3u32 << 30;
        book.next.store(far, Ordering::Relaxed);
        let lines = Seen(vec![far - 1, far - SLOTS as u32]);
        assert!(!book.slot_free(far, 64, &lines));
        let lines = Seen(vec![far - 1, far - SLOTS as u32 + 1]);
        assert!(book.slot_free(far, 64, &lines));
    }

    #[test]
    fn a_ring_entry_waits_for_its_own_reader_only() {
        let book = Ledger::new(5);
        // Three members; member 0 writes, readers 1 and 2 in turn.
        let mut lines = Seen(vec![4, 4, 4]);
        for s in 5..5 + RING as u32 {
            assert_eq!(book.take_seq(), s);
            assert!(book.ring_free(s, &lines), "collective {s}");
            book.ring_read_by(s, Readers::Member(1 + s as usize % 2));
        }
        // Entry of 5 (read by 2) comes back at 5 + RING: member 1's progress is no help.
        let s = book.take_seq();
        lines.0[1] = s;
        assert!(!book.ring_free(s, &lines));
        lines.0[2] = 6;
        assert!(book.ring_free(s, &lines));
        // The slots are another ledger: the ring leaves them as they were.
        assert!(book.slot_free(s, 64, &lines));
    }

    #[test]
    fn ring_entries_follow_the_sequence_numbers_across_their_wrap() {
        let first = u32::MAX - 3;
        let book = Ledger::new(first);
        let mut lines = Seen(vec![first - 1, first - 1]);
        for _ in 0..RING {
            let s = book.take_seq();
            assert!(book.ring_free(s, &lines));
            book.ring_read_by(s, Readers::Member(1));
        }
        let s = book.take_seq();
        assert_eq!(s, first.wrapping_add(RING as u32));
        assert!(!book.ring_free(s, &lines));
        lines.0[1] = first; // Posted the first: finished the one before only.
        assert!(!book.ring_free(s, &lines));
        lines.0[1] = first.wrapping_add(1);
        assert!(book.ring_free(s, &lines));
    }
}
