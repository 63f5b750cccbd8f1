//! How a segment's scans go: its creator's choice, told to every member in the set-up
//! handshake (`setup.rs`), so that members whose settings differ still agree.

use spools_am::Worker;
use spools_boot::config::ScanChoice;

/// How a segment's scans go, as its creator decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanWay {
    /// The chain (`chain.rs`).
    Chain,
    /// Recursive doubling (`doubling.rs`).
    Doubling,
    /// Not through the segment: a chain of eager messages (`reduce.rs`'s `scan_chain`,
    /// `plans::scan_chain`), where each member runs ahead of the ones after it by as many
    /// scans as the messages buffer, where the segment's chain holds it to [`super::SLOTS`].
    /// For the scans after the one that set the segment up (the chain through it), and
    /// the non-blocking ones once the non-blocking segment serves them (recursive
    /// doubling over the messages before). Parts past the eager limit go as a chain of
    /// rendezvous transfers, one after the other (by length alone the ranks could
    /// disagree).
    Messages,
}

impl ScanWay {
    /// The way of a segment of `members` by its creator's setting (`coll_sm_scan`):
    /// `auto` takes the messages where the job's ranks on this host that may run on the
    /// creator's CPUs outnumber them ([`Worker::oversubscribed`]: ranks bound to a core
    /// each are not; 16 ranks on 2 CPUs are): there a member's turn on a CPU is what a
    /// scan waits for, and a loop of `MPI_Scan`s through the segment's chain took 1.8 µs
    /// at 4 ranks on 2 cores and 10.0 at 16, through eager messages 0.11 and 0.10 (Open
    /// MPI 4.1: 0.31, 1.05); else recursive doubling from [`spools_coll::SCAN_DOUBLING_MIN`]
    /// members (the cost model's choice), the segment's chain below.
    pub(super) fn choose(choice: ScanChoice, members: usize, worker: &Worker) -> ScanWay {
        match choice {
            ScanChoice::Chain => ScanWay::Chain,
            ScanChoice::Doubling => ScanWay::Doubling,
            ScanChoice::Messages => ScanWay::Messages,
            ScanChoice::Auto if worker.oversubscribed() => ScanWay::Messages,
            ScanChoice::Auto if members >= spools_coll::SCAN_DOUBLING_MIN => ScanWay::Doubling,
            ScanChoice::Auto => ScanWay::Chain,
        }
    }

    /// Its byte in the segment's handshake.
    pub(super) fn code(self) -> u8 {
        match self {
            ScanWay::Chain => 0,
            ScanWay::Doubling => 1,
            ScanWay::Messages => 2,
        }
    }

    /// The way a handshake's byte names (every member reads the same byte).
    pub(super) fn from_code(b: u8) -> ScanWay {
        match b {
            1 => ScanWay::Doubling,
            2 => ScanWay::Messages,
            _ => ScanWay::Chain,
        }
    }
}
