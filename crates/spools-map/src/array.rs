//! N-d array distributions (`MPI_Type_create_darray` semantics).

use std::sync::Arc;

use crate::dist::{DimMap, Dist};
use crate::dtype::DType;
use crate::error::LayoutError;
use crate::intersect::DimIntersection;
use crate::limits::{MAX_BYTES, MAX_UNITS};
use crate::product::{Merge, Product};

/// Storage order of an array, both globally and in each unit's local storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    #[default]
    C,
    /// Column-major: the first dimension varies fastest.
    F,
}

/// An N-d array of fixed-size elements distributed over a grid of units.
///
/// Units are numbered over the grid in row-major order (the last grid dimension varies
/// fastest), whatever the array order, as `MPI_Type_create_darray` does. Each unit stores
/// the elements it owns as a dense local array in the array's order.
///
/// ```
/// use spools_map::{ArrayLayout, DType, Dist, Order};
/// // n=9 over 4 units with `block` gives blocks of 3, 3, 3 and 0.
/// let a = ArrayLayout::new(DType::U8, vec![9], vec![Dist::Block(None)], vec![4], Order::C)?;
/// assert_eq!(a.local_shape(3)?, vec![0]);
/// assert_eq!(a.local_shape(0)?, vec![3]);
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayLayout {
    dtype: DType,
    shape: Vec<u64>,
    dists: Vec<Dist>,
    grid: Vec<u64>,
    order: Order,
    maps: Vec<DimMap>,
    units: u64,
    total: u64,
}

