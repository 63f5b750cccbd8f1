//! Per-dimension intersection of two block-cyclic distributions with periodic interval
//! arithmetic (the ScaLAPACK redistribution idea).
//!
//! For one dimension, side A's coordinate `ca` and side B's coordinate `cb` share a set of
//! global indices; within each maximal piece both local indices advance by one. The pattern
//! of pieces repeats with period `L = lcm(period_A, period_B)`, while each side's local
//! index advances by a fixed amount per period. A [`DimSegs`] stores one period's pieces plus
//! the repeat count and a tail, so its size is the number of pieces in one period, never the
//! extent of the dimension.

use crate::dist::DimMap;

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

/// The segments shared by one coordinate of each side in one dimension, stored periodically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DimSegs {
    /// Merged pieces of one period (may be empty).
    pattern: Vec<Seg>,
    /// Full periods.
    reps: u64,
    /// Local advance per period on side A and side B.
    adv_a: u64,
    adv_b: u64,
    /// Merged pieces after the last full period.
    tail: Vec<Seg>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Intersects two sorted lists of disjoint half-open intervals.
fn intersect(x: &[(u64, u64)], y: &[(u64, u64)], mut f: impl FnMut(u64, u64)) {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        let s = x[i].0.max(y[j].0);
        let e = x[i].1.min(y[j].1);
        if s < e {
            f(s, e);
        }
        if x[i].1 <= y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
}

fn push_merged(out: &mut Vec<Seg>, seg: Seg) {
    match out.last_mut() {
        Some(last) if last.chains(&seg) => last.len += seg.len,
        _ => out.push(seg),
    }
}

/// Pieces of `[lo, hi)` owned by `ca` under `x` and by `cb` under `y`, merged.
fn pieces(x: &DimMap, ca: u64, y: &DimMap, cb: u64, lo: u64, hi: u64) -> Vec<Seg> {
    let (mut bx, mut by) = (Vec::new(), Vec::new());
    x.blocks_in(ca, lo, hi, &mut bx);
    y.blocks_in(cb, lo, hi, &mut by);
    let mut out = Vec::new();
    intersect(&bx, &by, |s, e| {
        push_merged(
            &mut out,
            Seg {
                a: x.local(s),
                b: y.local(s),
                len: e - s,
            },
        );
    });
    out
}

impl DimSegs {
    /// The segments of dimension `x` (coordinate `ca`) against `y` (coordinate `cb`).
    /// Both must describe the same extent.
    pub(crate) fn new(x: &DimMap, ca: u64, y: &DimMap, cb: u64) -> Self {
        debug_assert_eq!(x.n, y.n);
        let n = x.n;
        let (tx, ty) = (x.period(), y.period());
        let lcm = (tx / gcd(tx, ty)).checked_mul(ty).filter(|&l| l < n);
        let Some(period) = lcm else {
            return DimSegs::explicit(pieces(x, ca, y, cb, 0, n));
        };
        let reps = n / period;
        let pattern = pieces(x, ca, y, cb, 0, period);
        let tail = pieces(x, ca, y, cb, reps * period, n);
        let adv_a = (period / tx) * x.b;
        let adv_b = (period / ty) * y.b;
        let segs = DimSegs {
            pattern,
            reps,
            adv_a,
            adv_b,
            tail,
        };
        segs.normalized()
    }

    fn explicit(tail: Vec<Seg>) -> Self {
        DimSegs {
            pattern: Vec::new(),
            reps: 0,
            adv_a: 0,
            adv_b: 0,
            tail,
        }
    }

    /// Expands small or fully chaining periodic forms into an explicit, merged list.
    fn normalized(self) -> Self {
        if self.pattern.is_empty() || self.reps == 0 {
            return DimSegs::explicit(self.tail);
        }
        let chaining = self.pattern.len() == 1
            && self.pattern[0].len == self.adv_a
            && self.pattern[0].len == self.adv_b;
        if chaining {
            let mut out = vec![Seg {
                len: self.pattern[0].len * self.reps,
                ..self.pattern[0]
            }];
            for &s in &self.tail {
                push_merged(&mut out, s);
            }
            return DimSegs::explicit(out);
        }
        let raw = (self.pattern.len() as u64).saturating_mul(self.reps);
        if raw <= EXPAND_LIMIT {
            let out: Vec<Seg> = self.iter_raw().fold(Vec::new(), |mut v, s| {
                push_merged(&mut v, s);
                v
            });
            return DimSegs::explicit(out);
        }
        self
    }

