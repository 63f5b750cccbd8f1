//! The I/O distribution of a Zarr array: its outer chunks (shards, or chunks of an
//! unsharded array) dealt block-cyclically over a grid of ranks, so that every outer chunk
//! lies whole in one rank's local array (`cyclic(shard)` in each dimension), and the box
//! copies between a local array and a chunk. Pure: no I/O.

use spools_map::{DType, Layout};

/// Outer chunks dealt over ranks.
#[derive(Clone, Debug)]
pub(crate) struct Grid {
    /// The I/O layout: `dtype[shape] cyclic(o0),cyclic(o1),.. on p0xp1x..`.
    pub(crate) layout: Layout,
    /// The array's shape.
    pub(crate) shape: Vec<u64>,
    /// The outer chunks' shape.
    pub(crate) outer: Vec<u64>,
    /// Outer chunks per dimension.
    pub(crate) keys: Vec<u64>,
    /// Ranks per dimension.
    pub(crate) procs: Vec<u64>,
}

/// The rank grid (at most `ranks` ranks, at most one per outer chunk in each dimension)
/// that gives the fewest outer chunks to the busiest rank, then uses the most ranks, then
/// splits the slower dimensions most.
fn best_procs(keys: &[u64], ranks: u64) -> Vec<u64> {
    // A direct search: every grid with a product of at most `ranks`.
    let mut best: Option<(u64, u64, Vec<u64>)> = None;
    let mut cur = vec![1u64; keys.len()];
    fn search(
        d: usize,
        keys: &[u64],
        left: u64,
        cur: &mut Vec<u64>,
        best: &mut Option<(u64, u64, Vec<u64>)>,
    ) {
        if d == keys.len() {
            let load: u64 = keys
                .iter()
                .zip(cur.iter())
                .map(|(&k, &p)| k.div_ceil(p))
                .product();
            let used: u64 = cur.iter().product();
            let better = match best {
                None => true,
                // On a tie, the grid splitting earlier (slower) dimensions more: whole rows
                // of shards per rank.
                Some((l, u, _)) => load < *l || (load == *l && used >= *u),
            };
            if better {
                *best = Some((load, used, cur.clone()));
            }
            return;
        }
        for p in 1..=keys[d].max(1).min(left) {
            cur[d] = p;
            search(d + 1, keys, left / p, cur, best);
        }
        cur[d] = 1;
    }
    search(0, keys, ranks.max(1), &mut cur, &mut best);
    best.map(|b| b.2).unwrap_or_else(|| vec![1; keys.len()])
}

impl Grid {
    /// The I/O distribution of an array of `shape` in outer chunks of `outer` over at most
    /// `ranks` ranks.
    ///
    /// # Errors
    /// The layout's own error, for an array Spools' layouts cannot describe.
    pub(crate) fn new(
        dtype: DType,
        shape: &[u64],
        outer: &[u64],
        ranks: u32,
    ) -> Result<Grid, spools_map::SpecError> {
        let keys: Vec<u64> = shape
            .iter()
            .zip(outer)
            .map(|(&n, &o)| n.div_ceil(o.max(1)))
            .collect();
        let procs = best_procs(&keys, u64::from(ranks));
        let join = |v: Vec<String>, sep: &str| v.join(sep);
        let spec = format!(
            "{dtype}[{}] {} on {}",
            join(shape.iter().map(u64::to_string).collect(), ","),
            join(outer.iter().map(|o| format!("cyclic({o})")).collect(), ","),
            join(procs.iter().map(u64::to_string).collect(), "x"),
        );
        Ok(Grid {
            layout: spec.parse()?,
            shape: shape.to_vec(),
            outer: outer.to_vec(),
            keys,
            procs,
        })
    }

    /// Ranks holding outer chunks.
    pub(crate) fn units(&self) -> u64 {
        self.procs.iter().product()
    }

    /// Grid coordinates of `unit` (row-major over the rank grid).
    fn coords(&self, unit: u64) -> Vec<u64> {
        let mut rest = unit;
        let mut c = vec![0; self.procs.len()];
        for k in (0..self.procs.len()).rev() {
            c[k] = rest % self.procs[k];
            rest /= self.procs[k];
        }
        c
    }

    /// The local array's shape on `unit`.
    pub(crate) fn local_shape(&self, unit: u64) -> Vec<u64> {
        match &self.layout {
            Layout::Array(a) if unit < self.units() => a
                .local_shape(unit)
                .unwrap_or_else(|_| vec![0; self.shape.len()]),
            _ => vec![0; self.shape.len()],
        }
    }

    /// Indices of outer chunk `s` in dimension `d` inside the array.
    fn extent(&self, d: usize, s: u64) -> u64 {
        self.outer[d].min(self.shape[d] - s * self.outer[d])
    }

