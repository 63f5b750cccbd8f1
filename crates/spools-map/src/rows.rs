//! Runs between an array's unit and a stripe's unit where the stripe's blocks cut the
//! array's rows (a stripe unit that is no whole number of rows, so the stripe is no
//! distribution of the array's shape): each row of the array unit holds the same runs at
//! the same offsets within the row (its *row pattern*, found once as progressions), and
//! the runs between the two units are that pattern laid over every row the array unit
//! owns, clipped to the stripe unit's blocks. The cost grows with rows times the pattern's
//! progressions, not with bytes or runs.
//!
//! Both units keep their bytes in canonical order (an array unit's local storage is
//! monotone in the canonical stream, and so is a stripe unit's), so the runs come out in
//! the order of both sides at once.

use std::sync::{Arc, OnceLock};

use crate::array::ArrayLayout;
use crate::dist::DimMap;
use crate::intersect::DimIntersection;
use crate::product::{Product, RawRun};
use crate::strided::{MergeStrided, Progressions, Strided};
use crate::stripe::StripeLayout;

/// Most progressions a row pattern may hold; past it the plan sweeps run by run.
pub(crate) const MAX_ROW_PATTERN: usize = 4096;

/// One array unit's runs within any row it owns: `src` is the offset in the unit's local
/// storage of the row's part, `dst` the byte offset within the row.
#[derive(Clone, Debug)]
pub(crate) struct RowPattern {
    runs: Vec<Strided>,
    /// Bytes the unit holds of each row it owns.
    row_local: u64,
}

impl RowPattern {
    /// The pattern of `a`'s unit `s` (`None` when it has more than [`MAX_ROW_PATTERN`]
    /// progressions). A unit whose slowest-dimension coordinate owns no row gets the
    /// pattern of its row all the same; it is laid over no row.
    pub(crate) fn of(a: &ArrayLayout, s: u64) -> Option<RowPattern> {
        let order = a.storage_dims();
        let s0 = order[0];
        let coords = a.coords(s).ok()?;
        let maps = a.maps();
        let e = a.dtype().size();
        let mut dims = Vec::with_capacity(order.len());
        let (mut la, mut lg, mut sg) = (Vec::new(), Vec::new(), Vec::new());
        // Side B is the row in canonical order: strides of the dense row.
        let mut stride = e;
        let mut strides = vec![0; order.len()];
        for (j, &k) in order.iter().enumerate().rev() {
            strides[j] = stride;
            stride *= if k == s0 { 1 } else { a.shape()[k] };
        }
        let mut row_local = e;
        for (j, &k) in order.iter().enumerate() {
            let (m, c) = if k == s0 {
                (DimMap::whole(1), 0)
            } else {
                (maps[k], coords[k])
            };
            dims.push(Arc::new(DimIntersection::new(
                &m,
                c,
                &DimMap::whole(m.n),
                0,
            )));
            la.push(m.count(c));
            lg.push(m.n);
            sg.push(strides[j]);
            row_local *= m.count(c);
        }
        let product = Product::new(dims, &la, &lg, &sg, e);
        let runs: Vec<Strided> = MergeStrided::new(product, None)
            .take(MAX_ROW_PATTERN + 1)
            .collect();
        (runs.len() <= MAX_ROW_PATTERN).then_some(RowPattern { runs, row_local })
    }

    /// Bytes this pattern holds.
    pub(crate) fn stored_bytes(&self) -> usize {
        self.runs.len() * std::mem::size_of::<Strided>()
    }

    fn is_empty(&self) -> bool {
        self.runs.is_empty() || self.row_local == 0
    }
}

/// Whether `a` and `s` laid over its bytes from `origin` on are a pair this module
/// serves: an array of more than one dimension (a vector's rows are single elements), a
/// stripe of a size within the array.
pub(crate) fn serves(a: &ArrayLayout, s: &StripeLayout, origin: u64) -> bool {
    a.shape().len() > 1
        && s.size()
            .and_then(|n| n.checked_add(origin))
            .is_some_and(|end| end <= a.total_bytes())
}

