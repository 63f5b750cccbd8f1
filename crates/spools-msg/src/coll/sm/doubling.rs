//! Scans (inclusive and exclusive) through the segment by recursive doubling, within one
//! host, from [`SCAN_DOUBLING_MIN`] members where they have CPUs of their own (else the
//! chain, `chain.rs`; `coll_sm_scan` chooses either at every member count): a scan takes
//! [`scan_rounds`] sequence numbers, one per round. In round `k` (sequence number
//! `s + k`) member m posts the fold of the parts of members `m - 2^k + 1` to m (as far as
//! they go), then takes member `m - 2^k`'s post of that round, folds it before its own
//! and finishes the round. After `log2 P` rounds it holds the fold of members 0 to m; an
//! exclusive scan folds the left posts alone. The critical path is `log2 P` line
//! transfers where the chain's is P - 1 (the cost model, `spools-coll`'s
//! `Coll::ScanDoubling`, has the figures), at the price of a post per round and
//! `P log2 P` line transfers in all.
//!
//! What member m posts in round k is read by member `m + 2^k` alone, within that round,
//! before it posts the next one ([`Readers::Member`]): the ledger's rule decides when a
//! slot or cell comes back. Its one credit serves one round's reader at a time, so a member
//! looks at its reader's line at about every round: as often as the cost model's machine,
//! whose credit per round is renewed once a scan (a member is at most a scan ahead of its
//! readers, its 4 slots being a scan's rounds from 16 members).
//!
//! A member that finds its left post of another length, or a post for another collective
//! at that sequence number, fails with [`MsgError::Mismatch`] and leaves its failure
//! mark; the members that wait for its later posts see the mark and fail too, also when
//! a later collective of the failed member's has posted past this one (its mark is looked
//! at whenever a left member's post is past the round's).

use std::sync::atomic::Ordering;

use spools_coll::scan_rounds;
#[cfg(doc)]
use spools_coll::SCAN_DOUBLING_MIN;

use super::kind::Kind;
use super::{clamp_len, coll_no, Readers, SmComm, Watch};
use crate::coll::args::{bytes, bytes_mut};
use crate::coll::group::disagreement;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// One member's step of a scan by recursive doubling (its state: the segment comes with
/// each poll).
pub(super) struct Doubling<T: Element> {
    /// The first of its sequence numbers, one per round.
    seq: u32,
    rounds: u32,
    no: u32,
    kind: Kind,
    /// The round in progress (`rounds`: done).
    round: u32,
    /// Whether this round's post is made.
    posted: bool,
    /// An exclusive scan's fold of the members from `m - 2^round + 1` to this one, which
    /// it posts (an inclusive scan's is `out`); empty until the first poll.
    span: Vec<T>,
    /// The left post of this round, copied out.
    left: Vec<T>,
    /// An exclusive scan: whether `out` holds a fold yet (member 0's never does).
    folded: bool,
}

impl<T: Element> Doubling<T> {
    /// Scan `kind` (inclusive or exclusive) with base tag `tag` on `sm`: takes its
    /// sequence numbers.
    pub(super) fn new(sm: &SmComm, tag: u32, kind: Kind) -> Doubling<T> {
        let rounds = scan_rounds(sm.n());
        Doubling {
            seq: sm.take_seqs(rounds),
            rounds,
            no: coll_no(tag),
            kind,
            round: 0,
            posted: false,
            span: Vec::new(),
            left: Vec::new(),
            folded: false,
        }
    }

    /// Its first and last sequence numbers.
    pub(super) fn seqs(&self) -> (u32, u32) {
        (self.seq, self.seq.wrapping_add(self.rounds - 1))
    }

    /// What its waits watch for, with a part of `bytes` here.
    pub(super) fn watch(&self, bytes: usize) -> Watch {
        Watch {
            span: self.rounds,
            ..Watch::posting(self.seq, self.no, self.kind, bytes)
        }
    }

    /// Ends the scan on this member after an error: its last sequence number is marked
    /// finished where the rounds before it are (so that the collectives after it post),
    /// and where the ranks disagree it is marked failed for the members that wait for it.
    pub(super) fn abandon(&self, sm: &SmComm, part: usize, e: &MsgError) {
        let at = self.seq.wrapping_add(self.round);
        if self.round < self.rounds && (sm.may_post(at) || self.posted) {
            sm.finished(self.seqs().1);
        }
        if disagreement(e) {
            sm.mark_failed(self.no, part, e);
        }
    }

    /// Makes the rounds as far as the left posts allow. `out` holds this member's part
    /// (an inclusive scan) or what it held before (exclusive) at the first poll, and the
    /// result once done: `Ok(true)`.
    pub(super) fn poll(
        &mut self,
        sm: &SmComm,
        mine: &[T],
        out: &mut [T],
        op: &Op<T>,
    ) -> Result<bool, MsgError> {
        let part = std::mem::size_of_val(mine);
        let inclusive = self.kind == Kind::Scan;
        if !inclusive && self.span.is_empty() && !mine.is_empty() {
            self.span.extend_from_slice(mine);
        }
        while self.round < self.rounds {
            let s = self.seq.wrapping_add(self.round);
            let step = 1usize << self.round;
            if !self.posted {
                if !sm.may_post(s) || !sm.slot_free(s, part) {
                    return Ok(false);
                }
                let right = sm.me + step;
                if right < sm.n() {
                    sm.slot_read_by(s, part, Readers::Member(right));
                    let fold: &[T] = if inclusive { out } else { &self.span };
                    sm.write_data(s, bytes(fold));
                } else {
                    sm.slot_read_by(s, part, Readers::Nobody);
                }
                sm.len_of(sm.me, s)
                    .store(clamp_len(part), Ordering::Relaxed);
                sm.post(s, self.no);
                self.posted = true;
            }
            if let Some(left) = sm.me.checked_sub(step) {
                if !sm.left_post(left, (s, self.no), self.kind.name(), part)? {
                    return Ok(false);
                }
                self.left.resize(mine.len(), T::default());
                sm.read_data(left, s, bytes_mut(&mut self.left));
                if inclusive {
                    op.combine(out, &self.left, false);
                } else {
                    // The members before this one's span, then the span.
                    if sm.me + 2 * step < sm.n() {
                        op.combine(&mut self.span, &self.left, false);
                    }
                    if self.folded {
                        op.combine(out, &self.left, false);
                    } else {
                        out.copy_from_slice(&self.left);
                        self.folded = true;
                    }
                }
            }
            sm.finished(s);
            self.round += 1;
            self.posted = false;
        }
        Ok(true)
    }
}