    /// The outer chunks `unit` holds, in C order of their grid coordinates.
    pub(crate) fn owned(&self, unit: u64) -> Vec<Vec<u64>> {
        if unit >= self.units() {
            return Vec::new();
        }
        let c = self.coords(unit);
        let per: Vec<Vec<u64>> = (0..self.shape.len())
            .map(|d| {
                (c[d]..self.keys[d])
                    .step_by(self.procs[d] as usize)
                    .collect()
            })
            .collect();
        product(&per)
    }

    /// Where outer chunk `s` starts in its holder's local array, and its extent there
    /// (cut at the array's edge).
    pub(crate) fn local_box(&self, s: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let at = (0..s.len())
            .map(|d| s[d] / self.procs[d] * self.outer[d])
            .collect();
        let ext = (0..s.len()).map(|d| self.extent(d, s[d])).collect();
        (at, ext)
    }
}

/// Every point of the box `[lo, hi)` (one coordinate per dimension, `hi` exclusive), in
/// C order, made one at a time: walking a box of any size holds only the current point.
/// An empty box (some `lo[d] >= hi[d]`) has none; a box of no dimensions has one, `[]`.
#[derive(Clone, Debug)]
pub(crate) struct Coords {
    lo: Vec<u64>,
    hi: Vec<u64>,
    next: Option<Vec<u64>>,
}

impl Coords {
    /// The points of `[lo, hi)`.
    pub(crate) fn new(lo: Vec<u64>, hi: Vec<u64>) -> Coords {
        let empty = lo.iter().zip(&hi).any(|(l, h)| l >= h);
        let next = (!empty).then(|| lo.clone());
        Coords { lo, hi, next }
    }
}

impl Iterator for Coords {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        let cur = self.next.take()?;
        let mut n = cur.clone();
        // Bump the fastest dimension, carrying over; past the last point, none is left.
        for d in (0..n.len()).rev() {
            n[d] += 1;
            if n[d] < self.hi[d] {
                self.next = Some(n);
                return Some(cur);
            }
            n[d] = self.lo[d];
        }
        Some(cur)
    }
}

/// Every combination of one value from each list, in C order.
pub(crate) fn product(per: &[Vec<u64>]) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new()];
    for vals in per {
        out = out
            .into_iter()
            .flat_map(|p| {
                vals.iter().map(move |&v| {
                    let mut q = p.clone();
                    q.push(v);
                    q
                })
            })
            .collect();
    }
    out
}