    fn iter_raw(&self) -> impl Iterator<Item = Seg> + '_ {
        (0..self.reps)
            .flat_map(move |r| {
                self.pattern.iter().map(move |s| Seg {
                    a: s.a + r * self.adv_a,
                    b: s.b + r * self.adv_b,
                    len: s.len,
                })
            })
            .chain(self.tail.iter().copied())
    }

    /// True when the two coordinates share no index.
    pub(crate) fn is_empty(&self) -> bool {
        (self.pattern.is_empty() || self.reps == 0) && self.tail.is_empty()
    }

    /// The only segment, when the shared indices form one run on both sides.
    pub(crate) fn single(&self) -> Option<Seg> {
        if self.reps == 0 && self.tail.len() == 1 {
            Some(self.tail[0])
        } else {
            None
        }
    }

    /// Stored segments (the size of this description, not of the dimension).
    pub(crate) fn stored(&self) -> usize {
        self.pattern.len() + self.tail.len()
    }

    /// A cursor at the first merged segment.
    pub(crate) fn cursor(&self) -> SegCursor {
        SegCursor::default()
    }
}

/// A position in a [`DimSegs`]; `next` yields merged segments.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SegCursor {
    /// Index into the raw sequence: `rep * pattern.len() + idx`, then the tail.
    raw: u64,
}

impl SegCursor {
    fn raw_at(d: &DimSegs, raw: u64) -> Option<Seg> {
        let plen = d.pattern.len() as u64;
        let periodic = plen * d.reps;
        if raw < periodic {
            let (r, i) = (raw / plen, (raw % plen) as usize);
            let s = d.pattern[i];
            Some(Seg {
                a: s.a + r * d.adv_a,
                b: s.b + r * d.adv_b,
                len: s.len,
            })
        } else {
            d.tail.get((raw - periodic) as usize).copied()
        }
    }

    /// The next merged segment of `d`, or `None` at the end.
    pub(crate) fn next(&mut self, d: &DimSegs) -> Option<Seg> {
        let mut cur = Self::raw_at(d, self.raw)?;
        self.raw += 1;
        while let Some(n) = Self::raw_at(d, self.raw) {
            if !cur.chains(&n) {
                break;
            }
            cur.len += n.len;
            self.raw += 1;
        }
        Some(cur)
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

    fn all(d: &DimSegs) -> Vec<Seg> {
        let mut c = d.cursor();
        std::iter::from_fn(|| c.next(d)).collect()
    }

    #[test]
    fn matches_brute_force() {
        for n in [1u64, 2, 7, 9, 30, 97, 300, 1000] {
            for (bx, px) in [(1, 1), (1, 3), (2, 2), (3, 4), (5, 3), (n.div_ceil(4), 4), (4, 1)] {
                for (by, py) in [(1, 2), (2, 3), (7, 2), (n.div_ceil(3), 3), (n, 1), (1, 5)] {
                    let x = DimMap { n, b: bx.clamp(1, n), p: px };
                    let y = DimMap { n, b: by.clamp(1, n), p: py };
                    for ca in 0..px {
                        for cb in 0..py {
                            let d = DimSegs::new(&x, ca, &y, cb);
                            assert_eq!(all(&d), brute(&x, ca, &y, cb), "{x:?} {ca} {y:?} {cb}");
                            assert_eq!(d.is_empty(), all(&d).is_empty());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn identical_cyclic_collapses_to_one_segment() {
        let x = DimMap { n: 1 << 40, b: 1, p: 2 };
        let d = DimSegs::new(&x, 1, &x, 1);
        assert_eq!(d.single(), Some(Seg { a: 0, b: 0, len: 1 << 39 }));
    }

    #[test]
    fn disjoint_coordinates_of_a_huge_dimension_are_empty_at_once() {
        let x = DimMap { n: 1 << 40, b: 1, p: 2 };
        let d = DimSegs::new(&x, 0, &x, 1);
        assert!(d.is_empty());
        assert_eq!(d.stored(), 0);
    }

    #[test]
    fn huge_periodic_dimension_stays_small() {
        let x = DimMap { n: 1 << 40, b: 3, p: 5 };
        let y = DimMap { n: 1 << 40, b: 7, p: 2 };
        let d = DimSegs::new(&x, 2, &y, 1);
        assert!(d.stored() < 64, "stored {}", d.stored());
        let mut c = d.cursor();
        let first: Vec<Seg> = std::iter::from_fn(|| c.next(&d)).take(50).collect();
        assert_eq!(first.len(), 50);
    }
}
