//! A cursor over a plan's runs as progressions ([`Strided`]) that hands them out in
//! pieces of bounded length, so that a stream can be cut into transfer units anywhere
//! while equally spaced short runs still go by whole progressions.

use spools_map::{Run, Strided, StridedRuns};

/// The rest of a [`StridedRuns`] iterator, with the unfinished part of the current
/// progression.
#[derive(Clone, Debug)]
pub(crate) struct Pieces {
    runs: StridedRuns,
    /// What is left of a run cut at a piece boundary (handed out first).
    head: Option<Run>,
    /// The whole runs left of the current progression.
    cur: Option<Strided>,
}

impl Pieces {
    pub(crate) fn new(runs: StridedRuns) -> Self {
        Pieces {
            runs,
            head: None,
            cur: None,
        }
    }

    /// The next piece of at most `limit` bytes (never empty): as many whole runs of the
    /// current progression as fit, or the first part of a run longer than `limit`; `None`
    /// at the end.
    pub(crate) fn take(&mut self, limit: u64) -> Option<Strided> {
        let limit = limit.max(1);
        if let Some(h) = self.head.take() {
            return Some(self.cut(h, limit));
        }
        let p = match self.cur.take() {
            Some(p) => p,
            None => self.runs.by_ref().find(|p| p.len > 0)?,
        };
        let fit = if p.bytes() <= limit {
            p.count
        } else {
            (limit / p.len).min(p.count)
        };
        if fit > 0 {
            self.cur = p.skip(fit);
            return Some(p.first(fit));
        }
        self.cur = p.skip(1);
        Some(self.cut(p.run(0), limit))
    }

    /// At most `limit` bytes of `r`, keeping the rest as the head.
    fn cut(&mut self, r: Run, limit: u64) -> Strided {
        let len = r.len.min(limit);
        if len < r.len {
            self.head = Some(Run {
                src: r.src + len,
                dst: r.dst + len,
                len: r.len - len,
            });
        }
        Strided::single(Run { len, ..r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spools_map::{Layout, Plan};

    /// Pieces of any limit cover the runs exactly, in order, each within the limit.
    #[test]
    fn pieces_cover_the_runs_within_the_limit() {
        let from: Layout = "f64[4096] block on 2".parse().unwrap();
        for to in [
            "f64[4096] cyclic on 4",
            "f64[4096] cyclic(3) on 4",
            "f64[4096] block on 3",
        ] {
            let to: Layout = to.parse().unwrap();
            let plan = Plan::new(&from, &to).unwrap();
            for limit in [1u64, 5, 8, 20, 64, 1000, 1 << 20] {
                let bytes: Vec<(u64, u64)> = plan
                    .runs(1, 2)
                    .unwrap()
                    .flat_map(|r| (0..r.len).map(move |i| (r.src + i, r.dst + i)))
                    .collect();
                let mut pieces = Pieces::new(plan.runs(1, 2).unwrap().strided());
                let mut got = Vec::new();
                while let Some(p) = pieces.take(limit) {
                    assert!(p.bytes() <= limit && p.bytes() > 0, "{p:?} limit {limit}");
                    for r in p.runs() {
                        got.extend((0..r.len).map(|i| (r.src + i, r.dst + i)));
                    }
                }
                assert_eq!(got, bytes, "limit {limit}");
            }
        }
    }
}