/// Byte strides of a C-order array of `shape` with elements of `elem` bytes.
fn strides(shape: &[u64], elem: u64) -> Vec<u64> {
    let mut s = vec![elem; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f(a, b)` with the byte offsets in two C-order arrays (strides `sa`, `sb`, boxes
/// starting at byte offsets `a0`, `b0`) of every row of a box of extent `ext` (a row: the
/// last dimension), in C order, with an odometer: no allocation per row.
fn for_rows(
    ext: &[u64],
    sa: &[u64],
    a0: u64,
    sb: &[u64],
    b0: u64,
    mut f: impl FnMut(usize, usize),
) {
    let n = ext.len().saturating_sub(1);
    if ext.contains(&0) {
        return;
    }
    let mut idx = vec![0u64; n];
    let (mut a, mut b) = (a0, b0);
    loop {
        f(a as usize, b as usize);
        // Next row: bump the fastest of the leading dimensions, carrying over.
        let mut d = n;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            a += sa[d];
            b += sb[d];
            if idx[d] < ext[d] {
                break;
            }
            a -= sa[d] * ext[d];
            b -= sb[d] * ext[d];
            idx[d] = 0;
        }
    }
}

/// Byte offset of `at` in a C-order array with byte strides `st`.
fn offset(st: &[u64], at: &[u64]) -> u64 {
    st.iter().zip(at).map(|(s, i)| s * i).sum()
}

/// A box of a C-order array: its shape, the box's start and extent.
pub(crate) struct BoxOf<'a> {
    pub(crate) shape: &'a [u64],
    pub(crate) at: &'a [u64],
}

/// Copies the box of extent `ext` at `src.at` of `from` to `dst.at` of `to`.
pub(crate) fn copy_box(
    from: &[u8],
    src: BoxOf<'_>,
    to: &mut [u8],
    dst: BoxOf<'_>,
    ext: &[u64],
    elem: u64,
) {
    let Some(&last) = ext.last() else { return };
    let len = (last * elem) as usize;
    let (sa, sb) = (strides(src.shape, elem), strides(dst.shape, elem));
    let (a0, b0) = (offset(&sa, src.at), offset(&sb, dst.at));
    for_rows(ext, &sa, a0, &sb, b0, |a, b| {
        to[b..b + len].copy_from_slice(&from[a..a + len]);
    });
}

/// Fills the box of extent `ext` at `dst.at` of `to` with copies of `pattern` (one element).
pub(crate) fn fill_box(to: &mut [u8], dst: BoxOf<'_>, ext: &[u64], pattern: &[u8]) {
    let Some(&last) = ext.last() else { return };
    let elem = pattern.len() as u64;
    let len = (last * elem) as usize;
    let zero = pattern.iter().all(|&b| b == 0);
    let sb = strides(dst.shape, elem);
    let b0 = offset(&sb, dst.at);
    for_rows(ext, &sb, b0, &sb, b0, |_, b| {
        let row = &mut to[b..b + len];
        if zero {
            row.fill(0);
        } else {
            for e in row.chunks_exact_mut(pattern.len()) {
                e.copy_from_slice(pattern);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outer_chunk_lies_whole_in_one_local_array() {
        for (shape, outer, ranks) in [
            (vec![10u64, 7], vec![4u64, 3], 4u32),
            (vec![5, 5, 5], vec![2, 5, 3], 3),
            (vec![9], vec![9], 5),
            (vec![8, 8], vec![2, 2], 5),
        ] {
            let g = Grid::new(DType::U16, &shape, &outer, ranks)
                .unwrap_or_else(|e| unreachable!("{e}"));
            assert!(g.units() <= u64::from(ranks));
            let Layout::Array(a) = &g.layout else {
                unreachable!()
            };
            let mut seen = 0;
            for u in 0..g.units() {
                assert_eq!(g.local_shape(u), a.local_shape(u).unwrap_or_default());
                let ls = g.local_shape(u);
                // Every element of every owned chunk: its global index is where the
                // layout puts the local position the box says.
                for s in g.owned(u) {
                    let (at, ext) = g.local_box(&s);
                    seen += 1;
                    for idx in product(&ext.iter().map(|&e| (0..e).collect()).collect::<Vec<_>>()) {
                        let global: Vec<u64> =
                            (0..idx.len()).map(|d| s[d] * outer[d] + idx[d]).collect();
                        let lin = global.iter().zip(&shape).fold(0, |o, (&i, &n)| o * n + i);
                        let loc = g.layout.locate(lin * 2).unwrap_or_else(|| unreachable!());
                        let local: Vec<u64> = (0..idx.len()).map(|d| at[d] + idx[d]).collect();
                        let want = local.iter().zip(&ls).fold(0, |o, (&i, &n)| o * n + i) * 2;
                        assert_eq!((loc.unit, loc.local), (u, want), "{shape:?} {s:?} {idx:?}");
                    }
                }
            }
            assert_eq!(seen, g.keys.iter().product::<u64>());
        }
        // Load first, then ranks used.
        assert_eq!(best_procs(&[4, 4], 4), vec![4, 1]);
        assert_eq!(best_procs(&[2, 4], 4), vec![2, 2]);
        assert_eq!(best_procs(&[1, 8], 4), vec![1, 4]);
        assert_eq!(best_procs(&[3], 2), vec![2]);
    }

    #[test]
    fn coords_walk_a_box_in_c_order() {
        let all: Vec<Vec<u64>> = Coords::new(vec![1, 0], vec![3, 2]).collect();
        assert_eq!(all, vec![vec![1, 0], vec![1, 1], vec![2, 0], vec![2, 1]]);
        assert_eq!(Coords::new(vec![0, 5], vec![4, 5]).count(), 0);
        assert_eq!(
            Coords::new(vec![], vec![]).collect::<Vec<_>>(),
            vec![Vec::<u64>::new()]
        );
        // A box of 10^18 points: the first ones come at once.
        let huge = Coords::new(vec![0, 0], vec![1_000_000_000, 1_000_000_000]);
        assert_eq!(huge.take(3).last(), Some(vec![0, 2]));
        let per = vec![vec![0u64, 1, 2], vec![4, 5]];
        assert_eq!(
            Coords::new(vec![0, 4], vec![3, 6]).collect::<Vec<_>>(),
            product(&per)
        );
    }

    #[test]
    fn boxes_copy_and_fill() {
        // A 4x5 array of bytes 0..20; copy its 2x3 box at (1,1) into a 3x3 zeroed one at (1,0).
        let from: Vec<u8> = (0..20).collect();
        let mut to = vec![0u8; 9];
        copy_box(
            &from,
            BoxOf {
                shape: &[4, 5],
                at: &[1, 1],
            },
            &mut to,
            BoxOf {
                shape: &[3, 3],
                at: &[1, 0],
            },
            &[2, 3],
            1,
        );
        assert_eq!(to, [0, 0, 0, 6, 7, 8, 11, 12, 13]);
        fill_box(
            &mut to,
            BoxOf {
                shape: &[3, 3],
                at: &[0, 1],
            },
            &[3, 2],
            &[9],
        );
        assert_eq!(to, [0, 9, 9, 6, 9, 9, 11, 9, 9]);
    }
}
