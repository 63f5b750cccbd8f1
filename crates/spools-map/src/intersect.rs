//! Per-dimension intersection of two block-cyclic distributions with periodic interval
//! arithmetic (the ScaLAPACK redistribution idea).
//!
//! For one dimension, side A's coordinate `ca` and side B's coordinate `cb` share a set of
//! global indices; within each maximal piece both local indices advance by one. Everything
//! repeats with period `L = lcm(period_A, period_B)`, while each side's local index advances
//! by a fixed amount per period. A [`DimIntersection`] describes one period as a list of chunks and
//! repeats it, then adds a tail. Within the period, a chunk is either a plain list of pieces
//! or, inside one block of the side with fewer blocks, the other side's pattern repeated.
//! So its size is bounded by the blocks of the sparser side in one period, never by the
//! extent of the dimension.

use crate::dist::{gcd, DimMap};

/// Pieces of a period above this count are kept periodic; below it they are expanded.
const EXPAND_LIMIT: u64 = 64;

/// A run of indices contiguous on both sides: local index `a` on side A, `b` on side B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) len: u64,
}

impl Seg {
    /// True when `next` continues `self` on both sides.
    fn chains(&self, next: &Seg) -> bool {
        self.a + self.len == next.a && self.b + self.len == next.b
    }
}

/// A run of segments repeated `reps` times, each repetition shifted by `adv_a` / `adv_b`
/// local indices (an explicit list is one repetition).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Chunk {
    segs: Vec<Seg>,
    reps: u64,
    adv_a: u64,
    adv_b: u64,
}

impl Chunk {
    fn explicit(segs: Vec<Seg>) -> Self {
        Chunk {
            segs,
            reps: 1,
            adv_a: 0,
            adv_b: 0,
        }
    }

    /// The same chunk with every local index moved on by `da` / `db`.
    fn shifted(&self, da: u64, db: u64) -> Chunk {
        Chunk {
            segs: self
                .segs
                .iter()
                .map(|s| Seg {
                    a: s.a + da,
                    b: s.b + db,
                    len: s.len,
                })
                .collect(),
            ..*self
        }
    }

    fn raw_len(&self) -> u64 {
        self.segs.len() as u64 * self.reps
    }

    fn raw_at(&self, raw: u64) -> Seg {
        let plen = self.segs.len() as u64;
        let (r, i) = (raw / plen, (raw % plen) as usize);
        let s = self.segs[i];
        Seg {
            a: s.a + r * self.adv_a,
            b: s.b + r * self.adv_b,
            len: s.len,
        }
    }

    /// Collapses a pattern that chains into itself, and expands short repetitions of
    /// several segments.
    fn normalized(self) -> Self {
        if self.reps <= 1 || self.segs.is_empty() {
            return Chunk::explicit(if self.reps == 0 {
                Vec::new()
            } else {
                self.segs
            });
        }
        let chaining = self.segs.len() == 1
            && self.segs[0].len == self.adv_a
            && self.segs[0].len == self.adv_b;
        if chaining {
            return Chunk::explicit(vec![Seg {
                len: self.segs[0].len * self.reps,
                ..self.segs[0]
            }]);
        }
        // One segment repeated stays a progression (the cursor hands it out whole).
        if self.raw_len() <= EXPAND_LIMIT && self.segs.len() > 1 {
            let mut out = Vec::new();
            for raw in 0..self.raw_len() {
                push_merged(&mut out, self.raw_at(raw));
            }
            return Chunk::explicit(out);
        }
        self
    }
}

/// The segments shared by one coordinate of each side in one dimension: the chunks of one
/// common period, repeated `reps` times (each repetition shifted by `adv_a` / `adv_b` local
/// indices), then the tail's chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DimIntersection {
    body: Vec<Chunk>,
    reps: u64,
    adv_a: u64,
    adv_b: u64,
    tail: Vec<Chunk>,
}