/// The parts of the pair that do not depend on the units.
#[derive(Clone, Debug)]
pub(crate) struct RowGeometry {
    /// The slowest storage dimension's distribution.
    dim0: DimMap,
    /// Grid coordinate along it of each array unit is `coords[s0]`.
    s0: usize,
    /// Bytes of one row (one index of the slowest storage dimension).
    row: u64,
    /// Stripe block bytes and units.
    unit: u64,
    count: u64,
    /// The array's bytes `[origin, end)` the stripe is laid over (its local offsets count
    /// from `origin`): the whole array, or one round's window of it.
    origin: u64,
    end: u64,
    /// Each array unit's row pattern, found once per plan and shared by its sweeps.
    patterns: Arc<RowPatterns>,
}

/// The row patterns of an array's units, found when first asked for: units that differ
/// only in their slowest-dimension coordinate share one.
#[derive(Debug)]
struct RowPatterns {
    cells: Vec<OnceLock<Option<Arc<RowPattern>>>>,
}

impl RowGeometry {
    /// `s` laid over the bytes of `a` from `origin` on (as many as `s` holds).
    pub(crate) fn new(a: &ArrayLayout, s: &StripeLayout, origin: u64) -> RowGeometry {
        let s0 = a.storage_dims()[0];
        let dim0 = a.maps()[s0];
        let size = s.size().unwrap_or(0);
        RowGeometry {
            dim0,
            s0,
            row: a.total_bytes() / dim0.n.max(1),
            unit: s.unit(),
            count: s.count(),
            origin,
            end: origin.saturating_add(size).min(a.total_bytes()),
            patterns: Arc::new(RowPatterns {
                cells: (0..a.units() / dim0.p.max(1))
                    .map(|_| OnceLock::new())
                    .collect(),
            }),
        }
    }

    /// The row pattern of `a`'s unit `s` (`None` past [`MAX_ROW_PATTERN`] progressions).
    pub(crate) fn pattern(&self, a: &ArrayLayout, s: u64) -> Option<Arc<RowPattern>> {
        let c = a.coords(s).ok()?;
        let key = c
            .iter()
            .zip(a.grid())
            .enumerate()
            .filter(|&(k, _)| k != self.s0)
            .fold(0u64, |acc, (_, (&c, &g))| acc * g + c);
        let cell = self.patterns.cells.get(usize::try_from(key).ok()?)?;
        cell.get_or_init(|| RowPattern::of(a, s).map(Arc::new))
            .clone()
    }

    /// Whether every unit of `a` has a row pattern.
    pub(crate) fn all_patterns(&self, a: &ArrayLayout) -> bool {
        (0..a.units()).all(|u| self.pattern(a, u).is_some())
    }

    /// Where the stripe starts in the array's bytes.
    pub(crate) fn origin(&self) -> u64 {
        self.origin
    }

    /// Global byte range of stripe block `j` (empty past the end).
    fn block(&self, j: u64) -> (u64, u64) {
        let lo = j
            .saturating_mul(self.unit)
            .saturating_add(self.origin)
            .min(self.end);
        (lo, lo.saturating_add(self.unit).min(self.end))
    }

    /// Stripe units that array unit `s` (pattern `p`) exchanges bytes with, in increasing
    /// order.
    pub(crate) fn stripe_peers(&self, a: &ArrayLayout, s: u64, p: &RowPattern) -> Vec<u64> {
        let mut seen = vec![false; self.count as usize];
        let mut left = self.count;
        if let Ok(c) = a.coords(s) {
            let c0 = c[self.s0];
            let mut r = self.origin / self.row;
            while left > 0 {
                let Some((b0, b1)) = self.dim0.block_from(c0, r) else {
                    break;
                };
                if b0 * self.row >= self.end {
                    break;
                }
                for row in b0.max(r)..b1 {
                    let (g0, g1) = (row * self.row, ((row + 1) * self.row).min(self.end));
                    if g0 >= self.end {
                        break;
                    }
                    let mut j = g0.max(self.origin).saturating_sub(self.origin) / self.unit;
                    while self.block(j).0 < g1 && left > 0 {
                        let u = (j % self.count) as usize;
                        let (lo, hi) = self.block(j);
                        if !seen[u]
                            && p.runs
                                .iter()
                                .any(|x| clip(x, lo.max(g0) - g0, hi.min(g1) - g0).next().is_some())
                        {
                            seen[u] = true;
                            left -= 1;
                        }
                        j += 1;
                    }
                    if left == 0 {
                        break;
                    }
                }
                r = b1;
            }
        }
        (0..self.count).filter(|&u| seen[u as usize]).collect()
    }