impl ArrayLayout {
    /// Builds and validates an array layout.
    ///
    /// # Errors
    /// A [`LayoutError`] when the lengths of `shape`, `dists` and `grid` differ, an extent,
    /// grid extent or block size is 0, `block(b)` does not cover its dimension, `*` is put on
    /// a grid extent other than 1, or sizes overflow.
    pub fn new(
        dtype: DType,
        shape: Vec<u64>,
        dists: Vec<Dist>,
        grid: Vec<u64>,
        order: Order,
    ) -> Result<Self, LayoutError> {
        if shape.is_empty() {
            return Err(LayoutError::NoDimensions);
        }
        if dists.len() != shape.len() || grid.len() != shape.len() {
            return Err(LayoutError::RankMismatch {
                dims: shape.len(),
                dists: dists.len(),
                grid: grid.len(),
            });
        }
        if dtype.size() == 0 {
            return Err(LayoutError::ZeroElement);
        }
        let mut maps = Vec::with_capacity(shape.len());
        for (dim, ((&n, &dist), &p)) in shape.iter().zip(&dists).zip(&grid).enumerate() {
            maps.push(resolve(dim, n, dist, p)?);
        }
        let overflow = |what| LayoutError::Overflow { what };
        let units = grid.iter().fold(1u64, |a, &p| a.saturating_mul(p));
        if units > MAX_UNITS {
            return Err(LayoutError::TooManyUnits {
                units,
                max: MAX_UNITS,
            });
        }
        let total = shape
            .iter()
            .try_fold(dtype.size(), |a, &n| a.checked_mul(n))
            .filter(|&t| t <= MAX_BYTES)
            .ok_or_else(|| overflow("the dataset size in bytes (at most 2^62)"))?;
        Ok(ArrayLayout {
            dtype,
            shape,
            dists,
            grid,
            order,
            maps,
            units,
            total,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Global extents.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Distribution of each dimension.
    pub fn dists(&self) -> &[Dist] {
        &self.dists
    }
    /// Grid extents.
    pub fn grid(&self) -> &[u64] {
        &self.grid
    }
    /// Storage order.
    pub fn order(&self) -> Order {
        self.order
    }
    /// Number of units (product of the grid extents).
    pub fn units(&self) -> u64 {
        self.units
    }
    /// Dataset size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    pub(crate) fn maps(&self) -> &[DimMap] {
        &self.maps
    }

    fn check_unit(&self, unit: u64) -> Result<(), LayoutError> {
        if unit >= self.units {
            return Err(LayoutError::UnitOutOfRange {
                unit,
                units: self.units,
            });
        }
        Ok(())
    }

    /// Grid coordinates of `unit` (row-major over the grid).
    ///
    /// # Errors
    /// [`LayoutError::UnitOutOfRange`] when `unit` is not below [`units`](Self::units).
    pub fn coords(&self, unit: u64) -> Result<Vec<u64>, LayoutError> {
        self.check_unit(unit)?;
        let mut rest = unit;
        let mut c = vec![0; self.grid.len()];
        for k in (0..self.grid.len()).rev() {
            c[k] = rest % self.grid[k];
            rest /= self.grid[k];
        }
        Ok(c)
    }

    /// Extents of `unit`'s local array, per dimension (some may be 0).
    ///
    /// # Errors
    /// [`LayoutError::UnitOutOfRange`] when `unit` is not below [`units`](Self::units).
    pub fn local_shape(&self, unit: u64) -> Result<Vec<u64>, LayoutError> {
        let c = self.coords(unit)?;
        Ok(self.maps.iter().zip(&c).map(|(m, &c)| m.count(c)).collect())
    }

    /// Dimension indices in storage order, slowest first.
    pub(crate) fn storage_dims(&self) -> Vec<usize> {
        let d = self.shape.len();
        match self.order {
            Order::C => (0..d).collect(),
            Order::F => (0..d).rev().collect(),
        }
    }

    /// Byte strides of a dense array of extents `ext`, per dimension index.
    pub(crate) fn strides(&self, ext: &[u64]) -> Vec<u64> {
        let mut s = vec![0; ext.len()];
        let mut acc = self.dtype.size();
        for &k in self.storage_dims().iter().rev() {
            s[k] = acc;
            acc *= ext[k];
        }
        s
    }

    /// `unit`'s own runs as `(local, global, len)` in bytes, in local storage order.
    pub(crate) fn own_runs(&self, unit: u64) -> Result<Merge<Product>, LayoutError> {
        let c = self.coords(unit)?;
        let local = self.local_shape(unit)?;
        let gstride = self.strides(&self.shape);
        let order = self.storage_dims();
        let dims = order
            .iter()
            .map(|&k| {
                let m = &self.maps[k];
                Arc::new(DimIntersection::new(m, c[k], &DimMap::whole(m.n), 0))
            })
            .collect();
        let pick = |v: &[u64]| order.iter().map(|&k| v[k]).collect::<Vec<_>>();
        Ok(Merge::new(Product::new(
            dims,
            &pick(&local),
            &pick(&self.shape),
            &pick(&gstride),
            self.dtype.size(),
        )))
    }

    /// Where global byte `g` (canonical order) lives: `(unit, local byte, bytes that stay
    /// contiguous on that unit from there)`, or `None` past the end.
    pub(crate) fn locate(&self, g: u64) -> Option<(u64, u64, u64)> {
        if g >= self.total {
            return None;
        }
        let e = self.dtype.size();
        let d = self.shape.len();
        // One pass from the fastest storage dimension outwards, allocating nothing (a
        // sweep calls this once per run): the index in each dimension, its owner's grid
        // coordinate and local index, and the run's length.
        let (mut rest, mut local_off, mut acc) = (g / e, 0u64, e);
        let (mut unit, mut visited) = (0u64, 1u64);
        let (mut len, mut span, mut growing) = (0u64, 1u64, true);
        let mut inner_whole = true;
        for j in 0..d {
            let k = match self.order {
                Order::C => d - 1 - j,
                Order::F => j,
            };
            let m = &self.maps[k];
            let i = rest % self.shape[k];
            rest /= self.shape[k];
            let c = m.owner(i);
            local_off += m.local(i) * acc;
            acc *= m.count(c);
            // Units are numbered row-major over the grid whatever the array's order.
            let below = match self.order {
                Order::C => visited,
                Order::F => self.units / (visited * self.grid[k]),
            };
            unit += c * below;
            visited *= self.grid[k];
            // Run along the fastest dimension to the end of its block, then on through
            // dimensions this unit owns entirely.
            if j == 0 {
                len = m.rest_of_block(i);
            } else if growing && inner_whole {
                len += (m.rest_of_block(i) - 1) * span;
            } else {
                growing = false;
            }
            span *= self.shape[k];
            inner_whole = m.is_whole();
        }
        Some((unit, local_off + g % e, len * e - g % e))
    }
}

/// A slab of an array: the indices `[start, start + n)` of its slowest storage dimension
/// (every index of the others), where `start` is a whole number of that dimension's
/// periods, so that the slab is itself an array of the same distribution ([`layout`]) and
/// each unit's part of it is one contiguous range of the unit's local storage
/// ([`local_range`]). See [`ArrayLayout::slab`].
///
/// [`layout`]: Slab::layout
/// [`local_range`]: Slab::local_range
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slab {
    layout: ArrayLayout,
    /// The array of the indices before the slab (same distribution); `None` from 0.
    before: Option<ArrayLayout>,
}

impl Slab {
    /// The slab as an array of its own (same element type, distribution, grid and order;
    /// the slowest storage dimension shortened).
    pub fn layout(&self) -> &ArrayLayout {
        &self.layout
    }

    /// Where `unit`'s part of the slab lies in the unit's local storage of the whole array:
    /// `[start, end)` in bytes (empty where the unit holds none of it).
    ///
    /// # Errors
    /// [`LayoutError::UnitOutOfRange`] when `unit` is not a unit of the array.
    pub fn local_range(&self, unit: u64) -> Result<(u64, u64), LayoutError> {
        let start = match &self.before {
            Some(b) => b.local_len(unit)?,
            None => {
                self.layout.check_unit(unit)?;
                0
            }
        };
        Ok((start, start + self.layout.local_len(unit)?))
    }
}

impl ArrayLayout {
    /// Bytes `unit` stores.
    fn local_len(&self, unit: u64) -> Result<u64, LayoutError> {
        Ok(self
            .local_shape(unit)?
            .iter()
            .fold(self.dtype.size(), |acc, &n| acc * n))
    }

    /// Bytes of one index of the slowest storage dimension (a "row": every index of the
    /// other dimensions), and the indices of that dimension a slab must start at a
    /// multiple of (its period of blocks; 1 when it is not distributed).
    fn slab_grain(&self) -> (u64, u64) {
        let s0 = self.storage_dims()[0];
        let m = self.maps[s0];
        let row = self.total / m.n.max(1);
        (row, if m.p == 1 { 1 } else { m.period() })
    }

    /// The bytes of canonical stream that every slab boundary (but the end) is a multiple
    /// of: a period of blocks of the slowest storage dimension (saturated at `u64::MAX`).
    ///
    /// ```
    /// use spools_map::Layout;
    /// let Layout::Array(a) = "i64[1024] cyclic on 4".parse()? else { unreachable!() };
    /// assert_eq!(a.slab_period(), 32);
    /// let Layout::Array(b) = "f32[64,100] cyclic(2),cyclic on 2x3".parse()? else { unreachable!() };
    /// assert_eq!(b.slab_period(), 4 * 400);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slab_period(&self) -> u64 {
        let (row, period) = self.slab_grain();
        row.saturating_mul(period)
    }

    /// The bytes `[lo, hi)` of the canonical stream as a [`Slab`], when they are one:
    /// `lo` a multiple of [`slab_period`](Self::slab_period), `hi` a multiple of a row's
    /// bytes or the end, `lo < hi`. `None` otherwise.
    ///
    /// ```
    /// use spools_map::Layout;
    /// let Layout::Array(a) = "i64[10] cyclic on 2".parse()? else { unreachable!() };
    /// // elements 4..9: unit 0 holds 4, 6, 8 (its local elements 2..5), unit 1 holds 5
    /// // and 7 (its local elements 2..4)
    /// let s = a.slab(32, 72).unwrap();
    /// assert_eq!(Layout::Array(s.layout().clone()).to_string(), "i64[5] cyclic on 2");
    /// assert_eq!(s.local_range(0)?, (16, 40));
    /// assert_eq!(s.local_range(1)?, (16, 32));
    /// assert!(a.slab(24, 72).is_none()); // element 3 does not start a period
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slab(&self, lo: u64, hi: u64) -> Option<Slab> {
        let (row, period) = self.slab_grain();
        if row == 0 || lo >= hi || hi > self.total || lo % row != 0 || hi % row != 0 {
            return None;
        }
        let (i0, i1) = (lo / row, hi / row);
        if i0 % period != 0 {
            return None;
        }
        Some(Slab {
            layout: self.rows(i1 - i0)?,
            before: if i0 == 0 { None } else { Some(self.rows(i0)?) },
        })
    }

    /// A stripe over this array's canonical byte stream as an array distribution of the
    /// same shape, where it is one: every stripe unit a whole number of indices of the
    /// slowest storage dimension (its blocks dealt cyclically over the stripe's units, the
    /// other dimensions whole), and the stripe's size this array's. A stripe unit then
    /// stores its rows in the same order and at the same offsets as the array's unit, so a
    /// plan between the two can intersect them dimension by dimension.
    ///
    /// ```
    /// use spools_map::{Layout, StripeLayout};
    /// let Layout::Array(a) = "i64[1024,2048] *,cyclic on 1x3".parse()? else { unreachable!() };
    /// let s = StripeLayout::new(8 << 20, 2, Some(16 << 20))?;
    /// let b = a.stripe_as_array(&s).unwrap();
    /// assert_eq!(Layout::Array(b).to_string(), "i64[1024,2048] cyclic(512),* on 2x1");
    /// // a unit of 1000 bytes is no whole number of rows (16 KiB)
    /// assert!(a.stripe_as_array(&StripeLayout::new(1000, 2, Some(16 << 20))?).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stripe_as_array(&self, s: &crate::stripe::StripeLayout) -> Option<ArrayLayout> {
        if s.size() != Some(self.total) {
            return None;
        }
        let (row, _) = self.slab_grain();
        if row == 0 || (s.count() > 1 && s.unit() % row != 0) {
            return None;
        }
        let s0 = self.storage_dims()[0];
        let mut dists = vec![Dist::Whole; self.shape.len()];
        let mut grid = vec![1; self.shape.len()];
        if s.count() > 1 {
            dists[s0] = Dist::Cyclic(s.unit() / row);
            grid[s0] = s.count();
        }
        ArrayLayout::new(self.dtype, self.shape.clone(), dists, grid, self.order).ok()
    }

