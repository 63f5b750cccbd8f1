//! Irregular layouts: explicit extents per unit (data-dependent distributions).

use crate::error::LayoutError;

/// Each unit owns an explicit, sorted list of global extents `(start, len)` in elements and
/// stores them back to back in that order. Together the extents must cover the dataset
/// exactly once.
///
/// ```
/// use spools_map::IrregularLayout;
/// // 10 records of 16 bytes: unit 0 has 0..3 and 7..10, unit 1 has 3..7.
/// let l = IrregularLayout::new(16, 10, vec![vec![(0, 3), (7, 3)], vec![(3, 4)]])?;
/// assert_eq!(l.locate(7 * 16), Some((0, 3 * 16, 3 * 16)));
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IrregularLayout {
    elem_size: u64,
    total: u64,
    /// Per unit: `(global, local, len)` in bytes, in local order.
    units: Vec<Vec<(u64, u64, u64)>>,
    /// All extents sorted by global offset: `(global, unit, local, len)` in bytes.
    by_global: Vec<(u64, u64, u64, u64)>,
}

impl IrregularLayout {
    /// Builds an irregular layout of `elems` elements of `elem_size` bytes.
    ///
    /// # Errors
    /// [`LayoutError::Irregular`] when a unit's extents are unsorted or empty, extents
    /// overlap, or leave a gap; [`LayoutError::ZeroElement`], [`LayoutError::EmptyDataset`]
    /// and [`LayoutError::Overflow`] for bad sizes.
    pub fn new(
        elem_size: u64,
        elems: u64,
        units: Vec<Vec<(u64, u64)>>,
    ) -> Result<Self, LayoutError> {
        if elem_size == 0 {
            return Err(LayoutError::ZeroElement);
        }
        if elems == 0 {
            return Err(LayoutError::EmptyDataset);
        }
        if units.is_empty() {
            return Err(LayoutError::TooFewUnits {
                kind: "an irregular layout",
                min: 1,
                count: 0,
            });
        }
        if units.len() as u64 > crate::limits::MAX_UNITS {
            return Err(LayoutError::TooManyUnits {
                units: units.len() as u64,
                max: crate::limits::MAX_UNITS,
            });
        }
        let total = elems
            .checked_mul(elem_size)
            .filter(|&t| t <= crate::limits::MAX_BYTES)
            .ok_or(LayoutError::Overflow {
                what: "the dataset size in bytes (at most 2^62)",
            })?;
        let bad = |problem, at| LayoutError::Irregular { problem, at };
        let mut per_unit = Vec::with_capacity(units.len());
        let mut by_global = Vec::new();
        for (u, list) in units.iter().enumerate() {
            let mut local = 0u64;
            let mut prev_end = 0u64;
            let mut out = Vec::with_capacity(list.len());
            for (i, &(start, len)) in list.iter().enumerate() {
                if len == 0 {
                    return Err(bad("an extent of length 0", start));
                }
                if i > 0 && start < prev_end {
                    return Err(bad("a unit's extents are not sorted or overlap", start));
                }
                let end = start
                    .checked_add(len)
                    .filter(|&e| e <= elems)
                    .ok_or_else(|| bad("an extent past the end of the dataset", start))?;
                prev_end = end;
                out.push((start * elem_size, local, len * elem_size));
                by_global.push((start * elem_size, u as u64, local, len * elem_size));
                local += len * elem_size;
            }
            per_unit.push(out);
        }
        by_global.sort_unstable();
        let mut next = 0u64;
        for &(g, _, _, len) in &by_global {
            if g > next {
                return Err(bad("no unit owns this element", next / elem_size));
            }
            if g < next {
                return Err(bad("two extents overlap", g / elem_size));
            }
            next = g + len;
        }
        if next != total {
            return Err(bad("no unit owns this element", next / elem_size));
        }
        Ok(IrregularLayout {
            elem_size,
            total,
            units: per_unit,
            by_global,
        })
    }

    /// Element size in bytes.
    pub fn elem_size(&self) -> u64 {
        self.elem_size
    }
    /// Number of units.
    pub fn units(&self) -> u64 {
        self.units.len() as u64
    }
    /// Dataset size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// `(unit, local, contiguous bytes)` of global byte `g`, or `None` past the end.
    pub fn locate(&self, g: u64) -> Option<(u64, u64, u64)> {
        let i = self
            .by_global
            .partition_point(|e| e.0 <= g)
            .checked_sub(1)?;
        let (start, unit, local, len) = self.by_global[i];
        (g < start + len).then(|| (unit, local + (g - start), start + len - g))
    }

    /// Extents of `unit` as `(global, local, len)` in bytes, in local order.
    pub(crate) fn extents(&self, unit: u64) -> &[(u64, u64, u64)] {
        self.units.get(unit as usize).map_or(&[], |v| v.as_slice())
    }

    /// Bytes stored on `unit`.
    pub(crate) fn local_bytes(&self, unit: u64) -> u64 {
        self.extents(unit).iter().map(|e| e.2).sum()
    }
}
