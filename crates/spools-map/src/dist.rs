//! Distribution of one array dimension over one extent of the process grid
//! (HPF / `MPI_Type_create_darray` BLOCK, CYCLIC and NONE).

use std::fmt;

/// How one dimension of an array is distributed over its extent of the unit grid.
///
/// The semantics are those of `MPI_Type_create_darray`:
/// * `Block(None)`: block size `ceil(n/p)` (`MPI_DISTRIBUTE_BLOCK` with the default argument);
/// * `Block(Some(b))`: block size `b`, which must satisfy `b*p >= n`;
/// * `Cyclic(b)`: blocks of `b` dealt round-robin (`cyclic` is `Cyclic(1)`);
/// * `Whole`: not distributed (`*`, `MPI_DISTRIBUTE_NONE`); the grid extent must be 1.
///
/// ```
/// use spools_map::Dist;
/// assert_eq!(Dist::Cyclic(1).to_string(), "cyclic");
/// assert_eq!(Dist::Block(Some(4)).to_string(), "block(4)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dist {
    /// HPF BLOCK, optionally with an explicit block size.
    Block(Option<u64>),
    /// HPF CYCLIC(b), block-cyclic with block size `b >= 1`.
    Cyclic(u64),
    /// Not distributed.
    Whole,
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Block(None) => f.write_str("block"),
            Dist::Block(Some(b)) => write!(f, "block({b})"),
            Dist::Cyclic(1) => f.write_str("cyclic"),
            Dist::Cyclic(b) => write!(f, "cyclic({b})"),
            Dist::Whole => f.write_str("*"),
        }
    }
}

/// Greatest common divisor.
pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A resolved dimension: `n` indices dealt in blocks of `b` over `p` grid coordinates.
///
/// Every [`Dist`] reduces to this block-cyclic form: BLOCK is one period, NONE is `p = 1`.
/// `b` is clamped to `n`, which leaves ownership unchanged and keeps `b * p` small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DimMap {
    pub(crate) n: u64,
    pub(crate) b: u64,
    pub(crate) p: u64,
}

impl DimMap {
    /// The whole dimension on one coordinate; local index equals global index.
    pub(crate) fn whole(n: u64) -> Self {
        DimMap { n, b: n, p: 1 }
    }

    /// Length of one round of blocks, saturated (a saturated period exceeds `n`).
    pub(crate) fn period(&self) -> u64 {
        self.b.saturating_mul(self.p)
    }

    /// Grid coordinate owning global index `i`.
    pub(crate) fn owner(&self, i: u64) -> u64 {
        (i / self.b) % self.p
    }

    /// Local index of global index `i` on its owner.
    pub(crate) fn local(&self, i: u64) -> u64 {
        (i / self.period()) * self.b + i % self.b
    }

    /// Indices of the block holding `i` that remain from `i` on (at least 1).
    pub(crate) fn rest_of_block(&self, i: u64) -> u64 {
        (self.b - i % self.b).min(self.n - i)
    }

    /// Number of indices coordinate `c` owns.
    pub(crate) fn count(&self, c: u64) -> u64 {
        let t = self.period();
        let full = self.n / t;
        let rem = self.n % t;
        full * self.b + rem.saturating_sub(c.saturating_mul(self.b)).min(self.b)
    }

    /// True when coordinate 0 owns the whole dimension (so local and global indices agree).
    pub(crate) fn is_whole(&self) -> bool {
        self.b >= self.n
    }

    /// The first block of coordinate `c` that ends after index `i`, as `[start, end)`
    /// clipped to the extent, or `None` when there is none.
    pub(crate) fn block_from(&self, c: u64, i: u64) -> Option<(u64, u64)> {
        let t = self.period();
        let off = c.checked_mul(self.b).filter(|&o| o < self.n)?;
        // block k starts at k*t + off and ends b later: the first with an end past i
        let k = match i.checked_sub(off + self.b) {
            None => 0,
            Some(d) => d / t + 1,
        };
        let start = k.checked_mul(t)?.checked_add(off)?;
        let end = start.saturating_add(self.b).min(self.n);
        // the last block may be clipped short of `i`
        (start < self.n && end > i).then_some((start, end))
    }