fn push_merged(out: &mut Vec<Seg>, seg: Seg) {
    match out.last_mut() {
        Some(last) if last.chains(&seg) => last.len += seg.len,
        _ => out.push(seg),
    }
}

/// Appends chunks, normalising each, dropping empty ones and merging neighbouring explicit
/// lists.
fn extend(out: &mut Vec<Chunk>, chunks: impl IntoIterator<Item = Chunk>) {
    for c in chunks.into_iter().map(Chunk::normalized) {
        if c.segs.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.reps == 1 && c.reps == 1 => {
                for s in c.segs {
                    push_merged(&mut last.segs, s);
                }
            }
            _ => out.push(c),
        }
    }
}

/// Pieces of `[lo, hi)` owned by `ca` under `x` and by `cb` under `y`, merged. Walks the
/// blocks of the side with the longer period and finds the other side's blocks inside each
/// arithmetically, so it holds only the pieces found.
fn pieces(x: &DimMap, ca: u64, y: &DimMap, cb: u64, lo: u64, hi: u64) -> Vec<Seg> {
    let ((w, wc), (o, oc)) = if x.period() >= y.period() {
        ((x, ca), (y, cb))
    } else {
        ((y, cb), (x, ca))
    };
    let mut out = Vec::new();
    for (ws, we) in w.blocks(wc, lo, hi) {
        for (s, e) in o.blocks(oc, ws, we) {
            push_merged(
                &mut out,
                Seg {
                    a: x.local(s),
                    b: y.local(s),
                    len: e - s,
                },
            );
        }
    }
    out
}

/// One coordinate of each side of a dimension, for cutting ranges of it into chunks.
struct Span<'a> {
    x: &'a DimMap,
    ca: u64,
    y: &'a DimMap,
    cb: u64,
}

impl Span<'_> {
    /// Chunks for `[lo, hi)`: the plain list of pieces, or, when one side has far fewer
    /// blocks there, one set of chunks per block of that side (inside which the other side
    /// repeats with its own period).
    fn describe(&self, lo: u64, hi: u64) -> Vec<Chunk> {
        let (x, y) = (self.x, self.y);
        let (tx, ty) = (x.period(), y.period());
        let (bx, by) = ((hi - lo) / tx + 2, (hi - lo) / ty + 2);
        let mut out = Vec::new();
        if bx.min(by).saturating_mul(3) >= bx.saturating_add(by) {
            extend(
                &mut out,
                [Chunk::explicit(pieces(x, self.ca, y, self.cb, lo, hi))],
            );
            return out;
        }
        let (walk, c) = if bx <= by { (x, self.ca) } else { (y, self.cb) };
        let mut chunks = Vec::new();
        for (s, e) in walk.blocks(c, lo, hi) {
            if bx <= by {
                self.chunks(s, e, ty, ty, y.b, &mut chunks);
            } else {
                self.chunks(s, e, tx, x.b, tx, &mut chunks);
            }
            // Normalise as we go, so memory follows the result, not the blocks walked.
            extend(&mut out, chunks.drain(..));
        }
        out
    }

    /// Chunks for `[lo, hi)`, within which the shared pieces repeat every `period` indices
    /// while the local indices advance `adv_a` and `adv_b`: a head up to the first period
    /// boundary, whole periods, and a tail.
    fn chunks(&self, lo: u64, hi: u64, period: u64, adv_a: u64, adv_b: u64, out: &mut Vec<Chunk>) {
        let body = lo.div_ceil(period).saturating_mul(period).min(hi);
        let reps = (hi - body) / period;
        let end = body + reps * period;
        let (x, y) = (self.x, self.y);
        out.push(Chunk::explicit(pieces(x, self.ca, y, self.cb, lo, body)));
        if reps > 0 {
            let pattern = pieces(x, self.ca, y, self.cb, body, body + period);
            out.push(Chunk {
                segs: pattern,
                reps,
                adv_a,
                adv_b,
            });
        }
        out.push(Chunk::explicit(pieces(x, self.ca, y, self.cb, end, hi)));
    }
}

