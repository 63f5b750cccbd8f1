//! Transfer plans: the composite M1^-1 o M2 of two layouts of one dataset.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::array::ArrayLayout;
use crate::error::PlanError;
use crate::layout::{Layout, OwnRuns};
use crate::product::{Merge, Product, RawRun};
use crate::segs::DimSegs;

/// `len` bytes moving from byte `src` of a source unit's storage to byte `dst` of a
/// destination unit's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Run {
    /// Offset in the source unit's local storage.
    pub src: u64,
    /// Offset in the destination unit's local storage.
    pub dst: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The plan for moving a dataset from one layout to another.
///
/// For every pair (source unit `s`, destination unit `d`) the plan gives the maximal runs
/// that move from `s` to `d`; runs contiguous on both sides are merged. Nothing is
/// materialised up front: [`sends`](Plan::sends) and [`receives`](Plan::receives) give one
/// unit's part, and runs are enumerated lazily.
///
/// Between two arrays of the same shape the plan is symbolic: per dimension, the two
/// distributions are intersected with periodic interval arithmetic, and N-d runs are the
/// product of the per-dimension segments, so memory and time grow with the number of
/// segments per dimension, never with the number of bytes. Any other pair of layouts
/// (arrays onto byte streams, bit permutations, irregular layouts, arrays of different
/// shapes, which then correspond through the canonical byte stream) is planned by sweeping
/// one unit's extents against the other layout, in time proportional to the runs produced.
///
/// ```
/// use spools_map::{Layout, Plan, Run};
/// let rows: Layout = "u8[4,4] block,* on 2x1".parse()?;
/// let cols: Layout = "u8[4,4] *,block on 1x2".parse()?;
/// let plan = Plan::new(&rows, &cols)?;
/// let runs: Vec<Run> = plan.runs(0, 1)?.collect();
/// // unit 0 holds rows 0-1; unit 1 wants columns 2-3: two runs of 2 bytes.
/// assert_eq!(runs, vec![Run { src: 2, dst: 0, len: 2 }, Run { src: 6, dst: 2, len: 2 }]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Plan {
    src: Arc<Layout>,
    dst: Arc<Layout>,
    total: u64,
    grain: u64,
    symbolic: bool,
}

/// Which way a [`UnitPlan`] looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Runs a source unit sends, in source order.
    Send,
    /// Runs a destination unit receives, in destination order.
    Receive,
}

/// One unit's part of a plan: its peers and, for each, a lazy description of the runs.
#[derive(Clone, Debug)]
pub struct UnitPlan {
    /// The unit this part belongs to.
    pub unit: u64,
    /// Whether it lists sends or receives.
    pub direction: Direction,
    /// Peers with at least one byte to exchange, in increasing order.
    pub peers: Vec<PeerPlan>,
}

/// The runs between one unit and one peer.
#[derive(Clone, Debug)]
pub struct PeerPlan {
    /// The peer unit (a destination for sends, a source for receives).
    pub peer: u64,
    source: RunSource,
    swap: bool,
}

#[derive(Clone, Debug)]
enum RunSource {
    Symbolic(Product),
    Sweep {
        own: OwnRuns<Arc<Layout>>,
        other: Arc<Layout>,
        peer: u64,
    },
}

/// Lazy iterator over the [`Run`]s between two units.
#[derive(Clone, Debug)]
pub struct Runs {
    inner: Merge<RunsInner>,
    swap: bool,
}

#[derive(Clone, Debug)]
enum RunsInner {
    Symbolic(Product),
    Sweep(Sweep),
}

#[derive(Clone, Debug)]
struct Sweep {
    own: OwnRuns<Arc<Layout>>,
    other: Arc<Layout>,
    peer: u64,
    /// The rest of the current own extent: (local, global, len).
    cur: Option<RawRun>,
}

impl Iterator for Sweep {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        loop {
            let (l, g, n) = match self.cur.take() {
                Some(c) => c,
                None => self.own.next()?,
            };
            let at = self.other.locate(g)?;
            let take = at.len.min(n);
            if take < n {
                self.cur = Some((l + take, g + take, n - take));
            }
            if at.unit == self.peer {
                return Some((l, at.local, take));
            }
        }
    }
}

