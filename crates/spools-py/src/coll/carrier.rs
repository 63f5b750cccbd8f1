//! The Rust element type that carries an array's elements through a collective: the
//! dtype's own for the reductions of numeric dtypes, an unsigned integer of the item's
//! size (or a divisor of it) for the collectives that only move bytes.

use pyo3::prelude::*;
use spools::Element;

use crate::errors;

/// A Rust element type of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carrier {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl Carrier {
    /// The widest unsigned carrier whose size divides `itemsize` (for moving bytes: the
    /// elements of a new array are then aligned for their dtype).
    pub(crate) fn for_bytes(itemsize: usize) -> Carrier {
        match itemsize {
            s if s % 8 == 0 && s > 0 => Carrier::U64,
            s if s % 4 == 0 && s > 0 => Carrier::U32,
            s if s % 2 == 0 && s > 0 => Carrier::U16,
            _ => Carrier::U8,
        }
    }

    /// The unsigned carrier of exactly `itemsize` bytes, if there is one.
    pub(crate) fn exact(itemsize: usize) -> Option<Carrier> {
        match itemsize {
            1 => Some(Carrier::U8),
            2 => Some(Carrier::U16),
            4 => Some(Carrier::U32),
            8 => Some(Carrier::U64),
            _ => None,
        }
    }
}

/// Runs `$body` with `$T` the Rust type of a [`Carrier`].
macro_rules! with_carrier {
    ($carrier:expr, $T:ident => $body:expr) => {
        match $carrier {
            $crate::coll::carrier::Carrier::U8 => {
                type $T = u8;
                $body
            }
            $crate::coll::carrier::Carrier::I8 => {
                type $T = i8;
                $body
            }
            $crate::coll::carrier::Carrier::U16 => {
                type $T = u16;
                $body
            }
            $crate::coll::carrier::Carrier::I16 => {
                type $T = i16;
                $body
            }
            $crate::coll::carrier::Carrier::U32 => {
                type $T = u32;
                $body
            }
            $crate::coll::carrier::Carrier::I32 => {
                type $T = i32;
                $body
            }
            $crate::coll::carrier::Carrier::U64 => {
                type $T = u64;
                $body
            }
            $crate::coll::carrier::Carrier::I64 => {
                type $T = i64;
                $body
            }
            $crate::coll::carrier::Carrier::F32 => {
                type $T = f32;
                $body
            }
            $crate::coll::carrier::Carrier::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use with_carrier;

/// Checks that `bytes` may be seen as elements of `T`.
fn check<T>(ptr: *const u8, len: usize, what: &str) -> PyResult<()> {
    let size = std::mem::size_of::<T>();
    if len == 0 {
        return Ok(());
    }
    if len % size != 0 || (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(errors::type_error(format!(
            "{what}: its memory ({len} bytes at address {ptr:p}) is not aligned for {}-byte \
             elements (use numpy.ascontiguousarray or a freshly allocated array)",
            size
        )));
    }
    Ok(())
}

/// `bytes` as elements of `T`.
///
/// # Errors
/// `TypeError` when the length or the alignment does not fit `T`.
pub(crate) fn cast<'a, T: Element>(bytes: &'a [u8], what: &str) -> PyResult<&'a [T]> {
    check::<T>(bytes.as_ptr(), bytes.len(), what)?;
    if bytes.is_empty() {
        return Ok(&[]);
    }
    // SAFETY: length a multiple of T's size and pointer aligned (checked); every bit
    // pattern is a valid T (Element: plain numeric types); the borrow is `bytes`'.
    Ok(unsafe {
        std::slice::from_raw_parts(
            bytes.as_ptr().cast::<T>(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    })
}

/// `bytes` as elements of `T`, to be written.
///
/// # Errors
/// As [`cast`].
pub(crate) fn cast_mut<'a, T: Element>(bytes: &'a mut [u8], what: &str) -> PyResult<&'a mut [T]> {
    check::<T>(bytes.as_ptr(), bytes.len(), what)?;
    if bytes.is_empty() {
        return Ok(&mut []);
    }
    // SAFETY: as in `cast`; the exclusive borrow of `bytes` moves to the result.
    Ok(unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr().cast::<T>(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    })
}

/// `bytes` copied into a new vector of `T` (its length a multiple of T's size).
pub(crate) fn to_vec<T: Element>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::default(); bytes.len() / std::mem::size_of::<T>()];
    let n = std::mem::size_of_val(v.as_slice());
    spools::as_bytes_mut(&mut v).copy_from_slice(&bytes[..n]);
    v
}