    /// The blocks of coordinate `c` that meet `[lo, hi)`, clipped to it, in increasing order.
    pub(crate) fn blocks(&self, c: u64, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut i = lo;
        std::iter::from_fn(move || {
            if i >= hi {
                return None;
            }
            let (s, e) = self.block_from(c, i).filter(|&(s, _)| s < hi)?;
            let clipped = (s.max(i), e.min(hi));
            i = clipped.1;
            Some(clipped)
        })
    }

    /// The coordinates of `other` that share at least one index with coordinate `c` of
    /// `self`, in increasing order. The walk jumps from block to block and stops once every
    /// coordinate is found, so it costs at most the blocks of either side in one common
    /// period, and never more than the answer plus one step per block.
    pub(crate) fn coords_meeting(&self, c: u64, other: &DimMap) -> Vec<u64> {
        let (tx, ty) = (self.period(), other.period());
        let limit = (tx / gcd(tx, ty))
            .checked_mul(ty)
            .map_or(self.n, |l| l.min(self.n));
        let mut seen = std::collections::BTreeSet::new();
        let mut i = 0;
        while let Some((s, e)) = self.block_from(c, i) {
            if s >= limit {
                break;
            }
            let (first, last) = (s / other.b, (e - 1) / other.b);
            if last - first + 1 >= other.p {
                return (0..other.p).collect();
            }
            seen.extend((first..=last).map(|k| k % other.p));
            if seen.len() as u64 == other.p {
                break;
            }
            let Some(next) = (last + 1).checked_mul(other.b) else {
                break;
            };
            i = e.max(next);
        }
        seen.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::DimMap;

    #[test]
    fn counts_match_enumeration() {
        for n in 1..40u64 {
            for p in 1..6u64 {
                for b in 1..=n {
                    let m = DimMap { n, b, p };
                    for c in 0..p {
                        let owned: Vec<u64> = (0..n).filter(|&i| m.owner(i) == c).collect();
                        assert_eq!(m.count(c), owned.len() as u64, "n={n} b={b} p={p} c={c}");
                        for (l, &i) in owned.iter().enumerate() {
                            assert_eq!(m.local(i), l as u64);
                        }
                        // maximal runs of owned indices are exactly the blocks
                        let mut blocks: Vec<(u64, u64)> = Vec::new();
                        for &i in &owned {
                            match blocks.last_mut() {
                                Some(last) if last.1 == i && (i % b) != 0 => last.1 += 1,
                                _ => blocks.push((i, i + 1)),
                            }
                        }
                        assert_eq!(m.blocks(c, 0, n).collect::<Vec<_>>(), blocks);
                        let (lo, hi) = (n / 3, n - n / 4);
                        let clipped: Vec<(u64, u64)> = blocks
                            .iter()
                            .map(|&(s, e)| (s.max(lo), e.min(hi)))
                            .filter(|&(s, e)| s < e)
                            .collect();
                        assert_eq!(m.blocks(c, lo, hi).collect::<Vec<_>>(), clipped);
                        for i in 0..=n {
                            let expect = blocks.iter().copied().find(|&(_, e)| e > i);
                            assert_eq!(m.block_from(c, i), expect, "n={n} b={b} p={p} c={c} i={i}");
                        }
                        for (ob, op) in [(1, 3), (2, 2), (n.div_ceil(2), 2), (5, 4)] {
                            let o = DimMap {
                                n,
                                b: ob.clamp(1, n),
                                p: op,
                            };
                            let mut want: Vec<u64> = owned.iter().map(|&i| o.owner(i)).collect();
                            want.sort_unstable();
                            want.dedup();
                            assert_eq!(m.coords_meeting(c, &o), want, "{m:?} c={c} vs {o:?}");
                        }
                        let from_blocks: Vec<u64> =
                            blocks.iter().flat_map(|&(s, e)| s..e).collect();
                        assert_eq!(from_blocks, owned);
                    }
                }
            }
        }
    }
}
