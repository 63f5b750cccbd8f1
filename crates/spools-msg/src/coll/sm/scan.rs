//! Scans through the segment: the chain among few members (`chain.rs`), recursive
//! doubling among many (`doubling.rs`) where the ranks have CPUs of their own, as the
//! segment's creator decided for all its members (`coll_sm_scan`), so every member
//! chooses alike; where they take turns on CPUs, the creator sends scans to a chain of
//! messages instead ([`scans_by_messages`]).

use super::chain::Link;
use super::coll::place;
use super::doubling::Doubling;
use super::kind::Kind;
use super::way::ScanWay;
use super::{SmComm, Watch};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// Whether the scans of `c` go as a chain of messages ([`ScanWay::Messages`]): its
/// segment is set up over the whole communicator (one host) and its creator said so.
/// The same on every member at the same collective (the segment is set up in one, and
/// its creator's choice told to all), so a scan asks before it looks at the segment.
pub(crate) fn scans_by_messages(c: &CommCore) -> bool {
    c.sm.ready()
        .is_some_and(|sm| sm.n() == c.size() as usize && sm.scan_way() == ScanWay::Messages)
}

/// One member's step of a scan through the segment.
pub(super) enum Scanner<T: Element> {
    /// Among fewer than [`spools_coll::SCAN_DOUBLING_MIN`] members (`coll_sm_scan`), and
    /// the scan that sets the segment up where scans go to the messages.
    Chain(Link<T>),
    /// Among more.
    Doubling(Doubling<T>),
}

impl<T: Element> Scanner<T> {
    /// Scan `kind` (inclusive or exclusive) with base tag `tag` on `sm`: takes its
    /// sequence numbers.
    pub(super) fn new(sm: &SmComm, tag: u32, kind: Kind) -> Scanner<T> {
        match sm.scan_way() {
            ScanWay::Doubling => Scanner::Doubling(Doubling::new(sm, tag, kind)),
            // A scan that found the segment not yet set up over the whole communicator
            // (the first, which sets it up) goes through it as a chain.
            ScanWay::Chain | ScanWay::Messages => Scanner::Chain(Link::new(sm, tag, kind)),
        }
    }

    /// Its first and last sequence numbers.
    pub(super) fn seqs(&self) -> (u32, u32) {
        match self {
            Scanner::Chain(l) => l.seqs(),
            Scanner::Doubling(d) => d.seqs(),
        }
    }

    /// What its waits watch for, with a part of `bytes` here.
    pub(super) fn watch(&self, bytes: usize) -> Watch {
        match self {
            Scanner::Chain(l) => l.watch(bytes),
            Scanner::Doubling(d) => d.watch(bytes),
        }
    }

    /// Ends it on this member after an error (see [`Link::abandon`],
    /// [`Doubling::abandon`]).
    pub(super) fn abandon(&self, sm: &SmComm, part: usize, e: &MsgError) {
        match self {
            Scanner::Chain(l) => l.abandon(sm, part, e),
            Scanner::Doubling(d) => d.abandon(sm, part, e),
        }
    }

    /// Advances it as far as the flags allow: `Ok(true)` once done here, with the
    /// result in `out` (which holds this member's part at the first poll of an inclusive
    /// scan).
    pub(super) fn poll(
        &mut self,
        sm: &SmComm,
        mine: &[T],
        out: &mut [T],
        op: &Op<T>,
    ) -> Result<bool, MsgError> {
        match self {
            Scanner::Chain(l) => l.poll(sm, mine, out, op),
            Scanner::Doubling(d) => d.poll(sm, mine, out, op),
        }
    }
}

/// Scan within one host (across hosts: the messages): `mine` is this rank's part; on
/// return `out` holds the parts of ranks 0 to this one (`inclusive`) or to the one
/// before it combined with `op` in rank order (an exclusive scan leaves rank 0's `out`
/// as it was). `Ok(false)` when the segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] when a member whose post this one reads has a part of another
/// length (or it failed so), a dead rank.
pub(crate) fn scan<T: Element>(
    c: &CommCore,
    tag: u32,
    (mine, out): (&[T], &mut [T]),
    op: &Op<T>,
    inclusive: bool,
) -> Result<bool, MsgError> {
    let part = std::mem::size_of_val(mine);
    let kind = if inclusive { Kind::Scan } else { Kind::Exscan };
    let Some((sm, _)) = place(c, &c.hosts, tag, (kind, part), false)? else {
        return Ok(false);
    };
    if inclusive {
        out.copy_from_slice(mine);
    }
    let mut scanner = Scanner::new(sm, tag, kind);
    let w = scanner.watch(part);
    let r = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || {
        scanner.poll(sm, mine, out, op)
    });
    if let Err(e) = &r {
        scanner.abandon(sm, part, e);
    }
    r.map(|()| true)
}
