//! A cursor over a lazy list of runs that hands them out in pieces of bounded length, so
//! that a stream of runs can be cut into transfer units anywhere.

use spools_map::{Run, Runs};

/// The rest of a [`Runs`] iterator, with the unfinished part of the current run.
#[derive(Clone, Debug)]
pub(crate) struct RunCursor {
    runs: Runs,
    cur: Option<Run>,
}

impl RunCursor {
    pub(crate) fn new(runs: Runs) -> Self {
        RunCursor { runs, cur: None }
    }

    /// The next piece of at most `limit` bytes (never empty), or `None` at the end.
    pub(crate) fn take(&mut self, limit: u64) -> Option<Run> {
        let r = match self.cur.take() {
            Some(r) => r,
            None => self.runs.by_ref().find(|r| r.len > 0)?,
        };
        let len = r.len.min(limit.max(1));
        if len < r.len {
            self.cur = Some(Run {
                src: r.src + len,
                dst: r.dst + len,
                len: r.len - len,
            });
        }
        Some(Run { len, ..r })
    }
}
