//! Collectives of small messages through shared memory within a host (Open MPI's coll/sm,
//! MPICH's release/gather): one segment per communicator and host, holding a cache line of
//! flags per local member, two data slots per member and a ring of result slots.
//!
//! Every collective of this kind has a sequence number `s` (the same on every member, as
//! they call collectives in the same order; it wraps, and comparisons are modular). A
//! collective is a fan-in and a fan-out around one *root* member:
//!
//! - every member *posts*: it copies its contribution (reductions) into its data slot and
//!   sets its `posted` flag to `s`, which also says it has finished collective `s - 1`;
//! - the root *collects*: it waits until every `posted` reaches `s` (for a broadcast
//!   `s - outs + 1` only: it reads no contribution, so a root may run ahead of the
//!   others by that many broadcasts) and reduces the slots in rank order;
//! - the root *publishes*: it writes the result to result slot `s % outs` and sets that
//!   slot's `ready` flag to `s`; the others wait for it and copy the result out.
//!
//! Among few members on one host, barrier and allreduce are *flat* instead: every member
//! posts, waits for every post and reduces all contributions itself, in rank order (one
//! step instead of two).
//!
//! Why no slot is overwritten while someone still reads it: every read of a slot
//! happens within its collective, before the reader posts the next one. A member has two
//! data slots and writes slot `s % 2` only once every member posted `s - 1` or later
//! (finished `s - 2`, the last collective that read that slot); the root of `s` writes
//! result slot `s % outs` only once every member posted `s - outs + 1` or later.
//!
//! Waiting goes through the active-message layer's wait (it drives progress, yields when
//! ranks outnumber cores and fails when a rank dies), then sleeps on a futex word of this
//! rank's flag line in the segment, which a member that sets a flag rings when the waiter
//! says it sleeps; that sleep is bounded ([`NAP`]) so the watchdog is re-checked often.
//!
//! The segment is created at a communicator's first small collective by its lowest member
//! on the host and opened by the others after a point-to-point handshake on the
//! communicator; its creator unlinks it once every member answered (or the handshake
//! failed), and it is unmapped with the
//! communicator.

mod coll;
mod machine;
mod nonblocking;
mod setup;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use spools_am::{SharedArea, Worker};

use crate::comm_core::CommCore;
use crate::error::MsgError;

pub(crate) use coll::{allreduce, barrier, bcast, reduce};
pub(crate) use machine::Kind;
pub(crate) use nonblocking::step;
pub(crate) use setup::SmSlot;

/// Looks at a collective's flags before its wait drives progress (see [`SmComm::drive`]).
const QUICK_LOOKS: u32 = 128;

/// Longest sleep on the segment's futex before the wait looks at the job's health again.
const NAP: Duration = Duration::from_millis(2);

/// The first sequence number: close to the wrap, so that any run of a few hundred
/// collectives exercises it.
const FIRST_SEQ: u32 = u32::MAX - 255;

/// Bytes of result slots a segment aims at: `outs`, the number of result slots, is this
/// over the slot size, a power of two from 8 to 64 (64 of 4 KiB by default).
const RESULT_BYTES: usize = 256 << 10;

/// `out_len` of a result slot whose collective failed at the root (the ranks disagree).
const FAILED: u32 = u32::MAX;

/// Bytes of a member's flag line.
const LINE: usize = 64;
/// Offsets within a flag line: the sequence posted, the futex word the member sleeps on,
/// whether it sleeps, and the lengths of its contributions (one per data slot).
const POSTED: usize = 0;
const BELL: usize = 4;
const SLEEPING: usize = 8;
const LEN: usize = 12;
/// Offsets within the shared lines (after the members' lines): `ready` of each result
/// slot, then (from `4 * outs`) their lengths.
const READY: usize = 0;

/// `a >= b` in sequence order (modulo 2^32).
pub(crate) fn seq_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
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
    /// The next collective's sequence number.
    next: AtomicU32,
    /// The last collective this member finished: the next one posts only after it (a
    /// post of `s` tells the others that `s - 1` is finished here), so non-blocking
    /// collectives in flight and blocking ones after them go in call order.
    done: AtomicU32,
    worker: Worker,
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

impl SmComm {
    /// Result slots of a segment with slots of `slot` bytes.
    pub(crate) fn outs(slot: usize) -> usize {
        (RESULT_BYTES / slot.max(1))
            .clamp(8, 64)
            .next_power_of_two()
    }

    /// Bytes of the result slots' flags (`ready` and length of each).
    fn flag_bytes(outs: usize) -> usize {
        (8 * outs).next_multiple_of(LINE)
    }

    /// Bytes of a segment for `n` members with slots of `slot` bytes.
    pub(crate) fn bytes(n: usize, slot: usize) -> usize {
        let outs = Self::outs(slot);
        n * LINE + Self::flag_bytes(outs) + (2 * n + outs) * slot
    }

