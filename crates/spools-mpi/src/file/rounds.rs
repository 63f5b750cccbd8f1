//! The rounds of a collective access in two phases (ROMIO's cycles of `cb_buffer_size`):
//! each aggregator moves its domain a chunk of at most [`round_bytes`] bytes at a time,
//! so that it never holds more than that of the file, and no rank packs more than its
//! pieces of one round's chunks. Pure: the domains, the round's size and each rank's
//! own runs in, the chunks of each round and each rank's pieces of them out.
//!
//! Round 0's chunks start at their domains' starts. Where a domain is longer than its
//! chunk, the next round's chunk starts at the first byte past it that some rank touches
//! (one small allreduce of [`Rounds::next_starts`] per round after the first; brought
//! back to a multiple of the domains' alignment where that stays past the chunk before),
//! so gaps no rank touches cost no round. A domain that fits one chunk, the common small access,
//! takes one round and no allreduce.

use crate::file::view::FileRun;

/// The bytes of a domain an aggregator holds in one round without a `cb_buffer_size`
/// hint. ROMIO's default is 16 MiB; rounds of 1 MiB stay in the caches, and moved an
/// hindexed view of blocks of 50 to 139 bytes 2 to 3 times faster here (37.7 MB per
/// rank at 2 ranks: writes 40.8 against 119.2 ms, reads 31.6 against 75.9;
/// `bench/peers/io_hindexed.c`); 256 KiB and 1 MiB were alike at 2 to 4 ranks, 4 MiB
/// 1.2 to 2.2 times slower.
pub(crate) const ROUND_BYTES: u64 = 1 << 20;

/// The fewest bytes a `cb_buffer_size` hint makes a round of: a page.
pub(crate) const MIN_ROUND_BYTES: u64 = 4096;

/// The bytes of a domain one round moves, for a `cb_buffer_size` hint of `hint` bytes
/// (0: none; rank 0's, so that every rank has the same): at least
/// [`MIN_ROUND_BYTES`], [`ROUND_BYTES`] without it.
pub(crate) fn round_bytes(hint: u64) -> u64 {
    match hint {
        0 => ROUND_BYTES,
        b => b.max(MIN_ROUND_BYTES),
    }
}

/// One rank's view of the rounds of an access: its runs, where each starts in its data,
/// and the chunk of each domain in the current round.
pub(crate) struct Rounds<'a> {
    runs: &'a [FileRun],
    /// Where each run starts in the data, when the runs are in increasing offset order
    /// and apart (a round then finds its pieces by search); `None` otherwise (a round
    /// then looks at every run).
    starts: Option<Vec<usize>>,
    doms: &'a [(u64, u64)],
    per: u64,
    align: u64,
    /// The current round's chunk of each domain, `None` where a domain has no bytes left.
    chunks: Vec<Option<(u64, u64)>>,
}

