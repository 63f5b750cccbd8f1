//! Transfer plans: the composite M1^-1 o M2 of two layouts of one dataset.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::array::ArrayLayout;
use crate::bitruns::{BitComposite, BitRuns};
use crate::dist::{gcd, DimMap};
use crate::error::PlanError;
use crate::intersect::DimIntersection;
use crate::layout::{Layout, OwnRuns};
use crate::product::{Merge, Product, RawRun};
use crate::rows::{self, RowGeometry, RowSweep};
use crate::run::Run;
use crate::strided::{MergeStrided, Progressions, Strided};

/// The plan for moving a dataset from one layout to another.
///
/// For every pair (source unit `s`, destination unit `d`) the plan gives the maximal runs
/// that move from `s` to `d`; runs contiguous on both sides are merged. Nothing is
/// materialised up front: [`sends`](Plan::sends) and [`receives`](Plan::receives) give one
/// unit's part, and runs are enumerated lazily.
///
/// How the runs are found depends on the pair of layouts ([`PlanPath`]):
/// * two arrays of the same shape (or an array and a stripe whose unit is a whole number
///   of the array's rows, seen as an array of that shape): per dimension, the two
///   distributions are intersected
///   with periodic interval arithmetic, and N-d runs are the product of the per-dimension
///   segments, so memory and time grow with the number of segments per dimension, never
///   with the number of bytes; arrays of one shape correspond element by element (by
///   logical index, whatever their orders);
/// * two layouts that are both block-cyclic over the canonical byte stream (RAID-0 stripes,
///   arrays distributed along their slowest dimension only): the same, in one dimension;
/// * two bit permutations: the composite permutation gives the runs directly;
/// * an N-d array and a stripe whose blocks cut its rows: the runs of each array unit within
///   one row (its row pattern, as progressions) are found once and laid over every row it
///   owns, clipped to the stripe unit's blocks (`rows.rs`), so the cost grows with rows,
///   not with runs;
/// * anything else (RAID-5, irregular layouts, N-d arrays onto streams, arrays of different
///   shapes, which then correspond through the canonical byte stream): one unit's extents
///   are swept against the other layout, in time proportional to the pieces visited.
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
    alignment: u64,
    path: Path,
}

/// How a [`Plan`] finds its runs; see [`Plan::path`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanPath {
    /// Per-dimension product of periodic segments (arrays of one shape).
    Dimensions,
    /// One-dimensional periodic segments over the canonical byte stream.
    ByteStream,
    /// Composite of two bit permutations.
    BitPermutation,
    /// An array and a stripe whose blocks cut the array's rows: the runs of each array
    /// unit within one row, found once, laid over its rows and clipped to the blocks.
    Rows,
    /// A sweep of one unit's extents against the other layout.
    Sweep,
}

#[derive(Clone, Debug)]
enum Path {
    /// The two sides as arrays of one shape (a stripe seen as one where it is one:
    /// [`ArrayLayout::stripe_as_array`]).
    Dims(Arc<ArrayLayout>, Arc<ArrayLayout>),
    Bytes(DimMap, DimMap),
    Bits(BitComposite),
    /// The array, its geometry against the stripe, and whether the array is the source.
    Rows(Arc<ArrayLayout>, RowGeometry, bool),
    Sweep,
}

/// Picks the cheapest way to find the runs from `src` to `dst` (sizes already bound).
fn choose_path(src: &Layout, dst: &Layout) -> Path {
    match (src, dst) {
        (Layout::Array(a), Layout::Array(b))
            if a.shape() == b.shape() && a.dtype().size() == b.dtype().size() =>
        {
            Path::Dims(Arc::new(a.clone()), Arc::new(b.clone()))
        }
        (Layout::Bits(a), Layout::Bits(b)) => a.composite(b).map_or(Path::Sweep, |c| {
            Path::Bits(BitComposite::new(
                c,
                a.local_bits().len() as u32,
                b.local_bits().len() as u32,
            ))
        }),
        _ => match (byte_dim(src), byte_dim(dst)) {
            (Some(x), Some(y)) => Path::Bytes(x, y),
            _ => match (src, dst) {
                (Layout::Array(a), Layout::Stripe(s)) => match a.stripe_as_array(s) {
                    Some(b) => Path::Dims(Arc::new(a.clone()), Arc::new(b)),
                    None => rows_path(a, s, true),
                },
                (Layout::Stripe(s), Layout::Array(b)) => match b.stripe_as_array(s) {
                    Some(a) => Path::Dims(Arc::new(a), Arc::new(b.clone())),
                    None => rows_path(b, s, false),
                },
                _ => Path::Sweep,
            },
        },
    }
}

