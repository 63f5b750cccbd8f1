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

    /// The blocks of coordinate `c` that meet `[lo, hi)`, clipped to it, in increasing order.
    pub(crate) fn blocks_in(&self, c: u64, lo: u64, hi: u64, out: &mut Vec<(u64, u64)>) {
        let t = self.period();
        let mut k = lo / t;
        let offset = c.saturating_mul(self.b);
        while let Some(start) = k.checked_mul(t).and_then(|x| x.checked_add(offset)) {
            if start >= hi {
                break;
            }
            let end = start.saturating_add(self.b).min(hi);
            let s = start.max(lo);
            if s < end {
                out.push((s, end));
            }
            k += 1;
        }
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
                        let mut blocks = Vec::new();
                        m.blocks_in(c, 0, n, &mut blocks);
                        let from_blocks: Vec<u64> =
                            blocks.iter().flat_map(|&(s, e)| s..e).collect();
                        assert_eq!(from_blocks, owned);
                    }
                }
            }
        }
    }
}
