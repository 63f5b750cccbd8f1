//! Byte-stream layouts: RAID-0 striping and RAID-5 with rotating parity.

use crate::error::LayoutError;

/// RAID-0: logical block `i` (of `unit` bytes) on unit `i mod count`, at local offset
/// `(i div count) * unit`.
///
/// The dataset size may be left open (`size = None`); a plan binds it to the other side's.
///
/// ```
/// use spools_map::StripeLayout;
/// let s = StripeLayout::new(64 << 10, 4, Some(1 << 20))?;
/// assert_eq!(s.locate(200 << 10), Some((3, 8 << 10, 56 << 10)));
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StripeLayout {
    unit: u64,
    count: u64,
    size: Option<u64>,
}

/// RAID-5 over `count` units, Linux md "left-symmetric" (the md default).
///
/// The stream is cut into blocks of `unit` bytes; row `r` holds data blocks
/// `r*(count-1) .. (r+1)*(count-1)` and one parity block. With `K = count`:
/// * parity of row `r` is on unit `pd(r) = K - 1 - (r mod K)`;
/// * the `i`-th data block of row `r` (`0 <= i < K-1`) is on unit `(pd(r) + 1 + i) mod K`;
/// * every block of row `r` (data or parity) sits at local offset `r * unit` of its unit.
///
/// Parity covers the longest data block of its row (only the last row can be short).
///
/// ```
/// use spools_map::Raid5Layout;
/// let r = Raid5Layout::new(4096, 4, Some(6 * 4096))?;
/// assert_eq!(r.parity(0), Some((3, 0, 4096)));
/// assert_eq!(r.parity(1), Some((2, 4096, 4096)));
/// // data block 3 is the first of row 1, on the unit after the parity: unit 3
/// assert_eq!(r.locate(3 * 4096), Some((3, 4096, 4096)));
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Raid5Layout {
    unit: u64,
    count: u64,
    size: Option<u64>,
}

fn check(
    kind: &'static str,
    unit: u64,
    count: u64,
    min: u64,
    size: Option<u64>,
) -> Result<(), LayoutError> {
    if unit == 0 {
        return Err(LayoutError::ZeroStripeUnit);
    }
    if count < min {
        return Err(LayoutError::TooFewUnits { kind, min, count });
    }
    if count > crate::limits::MAX_UNITS {
        return Err(LayoutError::TooManyUnits {
            units: count,
            max: crate::limits::MAX_UNITS,
        });
    }
    if size == Some(0) {
        return Err(LayoutError::EmptyDataset);
    }
    if size.is_some_and(|s| s > crate::limits::MAX_BYTES) {
        return Err(LayoutError::Overflow {
            what: "the dataset size in bytes (at most 2^62)",
        });
    }
    if unit > crate::limits::MAX_BYTES {
        return Err(LayoutError::Overflow {
            what: "the stripe unit in bytes (at most 2^62)",
        });
    }
    Ok(())
}

impl StripeLayout {
    /// A stripe layout of `count` units with blocks of `unit` bytes.
    ///
    /// # Errors
    /// [`LayoutError`] when `unit` or `count` is 0, or `size` is `Some(0)`.
    pub fn new(unit: u64, count: u64, size: Option<u64>) -> Result<Self, LayoutError> {
        check("stripe", unit, count, 1, size)?;
        Ok(StripeLayout { unit, count, size })
    }
    /// Bytes per block.
    pub fn unit(&self) -> u64 {
        self.unit
    }
    /// Number of units.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Dataset size, if bound.
    pub fn size(&self) -> Option<u64> {
        self.size
    }
    pub(crate) fn with_size(&self, size: u64) -> Result<Self, LayoutError> {
        Self::new(self.unit, self.count, Some(size))
    }

    /// `(unit, local offset, contiguous bytes)` of global byte `g`, or `None` past the end.
    pub fn locate(&self, g: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        if g >= size {
            return None;
        }
        let b = g / self.unit;
        let within = g % self.unit;
        let len = (self.unit - within).min(size - g);
        if self.count == 1 {
            return Some((0, g, size - g));
        }
        Some((b % self.count, (b / self.count) * self.unit + within, len))
    }

    /// The `i`-th data extent of unit `u` as `(global, local, len)`.
    pub(crate) fn extent_at(&self, u: u64, i: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        if self.count == 1 {
            // One unit holds the whole stream contiguously.
            return (i == 0).then_some((0, 0, size));
        }
        let g = i
            .checked_mul(self.count)?
            .checked_add(u)?
            .checked_mul(self.unit)?;
        (g < size).then(|| (g, i * self.unit, self.unit.min(size - g)))
    }

    /// The first block (or rest of a block) of unit `u` at or after global byte `g`, as
    /// `(global, local, len)`.
    pub(crate) fn next_block_of(&self, u: u64, g: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        if g >= size {
            return None;
        }
        if self.count == 1 {
            return Some((g, g, size - g));
        }
        let b0 = g / self.unit;
        let b = b0 + (u + self.count - b0 % self.count) % self.count;
        let start = b.checked_mul(self.unit)?.max(g);
        (start < size).then(|| {
            let end = ((b + 1) * self.unit).min(size);
            (
                start,
                (b / self.count) * self.unit + start % self.unit,
                end - start,
            )
        })
    }