impl DimIntersection {
    /// The segments of dimension `x` (coordinate `ca`) against `y` (coordinate `cb`).
    /// Both must describe the same extent.
    pub(crate) fn new(x: &DimMap, ca: u64, y: &DimMap, cb: u64) -> Self {
        debug_assert_eq!(x.n, y.n);
        let n = x.n;
        let (tx, ty) = (x.period(), y.period());
        let span = Span { x, ca, y, cb };
        let period = (tx / gcd(tx, ty)).checked_mul(ty).filter(|&l| l < n);
        let segs = match period {
            Some(l) => {
                let reps = n / l;
                DimIntersection {
                    body: span.describe(0, l),
                    reps,
                    adv_a: (l / tx) * x.b,
                    adv_b: (l / ty) * y.b,
                    tail: span.describe(reps * l, n),
                }
            }
            None => DimIntersection {
                body: Vec::new(),
                reps: 0,
                adv_a: 0,
                adv_b: 0,
                tail: span.describe(0, n),
            },
        };
        segs.normalized()
    }

    fn body_raw_len(&self) -> u64 {
        self.body
            .iter()
            .fold(0u64, |acc, c| acc.saturating_add(c.raw_len()))
    }

    /// Collapses a repeated body that chains into itself, expands short repetitions, and
    /// drops an empty body.
    fn normalized(mut self) -> Self {
        if self.body.is_empty() || self.reps == 0 {
            self.body.clear();
            self.reps = 0;
            return self;
        }
        let chaining = match self.body.as_slice() {
            [c] => {
                c.reps == 1 && c.segs.len() == 1 && {
                    let s = c.segs[0];
                    s.len == self.adv_a && s.len == self.adv_b
                }
            }
            _ => false,
        };
        let expand = self.body_raw_len().saturating_mul(self.reps) <= EXPAND_LIMIT;
        if !chaining && !expand {
            return self;
        }
        let mut head: Vec<Chunk> = Vec::new();
        if chaining {
            let s = self.body[0].segs[0];
            head.push(Chunk::explicit(vec![Seg {
                len: s.len * self.reps,
                ..s
            }]));
        } else {
            for r in 0..self.reps {
                let shifted = self
                    .body
                    .iter()
                    .map(|c| c.shifted(r * self.adv_a, r * self.adv_b));
                extend(&mut head, shifted);
            }
        }
        extend(&mut head, std::mem::take(&mut self.tail));
        DimIntersection {
            body: Vec::new(),
            reps: 0,
            adv_a: 0,
            adv_b: 0,
            tail: head,
        }
    }

    /// True when the two coordinates share no index.
    pub(crate) fn is_empty(&self) -> bool {
        self.body.is_empty() && self.tail.is_empty()
    }

    /// The only segment, when the shared indices form one run on both sides.
    pub(crate) fn single(&self) -> Option<Seg> {
        match (self.body.as_slice(), self.tail.as_slice()) {
            ([], [c]) if c.reps == 1 && c.segs.len() == 1 => Some(c.segs[0]),
            _ => None,
        }
    }

    /// Indices shared (the sum of the segments' lengths), without enumerating them.
    pub(crate) fn indices(&self) -> u64 {
        let sum = |chunks: &[Chunk]| -> u64 {
            chunks
                .iter()
                .map(|c| c.reps * c.segs.iter().map(|s| s.len).sum::<u64>())
                .sum()
        };
        sum(&self.body) * self.reps + sum(&self.tail)
    }

    /// Stored segments (the size of this description, not of the dimension).
    pub(crate) fn stored(&self) -> usize {
        self.body
            .iter()
            .chain(&self.tail)
            .map(|c| c.segs.len())
            .sum()
    }

    /// A cursor at the first merged segment.
    pub(crate) fn cursor(&self) -> SegCursor {
        SegCursor::default()
    }
}

