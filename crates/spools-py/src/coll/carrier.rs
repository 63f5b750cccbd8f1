//! The Rust element type that carries an array's elements through a collective
//! ([`Carrier`], the facade's, in `spools_map::DType`'s vocabulary): the dtype's own for the
//! reductions of numeric dtypes, an unsigned integer of the item's size (or a divisor of it)
//! for the collectives that only move bytes; and the casts of bytes to those elements.

use pyo3::prelude::*;
use spools::Element;

use crate::errors;

pub(crate) use spools::{with_carrier, Carrier};

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
