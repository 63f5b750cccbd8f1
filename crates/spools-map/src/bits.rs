//! The nCUBE class of mapping functions: permutations of the bits of a byte index.

use crate::error::LayoutError;

/// Widest dataset a bit-permutation layout describes: `2^MAX_BITS` bytes.
pub const MAX_BITS: u32 = 62;

/// A permutation of the bits of an `n`-bit word: output bit `j` is input bit `map[j]`
/// (bit 0 is the least significant).
///
/// Inversion reflects the permutation; composition traces each arc through both (the
/// nCUBE paper's Figure 16). The paper composes "from the left": its `f o g` applies `f`
/// first, which is `f.then(&g)` here.
///
/// ```
/// use spools_map::BitPerm;
/// let swap = BitPerm::new(vec![1, 0, 2])?; // exchange bits 0 and 1
/// assert_eq!(swap.apply(0b001), 0b010);
/// assert_eq!(swap.then(&swap.inverse())?, BitPerm::identity(3));
/// assert!(swap.then(&BitPerm::identity(4)).is_err());
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BitPerm {
    map: Vec<u32>,
}

impl BitPerm {
    /// A permutation from its map (output bit `j` takes input bit `map[j]`).
    ///
    /// # Errors
    /// [`LayoutError::BitsWidth`] for more than 64 bits, [`LayoutError::BadBit`] when `map`
    /// is not a permutation of `0..map.len()`.
    pub fn new(map: Vec<u32>) -> Result<Self, LayoutError> {
        let n = map.len() as u32;
        if map.len() > 64 {
            return Err(LayoutError::BitsWidth {
                n: n.into(),
                max: 64,
            });
        }
        let mut seen = vec![false; map.len()];
        for &b in &map {
            let slot = seen.get_mut(b as usize).ok_or(LayoutError::BadBit {
                bit: b,
                n,
                problem: "out of range",
            })?;
            if *slot {
                return Err(LayoutError::BadBit {
                    bit: b,
                    n,
                    problem: "listed twice",
                });
            }
            *slot = true;
        }
        Ok(BitPerm { map })
    }

    /// The identity on `n` bits (at most 64; wider requests give the 64-bit identity).
    pub fn identity(n: u32) -> Self {
        BitPerm {
            map: (0..n.min(64)).collect(),
        }
    }

    /// Width in bits.
    pub fn width(&self) -> u32 {
        self.map.len() as u32
    }

    /// Output bit `j` takes input bit `map()[j]`.
    pub fn map(&self) -> &[u32] {
        &self.map
    }

    /// Applies the permutation to a word.
    pub fn apply(&self, x: u64) -> u64 {
        self.map
            .iter()
            .enumerate()
            .fold(0, |acc, (j, &src)| acc | (((x >> src) & 1) << j))
    }

    /// The inverse permutation.
    pub fn inverse(&self) -> BitPerm {
        let mut map = vec![0; self.map.len()];
        for (j, &src) in self.map.iter().enumerate() {
            map[src as usize] = j as u32;
        }
        BitPerm { map }
    }

    /// `self` first, then `next` (the paper's `self o next`).
    ///
    /// # Errors
    /// [`LayoutError::WidthMismatch`] when the two permutations have different widths.
    pub fn then(&self, next: &BitPerm) -> Result<BitPerm, LayoutError> {
        if self.width() != next.width() {
            return Err(LayoutError::WidthMismatch {
                left: self.width(),
                right: next.width(),
            });
        }
        Ok(BitPerm {
            map: next.map.iter().map(|&m| self.map[m as usize]).collect(),
        })
    }

    /// Number of low bits the permutation leaves in place.
    pub fn fixed_low_bits(&self) -> u32 {
        self.map
            .iter()
            .enumerate()
            .take_while(|&(j, &m)| j as u32 == m)
            .count() as u32
    }
}

/// `bits(n=N,unit=[...])`: `2^N` bytes; the unit number is made of the listed index bits
/// (most significant first), the local index of the remaining bits, by default in their
/// original order, or in the order given by `local=[...]` (most significant first).
///
/// As a bit permutation, a layout maps a byte index to the word `unit << L | local`
/// (`L` = number of local bits): local units are laid end to end.
///
/// ```
/// use spools_map::BitsLayout;
/// // The nCUBE paper's row mapping: a 16x16 f32 matrix in Fortran order, index bits 0-1
/// // the byte, 2-5 the row, 6-9 the column; rows in four groups by the row's top two bits.
/// let rows = BitsLayout::new(10, vec![5, 4], None)?;
/// assert_eq!(rows.units(), 4);
/// // byte 3 of row 13, column 4: unit 3 (row 13 = 0b11_01); locally byte | row low bits | column,
/// // and 9 bytes to the end of the 16-byte run (four bytes of four rows stay together).
/// let g = 3 | 13 << 2 | 4 << 6;
/// assert_eq!(rows.locate(g), Some((3, 3 | 0b01 << 2 | 4 << 4, 9)));
/// # Ok::<(), spools_map::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BitsLayout {
    n: u32,
    unit_bits: Vec<u32>,
    local_bits: Vec<u32>,
    explicit_local: bool,
    perm: BitPerm,
    inv: BitPerm,
    run_bits: u32,
}