/// Most array units for [`Path::Rows`]: a stripe unit's peers are found by trying every
/// array unit.
const MAX_ROWS_UNITS: u64 = 4096;

/// [`Path::Rows`] for `a` against `s` where it serves, else a sweep.
fn rows_path(a: &ArrayLayout, s: &crate::stripe::StripeLayout, array_src: bool) -> Path {
    if rows::serves(a, s, 0) && a.units() <= MAX_ROWS_UNITS {
        Path::Rows(Arc::new(a.clone()), RowGeometry::new(a, s, 0), array_src)
    } else {
        Path::Sweep
    }
}

/// The layout as one block-cyclic dimension over its canonical byte stream, where it is
/// one: a stripe, or an array distributed only along its slowest dimension.
fn byte_dim(l: &Layout) -> Option<DimMap> {
    match l {
        Layout::Stripe(s) => {
            let n = s.size()?;
            Some(DimMap {
                n,
                b: s.unit().min(n),
                p: s.count(),
            })
        }
        Layout::Array(a) => {
            let order = a.storage_dims();
            let slow = order[0];
            let rest_whole = order[1..]
                .iter()
                .all(|&k| a.grid()[k] == 1 && a.maps()[k].is_whole());
            let row: u64 =
                order[1..].iter().map(|&k| a.shape()[k]).product::<u64>() * a.dtype().size();
            let m = a.maps()[slow];
            rest_whole.then(|| DimMap {
                n: m.n * row,
                b: m.b * row,
                p: m.p,
            })
        }
        _ => None,
    }
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
    /// The runs, not yet started: [`runs`](Self::runs) clones it.
    source: RunsInner,
    swap: bool,
}

/// Lazy iterator over the [`Run`]s between two units.
#[derive(Clone, Debug)]
pub struct Runs {
    inner: Merge<RunsInner>,
    swap: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum RunsInner {
    Symbolic(Product),
    Bits(BitRuns),
    Rows(RowSweep),
    Sweep(Sweep),
}

#[derive(Clone, Debug)]
pub(crate) struct Sweep {
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
            let Some(at) = self.other.next_piece(self.peer, g, g + n) else {
                continue;
            };
            let skip = at.global - g;
            let rest = n - skip - at.len;
            if rest > 0 {
                let end = skip + at.len;
                self.cur = Some((l + end, g + end, rest));
            }
            return Some((l + skip, at.local, at.len));
        }
    }
}

impl Iterator for RunsInner {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        match self {
            RunsInner::Symbolic(p) => p.next(),
            RunsInner::Bits(b) => b.next(),
            RunsInner::Rows(r) => r.next(),
            RunsInner::Sweep(s) => s.next(),
        }
    }
}