    /// Array units that exchange bytes with stripe unit `d`, in increasing order.
    pub(crate) fn array_peers(&self, a: &ArrayLayout, d: u64) -> Vec<u64> {
        (0..a.units())
            .filter(|&s| {
                self.pattern(a, s).is_some_and(|p| {
                    RowSweep::new(p, self.clone(), a, s, d, false)
                        .next_progression()
                        .is_some()
                })
            })
            .collect()
    }
}

/// The runs between array unit `s` and stripe unit `d` as `(array local, stripe local,
/// len)`, or the other way round when `flip`.
#[derive(Clone, Debug)]
pub(crate) struct RowSweep {
    pattern: Arc<RowPattern>,
    geo: RowGeometry,
    /// `s`'s coordinate along the slowest dimension.
    c0: u64,
    flip: bool,
    /// The current stripe block `j` (one of `d`'s) and its clipped global range.
    block: u64,
    /// The current row and the next pattern progression to lay over it.
    row: u64,
    at: usize,
    /// Pieces of a clipped progression not yet handed out (taken from the front).
    queue: [Option<Strided>; 3],
    /// A progression being handed out run by run (for `Iterator`).
    expanding: Option<(Strided, u64)>,
    done: bool,
}

impl RowSweep {
    pub(crate) fn new(
        pattern: Arc<RowPattern>,
        geo: RowGeometry,
        a: &ArrayLayout,
        s: u64,
        d: u64,
        flip: bool,
    ) -> RowSweep {
        let c0 = a.coords(s).map_or(0, |c| c[geo.s0]);
        let done = pattern.is_empty() || d >= geo.count || geo.block(d).0 >= geo.end;
        let mut sweep = RowSweep {
            pattern,
            c0,
            flip,
            block: d,
            row: 0,
            at: 0,
            queue: [None; 3],
            expanding: None,
            done,
            geo,
        };
        if !sweep.done {
            sweep.row = sweep.first_row(sweep.geo.block(d).0);
            sweep.settle();
        }
        sweep
    }

    /// The first row `s` owns that ends after global byte `g` (the row count when none).
    fn first_row(&self, g: u64) -> u64 {
        let r = g / self.geo.row;
        self.geo
            .dim0
            .block_from(self.c0, r)
            .map_or(self.geo.dim0.n, |(b0, _)| b0.max(r))
    }

    /// Makes the current row one that meets the current block, moving on to `d`'s later
    /// blocks as needed (done past the last).
    fn settle(&mut self) {
        loop {
            let (_, hi) = self.range();
            if self.row >= self.geo.dim0.n {
                self.done = true;
                return;
            }
            if self.row * self.geo.row < hi || !self.next_block() {
                return;
            }
        }
    }

    /// Moves on to `d`'s next block and the first row `s` owns that meets it; `false`
    /// (and done) past the end.
    fn next_block(&mut self) -> bool {
        self.block += self.geo.count;
        let g = self.geo.block(self.block).0;
        if g >= self.geo.end {
            self.done = true;
            return false;
        }
        self.row = self.first_row(g);
        true
    }

    /// Steps to the next row `s` owns within the block, or on to the next block of `d`
    /// (which may start within the same row: a row longer than the stripe's period, or a
    /// stripe of one unit, goes on there and is clipped again).
    fn advance(&mut self) {
        self.at = 0;
        let (_, hi) = self.range();
        let row_end = (self.row + 1) * self.geo.row;
        if row_end > hi {
            // The row goes on past the block: the rest lies in other units' blocks, or in
            // `d`'s next block, which starts at this row or a later one.
            if !self.next_block() {
                return;
            }
        } else {
            self.row = self.first_row(row_end);
        }
        self.settle();
    }

    /// The current block's global byte range.
    fn range(&self) -> (u64, u64) {
        self.geo.block(self.block)
    }
}

