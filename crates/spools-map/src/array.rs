//! N-d array distributions (`MPI_Type_create_darray` semantics).

use std::sync::Arc;

use crate::dist::{DimMap, Dist};
use crate::dtype::DType;
use crate::error::LayoutError;
use crate::intersect::DimIntersection;
use crate::product::{Merge, Product};

/// Most units one layout may have.
pub const MAX_UNITS: u64 = 1 << 31;

/// Largest dataset a layout may describe, in bytes (4 EiB), so that no offset arithmetic
/// can overflow.
pub const MAX_BYTES: u64 = 1 << 62;

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
        let order = self.storage_dims();
        let mut idx = vec![0; self.shape.len()];
        let mut rest = g / e;
        for &k in order.iter().rev() {
            idx[k] = rest % self.shape[k];
            rest /= self.shape[k];
        }
        let (mut unit, mut local_off) = (0u64, 0u64);
        let mut lstride = vec![0; self.shape.len()];
        let mut acc = e;
        for &k in order.iter().rev() {
            let m = &self.maps[k];
            let c = m.owner(idx[k]);
            lstride[k] = acc;
            acc *= m.count(c);
            local_off += m.local(idx[k]) * lstride[k];
        }
        for (k, m) in self.maps.iter().enumerate() {
            unit = unit * self.grid[k] + m.owner(idx[k]);
        }
        // Run along the fastest dimension to the end of its block, then on through
        // dimensions this unit owns entirely.
        let fastest = order[order.len() - 1];
        let mut len = self.maps[fastest].rest_of_block(idx[fastest]);
        let mut span = self.shape[fastest];
        for w in order.windows(2).rev() {
            let (outer, inner) = (w[0], w[1]);
            if !self.maps[inner].is_whole() {
                break;
            }
            len += (self.maps[outer].rest_of_block(idx[outer]) - 1) * span;
            span *= self.shape[outer];
        }
        Some((unit, local_off + g % e, len * e - g % e))
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