impl Progressions for RunsInner {
    fn next_progression(&mut self) -> Option<Strided> {
        match self {
            RunsInner::Symbolic(p) => p.next_strided(),
            RunsInner::Rows(r) => r.next_progression(),
            _ => self
                .next()
                .map(|(src, dst, len)| Strided::single(Run { src, dst, len })),
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

impl Runs {
    /// The raw source, the raw run taken but not yet handed out, and whether the sides
    /// are swapped.
    pub(crate) fn into_parts(self) -> (RunsInner, Option<RawRun>, bool) {
        let (inner, pending) = self.inner.into_parts();
        (inner, pending, self.swap)
    }

    /// The rest of these runs as progressions (see [`StridedRuns`]).
    pub fn strided(self) -> StridedRuns {
        let (inner, pending, swap) = self.into_parts();
        let pending = pending.map(|(src, dst, len)| Strided::single(Run { src, dst, len }));
        StridedRuns::new(MergeStrided::new(inner, pending), swap)
    }
}

/// Lazy iterator over the runs between two units as [`Strided`] progressions: expanded,
/// they are exactly the [`Runs`] the plan gives, in the same order.
///
/// ```
/// use spools_map::{Layout, Plan, Run, Strided};
/// let from: Layout = "f64[4096] block on 2".parse()?;
/// let to: Layout = "f64[4096] cyclic on 4".parse()?;
/// let plan = Plan::new(&from, &to)?;
/// let p: Vec<Strided> = plan.runs(1, 2)?.strided().collect();
/// // Elements 2050, 2054, ... of source unit 1, 32 bytes apart there, land next to each
/// // other on unit 2: 512 runs of 8 bytes in one progression.
/// assert_eq!(p, vec![Strided { src: 16, dst: 4096, len: 8, count: 512, src_stride: 32, dst_stride: 8 }]);
/// let runs: Vec<Run> = p.iter().flat_map(|s| s.runs().collect::<Vec<_>>()).collect();
/// assert_eq!(runs, plan.runs(1, 2)?.collect::<Vec<_>>());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct StridedRuns {
    inner: MergeStrided<RunsInner>,
    swap: bool,
}

impl StridedRuns {
    pub(crate) fn new(inner: MergeStrided<RunsInner>, swap: bool) -> Self {
        StridedRuns { inner, swap }
    }
}

impl Iterator for StridedRuns {
    type Item = Strided;

    fn next(&mut self) -> Option<Strided> {
        let p = self.inner.next()?;
        Some(if self.swap { p.swapped() } else { p })
    }
}

impl PeerPlan {
    /// The runs, lazily: in source order for sends, destination order for receives.
    pub fn runs(&self) -> Runs {
        Runs {
            inner: Merge::new(self.source.clone()),
            swap: self.swap,
        }
    }

    /// The same runs as progressions (see [`StridedRuns`]).
    pub fn strided(&self) -> StridedRuns {
        self.runs().strided()
    }

    /// Bytes of all the runs: from the per-dimension counts where the runs are a product
    /// of segments (arrays of one shape, byte streams), else by enumerating them.
    pub fn bytes(&self) -> u64 {
        match &self.source {
            RunsInner::Symbolic(p) => p.total_bytes(),
            RunsInner::Rows(r) => r.total_bytes(),
            _ => self.strided().map(|p| p.bytes()).sum(),
        }
    }

    /// Bytes this description holds of its own (shared layouts not counted).
    pub fn stored_bytes(&self) -> usize {
        let segs = match &self.source {
            RunsInner::Symbolic(p) => p.stored_segments(),
            RunsInner::Bits(_) => 0,
            RunsInner::Rows(r) => r.stored_bytes() / (3 * std::mem::size_of::<u64>()),
            RunsInner::Sweep(sweep) => sweep.own.stored_segments(),
        };
        std::mem::size_of::<Self>() + segs * 3 * std::mem::size_of::<u64>()
    }
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
        let alignment = gcd(gcd(src.alignment(), dst.alignment()), total);
        let path = choose_path(&src, &dst);
        Ok(Plan {
            src: Arc::new(src),
            dst: Arc::new(dst),
            total,
            alignment,
            path,
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
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// How the runs are found.
    ///
    /// ```
    /// use spools_map::{Layout, Plan, PlanPath};
    /// let rows: Layout = "f64[512,512] cyclic,* on 4x1".parse()?;
    /// let disks: Layout = "stripe(unit=4KiB,count=4)".parse()?;
    /// let blocks: Layout = "f64[512,512] block,block on 2x2".parse()?;
    /// assert_eq!(Plan::new(&rows, &blocks)?.path(), PlanPath::Dimensions);
    /// assert_eq!(Plan::new(&rows, &disks)?.path(), PlanPath::ByteStream);
    /// // a stripe unit of whole rows (4 KiB) is a distribution of the rows
    /// assert_eq!(Plan::new(&blocks, &disks)?.path(), PlanPath::Dimensions);
    /// // one that cuts rows: each unit's runs of one row, laid over its rows
    /// let odd: Layout = "stripe(unit=1000,count=4)".parse()?;
    /// assert_eq!(Plan::new(&blocks, &odd)?.path(), PlanPath::Rows);
    /// let parity: Layout = "raid5(unit=4KiB,count=4)".parse()?;
    /// assert_eq!(Plan::new(&blocks, &parity)?.path(), PlanPath::Sweep);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> PlanPath {
        match self.path {
            Path::Dims(..) => PlanPath::Dimensions,
            Path::Bytes(..) => PlanPath::ByteStream,
            Path::Bits(_) => PlanPath::BitPermutation,
            Path::Rows(..) => PlanPath::Rows,
            Path::Sweep => PlanPath::Sweep,
        }
    }

    /// The same transfer the other way round.
    ///
    /// ```
    /// use spools_map::{Layout, Plan};
    /// let a: Layout = "f32[10,10] block,* on 2x1".parse()?;
    /// let b: Layout = "stripe(unit=64B,count=3)".parse()?;
    /// let there = Plan::new(&a, &b)?;
    /// let back = there.reversed();
    /// assert_eq!(back.src(), there.dst());
    /// let mut sent: Vec<_> = there.runs(1, 2)?.map(|r| (r.src, r.dst, r.len)).collect();
    /// let mut returned: Vec<_> = back.runs(2, 1)?.map(|r| (r.dst, r.src, r.len)).collect();
    /// sent.sort();
    /// returned.sort();
    /// assert_eq!(sent, returned);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reversed(&self) -> Plan {
        let path = match &self.path {
            // A window's geometry is not in its layouts: keep it.
            Path::Rows(a, geo, array_src) => Path::Rows(Arc::clone(a), geo.clone(), !array_src),
            _ => choose_path(&self.dst, &self.src),
        };
        Plan {
            src: Arc::clone(&self.dst),
            dst: Arc::clone(&self.src),
            total: self.total,
            alignment: self.alignment,
            path,
        }
    }

    /// Where the destination's (for a reversed plan, the source's) stream starts in the
    /// array's: the `lo` of [`window`](Self::window), 0 for any other plan. Part of what
    /// the ranks of an exchange agree on, with the two layouts.
    pub fn window_origin(&self) -> u64 {
        match &self.path {
            Path::Rows(_, geo, _) => geo.origin(),
            _ => 0,
        }
    }

    /// The plan from the bytes `[lo, lo + n)` of `array`'s canonical stream to `io`, a
    /// stripe of `n` bytes laid over them (its local offsets count from `lo`): one round of
    /// collective file I/O, whose window of the array needs no description of its own. The
    /// array side keeps its whole local storage (runs outside the window are not touched);
    /// [`reversed`](Self::reversed) gives the read. `None` where this path does not serve
    /// (`array` not an array of two or more dimensions, more than 4096 units, `io` unsized
    /// or reaching past the array, a unit's runs within one row more than 4096
    /// progressions apart); the round is then planned from a description of the window.
    ///
    /// ```
    /// use spools_map::{Layout, Plan, PlanPath, StripeLayout};
    /// let a: Layout = "u8[4,6] *,cyclic on 1x2".parse()?;
    /// // bytes 5..17 over two units of 4 bytes: unit 0 takes 5..9 and 13..17
    /// let io = StripeLayout::new(4, 2, Some(12))?;
    /// let plan = Plan::window(&a, 5, &io).unwrap();
    /// assert_eq!(plan.path(), PlanPath::Rows);
    /// // unit 1 of the array holds the odd columns: bytes 5, 7, 13 and 15 of the window's
    /// // unit 0 (its local bytes 2, 3, 6 and 7)
    /// let runs: Vec<(u64, u64)> = plan.runs(1, 0)?.map(|r| (r.src, r.dst)).collect();
    /// assert_eq!(runs, vec![(2, 0), (3, 2), (6, 4), (7, 6)]);
    /// assert_eq!((plan.window_origin(), plan.reversed().window_origin()), (5, 5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn window(array: &Layout, lo: u64, io: &crate::stripe::StripeLayout) -> Option<Plan> {
        let Layout::Array(a) = array else {
            return None;
        };
        if !rows::serves(a, io, lo) || a.units() > MAX_ROWS_UNITS {
            return None;
        }
        let geo = RowGeometry::new(a, io, lo);
        if !geo.all_patterns(a) {
            return None;
        }
        let n = io.size()?;
        let dst = Layout::Stripe(io.clone());
        let alignment = gcd(gcd(gcd(array.alignment(), dst.alignment()), n), lo);
        Some(Plan {
            src: Arc::new(array.clone()),
            dst: Arc::new(dst),
            total: n,
            alignment,
            path: Path::Rows(Arc::new(a.clone()), geo, true),
        })
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

    /// Bytes from source unit `s` to destination unit `d` (see [`PeerPlan::bytes`]).
    ///
    /// ```
    /// use spools_map::{Layout, Plan};
    /// let from: Layout = "f64[2048,2048] block,* on 4x1 order=F".parse()?;
    /// let to: Layout = "f64[2048,2048] cyclic,* on 4x1 order=F".parse()?;
    /// let plan = Plan::new(&from, &to)?;
    /// assert_eq!(plan.bytes(1, 3)?, 128 * 2048 * 8);
    /// assert_eq!(plan.bytes(1, 3)?, plan.runs(1, 3)?.map(|r| r.len).sum::<u64>());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PlanError::UnitOutOfRange`] for a unit beyond either layout.
    pub fn bytes(&self, s: u64, d: u64) -> Result<u64, PlanError> {
        self.check("source", &self.src, s)?;
        self.check("destination", &self.dst, d)?;
        Ok(self.peer_plan(s, d, &mut HashMap::new(), false)?.bytes())
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
    /// ```
    /// use spools_map::{Layout, Plan, Run};
    /// let from: Layout = "u8[6] cyclic on 3".parse()?;
    /// let to: Layout = "u8[6] block on 2".parse()?;
    /// let part = Plan::new(&from, &to)?.receives(1)?;
    /// // unit 1 wants bytes 3, 4, 5: byte 3 from unit 0, 4 from unit 1, 5 from unit 2
    /// let got: Vec<(u64, Vec<Run>)> = part.peers.iter().map(|p| (p.peer, p.runs().collect())).collect();
    /// assert_eq!(got, vec![
    ///     (0, vec![Run { src: 1, dst: 0, len: 1 }]),
    ///     (1, vec![Run { src: 1, dst: 1, len: 1 }]),
    ///     (2, vec![Run { src: 1, dst: 2, len: 1 }]),
    /// ]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
        let mut cache = HashMap::new();
        let peers: Vec<u64> = match (&self.path, &*self.src, &*self.dst) {
            (Path::Dims(a, b), _, _) => dims_peers(a, s, b)?,
            (Path::Bytes(x, y), _, _) => x.coords_meeting(s, y),
            (Path::Bits(c), _, _) => c.peers(s),
            (Path::Rows(a, geo, true), _, _) => match geo.pattern(a, s) {
                Some(p) => geo.stripe_peers(a, s, &p),
                None => self.touched(s)?.into_iter().collect(),
            },
            (Path::Rows(a, geo, false), _, _) => {
                let mut peers = geo.array_peers(a, s);
                if !geo.all_patterns(a) {
                    peers = self.touched(s)?.into_iter().collect();
                }
                peers
            }
            _ => self.touched(s)?.into_iter().collect(),
        };
        let out = peers
            .into_iter()
            .map(|d| self.peer_plan(s, d, &mut cache, swap))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UnitPlan {
            unit: s,
            direction,
            peers: out,
        })
    }

    /// Calls `f(destination, run)` for every run source unit `s` sends, in source order
    /// (so each destination's runs arrive in order). A sweep visits `s`'s extents once for
    /// all destinations; the other paths go peer by peer.
    pub(crate) fn for_each_send(
        &self,
        s: u64,
        mut f: impl FnMut(u64, Run),
    ) -> Result<(), PlanError> {
        if !matches!(self.path, Path::Sweep) {
            for peer in self.sends(s)?.peers {
                for r in peer.runs() {
                    f(peer.peer, r);
                }
            }
            return Ok(());
        }
        self.check("source", &self.src, s)?;
        let mut open: HashMap<u64, Run> = HashMap::new();
        for (l, g, n) in OwnRuns::new(Arc::clone(&self.src), s)? {
            let mut done = 0;
            while done < n {
                let Some(at) = self.dst.locate(g + done) else {
                    break;
                };
                let len = at.len.min(n - done);
                let piece = Run {
                    src: l + done,
                    dst: at.local,
                    len,
                };
                match open.get_mut(&at.unit) {
                    Some(r) if r.src + r.len == piece.src && r.dst + r.len == piece.dst => {
                        r.len += len
                    }
                    Some(r) => f(at.unit, std::mem::replace(r, piece)),
                    None => {
                        open.insert(at.unit, piece);
                    }
                }
                done += len;
            }
        }
        let mut rest: Vec<(u64, Run)> = open.into_iter().collect();
        rest.sort_unstable();
        for (d, r) in rest {
            f(d, r);
        }
        Ok(())
    }

    /// Destination units that source unit `s` sends to (one sweep of its extents).
    fn touched(&self, s: u64) -> Result<BTreeSet<u64>, PlanError> {
        let mut set = BTreeSet::new();
        let all = self.dst.units();
        for (_, g, n) in OwnRuns::new(Arc::clone(&self.src), s)? {
            let mut at = g;
            while at < g + n && (set.len() as u64) < all {
                let Some(loc) = self.dst.locate(at) else {
                    break;
                };
                set.insert(loc.unit);
                at += loc.len;
            }
            if set.len() as u64 == all {
                break;
            }
        }
        Ok(set)
    }

    fn peer_plan(
        &self,
        s: u64,
        d: u64,
        cache: &mut SegCache,
        swap: bool,
    ) -> Result<PeerPlan, PlanError> {
        let source = match (&self.path, &*self.src, &*self.dst) {
            (Path::Dims(a, b), _, _) => RunsInner::Symbolic(symbolic_pair(a, s, b, d, cache)?),
            (Path::Bytes(x, y), _, _) => {
                let segs = Arc::new(DimIntersection::new(x, s, y, d));
                RunsInner::Symbolic(Product::new(
                    vec![segs],
                    &[x.count(s)],
                    &[y.count(d)],
                    &[1],
                    1,
                ))
            }
            (Path::Bits(c), _, _) => RunsInner::Bits(c.runs(s, d)),
            (Path::Rows(a, geo, array_src), _, _) => {
                let (au, su) = if *array_src { (s, d) } else { (d, s) };
                match geo.pattern(a, au) {
                    Some(p) => {
                        RunsInner::Rows(RowSweep::new(p, geo.clone(), a, au, su, !*array_src))
                    }
                    None => self.sweep(s, d)?,
                }
            }
            _ => self.sweep(s, d)?,
        };
        Ok(PeerPlan {
            peer: d,
            source,
            swap,
        })
    }

    /// The runs from `s` to `d` by a sweep of `s`'s extents against the destination.
    fn sweep(&self, s: u64, d: u64) -> Result<RunsInner, PlanError> {
        Ok(RunsInner::Sweep(Sweep {
            own: OwnRuns::new(Arc::clone(&self.src), s)?,
            other: Arc::clone(&self.dst),
            peer: d,
            cur: None,
        }))
    }
}

/// Segment cache of one unit plan: `(dimension, source coordinate, destination coordinate)`.
type SegCache = HashMap<(usize, u64, u64), Arc<DimIntersection>>;

/// The destination units that share data with `a`'s unit `s`, in increasing order: per
/// dimension, the destination coordinates that meet the source coordinate, then their
/// product (so the cost follows the answer, not the number of units).
fn dims_peers(a: &ArrayLayout, s: u64, b: &ArrayLayout) -> Result<Vec<u64>, PlanError> {
    let cs = a.coords(s)?;
    let mut peers = vec![0u64];
    for (k, (&c, y)) in cs.iter().zip(b.maps()).enumerate() {
        let coords = a.maps()[k].coords_meeting(c, y);
        peers = peers
            .iter()
            .flat_map(|&d| coords.iter().map(move |&q| d * b.grid()[k] + q))
            .collect();
    }
    Ok(peers)
}

/// The product of per-dimension segments between `a`'s unit `s` and `b`'s unit `d`.
fn symbolic_pair(
    a: &ArrayLayout,
    s: u64,
    b: &ArrayLayout,
    d: u64,
    cache: &mut SegCache,
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
                Arc::new(DimIntersection::new(
                    &a.maps()[k],
                    cs[k],
                    &b.maps()[k],
                    cd[k],
                ))
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
