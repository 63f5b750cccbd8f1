//! The element types a Rust buffer carries through the runtime, in the one vocabulary of
//! element types (`spools_map::DType`): [`Carrier`] is the part of it that a Rust
//! [`Element`](crate::Element) type stands for (`u8` to `f64`), and
//! [`with_carrier!`](crate::with_carrier) runs code with that Rust type. The Python and C
//! interfaces map their own spellings (numpy's dtypes, `spools_dtype_t`) to a `DType`
//! and go through these, so no interface keeps a list of its own.

use spools_map::DType;

/// A [`DType`] that a Rust [`Element`](crate::Element) type carries: `u8`, `i8`, `u16`,
/// `i16`, `u32`, `i32`, `u64`, `i64`, `f32` or `f64`.
///
/// ```
/// use spools::{Carrier, DType};
/// assert_eq!(Carrier::of(DType::F64).map(Carrier::dtype), Some(DType::F64));
/// assert_eq!(Carrier::of(DType::C64), None);
/// assert_eq!(Carrier::unsigned(4).map(Carrier::dtype), Some(DType::U32));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Carrier(DType);

impl Carrier {
    /// The carrier of `d`, if a Rust element type stands for it.
    pub fn of(d: DType) -> Option<Carrier> {
        match d {
            DType::U8
            | DType::I8
            | DType::U16
            | DType::I16
            | DType::U32
            | DType::I32
            | DType::U64
            | DType::I64
            | DType::F32
            | DType::F64 => Some(Carrier(d)),
            DType::C64 | DType::C128 | DType::Bytes(_) => None,
        }
    }

    /// The unsigned carrier of exactly `bytes` bytes (1, 2, 4 or 8).
    pub fn unsigned(bytes: usize) -> Option<Carrier> {
        match bytes {
            1 => Some(Carrier(DType::U8)),
            2 => Some(Carrier(DType::U16)),
            4 => Some(Carrier(DType::U32)),
            8 => Some(Carrier(DType::U64)),
            _ => None,
        }
    }

    /// The widest unsigned carrier whose size divides `itemsize` (for moving items as
    /// bytes, aligned for their own type).
    pub fn for_bytes(itemsize: usize) -> Carrier {
        let d = match itemsize {
            s if s % 8 == 0 && s > 0 => DType::U64,
            s if s % 4 == 0 && s > 0 => DType::U32,
            s if s % 2 == 0 && s > 0 => DType::U16,
            _ => DType::U8,
        };
        Carrier(d)
    }

    /// Its element type.
    pub fn dtype(self) -> DType {
        self.0
    }
}

/// Runs `$body` with `$T` the Rust element type of a [`Carrier`].
///
/// ```
/// use spools::{with_carrier, Carrier, DType};
/// let c = Carrier::of(DType::I16).expect("a carrier");
/// let size = with_carrier!(c, T => std::mem::size_of::<T>());
/// assert_eq!(size, 2);
/// ```
#[macro_export]
macro_rules! with_carrier {
    ($carrier:expr, $T:ident => $body:expr) => {
        match $crate::Carrier::dtype($carrier) {
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            // F64, the only other dtype a `Carrier` holds.
            _ => {
                type $T = f64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Element;

    /// Every carrier's Rust type is the element type of the same name, and of the size
    /// the dtype says: the facade's table and `spools_msg::Element` agree.
    #[test]
    fn each_carrier_is_the_rust_element_of_its_dtype() {
        let all = [
            DType::U8,
            DType::I8,
            DType::U16,
            DType::I16,
            DType::U32,
            DType::I32,
            DType::U64,
            DType::I64,
            DType::F32,
            DType::F64,
        ];
        for d in all {
            let c = Carrier::of(d).expect("a carrier");
            let (name, size) =
                with_carrier!(c, T => (<T as Element>::NAME, std::mem::size_of::<T>()));
            assert_eq!(name, d.to_string());
            assert_eq!(size as u64, d.size());
        }
        for d in [DType::C64, DType::C128, DType::Bytes(3)] {
            assert_eq!(Carrier::of(d), None);
        }
        for (n, d) in [
            (1, DType::U8),
            (2, DType::U16),
            (4, DType::U32),
            (8, DType::U64),
        ] {
            assert_eq!(Carrier::unsigned(n).map(Carrier::dtype), Some(d));
            assert_eq!(Carrier::for_bytes(n * 3).dtype(), d);
        }
        assert_eq!(Carrier::unsigned(3), None);
    }
}
