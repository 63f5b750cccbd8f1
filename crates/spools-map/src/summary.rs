//! Plan statistics: traffic matrix, run counts, run lengths, locality.

use crate::error::PlanError;
use crate::plan::{Plan, PlanPath};

/// Most (source, destination) pairs a [`PlanSummary`] holds: 2^24, 256 MiB of counters.
pub const MAX_SUMMARY_CELLS: u64 = 1 << 24;

/// Bytes and runs for every (source unit, destination unit) pair of a plan.
///
/// ```
/// use spools_map::{Layout, Plan};
/// let from: Layout = "i32[8,8] block,* on 2x1".parse()?;
/// let to: Layout = "i32[8,8] *,block on 1x2".parse()?;
/// let s = Plan::new(&from, &to)?.summary()?;
/// assert_eq!(s.bytes(0, 1), 4 * 4 * 4);
/// assert_eq!(s.total_runs(), 4 * 4);
/// assert_eq!(s.local_share(), 0.5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSummary {
    src_units: u64,
    dst_units: u64,
    bytes: Vec<u64>,
    runs: Vec<u64>,
}

impl PlanSummary {
    /// Source units (rows of the matrices).
    pub fn src_units(&self) -> u64 {
        self.src_units
    }
    /// Destination units (columns of the matrices).
    pub fn dst_units(&self) -> u64 {
        self.dst_units
    }
    fn at(&self, s: u64, d: u64) -> usize {
        (s * self.dst_units + d) as usize
    }
    fn cell(&self, v: &[u64], s: u64, d: u64) -> u64 {
        if s < self.src_units && d < self.dst_units {
            v[self.at(s, d)]
        } else {
            0
        }
    }
    /// Bytes from `s` to `d` (0 for units out of range).
    pub fn bytes(&self, s: u64, d: u64) -> u64 {
        self.cell(&self.bytes, s, d)
    }
    /// Runs from `s` to `d` (0 for units out of range).
    pub fn runs(&self, s: u64, d: u64) -> u64 {
        self.cell(&self.runs, s, d)
    }
    /// Bytes moved in all.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }
    /// Runs in all.
    pub fn total_runs(&self) -> u64 {
        self.runs.iter().sum()
    }
    /// Mean run length in bytes.
    pub fn mean_run_bytes(&self) -> f64 {
        self.total_bytes() as f64 / self.total_runs().max(1) as f64
    }
    /// Bytes whose source and destination unit have the same number.
    pub fn same_unit_bytes(&self) -> u64 {
        (0..self.src_units.min(self.dst_units))
            .map(|u| self.bytes(u, u))
            .sum()
    }
    /// Share of the bytes that stay on the same unit number (0 to 1).
    pub fn local_share(&self) -> f64 {
        self.same_unit_bytes() as f64 / self.total_bytes().max(1) as f64
    }
}

impl Plan {
    /// Enumerates every unit's sends and tallies them.
    ///
    /// # Errors
    /// [`PlanError::SummaryTooLarge`] when the two layouts have more than
    /// [`MAX_SUMMARY_CELLS`] pairs of units.
    pub fn summary(&self) -> Result<PlanSummary, PlanError> {
        let (su, du) = (self.src().units(), self.dst().units());
        let cells = su
            .checked_mul(du)
            .filter(|&c| c <= MAX_SUMMARY_CELLS)
            .ok_or(PlanError::SummaryTooLarge {
                src_units: su,
                dst_units: du,
                max: MAX_SUMMARY_CELLS,
            })? as usize;
        let mut out = PlanSummary {
            src_units: su,
            dst_units: du,
            bytes: vec![0; cells],
            runs: vec![0; cells],
        };
        for s in 0..su {
            if self.path() == PlanPath::Sweep {
                // One sweep of the unit's extents for all destinations.
                self.for_each_send(s, |d, r| {
                    let i = out.at(s, d);
                    out.bytes[i] += r.len;
                    out.runs[i] += 1;
                })?;
                continue;
            }
            for peer in self.sends(s)?.peers {
                let i = out.at(s, peer.peer);
                for p in peer.strided() {
                    out.bytes[i] += p.bytes();
                    out.runs[i] += p.count;
                }
            }
        }
        Ok(out)
    }
}
