//! Lazy enumeration of N-d runs as the product of per-dimension segments.

use std::sync::Arc;

use crate::intersect::{DimIntersection, Seg, SegCursor, SegProgression};
use crate::run::Run;
use crate::strided::{Progressions, Strided};

/// A run contiguous on both sides: byte offset `a` on side A, `b` on side B, `len` bytes.
pub(crate) type RawRun = (u64, u64, u64);

#[derive(Clone, Copy, Debug)]
struct Level {
    cursor: SegCursor,
    seg: Seg,
    pos: u64,
}

/// Odometer over the per-dimension segments of one pair of coordinates.
///
/// Dimensions are given in side A's storage order (slowest first), so runs come out in
/// increasing order of side A's offset. Trailing dimensions whose segment covers the whole
/// local extent on both sides (and is laid out alike on both) are folded into the element,
/// so a fully owned row, plane or block comes out as one run.
#[derive(Clone, Debug)]
pub(crate) struct Product {
    dims: Vec<Arc<DimIntersection>>,
    sa: Vec<u64>,
    sb: Vec<u64>,
    /// Bytes moved per index step of the innermost enumerated dimension.
    unit: u64,
    /// Whether consecutive indices of the innermost dimension are adjacent on side B too.
    contiguous: bool,
    levels: Vec<Level>,
    /// The innermost level's segments still to hand out, in strided enumeration.
    prog: Option<SegProgression>,
    started: bool,
    done: bool,
}

impl Product {
    /// `la`, `lb`: local extents on each side; `sb`: side B's byte stride of each dimension;
    /// all in side A's storage order. `elem` is the element size in bytes.
    pub(crate) fn new(
        dims: Vec<Arc<DimIntersection>>,
        la: &[u64],
        lb: &[u64],
        sb: &[u64],
        elem: u64,
    ) -> Self {
        let d = dims.len();
        let mut sa = vec![elem; d];
        for k in (0..d.saturating_sub(1)).rev() {
            sa[k] = sa[k + 1] * la[k + 1];
        }
        let mut unit = elem;
        let mut m = d - 1;
        while m > 0 {
            let full = dims[m].single().is_some_and(|s| {
                s.a == 0 && s.b == 0 && s.len == la[m] && s.len == lb[m] && sb[m] == unit
            });
            if !full {
                break;
            }
            unit *= la[m];
            m -= 1;
        }
        let mut dims = dims;
        dims.truncate(m + 1);
        let done = dims.iter().any(|x| x.is_empty());
        Product {
            contiguous: sb[m] == unit,
            sa: sa[..=m].to_vec(),
            sb: sb[..=m].to_vec(),
            dims,
            unit,
            levels: Vec::new(),
            prog: None,
            started: false,
            done,
        }
    }

    /// Bytes of all the runs (from the start), from the per-dimension counts.
    pub(crate) fn total_bytes(&self) -> u64 {
        if self.dims.iter().any(|d| d.is_empty()) {
            return 0;
        }
        self.dims.iter().map(|d| d.indices()).product::<u64>() * self.unit
    }

    /// Per-dimension segments held (a measure of this description's size).
    pub(crate) fn stored_segments(&self) -> usize {
        self.dims.iter().map(|d| d.stored()).sum()
    }

    fn start(&mut self) {
        self.started = true;
        for d in &self.dims {
            let mut cursor = d.cursor();
            match cursor.next(d) {
                Some(seg) => self.levels.push(Level {
                    cursor,
                    seg,
                    pos: 0,
                }),
                None => {
                    self.done = true;
                    return;
                }
            }
        }
    }

    /// Moves level `k` on by `steps` indices, carrying into outer levels.
    fn advance(&mut self, mut k: usize, steps: u64) {
        self.levels[k].pos += steps;
        loop {
            let level = &mut self.levels[k];
            if level.pos < level.seg.len {
                return;
            }
            if let Some(seg) = level.cursor.next(&self.dims[k]) {
                level.seg = seg;
                level.pos = 0;
                return;
            }
            if k == 0 {
                self.done = true;
                return;
            }
            let mut cursor = self.dims[k].cursor();
            if let Some(seg) = cursor.next(&self.dims[k]) {
                *level = Level {
                    cursor,
                    seg,
                    pos: 0,
                };
            }
            k -= 1;
            self.levels[k].pos += 1;
        }
    }
}

