//! Scans (inclusive and exclusive) through the segment as a chain, within one host, among
//! fewer than [`spools_coll::SCAN_DOUBLING_MIN`] members that have a CPU each (else
//! recursive doubling, `doubling.rs`, or where ranks outnumber CPUs a chain of messages;
//! `coll_sm_scan` chooses, and the scan that sets the segment up always goes so): member
//! m waits for member m - 1's post, which carries the fold of members 0 to m - 1 (its
//! *prefix*), folds its own part after it and posts that for member m + 1. Each member
//! loads one line of another's per collective (and, before it reuses a data slot, its one
//! reader's), so a scan costs O(P) line transfers in all; member 0 waits for nobody.
//!
//! One scan alone takes P - 1 transfers from end to end, but members run ahead by up to
//! four scans (the four data slots), so in a loop of scans the chain is a pipeline: each
//! scan costs a member one transfer from its left neighbour (what Open MPI's linear scan,
//! by eager messages, gets). The flat scan it replaces (every member read every member's
//! part and waited for all of them: O(P²) transfers, every member in step) took 1.6 to 5
//! µs at 16 ranks on a 16-core node against Open MPI's 0.28.
//!
//! A member that finds its left neighbour's part of another length, or a post for another
//! collective at this sequence number, fails with [`MsgError::Mismatch`] and leaves its
//! failure mark; the members after it, waiting for its post, see the mark and fail too.
//! The members before it, which wait for nobody after them, may return `Ok`.

use std::sync::atomic::Ordering;

use super::kind::Kind;
use super::{clamp_len, coll_no, Readers, SmComm, Watch};
use crate::coll::args::{bytes, bytes_mut};
use crate::coll::group::disagreement;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// One member's step of a chained scan (its state: the segment comes with each poll).
pub(super) struct Link<T: Element> {
    seq: u32,
    no: u32,
    kind: Kind,
    /// The fold of members 0 to this one, which this member posts (unused for an
    /// inclusive scan, whose result `out` is that fold).
    prefix: Vec<T>,
    /// Whether the left neighbour's prefix was taken (member 0: nothing to take).
    took: bool,
    posted: bool,
}

impl<T: Element> Link<T> {
    /// Scan `kind` (inclusive or exclusive) with base tag `tag` on `sm`: takes its
    /// sequence number.
    pub(super) fn new(sm: &SmComm, tag: u32, kind: Kind) -> Link<T> {
        Link {
            seq: sm.take_seq(),
            no: coll_no(tag),
            kind,
            prefix: Vec::new(),
            took: sm.me == 0,
            posted: false,
        }
    }

    /// Its first and last sequence numbers (the same: a chain takes one).
    pub(super) fn seqs(&self) -> (u32, u32) {
        (self.seq, self.seq)
    }

    /// What its waits watch for, with a part of `bytes` here.
    pub(super) fn watch(&self, bytes: usize) -> Watch {
        Watch::posting(self.seq, self.no, self.kind, bytes)
    }

    /// Ends the step on this member after an error (not posted: a post ends the step),
    /// and where the ranks disagree marks it failed for the members after this one.
    pub(super) fn abandon(&self, sm: &SmComm, part: usize, e: &MsgError) {
        if !self.posted && sm.may_post(self.seq) {
            sm.finished(self.seq);
        }
        if disagreement(e) {
            sm.mark_failed(self.no, part, e);
        }
    }

    /// Takes the left neighbour's prefix once it is posted, then posts this member's.
    /// `Ok(true)` once posted.
    pub(super) fn poll(
        &mut self,
        sm: &SmComm,
        mine: &[T],
        out: &mut [T],
        op: &Op<T>,
    ) -> Result<bool, MsgError> {
        let part = std::mem::size_of_val(mine);
        let inclusive = self.kind == Kind::Scan;
        if !self.took {
            let left = sm.me - 1;
            if !sm.left_post(left, (self.seq, self.no), self.kind.name(), part)? {
                return Ok(false);
            }
            if inclusive {
                // out (this member's part) = left's prefix, then this part.
                let mut before = std::mem::take(&mut self.prefix);
                before.resize(mine.len(), T::default());
                sm.read_data(left, self.seq, bytes_mut(&mut before));
                op.combine(out, &before, false);
                self.prefix = before;
            } else {
                sm.read_data(left, self.seq, bytes_mut(out));
                if sm.me + 1 < sm.n() {
                    self.prefix.clear();
                    self.prefix.extend_from_slice(out);
                    op.combine(&mut self.prefix, mine, true);
                }
            }
            self.took = true;
        }
        if !self.posted {
            if !sm.may_post(self.seq) || !sm.slot_free(self.seq, part) {
                return Ok(false);
            }
            let right = sm.me + 1;
            if right < sm.n() {
                sm.slot_read_by(self.seq, part, Readers::BeforePost(right));
                let fold: &[T] = match (inclusive, sm.me) {
                    (true, _) => out,
                    (false, 0) => mine,
                    (false, _) => &self.prefix,
                };
                sm.write_data(self.seq, bytes(fold));
            } else {
                sm.slot_read_by(self.seq, part, Readers::Nobody);
            }
            sm.len_of(sm.me, self.seq)
                .store(clamp_len(part), Ordering::Relaxed);
            sm.post(self.seq, self.no);
            sm.finished(self.seq);
            self.posted = true;
        }
        Ok(true)
    }
}
