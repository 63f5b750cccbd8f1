//! The `Layout` type: one dataset mapped onto units, whatever the kind of mapping.

use std::ops::Deref;

use crate::array::ArrayLayout;
use crate::bits::BitsLayout;
use crate::error::LayoutError;
use crate::irregular::IrregularLayout;
use crate::product::{Merge, Product};
use crate::stripe::{Raid5Layout, StripeLayout};

/// A maximal run of a unit's data: `len` bytes at global byte offset `global` (in the
/// dataset's canonical byte order) stored at byte offset `local` of the unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// Offset in the dataset's canonical byte stream.
    pub global: u64,
    /// Offset in the unit's local storage.
    pub local: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Where one byte of the dataset lives, and how far the run around it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The unit holding the byte.
    pub unit: u64,
    /// Its byte offset in that unit's local storage.
    pub local: u64,
    /// Bytes from here on that stay contiguous both in the dataset and on the unit
    /// (at least 1; not necessarily maximal).
    pub len: u64,
}

/// A run of one unit's data found by [`Layout::next_piece`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) global: u64,
    pub(crate) local: u64,
    pub(crate) len: u64,
}

/// A mapping of a dataset onto units (ranks, disks, links): the M of the nCUBE paper.
///
/// Parse one from the spec syntax with [`str::parse`]; printing gives the spec back.
///
/// ```
/// use spools_map::Layout;
/// let l: Layout = "f64[1000,1000] cyclic(2),cyclic(2) on 8x8".parse()?;
/// assert_eq!(l.units(), 64);
/// assert_eq!(l.total_bytes(), Some(8_000_000));
/// assert_eq!(l.to_string(), "f64[1000,1000] cyclic(2),cyclic(2) on 8x8");
/// # Ok::<(), spools_map::SpecError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// An N-d array distributed block / cyclic over a grid.
    Array(ArrayLayout),
    /// A byte stream striped RAID-0.
    Stripe(StripeLayout),
    /// A byte stream striped RAID-5 (left-symmetric).
    Raid5(Raid5Layout),
    /// A bit-permutation mapping (nCUBE).
    Bits(BitsLayout),
    /// Explicit extents per unit.
    Irregular(IrregularLayout),
}

/// Iterator over a unit's [`Extent`]s in local storage order; see [`Layout::extents`].
#[derive(Clone, Debug)]
pub struct Extents<'a> {
    inner: OwnRuns<&'a Layout>,
}

/// A unit's own runs as `(local, global, len)` in local order, over a borrowed or shared
/// layout.
#[derive(Clone, Debug)]
pub(crate) enum OwnRuns<L> {
    Array(Merge<Product>),
    Raw(Merge<RawExtents<L>>),
}

impl<L: Deref<Target = Layout>> OwnRuns<L> {
    /// `unit`'s runs; the unit must be in range and the layout sized.
    pub(crate) fn new(layout: L, unit: u64) -> Result<Self, LayoutError> {
        layout.check_unit(unit)?;
        Ok(match &*layout {
            Layout::Array(a) => OwnRuns::Array(a.own_runs(unit)?),
            _ => OwnRuns::Raw(Merge::new(RawExtents {
                layout,
                unit,
                next: 0,
            })),
        })
    }

    /// Per-dimension segments held, for arrays (0 otherwise).
    pub(crate) fn stored_segments(&self) -> usize {
        match self {
            OwnRuns::Array(p) => p.inner().stored_segments(),
            OwnRuns::Raw(_) => 0,
        }
    }
}

impl<L: Deref<Target = Layout>> Iterator for OwnRuns<L> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<(u64, u64, u64)> {
        match self {
            OwnRuns::Array(p) => p.next(),
            OwnRuns::Raw(r) => r.next(),
        }
    }
}

/// Non-array layouts' extents as `(local, global, len)`, by index.
#[derive(Clone, Debug)]
pub(crate) struct RawExtents<L> {
    layout: L,
    unit: u64,
    next: u64,
}

impl<L: Deref<Target = Layout>> Iterator for RawExtents<L> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<(u64, u64, u64)> {
        let i = self.next;
        let (g, l, n) = match &*self.layout {
            Layout::Stripe(s) => s.extent_at(self.unit, i),
            Layout::Raid5(r) => r.extent_at(self.unit, i),
            Layout::Bits(b) => b.extent_at(self.unit, i),
            Layout::Irregular(x) => x.extents(self.unit).get(i as usize).copied(),
            Layout::Array(_) => None,
        }?;
        self.next += 1;
        Some((l, g, n))
    }
}

impl Iterator for Extents<'_> {
    type Item = Extent;

    fn next(&mut self) -> Option<Extent> {
        let (local, global, len) = self.inner.next()?;
        Some(Extent { global, local, len })
    }
}

impl Layout {
    /// Number of units.
    pub fn units(&self) -> u64 {
        match self {
            Layout::Array(a) => a.units(),
            Layout::Stripe(s) => s.count(),
            Layout::Raid5(r) => r.count(),
            Layout::Bits(b) => b.units(),
            Layout::Irregular(x) => x.units(),
        }
    }

    /// Dataset size in bytes; `None` for a byte-stream layout whose size is not given.
    pub fn total_bytes(&self) -> Option<u64> {
        match self {
            Layout::Array(a) => Some(a.total_bytes()),
            Layout::Stripe(s) => s.size(),
            Layout::Raid5(r) => r.size(),
            Layout::Bits(b) => Some(b.total_bytes()),
            Layout::Irregular(x) => Some(x.total_bytes()),
        }
    }