impl<'a> Rounds<'a> {
    /// Round 0 of an access of `runs` (this rank's, in data order) over the aggregators'
    /// domains `doms` (in order, apart), `per` bytes of a domain a round, chunks after a
    /// gap starting at a multiple of `align` where they can.
    pub(crate) fn new(
        runs: &'a [FileRun],
        doms: &'a [(u64, u64)],
        per: u64,
        align: u64,
    ) -> Rounds<'a> {
        let ordered = runs.windows(2).all(|w| w[0].0 + w[0].1 as u64 <= w[1].0);
        let starts = ordered.then(|| {
            let mut at = 0usize;
            runs.iter()
                .map(|r| {
                    let s = at;
                    at += r.1;
                    s
                })
                .collect()
        });
        let per = per.max(1);
        let chunks = doms.iter().map(|&(lo, hi)| chunk(lo, hi, per)).collect();
        Rounds {
            runs,
            starts,
            doms,
            per,
            align: align.max(1),
            chunks,
        }
    }

    /// The current round's chunk of domain `d`, if it has one.
    pub(crate) fn chunk(&self, d: usize) -> Option<(u64, u64)> {
        self.chunks.get(d).copied().flatten()
    }

    /// Whether a next round may be needed: some domain ends past its current chunk.
    /// The same answer on every rank (it depends on the domains and chunks only).
    pub(crate) fn more(&self) -> bool {
        self.chunks
            .iter()
            .zip(self.doms)
            .any(|(c, d)| c.is_some_and(|c| c.1 < d.1))
    }

    /// For each domain, the first byte past its current chunk that this rank's runs
    /// touch (`u64::MAX` for none): the group's minimum ([`Rounds::advance`]) is where
    /// the domain's next chunk starts.
    pub(crate) fn next_starts(&self) -> Vec<u64> {
        self.chunks
            .iter()
            .zip(self.doms)
            .map(|(c, &(_, hi))| match c {
                Some((_, end)) if *end < hi => self.first_touched(*end, hi),
                _ => u64::MAX,
            })
            .collect()
    }

    /// Moves to the next round, whose chunks start at `starts` (the group's minimum of
    /// every rank's [`Rounds::next_starts`]). Whether the round has any chunk.
    pub(crate) fn advance(&mut self, starts: &[u64]) -> bool {
        for ((c, &(_, hi)), &s) in self.chunks.iter_mut().zip(self.doms).zip(starts) {
            let after = c.map_or(s, |(_, end)| end);
            let s = if s < hi {
                (s - s % self.align).max(after)
            } else {
                s
            };
            *c = chunk(s, hi, self.per);
        }
        self.chunks.iter().any(Option::is_some)
    }

    /// The first byte of `[from, to)` that a run touches, or `u64::MAX`.
    fn first_touched(&self, from: u64, to: u64) -> u64 {
        let touched = |&(off, len): &FileRun| {
            let (a, b) = (off.max(from), (off + len as u64).min(to));
            (a < b).then_some(a)
        };
        match &self.starts {
            Some(_) => {
                let i = self.runs.partition_point(|r| r.0 + r.1 as u64 <= from);
                self.runs[i..]
                    .iter()
                    .take_while(|r| r.0 < to)
                    .find_map(touched)
            }
            None => self.runs.iter().filter_map(touched).min(),
        }
        .unwrap_or(u64::MAX)
    }

    /// This rank's pieces of the current round: calls `each(domain, file offset,
    /// length, position in the data)` for every piece of a run within a domain's chunk.
    /// The order is the same on every call, and a domain's pieces come in the order of
    /// the runs.
    pub(crate) fn cut(&self, mut each: impl FnMut(usize, u64, usize, usize)) {
        let live: Vec<(usize, u64, u64)> = self
            .chunks
            .iter()
            .enumerate()
            .filter_map(|(d, c)| c.map(|(lo, hi)| (d, lo, hi)))
            .collect();
        let mut piece = |d: usize, (lo, hi): (u64, u64), (off, len): FileRun, at: usize| {
            let (a, b) = (off.max(lo), (off + len as u64).min(hi));
            if a < b {
                each(d, a, (b - a) as usize, at + (a - off) as usize);
            }
        };
        match &self.starts {
            Some(starts) => {
                for &(d, lo, hi) in &live {
                    let i = self.runs.partition_point(|r| r.0 + r.1 as u64 <= lo);
                    for (&run, &at) in self.runs[i..].iter().zip(&starts[i..]) {
                        if run.0 >= hi {
                            break;
                        }
                        piece(d, (lo, hi), run, at);
                    }
                }
            }
            None => {
                let mut at = 0usize;
                for &run in self.runs {
                    let end = run.0 + run.1 as u64;
                    let j = live.partition_point(|c| c.2 <= run.0);
                    for &(d, lo, hi) in live[j..].iter().take_while(|c| c.1 < end) {
                        piece(d, (lo, hi), run, at);
                    }
                    at += run.1;
                }
            }
        }
    }
}