    /// The same distribution of an array whose slowest storage dimension has `n` indices
    /// (the slowest dimension dealt in the same blocks, which only start a slab at a whole
    /// period).
    fn rows(&self, n: u64) -> Option<ArrayLayout> {
        let s0 = self.storage_dims()[0];
        let m = self.maps[s0];
        let mut shape = self.shape.clone();
        shape[s0] = n;
        let mut dists = self.dists.clone();
        dists[s0] = if m.p == 1 {
            Dist::Whole
        } else {
            Dist::Cyclic(m.b)
        };
        ArrayLayout::new(self.dtype, shape, dists, self.grid.clone(), self.order).ok()
    }
}

fn resolve(dim: usize, n: u64, dist: Dist, p: u64) -> Result<DimMap, LayoutError> {
    if n == 0 {
        return Err(LayoutError::ZeroExtent { dim });
    }
    if p == 0 {
        return Err(LayoutError::ZeroGrid { dim });
    }
    let b = match dist {
        Dist::Block(None) => n.div_ceil(p),
        Dist::Block(Some(b)) => {
            if b == 0 {
                return Err(LayoutError::ZeroBlock { dim });
            }
            let covered = b.saturating_mul(p);
            if covered < n {
                return Err(LayoutError::BlockTooSmall {
                    dim,
                    block: b,
                    procs: p,
                    covered,
                    extent: n,
                });
            }
            b
        }
        Dist::Cyclic(0) => return Err(LayoutError::ZeroBlock { dim }),
        Dist::Cyclic(b) => b,
        Dist::Whole => {
            if p != 1 {
                return Err(LayoutError::WholeOnGrid { dim, procs: p });
            }
            n
        }
    };
    // On one coordinate every block size means the same thing: the whole dimension.
    let b = if p == 1 { n } else { b.min(n) };
    Ok(DimMap { n, b, p })
}