    /// The layout's natural element size in bytes: the array element or irregular record,
    /// 1 for byte streams. Offsets shown to people are counted in these.
    pub fn elem_size(&self) -> u64 {
        match self {
            Layout::Array(a) => a.dtype().size(),
            Layout::Irregular(x) => x.elem_size(),
            Layout::Stripe(_) | Layout::Raid5(_) | Layout::Bits(_) => 1,
        }
    }

    /// The largest size every run boundary of this layout is a multiple of.
    pub(crate) fn alignment(&self) -> u64 {
        match self {
            Layout::Stripe(s) => s.unit(),
            Layout::Raid5(r) => r.unit(),
            _ => self.elem_size(),
        }
    }

    /// Whether this is a byte-stream layout without a size.
    pub fn is_unsized(&self) -> bool {
        self.total_bytes().is_none()
    }

    /// The same layout bound to a dataset of `size` bytes (only byte streams can be bound;
    /// other layouts are returned unchanged).
    ///
    /// ```
    /// use spools_map::Layout;
    /// let s: Layout = "stripe(unit=1MiB,count=4)".parse()?;
    /// assert!(s.is_unsized());
    /// assert_eq!(s.with_size(10 << 20)?.to_string(), "stripe(unit=1MiB,count=4,size=10MiB)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LayoutError::EmptyDataset`] when `size` is 0.
    pub fn with_size(&self, size: u64) -> Result<Layout, LayoutError> {
        Ok(match self {
            Layout::Stripe(s) => Layout::Stripe(s.with_size(size)?),
            Layout::Raid5(r) => Layout::Raid5(r.with_size(size)?),
            other => other.clone(),
        })
    }

    pub(crate) fn check_unit(&self, unit: u64) -> Result<(), LayoutError> {
        if self.is_unsized() {
            return Err(LayoutError::Unsized {
                spec: self.to_string(),
            });
        }
        if unit >= self.units() {
            return Err(LayoutError::UnitOutOfRange {
                unit,
                units: self.units(),
            });
        }
        Ok(())
    }

    /// Bytes of `unit`'s local storage (for RAID-5, including its parity blocks).
    ///
    /// ```
    /// use spools_map::Layout;
    /// let l: Layout = "f64[10,10] block,cyclic(3) on 3x2".parse()?;
    /// // unit 5 = grid (2, 1): rows 8-9 (the short last block of 4), columns 3-5 and 9
    /// assert_eq!(l.local_bytes(5)?, 2 * 4 * 8);
    /// let r: Layout = "raid5(unit=1KiB,count=3,size=4KiB)".parse()?;
    /// assert_eq!(r.local_bytes(0)?, 2048);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LayoutError::UnitOutOfRange`], or [`LayoutError::Unsized`] for an unsized stream.
    pub fn local_bytes(&self, unit: u64) -> Result<u64, LayoutError> {
        self.check_unit(unit)?;
        Ok(match self {
            Layout::Array(a) => a
                .local_shape(unit)?
                .iter()
                .fold(a.dtype().size(), |acc, &n| acc * n),
            Layout::Stripe(s) => s.local_bytes(unit),
            Layout::Raid5(r) => r.local_bytes(unit),
            Layout::Bits(b) => b.local_bytes(),
            Layout::Irregular(x) => x.local_bytes(unit),
        })
    }

    /// The maximal runs of data `unit` holds, in its local storage order (lazy).
    ///
    /// ```
    /// use spools_map::{Extent, Layout};
    /// let l: Layout = "u8[9] block on 4".parse()?;
    /// let e: Vec<Extent> = l.extents(1)?.collect();
    /// assert_eq!(e, vec![Extent { global: 3, local: 0, len: 3 }]);
    /// assert_eq!(l.extents(3)?.count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LayoutError::UnitOutOfRange`], or [`LayoutError::Unsized`] for an unsized stream.
    pub fn extents(&self, unit: u64) -> Result<Extents<'_>, LayoutError> {
        Ok(Extents {
            inner: OwnRuns::new(self, unit)?,
        })
    }

    /// The first piece of `unit`'s data within global bytes `[g, end)`: a run contiguous on
    /// the unit, clipped to the range, with its global offset; `None` when `unit` holds
    /// nothing there. Stripes and RAID-5 find it arithmetically; other layouts step through
    /// the range with [`locate`](Self::locate).
    pub(crate) fn next_piece(&self, unit: u64, g: u64, end: u64) -> Option<Piece> {
        let found = match self {
            Layout::Stripe(s) => s.next_block_of(unit, g),
            Layout::Raid5(r) => r.next_block_of(unit, g),
            _ => {
                let mut at = g;
                loop {
                    if at >= end {
                        return None;
                    }
                    let loc = self.locate(at)?;
                    if loc.unit == unit {
                        break Some((at, loc.local, loc.len));
                    }
                    at += loc.len;
                }
            }
        };
        let (start, local, len) = found?;
        (start < end).then(|| Piece {
            global: start,
            local,
            len: len.min(end - start),
        })
    }

    /// Where global byte `g` lives, or `None` past the end (or for an unsized stream).
    ///
    /// ```
    /// use spools_map::Layout;
    /// let l: Layout = "stripe(unit=4KiB,count=3,size=1MiB)".parse()?;
    /// let at = l.locate(9000).unwrap();
    /// assert_eq!((at.unit, at.local, at.len), (2, 808, 3288));
    /// # Ok::<(), spools_map::SpecError>(())
    /// ```
    pub fn locate(&self, g: u64) -> Option<Location> {
        let (unit, local, len) = match self {
            Layout::Array(a) => a.locate(g),
            Layout::Stripe(s) => s.locate(g),
            Layout::Raid5(r) => r.locate(g),
            Layout::Bits(b) => b.locate(g),
            Layout::Irregular(x) => x.locate(g),
        }?;
        Some(Location { unit, local, len })
    }
}
