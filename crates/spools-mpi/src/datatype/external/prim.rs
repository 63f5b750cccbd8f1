//! One primitive of the `external32` representation: its native and external sizes,
//! and the conversions between them (big-endian; `long` narrowed to 4 bytes, `wchar_t`
//! to 2; x86-64's 80-bit `long double` as IEEE binary128).

use crate::abi::*;
use crate::env::error::MpiError;

/// How one primitive converts between its native and its external32 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prim {
    /// One byte, as it is.
    Byte,
    /// `n` bytes, byte order reversed.
    Swap(u8),
    /// A native 8-byte integer in 4 external bytes (`long`), signed or not.
    Narrow8 { signed: bool },
    /// A native 4-byte `wchar_t` in 2 external bytes.
    Wchar,
    /// x86-64's 80-bit `long double` (in 16 bytes) as binary128.
    Quad,
}

impl Prim {
    /// Native bytes.
    pub(crate) fn native(self) -> usize {
        match self {
            Prim::Byte => 1,
            Prim::Swap(n) => usize::from(n),
            Prim::Narrow8 { .. } => 8,
            Prim::Wchar => 4,
            Prim::Quad => 16,
        }
    }

    /// External32 bytes.
    pub(crate) fn external(self) -> usize {
        match self {
            Prim::Byte => 1,
            Prim::Swap(n) => usize::from(n),
            Prim::Narrow8 { .. } => 4,
            Prim::Wchar => 2,
            Prim::Quad => 16,
        }
    }

    /// Writes the external form of the native bytes `src` into `dst`.
    ///
    /// # Errors
    /// `MPI_ERR_CONVERSION` for a value the external form cannot hold.
    pub(crate) fn to_external(self, src: &[u8], dst: &mut [u8]) -> Result<(), MpiError> {
        match self {
            Prim::Byte => dst[0] = src[0],
            Prim::Swap(_) => {
                for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = *s;
                }
            }
            Prim::Narrow8 { signed } => {
                let v = i64::from_ne_bytes(src[..8].try_into().unwrap_or([0; 8]));
                let fits = if signed {
                    i32::try_from(v).is_ok()
                } else {
                    u32::try_from(v as u64).is_ok()
                };
                if !fits {
                    return Err(MpiError::invalid(
                        MPI_ERR_CONVERSION,
                        format!("external32: {v} does not fit a 4-byte long"),
                    ));
                }
                dst.copy_from_slice(&(v as u32).to_be_bytes());
            }
            Prim::Wchar => {
                let v = u32::from_ne_bytes(src[..4].try_into().unwrap_or([0; 4]));
                let w = u16::try_from(v).map_err(|_| {
                    MpiError::invalid(
                        MPI_ERR_CONVERSION,
                        format!("external32: wide character {v:#x} does not fit 2 bytes"),
                    )
                })?;
                dst.copy_from_slice(&w.to_be_bytes());
            }
            Prim::Quad => {
                let m = u64::from_le_bytes(src[..8].try_into().unwrap_or([0; 8]));
                let se = u16::from_le_bytes([src[8], src[9]]);
                dst.copy_from_slice(&x87_to_quad(m, se).to_be_bytes());
            }
        }
        Ok(())
    }

    /// Writes the native form of the external bytes `src` into `dst`.
    pub(crate) fn to_native(self, src: &[u8], dst: &mut [u8]) {
        match self {
            Prim::Byte => dst[0] = src[0],
            Prim::Swap(_) => {
                for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = *s;
                }
            }
            Prim::Narrow8 { signed } => {
                let v = u32::from_be_bytes(src[..4].try_into().unwrap_or([0; 4]));
                let wide = if signed {
                    i64::from(v as i32)
                } else {
                    i64::from(v)
                };
                dst.copy_from_slice(&wide.to_ne_bytes());
            }
            Prim::Wchar => {
                let v = u16::from_be_bytes([src[0], src[1]]);
                dst.copy_from_slice(&u32::from(v).to_ne_bytes());
            }
            Prim::Quad => {
                let q = u128::from_be_bytes(src[..16].try_into().unwrap_or([0; 16]));
                let (m, se) = quad_to_x87(q);
                dst[..8].copy_from_slice(&m.to_le_bytes());
                dst[8..10].copy_from_slice(&se.to_le_bytes());
                dst[10..16].fill(0);
            }
        }
    }
}

/// An 80-bit extended value (mantissa with its explicit integer bit, sign and exponent)
/// as binary128: the same sign and biased exponent, the 63 fraction bits at the top of
/// the 112.
fn x87_to_quad(m: u64, se: u16) -> u128 {
    let frac = u128::from(m & !(1 << 63)) << 49;
    (u128::from(se) << 112) | frac
}

/// The inverse of [`x87_to_quad`] (the fraction's low 49 bits dropped; a NaN stays
/// one).
fn quad_to_x87(q: u128) -> (u64, u16) {
    let se = (q >> 112) as u16;
    let frac = q & ((1u128 << 112) - 1);
    let exp = se & 0x7fff;
    let mut m = (frac >> 49) as u64;
    if exp != 0 {
        m |= 1 << 63;
    }
    if exp == 0x7fff && frac != 0 && m & !(1 << 63) == 0 {
        m |= 1;
    }
    (m, se)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_double_one_and_minus_two_and_infinity_become_binary128() {
        // 1.0: integer bit set, biased exponent 16383.
        assert_eq!(x87_to_quad(1 << 63, 0x3fff), 0x3fff_u128 << 112);
        // -2.0.
        assert_eq!(x87_to_quad(1 << 63, 0xc000), 0xc000_u128 << 112);
        // 1.5: the first fraction bit.
        assert_eq!(
            x87_to_quad(3 << 62, 0x3fff),
            (0x3fff_u128 << 112) | (1u128 << 111)
        );
        // Infinity keeps a zero fraction.
        assert_eq!(x87_to_quad(1 << 63, 0x7fff), 0x7fff_u128 << 112);
        for (m, se) in [
            (1u64 << 63, 0x3fffu16),
            (3 << 62, 0xbffe),
            (0x1234, 0),
            (1 << 63, 0x7fff),
        ] {
            assert_eq!(quad_to_x87(x87_to_quad(m, se)), (m, se), "{m:#x} {se:#x}");
        }
        // A NaN whose fraction lies only in the bits x87 cannot hold stays a NaN.
        let (m, se) = quad_to_x87((0x7fff_u128 << 112) | 1);
        assert!(se == 0x7fff && m & !(1 << 63) != 0);
    }

    #[test]
    fn longs_narrow_to_four_bytes_and_refuse_what_does_not_fit() {
        let p = Prim::Narrow8 { signed: true };
        let mut ext = [0u8; 4];
        p.to_external(&(-5i64).to_ne_bytes(), &mut ext).unwrap();
        assert_eq!(ext, (-5i32).to_be_bytes());
        let mut back = [0u8; 8];
        p.to_native(&ext, &mut back);
        assert_eq!(i64::from_ne_bytes(back), -5);
        let e = p
            .to_external(&(1i64 << 40).to_ne_bytes(), &mut ext)
            .unwrap_err();
        assert_eq!(e.class(), MPI_ERR_CONVERSION);
        let u = Prim::Narrow8 { signed: false };
        u.to_external(&0xffff_ffffu64.to_ne_bytes(), &mut ext)
            .unwrap();
        u.to_native(&ext, &mut back);
        assert_eq!(u64::from_ne_bytes(back), 0xffff_ffff);
    }
}