impl Product {
    /// The next runs as one progression: the innermost level's segments go out as
    /// arithmetic progressions (a segment's indices, when they are not adjacent on side B,
    /// or equally spaced segments), the outer levels step as in [`Iterator::next`].
    /// Expanded, the progressions are the runs `next` gives, possibly cut further.
    pub(crate) fn next_strided(&mut self) -> Option<Strided> {
        if !self.started {
            self.start();
            // The innermost level restarts, to be taken as progressions from its first
            // segment on.
            if let (Some(l), Some(d)) = (self.levels.last_mut(), self.dims.last()) {
                l.cursor = d.cursor();
                l.pos = l.seg.len;
            }
        }
        loop {
            if self.done {
                return None;
            }
            let m = self.levels.len() - 1;
            let p = match self.prog.take() {
                Some(p) => p,
                None => {
                    let l = &mut self.levels[m];
                    if l.pos < l.seg.len {
                        // What is left of a segment `next` began (or `start` took).
                        let p = SegProgression {
                            a: l.seg.a + l.pos,
                            b: l.seg.b + l.pos,
                            len: l.seg.len - l.pos,
                            count: 1,
                            da: 0,
                            db: 0,
                        };
                        l.pos = l.seg.len;
                        p
                    } else if let Some(p) = l.cursor.progression(&self.dims[m]) {
                        p
                    } else if m == 0 {
                        self.done = true;
                        return None;
                    } else {
                        l.cursor = self.dims[m].cursor();
                        self.advance(m - 1, 1);
                        continue;
                    }
                }
            };
            let (mut a, mut b) = (0, 0);
            for (k, l) in self.levels[..m].iter().enumerate() {
                a += (l.seg.a + l.pos) * self.sa[k];
                b += (l.seg.b + l.pos) * self.sb[k];
            }
            let (ua, ub) = (self.sa[m], self.sb[m]);
            let first = Run {
                src: a + p.a * ua,
                dst: b + p.b * ub,
                len: self.unit,
            };
            let out = if self.contiguous || p.len == 1 {
                Strided {
                    len: p.len * self.unit,
                    count: p.count,
                    src_stride: p.da * ua,
                    dst_stride: p.db * ub,
                    ..Strided::single(first)
                }
            } else {
                // Each index of a segment is a run of its own: one progression per segment.
                self.prog = p.rest();
                Strided {
                    count: p.len,
                    src_stride: ua,
                    dst_stride: ub,
                    ..Strided::single(first)
                }
            };
            return Some(out);
        }
    }
}

impl Iterator for Product {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        if !self.started {
            self.start();
        }
        if self.done {
            return None;
        }
        let (mut a, mut b) = (0, 0);
        for (k, l) in self.levels.iter().enumerate() {
            a += (l.seg.a + l.pos) * self.sa[k];
            b += (l.seg.b + l.pos) * self.sb[k];
        }
        let m = self.levels.len() - 1;
        let inner = &self.levels[m];
        let steps = if self.contiguous {
            inner.seg.len - inner.pos
        } else {
            1
        };
        self.advance(m, steps);
        Some((a, b, steps * self.unit))
    }
}

/// Merges consecutive runs that are contiguous on both sides.
#[derive(Clone, Debug)]
pub(crate) struct Merge<I> {
    inner: I,
    pending: Option<RawRun>,
}

impl<I: Iterator<Item = RawRun>> Merge<I> {
    pub(crate) fn new(inner: I) -> Self {
        Merge {
            inner,
            pending: None,
        }
    }

    pub(crate) fn inner(&self) -> &I {
        &self.inner
    }

    /// The source and the run taken from it but not yet handed out.
    pub(crate) fn into_parts(self) -> (I, Option<RawRun>) {
        (self.inner, self.pending)
    }
}

impl<I: Iterator<Item = RawRun>> Iterator for Merge<I> {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        let mut cur = self.pending.take().or_else(|| self.inner.next())?;
        for n in self.inner.by_ref() {
            if cur.0 + cur.2 == n.0 && cur.1 + cur.2 == n.1 {
                cur.2 += n.2;
            } else {
                self.pending = Some(n);
                break;
            }
        }
        Some(cur)
    }
}

impl Progressions for Product {
    fn next_progression(&mut self) -> Option<Strided> {
        self.next_strided()
    }
}