impl Iterator for RunsInner {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        match self {
            RunsInner::Symbolic(p) => p.next(),
            RunsInner::Sweep(s) => s.next(),
        }
    }
}

impl Iterator for Runs {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        let (a, b, len) = self.inner.next()?;
        let (src, dst) = if self.swap { (b, a) } else { (a, b) };
        Some(Run { src, dst, len })
    }
}

impl PeerPlan {
    /// The runs, lazily: in source order for sends, destination order for receives.
    pub fn runs(&self) -> Runs {
        let inner = match &self.source {
            RunSource::Symbolic(p) => RunsInner::Symbolic(p.clone()),
            RunSource::Sweep { own, other, peer } => RunsInner::Sweep(Sweep {
                own: own.clone(),
                other: Arc::clone(other),
                peer: *peer,
                cur: None,
            }),
        };
        Runs {
            inner: Merge::new(inner),
            swap: self.swap,
        }
    }

    /// Bytes this description holds of its own (shared layouts not counted).
    pub fn stored_bytes(&self) -> usize {
        let segs = match &self.source {
            RunSource::Symbolic(p) => p.stored_segments(),
            RunSource::Sweep { own, .. } => own.stored_segments(),
        };
        std::mem::size_of::<Self>() + segs * 3 * std::mem::size_of::<u64>()
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Plan {
    /// Plans moving a dataset from `src` to `dst`. A byte-stream layout without a size
    /// takes the other side's.
    ///
    /// # Errors
    /// [`PlanError::SizeMismatch`] when the layouts hold different numbers of bytes,
    /// [`PlanError::Unsized`] when neither gives a size.
    pub fn new(src: &Layout, dst: &Layout) -> Result<Plan, PlanError> {
        let total = match (src.total_bytes(), dst.total_bytes()) {
            (None, None) => return Err(PlanError::Unsized),
            (Some(a), Some(b)) if a != b => return Err(PlanError::SizeMismatch { src: a, dst: b }),
            (Some(a), _) | (None, Some(a)) => a,
        };
        let src = src.with_size(total)?;
        let dst = dst.with_size(total)?;
        let grain = gcd(gcd(src.grain(), dst.grain()), total);
        let symbolic = matches!((&src, &dst), (Layout::Array(a), Layout::Array(b))
            if a.shape() == b.shape() && a.dtype().size() == b.dtype().size());
        Ok(Plan {
            src: Arc::new(src),
            dst: Arc::new(dst),
            total,
            grain,
            symbolic,
        })
    }

    /// The source layout (with its size bound).
    pub fn src(&self) -> &Layout {
        &self.src
    }
    /// The destination layout (with its size bound).
    pub fn dst(&self) -> &Layout {
        &self.dst
    }
    /// Dataset size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }
    /// Every run offset and length is a multiple of this many bytes (the common element
    /// size, where there is one).
    pub fn grain(&self) -> u64 {
        self.grain
    }
    /// Whether runs come from the per-dimension symbolic product (array to array of one
    /// shape) rather than a sweep.
    pub fn is_symbolic(&self) -> bool {
        self.symbolic
    }

    /// The same transfer the other way round.
    pub fn reversed(&self) -> Plan {
        Plan {
            src: Arc::clone(&self.dst),
            dst: Arc::clone(&self.src),
            ..*self
        }
    }

    fn check(&self, side: &'static str, layout: &Layout, unit: u64) -> Result<(), PlanError> {
        if unit >= layout.units() {
            return Err(PlanError::UnitOutOfRange {
                side,
                unit,
                units: layout.units(),
            });
        }
        Ok(())
    }

    /// The runs from source unit `s` to destination unit `d`, in source order.
    ///
    /// # Errors
    /// [`PlanError::UnitOutOfRange`] for a unit beyond either layout.
    pub fn runs(&self, s: u64, d: u64) -> Result<Runs, PlanError> {
        self.check("source", &self.src, s)?;
        self.check("destination", &self.dst, d)?;
        Ok(self.peer_plan(s, d, &mut HashMap::new(), false)?.runs())
    }

    /// What source unit `s` sends, to each destination that gets anything.
    ///
    /// ```
    /// use spools_map::{Layout, Plan};
    /// let from: Layout = "f64[1000,1000] block,* on 8x1".parse()?;
    /// let to: Layout = "f64[1000,1000] cyclic(2),cyclic(2) on 8x8".parse()?;
    /// let part = Plan::new(&from, &to)?.sends(0)?;
    /// let bytes: u64 = part.peers.iter().flat_map(|p| p.runs()).map(|r| r.len).sum();
    /// assert_eq!(bytes, 125 * 1000 * 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PlanError::UnitOutOfRange`] when `s` is beyond the source layout.
    pub fn sends(&self, s: u64) -> Result<UnitPlan, PlanError> {
        self.check("source", &self.src, s)?;
        self.unit_plan(s, false)
    }

    /// What destination unit `d` receives, from each source that sends anything; runs in
    /// destination order.
    ///
    /// # Errors
    /// [`PlanError::UnitOutOfRange`] when `d` is beyond the destination layout.
    pub fn receives(&self, d: u64) -> Result<UnitPlan, PlanError> {
        self.check("destination", &self.dst, d)?;
        self.reversed().unit_plan(d, true)
    }

    fn unit_plan(&self, s: u64, swap: bool) -> Result<UnitPlan, PlanError> {
        let direction = if swap {
            Direction::Receive
        } else {
            Direction::Send
        };
        let peers: Vec<u64> = if self.symbolic {
            (0..self.dst.units()).collect()
        } else {
            self.touched(s)?.into_iter().collect()
        };
        let mut cache = HashMap::new();
        let mut out = Vec::with_capacity(peers.len());
        for d in peers {
            let p = self.peer_plan(s, d, &mut cache, swap)?;
            let empty = matches!(&p.source, RunSource::Symbolic(prod) if prod.clone().next().is_none());
            if !empty {
                out.push(p);
            }
        }
        Ok(UnitPlan {
            unit: s,
            direction,
            peers: out,
        })
    }

    /// Destination units that source unit `s` sends to (one sweep of its extents).
    fn touched(&self, s: u64) -> Result<BTreeSet<u64>, PlanError> {
        let mut set = BTreeSet::new();
        for (_, g, n) in OwnRuns::new(Arc::clone(&self.src), s)? {
            let mut at = g;
            while at < g + n {
                let Some(loc) = self.dst.locate(at) else { break };
                set.insert(loc.unit);
                at += loc.len;
            }
        }
        Ok(set)
    }

    fn peer_plan(
        &self,
        s: u64,
        d: u64,
        cache: &mut HashMap<(usize, u64, u64), Arc<DimSegs>>,
        swap: bool,
    ) -> Result<PeerPlan, PlanError> {
        let source = match (&*self.src, &*self.dst) {
            (Layout::Array(a), Layout::Array(b)) if self.symbolic => {
                RunSource::Symbolic(symbolic_pair(a, s, b, d, cache)?)
            }
            _ => RunSource::Sweep {
                own: OwnRuns::new(Arc::clone(&self.src), s)?,
                other: Arc::clone(&self.dst),
                peer: d,
            },
        };
        Ok(PeerPlan {
            peer: d,
            source,
            swap,
        })
    }
}

/// The product of per-dimension segments between `a`'s unit `s` and `b`'s unit `d`.
fn symbolic_pair(
    a: &ArrayLayout,
    s: u64,
    b: &ArrayLayout,
    d: u64,
    cache: &mut HashMap<(usize, u64, u64), Arc<DimSegs>>,
) -> Result<Product, PlanError> {
    let cs = a.coords(s)?;
    let cd = b.coords(d)?;
    let la = a.local_shape(s)?;
    let lb = b.local_shape(d)?;
    let sb = b.strides(&lb);
    let order = a.storage_dims();
    let dims = order
        .iter()
        .map(|&k| {
            Arc::clone(cache.entry((k, cs[k], cd[k])).or_insert_with(|| {
                Arc::new(DimSegs::new(&a.maps()[k], cs[k], &b.maps()[k], cd[k]))
            }))
        })
        .collect();
    let pick = |v: &[u64]| order.iter().map(|&k| v[k]).collect::<Vec<_>>();
    Ok(Product::new(
        dims,
        &pick(&la),
        &pick(&lb),
        &pick(&sb),
        a.dtype().size(),
    ))
}