    /// Lays out a fresh segment (creator only, before anyone else maps it).
    fn init(&self) {
        for i in 0..self.n() {
            self.word(i, POSTED)
                .store(FIRST_SEQ.wrapping_sub(1), Ordering::Relaxed);
        }
        for k in 0..self.outs {
            self.shared(READY + 4 * k)
                .store(FIRST_SEQ.wrapping_sub(1), Ordering::Relaxed);
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

    /// Takes the next sequence number.
    pub(crate) fn take_seq(&self) -> u32 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn word(&self, member: usize, field: usize) -> &AtomicU32 {
        self.area.u32_at(member * LINE + field)
    }

    fn shared(&self, field: usize) -> &AtomicU32 {
        self.area.u32_at(self.n() * LINE + field)
    }

    pub(crate) fn posted(&self, member: usize) -> &AtomicU32 {
        self.word(member, POSTED)
    }

    /// The length of member `member`'s contribution to collective `seq`.
    pub(crate) fn len_of(&self, member: usize, seq: u32) -> &AtomicU32 {
        self.word(member, LEN + 4 * (seq & 1) as usize)
    }

    pub(crate) fn ready(&self, k: usize) -> &AtomicU32 {
        self.shared(READY + 4 * k)
    }

    pub(crate) fn out_len(&self, k: usize) -> &AtomicU32 {
        self.shared(4 * self.outs + 4 * k)
    }

    /// Member `member`'s data slot for collective `seq` (two per member, alternating).
    fn data_off(&self, member: usize, seq: u32) -> usize {
        self.n() * LINE
            + Self::flag_bytes(self.outs)
            + (2 * member + (seq & 1) as usize) * self.slot
    }

    fn out_off(&self, k: usize) -> usize {
        self.n() * LINE + Self::flag_bytes(self.outs) + (2 * self.n() + k) * self.slot
    }

    /// Copies this member's contribution to collective `seq` into its data slot.
    pub(crate) fn write_data(&self, seq: u32, bytes: &[u8]) {
        self.area.write(self.data_off(self.me, seq), bytes);
    }

    /// Copies member `m`'s contribution to collective `seq` out of its slot.
    pub(crate) fn read_data(&self, m: usize, seq: u32, dst: &mut [u8]) {
        self.area.read(self.data_off(m, seq), dst);
    }

    /// Copies a result into result slot `k`.
    pub(crate) fn write_out(&self, k: usize, bytes: &[u8]) {
        self.area.write(self.out_off(k), bytes);
    }

    /// Copies result slot `k` out.
    pub(crate) fn read_out(&self, k: usize, dst: &mut [u8]) {
        self.area.read(self.out_off(k), dst);
    }

    /// Wakes member `m` if it sleeps (call after setting a flag it may wait for).
    pub(crate) fn wake(&self, m: usize) {
        if self.word(m, SLEEPING).load(Ordering::SeqCst) != 0 {
            self.word(m, BELL).fetch_add(1, Ordering::SeqCst);
            self.area.wake(m * LINE + BELL);
        }
    }

    /// Wakes every other member that sleeps.
    pub(crate) fn wake_all(&self) {
        for m in 0..self.n() {
            if m != self.me {
                self.wake(m);
            }
        }
    }

    /// Runs `poll` until it returns `Ok(true)`: through the active-message layer's wait
    /// (progress, yielding, the watchdog) for the spin time, then sleeping on this
    /// member's bell, woken by whoever sets a flag, at most [`NAP`] at a time.
    pub(crate) fn drive(
        &self,
        c: &CommCore,
        tag: u32,
        mut poll: impl FnMut() -> Result<bool, MsgError>,
    ) -> Result<(), MsgError> {
        // The flags of a collective among ranks that arrive together are set within a
        // few hundred nanoseconds: look at them alone first, before a progress round
        // (which polls every transport) gets between two looks. Not when ranks outnumber
        // CPUs: the others need this CPU to get there.
        let quick = if self.worker.oversubscribed() {
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
        let collective = (c.coll_ctx(), tag >> 8);
        loop {
            // Longer than `spin_us` right after a sleep of this rank (`Worker::spin_now`).
            let spin = self.worker.spin_now();
            let mut err = None;
            let mut blocker = None;
            let mut start: Option<Instant> = None;
            let mut empty = 0u32;
            let done = self.worker.wait_for_flags(
                || match poll() {
                    Ok(d) => d,
                    Err(e) => {
                        err = Some(e);
                        true
                    }
                },
                || {
                    blocker = state.collective_blocker(collective.0, collective.1, &c.ranks);
                    if blocker.is_some() {
                        return true;
                    }
                    empty = empty.wrapping_add(1);
                    if empty % 16 != 0 {
                        return false;
                    }
                    let t = *start.get_or_insert_with(Instant::now);
                    t.elapsed() >= spin
                },
            )?;
            if let Some(e) = err {
                return Err(e);
            }
            if done {
                return Ok(());
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
            let ticket = bell.load(Ordering::SeqCst);
            // One more progress round too: a non-blocking collective before this one,
            // which only the pollers advance, may be what this one waits for.
            self.worker.progress()?;
            let now = poll();
            if !matches!(now, Ok(false)) {
                sleeping.store(0, Ordering::SeqCst);
                return now.map(|_| ());
            }
            self.area.wait(self.me * LINE + BELL, ticket, NAP);
            sleeping.store(0, Ordering::SeqCst);
            self.worker.note_woken();
        }
    }
}