impl BitsLayout {
    /// Builds a layout of `2^n` bytes.
    ///
    /// # Errors
    /// [`LayoutError`] when `n` is 0 or above [`MAX_BITS`], a bit is out of range or listed
    /// twice, or `local` is not exactly the bits not in `unit`.
    pub fn new(n: u32, unit: Vec<u32>, local: Option<Vec<u32>>) -> Result<Self, LayoutError> {
        if n == 0 || n > MAX_BITS {
            return Err(LayoutError::BitsWidth {
                n: n.into(),
                max: MAX_BITS,
            });
        }
        for (i, &b) in unit.iter().enumerate() {
            let problem = if b >= n {
                "out of range"
            } else if unit[..i].contains(&b) {
                "listed twice"
            } else {
                continue;
            };
            return Err(LayoutError::BadBit { bit: b, n, problem });
        }
        if 1u64 << unit.len().min(63) > crate::limits::MAX_UNITS {
            return Err(LayoutError::TooManyUnits {
                units: 1u64 << unit.len().min(63),
                max: crate::limits::MAX_UNITS,
            });
        }
        let explicit_local = local.is_some();
        let local = match local {
            Some(l) => l,
            None => (0..n).rev().filter(|b| !unit.contains(b)).collect(),
        };
        if unit.len() + local.len() != n as usize {
            return Err(LayoutError::LocalBits {
                expected: n - (unit.len() as u32).min(n),
                got: local.len() as u32,
            });
        }
        let map: Vec<u32> = local
            .iter()
            .rev()
            .chain(unit.iter().rev())
            .copied()
            .collect();
        let perm = BitPerm::new(map)?;
        let lb = local.len() as u32;
        let run_bits = perm.fixed_low_bits().min(lb);
        Ok(BitsLayout {
            n,
            inv: perm.inverse(),
            unit_bits: unit,
            local_bits: local,
            explicit_local,
            perm,
            run_bits,
        })
    }

    /// Index bits: the dataset has `2^n` bytes.
    pub fn n(&self) -> u32 {
        self.n
    }
    /// Bits forming the unit number, most significant first.
    pub fn unit_bits(&self) -> &[u32] {
        &self.unit_bits
    }
    /// Bits forming the local index, most significant first.
    pub fn local_bits(&self) -> &[u32] {
        &self.local_bits
    }
    /// Whether `local=[...]` was given (printing keeps it).
    pub fn explicit_local(&self) -> bool {
        self.explicit_local
    }
    /// The mapping as a permutation from byte index to `unit << L | local`.
    pub fn perm(&self) -> &BitPerm {
        &self.perm
    }
    /// Number of units, `2^(unit bits)`.
    pub fn units(&self) -> u64 {
        1 << self.unit_bits.len()
    }
    /// Dataset size in bytes.
    pub fn total_bytes(&self) -> u64 {
        1 << self.n
    }
    /// Bytes per unit.
    pub fn local_bytes(&self) -> u64 {
        1 << self.local_bits.len()
    }

    /// The composite `self^-1 o dst`: from this layout's `unit << L | local` word to the
    /// destination's; `None` when the widths differ.
    pub fn composite(&self, dst: &BitsLayout) -> Option<BitPerm> {
        self.inv.then(&dst.perm).ok()
    }

    /// `(unit, local, contiguous bytes)` of byte `g`, or `None` past the end.
    pub fn locate(&self, g: u64) -> Option<(u64, u64, u64)> {
        if g >= self.total_bytes() {
            return None;
        }
        let w = self.perm.apply(g);
        let lb = self.local_bits.len();
        let run = 1u64 << self.run_bits;
        Some((w >> lb, w & ((1u64 << lb) - 1), run - (g & (run - 1))))
    }

    /// The `i`-th extent of `unit` as `(global, local, len)`, in local order.
    pub(crate) fn extent_at(&self, unit: u64, i: u64) -> Option<(u64, u64, u64)> {
        if i >= self.local_bytes() >> self.run_bits {
            return None;
        }
        let l = i << self.run_bits;
        let lb = self.local_bits.len();
        Some((self.inv.apply(unit << lb | l), l, 1 << self.run_bits))
    }
}