/// A position in a [`DimIntersection`]; `next` yields merged segments, `progression`
/// raw ones grouped into arithmetic progressions.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SegCursor {
    /// Repetition of the body, or `reps` once in the tail.
    rep: u64,
    chunk: usize,
    /// Repetition of the chunk.
    crep: u64,
    /// Segment of the chunk's list.
    seg: usize,
}

/// `count` segments of `len` indices, the `i`-th at local index `a + i * da` on side A and
/// `b + i * db` on side B (`da`, `db` are 0 when `count` is 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegProgression {
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) len: u64,
    pub(crate) count: u64,
    pub(crate) da: u64,
    pub(crate) db: u64,
}

impl SegProgression {
    fn single(s: Seg) -> Self {
        SegProgression {
            a: s.a,
            b: s.b,
            len: s.len,
            count: 1,
            da: 0,
            db: 0,
        }
    }

    /// The same progression without its first segment (`None` if that was the only one).
    pub(crate) fn rest(&self) -> Option<SegProgression> {
        (self.count > 1).then(|| SegProgression {
            a: self.a + self.da,
            b: self.b + self.db,
            count: self.count - 1,
            ..*self
        })
    }
}

/// Length of the run of segments of `segs`, from the first, of one length and equally
/// spaced on both sides, and the spacing.
fn equal_steps(segs: &[Seg]) -> (usize, u64, u64) {
    let [s, t, ..] = segs else {
        return (segs.len(), 0, 0);
    };
    let (Some(da), Some(db)) = (t.a.checked_sub(s.a), t.b.checked_sub(s.b)) else {
        return (1, 0, 0);
    };
    let n = segs
        .windows(2)
        .take_while(|w| w[1].len == s.len && w[1].a == w[0].a + da && w[1].b == w[0].b + db)
        .count();
    if n == 0 {
        return (1, 0, 0);
    }
    (n + 1, da, db)
}

