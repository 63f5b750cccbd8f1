//! Runs grouped into arithmetic progressions: where a plan's runs are many short pieces
//! at constant spacing (an element moving to every p-th slot), they are handed out as one
//! [`Strided`] each, so that a consumer copies them in one tight loop and the plan pays
//! once per progression, not once per run.

use crate::run::Run;

/// `count` runs of `len` bytes: run `i` moves from source offset `src + i * src_stride`
/// to destination offset `dst + i * dst_stride`. When `count` is 1 both strides are 0.
///
/// Runs of one progression never chain (they are not contiguous on both sides), since
/// such a progression is one longer run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Strided {
    /// Offset of the first run in the source unit's local storage.
    pub src: u64,
    /// Offset of the first run in the destination unit's local storage.
    pub dst: u64,
    /// Bytes per run.
    pub len: u64,
    /// Runs (at least 1).
    pub count: u64,
    /// Bytes from one run's source offset to the next one's.
    pub src_stride: u64,
    /// Bytes from one run's destination offset to the next one's.
    pub dst_stride: u64,
}

impl Strided {
    /// One run, as a progression of one.
    pub fn single(run: Run) -> Strided {
        Strided {
            src: run.src,
            dst: run.dst,
            len: run.len,
            count: 1,
            src_stride: 0,
            dst_stride: 0,
        }
    }

    /// Run `i` (for `i < count`).
    pub fn run(&self, i: u64) -> Run {
        Run {
            src: self.src + i * self.src_stride,
            dst: self.dst + i * self.dst_stride,
            len: self.len,
        }
    }

    /// The last run.
    pub fn last(&self) -> Run {
        self.run(self.count.saturating_sub(1))
    }

    /// Bytes in all the runs.
    pub fn bytes(&self) -> u64 {
        self.len * self.count
    }

    /// The runs, one by one.
    pub fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        (0..self.count).map(|i| self.run(i))
    }

    /// The first `n` runs (`n` at least 1 and at most `count`).
    pub fn first(&self, n: u64) -> Strided {
        Strided { count: n, ..*self }.normalized()
    }

    /// The runs after the first `n` (`None` when none is left).
    pub fn skip(&self, n: u64) -> Option<Strided> {
        (n < self.count).then(|| {
            Strided {
                src: self.src + n * self.src_stride,
                dst: self.dst + n * self.dst_stride,
                count: self.count - n,
                ..*self
            }
            .normalized()
        })
    }

    /// `self` followed by `n`, when that is one progression.
    fn extended(&self, n: &Strided) -> Option<Strided> {
        if n.len != self.len {
            return None;
        }
        let (ss, ds) = if self.count > 1 {
            (self.src_stride, self.dst_stride)
        } else {
            (n.src.checked_sub(self.src)?, n.dst.checked_sub(self.dst)?)
        };
        let last = self.last();
        let continues = n.src == last.src + ss
            && n.dst == last.dst + ds
            && (n.count == 1 || (n.src_stride == ss && n.dst_stride == ds));
        continues.then_some(Strided {
            count: self.count + n.count,
            src_stride: ss,
            dst_stride: ds,
            ..*self
        })
    }

    /// The same runs with `src` and `dst` exchanged.
    pub(crate) fn swapped(self) -> Strided {
        Strided {
            src: self.dst,
            dst: self.src,
            src_stride: self.dst_stride,
            dst_stride: self.src_stride,
            ..self
        }
    }

    /// One run if the runs chain into each other; strides 0 for a single run.
    pub(crate) fn normalized(mut self) -> Strided {
        if self.count > 1 && self.len == self.src_stride && self.len == self.dst_stride {
            self.len *= self.count;
            self.count = 1;
        }
        if self.count <= 1 {
            self.src_stride = 0;
            self.dst_stride = 0;
        }
        self
    }
}

/// A source of raw progressions (each without chaining runs inside, once normalised).
pub(crate) trait Progressions {
    /// The next progression, or `None` at the end.
    fn next_progression(&mut self) -> Option<Strided>;
}

/// Merges the runs of consecutive progressions that chain, exactly as the run-by-run
/// merge does (only the last run of one progression and the first of the next can), and
/// joins consecutive progressions that continue each other.
#[derive(Clone, Debug)]
pub(crate) struct MergeStrided<I> {
    inner: I,
    /// Final: handed out before `pending`.
    queued: Option<Strided>,
    /// Whose last run may still grow.
    pending: Option<Strided>,
}

impl<I: Progressions> MergeStrided<I> {
    /// Merges `inner`'s progressions after `pending` (a run already taken from it).
    pub(crate) fn new(inner: I, pending: Option<Strided>) -> Self {
        MergeStrided {
            inner,
            queued: None,
            pending,
        }
    }

    fn pull(&mut self) -> Option<Strided> {
        loop {
            let p = self.inner.next_progression()?;
            if p.count > 0 {
                return Some(p.normalized());
            }
        }
    }
}

impl<I: Progressions> Iterator for MergeStrided<I> {
    type Item = Strided;

    fn next(&mut self) -> Option<Strided> {
        if let Some(q) = self.queued.take() {
            return Some(q);
        }
        let mut cur = match self.pending.take() {
            Some(p) => p,
            None => self.pull()?,
        };
        loop {
            let Some(n) = self.pull() else {
                return Some(cur);
            };
            let last = cur.last();
            if last.src + last.len != n.src || last.dst + last.len != n.dst {
                if let Some(longer) = cur.extended(&n) {
                    cur = longer;
                    continue;
                }
                self.pending = Some(n);
                return Some(cur);
            }
            // The last run of `cur` and the first of `n` are one run; the rest of `n`
            // does not chain to it (no progression chains inside).
            let joined = Strided::single(Run {
                len: last.len + n.len,
                ..last
            });
            let rest = n.skip(1);
            if cur.count > 1 {
                match rest {
                    Some(r) => {
                        self.queued = Some(joined);
                        self.pending = Some(r);
                    }
                    None => self.pending = Some(joined),
                }
                return Some(cur.first(cur.count - 1));
            }
            match rest {
                Some(r) => {
                    self.pending = Some(r);
                    return Some(joined);
                }
                None => cur = joined,
            }
        }
    }
}