    /// Bytes stored on unit `u`.
    pub(crate) fn local_bytes(&self, u: u64) -> u64 {
        let size = self.size.unwrap_or(0);
        let blocks = size.div_ceil(self.unit);
        if u >= blocks {
            return 0;
        }
        let mine = (blocks - 1 - u) / self.count + 1;
        let short = if (blocks - 1) % self.count == u {
            blocks * self.unit - size
        } else {
            0
        };
        mine * self.unit - short
    }
}

impl Raid5Layout {
    /// A RAID-5 layout of `count >= 2` units with blocks of `unit` bytes.
    ///
    /// # Errors
    /// [`LayoutError`] when `unit` is 0, `count < 2`, or `size` is `Some(0)`.
    pub fn new(unit: u64, count: u64, size: Option<u64>) -> Result<Self, LayoutError> {
        check("raid5", unit, count, 2, size)?;
        Ok(Raid5Layout { unit, count, size })
    }
    /// Bytes per block.
    pub fn unit(&self) -> u64 {
        self.unit
    }
    /// Number of units (data plus parity).
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Dataset size, if bound.
    pub fn size(&self) -> Option<u64> {
        self.size
    }
    pub(crate) fn with_size(&self, size: u64) -> Result<Self, LayoutError> {
        Self::new(self.unit, self.count, Some(size))
    }

    /// Unit holding the parity of row `r`.
    pub fn parity_unit(&self, r: u64) -> u64 {
        self.count - 1 - r % self.count
    }

    /// Number of stripe rows (0 while the size is unbound).
    pub fn rows(&self) -> u64 {
        let blocks = self.size.unwrap_or(0).div_ceil(self.unit);
        blocks.div_ceil(self.count - 1)
    }

    /// `(unit, local offset, len)` of row `r`'s parity block, or `None` past the last row.
    pub fn parity(&self, r: u64) -> Option<(u64, u64, u64)> {
        if r >= self.rows() {
            return None;
        }
        let size = self.size?;
        let len = self.unit.min(size - r * (self.count - 1) * self.unit);
        Some((self.parity_unit(r), r * self.unit, len))
    }

    /// `(unit, local offset, contiguous bytes)` of global data byte `g`.
    pub fn locate(&self, g: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        if g >= size {
            return None;
        }
        let b = g / self.unit;
        let within = g % self.unit;
        let (r, i) = (b / (self.count - 1), b % (self.count - 1));
        let u = (self.parity_unit(r) + 1 + i) % self.count;
        Some((
            u,
            r * self.unit + within,
            (self.unit - within).min(size - g),
        ))
    }

    /// The `i`-th data extent of unit `u` as `(global, local, len)`: unit `u` holds a data
    /// block in `K - 1` of every `K` rows, the other holding parity.
    pub(crate) fn extent_at(&self, u: u64, i: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        let k = self.count;
        let j = i % (k - 1);
        let skip = k - 1 - u;
        let r = (i / (k - 1)).checked_mul(k)? + if j < skip { j } else { j + 1 };
        let idx = (u + k - self.parity_unit(r) - 1) % k;
        let g = r
            .checked_mul(k - 1)?
            .checked_add(idx)?
            .checked_mul(self.unit)?;
        (g < size).then(|| (g, r * self.unit, self.unit.min(size - g)))
    }

    /// The first data block (or rest of one) of unit `u` at or after global byte `g`, as
    /// `(global, local, len)`: the unit holds one data block in each row where it does not
    /// hold the parity, so at most two rows are looked at.
    pub(crate) fn next_block_of(&self, u: u64, g: u64) -> Option<(u64, u64, u64)> {
        let size = self.size?;
        let k = self.count;
        let mut r = (g / self.unit) / (k - 1);
        loop {
            let pd = self.parity_unit(r);
            if pd != u {
                let i = (u + k - pd - 1) % k;
                let b = r.checked_mul(k - 1)?.checked_add(i)?;
                let block_start = b.checked_mul(self.unit)?;
                if block_start >= size {
                    return None;
                }
                let end = (block_start + self.unit).min(size);
                if end > g {
                    let start = block_start.max(g);
                    return Some((start, r * self.unit + (start - block_start), end - start));
                }
            }
            r += 1;
        }
    }

    /// Bytes of unit `u`'s storage: every unit has a block in every row but perhaps the
    /// last, where its block may be short or missing.
    pub(crate) fn local_bytes(&self, u: u64) -> u64 {
        let rows = self.rows();
        if rows == 0 {
            return 0;
        }
        let last = rows - 1;
        let last_len = if self.parity_unit(last) == u {
            self.parity(last).map_or(0, |p| p.2)
        } else {
            let pd = self.parity_unit(last);
            let idx = (u + self.count - pd - 1) % self.count;
            let size = self.size.unwrap_or(0);
            // The block may lie past the end of the data (then it is missing), so its
            // offset is computed with checked arithmetic.
            match (last * (self.count - 1) + idx).checked_mul(self.unit) {
                Some(g) if g < size => self.unit.min(size - g),
                _ => 0,
            }
        };
        last * self.unit + last_len
    }
}