impl SegCursor {
    /// The chunk under the cursor and the shift of its body repetition, moving on past
    /// finished chunks; `None` at the end.
    fn current<'d>(&mut self, d: &'d DimIntersection) -> Option<(&'d Chunk, u64, u64)> {
        loop {
            let in_body = self.rep < d.reps;
            let chunks = if in_body { &d.body } else { &d.tail };
            let Some(c) = chunks.get(self.chunk) else {
                if !in_body {
                    return None;
                }
                self.rep += 1;
                self.chunk = 0;
                self.crep = 0;
                self.seg = 0;
                continue;
            };
            if self.crep < c.reps && self.seg < c.segs.len() {
                return Some(if in_body {
                    (c, self.rep * d.adv_a, self.rep * d.adv_b)
                } else {
                    (c, 0, 0)
                });
            }
            self.chunk += 1;
            self.crep = 0;
            self.seg = 0;
        }
    }

    /// The segment under the cursor (which [`current`](Self::current) found).
    fn at(&self, c: &Chunk, da: u64, db: u64) -> Seg {
        let s = c.segs[self.seg];
        Seg {
            a: s.a + self.crep * c.adv_a + da,
            b: s.b + self.crep * c.adv_b + db,
            len: s.len,
        }
    }

    /// Moves past `n` segments of the current chunk's list (at most to its end).
    fn step(&mut self, c: &Chunk, n: usize) {
        self.seg += n;
        if self.seg >= c.segs.len() {
            self.seg = 0;
            self.crep += 1;
        }
    }

    fn take(&mut self, d: &DimIntersection) -> Option<Seg> {
        let (c, da, db) = self.current(d)?;
        let s = self.at(c, da, db);
        self.step(c, 1);
        Some(s)
    }

    /// The next raw (unmerged) segments as one progression: the rest of a repeated
    /// single segment, of a body made of one segment, or a stretch of an explicit list
    /// that is equally spaced; else one segment.
    pub(crate) fn progression(&mut self, d: &DimIntersection) -> Option<SegProgression> {
        let (c, da, db) = self.current(d)?;
        let s = self.at(c, da, db);
        if c.segs.len() == 1 && c.reps > 1 {
            let count = c.reps - self.crep;
            self.crep = c.reps;
            return Some(SegProgression {
                count,
                da: if count > 1 { c.adv_a } else { 0 },
                db: if count > 1 { c.adv_b } else { 0 },
                ..SegProgression::single(s)
            });
        }
        let in_body = self.rep < d.reps;
        if in_body && d.body.len() == 1 && c.segs.len() == 1 && d.reps - self.rep > 1 {
            let count = d.reps - self.rep;
            *self = SegCursor {
                rep: d.reps,
                ..SegCursor::default()
            };
            return Some(SegProgression {
                count,
                da: d.adv_a,
                db: d.adv_b,
                ..SegProgression::single(s)
            });
        }
        if c.reps == 1 {
            let (n, sa, sb) = equal_steps(&c.segs[self.seg..]);
            self.step(c, n);
            return Some(SegProgression {
                count: n as u64,
                da: sa,
                db: sb,
                ..SegProgression::single(s)
            });
        }
        self.step(c, 1);
        Some(SegProgression::single(s))
    }

    /// The next merged segment of `d`, or `None` at the end.
    pub(crate) fn next(&mut self, d: &DimIntersection) -> Option<Seg> {
        let mut cur = self.take(d)?;
        loop {
            let save = *self;
            match self.take(d) {
                Some(n) if cur.chains(&n) => cur.len += n.len,
                Some(_) => {
                    *self = save;
                    return Some(cur);
                }
                None => return Some(cur),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(x: &DimMap, ca: u64, y: &DimMap, cb: u64) -> Vec<Seg> {
        let mut out = Vec::new();
        for i in 0..x.n {
            if x.owner(i) == ca && y.owner(i) == cb {
                push_merged(
                    &mut out,
                    Seg {
                        a: x.local(i),
                        b: y.local(i),
                        len: 1,
                    },
                );
            }
        }
        out
    }

    fn all(d: &DimIntersection) -> Vec<Seg> {
        let mut c = d.cursor();
        std::iter::from_fn(|| c.next(d)).collect()
    }

    #[test]
    fn matches_brute_force() {
        for n in [1u64, 2, 7, 9, 30, 97, 300, 1000, 1201] {
            for (bx, px) in [
                (1, 1),
                (1, 3),
                (2, 2),
                (3, 4),
                (5, 3),
                (n.div_ceil(4), 4),
                (4, 1),
            ] {
                for (by, py) in [(1, 2), (2, 3), (7, 2), (n.div_ceil(3), 3), (n, 1), (1, 5)] {
                    let x = DimMap {
                        n,
                        b: bx.clamp(1, n),
                        p: px,
                    };
                    let y = DimMap {
                        n,
                        b: by.clamp(1, n),
                        p: py,
                    };
                    for ca in 0..px {
                        for cb in 0..py {
                            let d = DimIntersection::new(&x, ca, &y, cb);
                            assert_eq!(all(&d), brute(&x, ca, &y, cb), "{x:?} {ca} {y:?} {cb}");
                            assert_eq!(d.is_empty(), all(&d).is_empty());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn indices_are_the_sum_of_the_segments() {
        for (x, y) in [
            (DimMap { n: 400, b: 2, p: 2 }, DimMap { n: 400, b: 1, p: 3 }),
            (
                DimMap {
                    n: 2048,
                    b: 512,
                    p: 4,
                },
                DimMap {
                    n: 2048,
                    b: 1,
                    p: 4,
                },
            ),
            (
                DimMap {
                    n: 1201,
                    b: 5,
                    p: 3,
                },
                DimMap {
                    n: 1201,
                    b: 7,
                    p: 2,
                },
            ),
        ] {
            for (ca, cb) in [(0, 0), (1, 1), (2, 0)] {
                if ca >= x.p || cb >= y.p {
                    continue;
                }
                let d = DimIntersection::new(&x, ca, &y, cb);
                assert_eq!(d.indices(), all(&d).iter().map(|s| s.len).sum::<u64>());
            }
        }
    }

    #[test]
    fn identical_cyclic_collapses_to_one_segment() {
        let x = DimMap {
            n: 1 << 40,
            b: 1,
            p: 2,
        };
        let d = DimIntersection::new(&x, 1, &x, 1);
        assert_eq!(
            d.single(),
            Some(Seg {
                a: 0,
                b: 0,
                len: 1 << 39
            })
        );
    }

    #[test]
    fn disjoint_coordinates_of_a_huge_dimension_are_empty_at_once() {
        let x = DimMap {
            n: 1 << 40,
            b: 1,
            p: 2,
        };
        let d = DimIntersection::new(&x, 0, &x, 1);
        assert!(d.is_empty());
        assert_eq!(d.stored(), 0);
    }

    #[test]
    fn block_against_fine_cyclic_stays_small() {
        let n = 1u64 << 40;
        let x = DimMap {
            n,
            b: n.div_ceil(3),
            p: 3,
        };
        let y = DimMap { n, b: 3, p: 5 };
        for (ca, cb) in [(0, 0), (1, 2), (2, 4)] {
            for d in [
                DimIntersection::new(&x, ca, &y, cb),
                DimIntersection::new(&y, cb, &x, ca),
            ] {
                assert!(d.stored() < 16, "stored {}", d.stored());
                let mut c = d.cursor();
                assert_eq!(std::iter::from_fn(|| c.next(&d)).take(1000).count(), 1000);
            }
        }
    }

    #[test]
    fn repeated_chunk_shifts_each_repetition() {
        // Two segments repeated three times, each repetition 4 further on side A and 10
        // on side B: raw segment k is segment k % 2 of repetition k / 2.
        let seg = |a, b| Seg { a, b, len: 1 };
        let c = Chunk {
            segs: vec![seg(0, 0), seg(2, 5)],
            reps: 3,
            adv_a: 4,
            adv_b: 10,
        };
        let want = vec![
            seg(0, 0),
            seg(2, 5),
            seg(4, 10),
            seg(6, 15),
            seg(8, 20),
            seg(10, 25),
        ];
        assert_eq!((0..6).map(|k| c.raw_at(k)).collect::<Vec<_>>(), want);
        // six pieces are few enough to be expanded into a plain list
        assert_eq!(c.normalized(), Chunk::explicit(want));
    }

    #[test]
    fn block_against_a_byte_fine_single_unit_is_one_segment() {
        // Index i of a 1000-index dimension: block over 2 coordinates on one side, blocks
        // of 1 all on one coordinate on the other (a stripe with unit=1B,count=1). The
        // second half is one run on both sides: local 0.. on A, 500.. on B.
        let x = DimMap {
            n: 1000,
            b: 500,
            p: 2,
        };
        let y = DimMap {
            n: 1000,
            b: 1,
            p: 1,
        };
        let want = Seg {
            a: 0,
            b: 500,
            len: 500,
        };
        let d = DimIntersection::new(&x, 1, &y, 0);
        assert_eq!(d.single(), Some(want));
        assert_eq!(d.stored(), 1);
        let d = DimIntersection::new(&y, 0, &x, 1);
        assert_eq!(
            d.single(),
            Some(Seg {
                a: 500,
                b: 0,
                len: 500
            })
        );
    }

    #[test]
    fn identical_block_cyclic_with_a_partial_last_period_is_one_segment() {
        // cyclic(2) over 2 coordinates, 14 indices: coordinate 0 owns 0-1, 4-5, 8-9 and
        // 12-13, local 0..8 on both sides. Three whole periods plus a 2-index tail.
        let x = DimMap { n: 14, b: 2, p: 2 };
        let d = DimIntersection::new(&x, 0, &x, 0);
        assert_eq!(d.single(), Some(Seg { a: 0, b: 0, len: 8 }));
        assert_eq!(d.stored(), 1);
        // coordinate 1 owns 2-3, 6-7, 10-11: three whole periods, no tail
        let d = DimIntersection::new(&x, 1, &x, 1);
        assert_eq!(d.single(), Some(Seg { a: 0, b: 0, len: 6 }));
    }

    #[test]
    fn repeated_body_and_long_tail_are_held_once() {
        // cyclic(4096) over 5 against cyclic(2) over 2: a common period of 20480 indices.
        // Inside each 4096-block of A, B's pattern repeats every 4 indices: one periodic
        // chunk holds a whole common period, however many times the period repeats. The
        // tail after the last whole period (16384 indices for 3 * 20480 + 16384 and for
        // 2^30 = 52428 * 20480 + 16384) holds the first 4 blocks of A, so coordinates 0-3
        // of A need a second chunk there; none for 64 * 20480, which has no tail.
        for n in [3 * 20480 + 16384, 64 * 20480, 1 << 30] {
            let x = DimMap { n, b: 4096, p: 5 };
            let y = DimMap { n, b: 2, p: 2 };
            for ca in 0..5 {
                for cb in 0..2 {
                    let want = if ca < 4 && n % 20480 != 0 { 2 } else { 1 };
                    for (d, (sx, cx, sy, cy)) in [
                        (DimIntersection::new(&x, ca, &y, cb), (&x, ca, &y, cb)),
                        (DimIntersection::new(&y, cb, &x, ca), (&y, cb, &x, ca)),
                    ] {
                        assert_eq!(d.stored(), want, "n={n} {ca} {cb}");
                        if n < 1 << 17 {
                            assert_eq!(all(&d), brute(sx, cx, sy, cy));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn several_pieces_are_not_single() {
        // cyclic over 2 against the whole dimension: coordinate 0 holds 0, 2, 4, ...,
        // which are one apart locally on A but two apart on B, so no single run: as a
        // list of 5 pieces (n = 10) or as one piece repeated 500 times (n = 1000).
        for n in [10, 1000] {
            let x = DimMap { n, b: 1, p: 2 };
            let d = DimIntersection::new(&x, 0, &DimMap::whole(n), 0);
            assert_eq!(d.single(), None, "n={n}");
            assert_eq!(all(&d).len() as u64, n / 2);
        }
    }

    #[test]
    fn cursor_merges_across_repetitions() {
        // block-cyclic(2) over 2 against cyclic over 3, coordinates 0 and 0: they share the
        // indices 0 and 9 of each common period of 12 (33 periods in 400, then index 396).
        // Index 9 + 12k is local 5 + 6k on A and 3 + 4k on B, and index 12 + 12k is the
        // next local index on both sides: one run of 2 across each period boundary. The
        // body (2 pieces x 33) is too long to expand, so the cursor must do the merging.
        let x = DimMap { n: 400, b: 2, p: 2 };
        let y = DimMap { n: 400, b: 1, p: 3 };
        let d = DimIntersection::new(&x, 0, &y, 0);
        let mut want = vec![Seg { a: 0, b: 0, len: 1 }];
        want.extend((0..33).map(|k| Seg {
            a: 5 + 6 * k,
            b: 3 + 4 * k,
            len: 2,
        }));
        assert_eq!(all(&d), want);
        assert_eq!(all(&d), brute(&x, 0, &y, 0));
        assert!(d.stored() < 8, "stored {}", d.stored());
    }

    #[test]
    fn huge_periodic_dimension_stays_small() {
        let x = DimMap {
            n: 1 << 40,
            b: 3,
            p: 5,
        };
        let y = DimMap {
            n: 1 << 40,
            b: 7,
            p: 2,
        };
        let d = DimIntersection::new(&x, 2, &y, 1);
        assert!(d.stored() < 64, "stored {}", d.stored());
        let mut c = d.cursor();
        let first: Vec<Seg> = std::iter::from_fn(|| c.next(&d)).take(50).collect();
        assert_eq!(first.len(), 50);
    }
}