/// The runs of `p` (offsets within a row on side B) within `[lo, hi)` of the row: up to
/// three progressions (a cut first run, whole runs, a cut last run).
fn clip(p: &Strided, lo: u64, hi: u64) -> impl Iterator<Item = Strided> {
    let mut out: [Option<Strided>; 3] = [None, None, None];
    let end0 = p.dst + p.len;
    let step = p.dst_stride.max(1);
    let first = if lo < end0 { 0 } else { (lo - end0) / step + 1 };
    let last = if hi <= p.dst {
        None
    } else {
        Some(((hi - 1 - p.dst) / step).min(p.count - 1))
    };
    if let Some(last) = last.filter(|&l| first <= l && first < p.count) {
        let piece = |i: u64| -> Option<Strided> {
            let r = p.run(i);
            let (a, b) = (r.dst.max(lo), (r.dst + r.len).min(hi));
            (a < b).then_some(Strided::single(crate::run::Run {
                src: r.src + (a - r.dst),
                dst: a,
                len: b - a,
            }))
        };
        let cut_first = p.run(first).dst < lo;
        let cut_last = p.run(last).dst + p.len > hi;
        if first == last {
            out[0] = piece(first);
        } else {
            let (m0, m1) = (first + u64::from(cut_first), last - u64::from(cut_last));
            if cut_first {
                out[0] = piece(first);
            }
            if m0 <= m1 {
                out[1] = p.skip(m0).map(|q| q.first(m1 - m0 + 1));
            }
            if cut_last {
                out[2] = piece(last);
            }
        }
    }
    out.into_iter().flatten()
}

impl RowSweep {
    /// Bytes this sweep holds of its own (its pattern, shared with its clones).
    pub(crate) fn stored_bytes(&self) -> usize {
        self.pattern.stored_bytes()
    }

    /// Bytes of all the runs from the start, without handing them out: a row wholly in a
    /// block counts its pattern's bytes at once.
    pub(crate) fn total_bytes(&self) -> u64 {
        let mut walk = self.clone();
        walk.queue = [None; 3];
        walk.expanding = None;
        walk.at = 0;
        let whole: u64 = walk.pattern.runs.iter().map(Strided::bytes).sum();
        let mut sum = 0;
        while !walk.done {
            let (lo, hi) = walk.range();
            let g0 = walk.row * walk.geo.row;
            let (a, b) = (lo.max(g0) - g0, hi.min(g0 + walk.geo.row) - g0);
            if a == 0 && b == walk.geo.row {
                sum += whole;
            } else {
                for p in &walk.pattern.runs {
                    sum += clip(p, a, b).map(|x| x.bytes()).sum::<u64>();
                }
            }
            walk.advance();
        }
        sum
    }
}

impl Progressions for RowSweep {
    fn next_progression(&mut self) -> Option<Strided> {
        // The rest of a progression `Iterator::next` was handing out run by run.
        if let Some(rest) = self.expanding.take().and_then(|(p, i)| p.skip(i)) {
            return Some(rest);
        }
        loop {
            if let Some(q) = self.queue.iter_mut().find_map(Option::take) {
                return Some(if self.flip { q.swapped() } else { q });
            }
            if self.done {
                return None;
            }
            if self.at >= self.pattern.runs.len() {
                self.advance();
                continue;
            }
            let (lo, hi) = self.range();
            let g0 = self.row * self.geo.row;
            let (a, b) = (lo.max(g0) - g0, hi.min(g0 + self.geo.row) - g0);
            let p = self.pattern.runs[self.at];
            self.at += 1;
            let src_base = self.geo.dim0.local(self.row) * self.pattern.row_local;
            // Stripe-local offset of the row's byte 0 (may lie before the block: only
            // bytes within it are handed out).
            let dst_base = (self.block / self.geo.count) * self.geo.unit + g0;
            let place = |x: Strided| Strided {
                src: src_base + x.src,
                dst: dst_base + x.dst - lo,
                ..x
            };
            if a == 0 && b == self.geo.row {
                // The whole row lies in the block (the common case): no clipping.
                let q = place(p);
                return Some(if self.flip { q.swapped() } else { q });
            }
            for (slot, x) in self.queue.iter_mut().zip(clip(&p, a, b)) {
                *slot = Some(place(x));
            }
        }
    }
}

impl Iterator for RowSweep {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        loop {
            if let Some((p, i)) = self.expanding.take() {
                if i < p.count {
                    let r = p.run(i);
                    self.expanding = Some((p, i + 1));
                    return Some((r.src, r.dst, r.len));
                }
            }
            let p = self.next_progression()?;
            self.expanding = Some((p, 0));
        }
    }
}