/// The chunk of `per` bytes starting at `start` of a domain ending at `hi`, if any.
fn chunk(start: u64, hi: u64, per: u64) -> Option<(u64, u64)> {
    (start < hi).then(|| (start, start.saturating_add(per).min(hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` domains of `[lo, hi)`, each `per` long but the last.
    fn domains(lo: u64, hi: u64, n: u64, align: u64) -> Vec<(u64, u64)> {
        let per = (hi - lo).div_ceil(n).div_ceil(align) * align;
        (0..n)
            .map(|i| (lo + i * per, (lo + (i + 1) * per).min(hi)))
            .filter(|(a, b)| a < b)
            .collect()
    }

    /// Every round of `runs` over `doms` as one process sees them (the minimum of one
    /// rank's starts is its own): the pieces of each round.
    fn all_rounds(
        runs: &[FileRun],
        doms: &[(u64, u64)],
        per: u64,
    ) -> Vec<Vec<(usize, u64, usize, usize)>> {
        let mut r = Rounds::new(runs, doms, per, 64);
        let mut out = Vec::new();
        loop {
            let mut pieces = Vec::new();
            r.cut(|d, o, l, p| pieces.push((d, o, l, p)));
            out.push(pieces);
            if !r.more() || !r.advance(&r.next_starts()) {
                return out;
            }
        }
    }

    /// The bytes each piece list covers, as (offset, position) per byte, sorted.
    fn bytes(rounds: &[Vec<(usize, u64, usize, usize)>]) -> Vec<(u64, usize)> {
        let mut b: Vec<(u64, usize)> = rounds
            .iter()
            .flatten()
            .flat_map(|&(_, o, l, p)| (0..l).map(move |i| (o + i as u64, p + i)))
            .collect();
        b.sort_unstable();
        b
    }

    #[test]
    fn rounds_move_every_byte_once_within_chunks_of_at_most_per_bytes() {
        let runs: Vec<FileRun> = (0..200u64).map(|i| (i * 30 + 3, 10)).collect();
        let doms = domains(3, 199 * 30 + 13, 3, 64);
        for per in [64u64, 100, 1000, 1 << 20] {
            let rounds = all_rounds(&runs, &doms, per);
            let want: Vec<(u64, usize)> = runs
                .iter()
                .enumerate()
                .flat_map(|(i, &(o, l))| (0..l).map(move |k| (o + k as u64, i * 10 + k)))
                .collect();
            assert_eq!(bytes(&rounds), want, "per {per}");
            for pieces in &rounds {
                for (d, &(lo, hi)) in doms.iter().enumerate() {
                    let mine: Vec<_> = pieces.iter().filter(|p| p.0 == d).collect();
                    if let (Some(a), Some(b)) = (mine.first(), mine.last()) {
                        assert!(b.1 + b.2 as u64 - a.1 <= per, "per {per}: {mine:?}");
                        assert!(a.1 >= lo && b.1 + b.2 as u64 <= hi);
                    }
                }
            }
            let longest = doms.iter().map(|d| (d.1 - d.0).div_ceil(per)).max();
            assert!(rounds.len() as u64 <= longest.unwrap_or(1), "per {per}");
        }
    }

    #[test]
    fn a_domain_within_one_chunk_takes_one_round() {
        let runs = vec![(0u64, 10usize), (100, 10)];
        let doms = domains(0, 110, 2, 8);
        let r = Rounds::new(&runs, &doms, 4096, 4096);
        assert!(!r.more());
        assert_eq!(all_rounds(&runs, &doms, 4096).len(), 1);
    }

    #[test]
    fn gaps_no_run_touches_cost_no_round() {
        // Two pieces a terabyte apart in one domain: two rounds, not 2^40 / 4096.
        let runs = vec![(0u64, 10usize), (1 << 40, 10)];
        let doms = vec![(0u64, (1u64 << 40) + 10)];
        let rounds = all_rounds(&runs, &doms, 4096);
        assert_eq!(rounds.len(), 2, "{rounds:?}");
        assert_eq!(rounds[1], vec![(0, 1 << 40, 10, 10)]);
        // The second chunk starts at a multiple of the alignment: 64 bytes before the
        // piece, whose bytes it holds.
        let runs = vec![(0u64, 10usize), ((1 << 40) + 64, 10)];
        let doms = vec![(0u64, (1u64 << 40) + 74)];
        let mut r = Rounds::new(&runs, &doms, 4096, 4096);
        assert!(r.more() && r.advance(&r.next_starts()));
        assert_eq!(r.chunk(0), Some((1 << 40, (1 << 40) + 74)));
    }

    #[test]
    fn runs_out_of_order_are_cut_as_runs_in_order_are() {
        let runs = vec![(500u64, 40usize), (0, 100), (300, 20), (90, 30)];
        let doms = domains(0, 540, 2, 64);
        let rounds = all_rounds(&runs, &doms, 128);
        let mut want: Vec<(u64, usize)> = Vec::new();
        let mut at = 0;
        for &(o, l) in &runs {
            want.extend((0..l).map(|k| (o + k as u64, at + k)));
            at += l;
        }
        want.sort_unstable();
        assert_eq!(bytes(&rounds), want);
        assert!(Rounds::new(&runs, &doms, 128, 64).starts.is_none());
    }

    #[test]
    fn the_hint_sets_the_round_and_a_page_is_the_least() {
        assert_eq!(round_bytes(0), ROUND_BYTES);
        assert_eq!(round_bytes(1 << 20), 1 << 20);
        assert_eq!(round_bytes(1), MIN_ROUND_BYTES);
    }
}
