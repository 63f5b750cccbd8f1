//! Checked views of the pointers and lengths C passes: a NULL pointer, a length that no
//! object can have, or a string that is not UTF-8 is `SPOOLS_ERR_INVALID_ARG` naming the
//! argument, never a crash.

use std::ffi::{c_char, c_void, CStr};

use crate::status::Failure;

/// The tag every live handle starts with; a destroyed handle's is overwritten, so that a
/// handle used after it was destroyed (while its memory is not yet reused) is caught.
pub(crate) trait Handle {
    /// This handle kind's tag.
    const MAGIC: u64;
    /// The kind's name, for messages ("spools_comm_t").
    const NAME: &'static str;
    /// The handle's current tag.
    fn magic(&self) -> u64;
}

/// A live handle behind `p`.
///
/// # Safety
/// `p` is NULL or was given out by this library as a handle of type `T` (live or
/// destroyed, but not freed memory reused by something else).
#[inline]
pub(crate) unsafe fn handle<'a, T: Handle>(p: *const T) -> Result<&'a T, Failure> {
    if p.is_null() {
        return Err(Failure::arg(format!("the {} handle is NULL", T::NAME)));
    }
    // SAFETY: non-NULL and given out by this library (the caller's contract).
    let h = unsafe { &*p };
    if h.magic() != T::MAGIC {
        return Err(Failure::arg(format!(
            "the {} handle is not a live one (destroyed, or not a {})",
            T::NAME,
            T::NAME
        )));
    }
    Ok(h)
}

/// `len` bytes at `p` to read (`p` may be NULL when `len` is 0).
///
/// # Safety
/// When `len > 0`, `p` points to `len` readable bytes that live for `'a`.
#[inline]
pub(crate) unsafe fn bytes<'a>(
    p: *const c_void,
    len: usize,
    what: &str,
) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    check_ptr(p, len, what)?;
    // SAFETY: the caller's contract, checked non-NULL and in range above.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// `len` bytes at `p` to write (`p` may be NULL when `len` is 0).
///
/// # Safety
/// When `len > 0`, `p` points to `len` writable bytes that live for `'a`, not
/// accessed otherwise meanwhile.
#[inline]
pub(crate) unsafe fn bytes_mut<'a>(
    p: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_ptr(p, len, what)?;
    // SAFETY: the caller's contract, checked non-NULL and in range above.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
}

#[inline]
fn check_ptr(p: *const c_void, len: usize, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::arg(format!(
            "{what} is NULL with a length of {len} bytes"
        )));
    }
    if len > isize::MAX as usize || (p as usize).checked_add(len).is_none() {
        return Err(Failure::arg(format!(
            "{what} has an impossible length of {len} bytes"
        )));
    }
    Ok(())
}

/// A place to write an output value.
///
/// # Safety
/// `p` is NULL or points to writable memory for a `T`.
#[inline]
pub(crate) unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    if p.is_null() {
        return Err(Failure::arg(format!("{what} (an output) is NULL")));
    }
    // SAFETY: non-NULL, and writable memory for a `T` (the caller's contract).
    Ok(unsafe { &mut *p })
}

/// Writes `v` to `p` if it is not NULL (an optional output).
///
/// # Safety
/// `p` is NULL or points to writable memory for a `T`.
#[inline]
pub(crate) unsafe fn maybe_out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { p.write(v) };
    }
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn string<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::arg(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated (the caller's contract).
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map_err(|_| Failure::arg(format!("{what} is not UTF-8: {:?}", c.to_string_lossy())))
}

/// Copies `s` and a NUL into `buf` of `cap` bytes when it fits, and says in `needed`
/// how many bytes it takes with the NUL: `SPOOLS_ERR_TRUNCATED` when `cap` is smaller
/// (nothing written then; call again with `needed` bytes).
///
/// # Safety
/// `buf` is NULL or points to `cap` writable bytes; `needed` is NULL or writable.
pub(crate) unsafe fn give_string(
    s: &str,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> Result<(), Failure> {
    let n = s.len() + 1;
    // SAFETY: the caller's contract for `needed`.
    unsafe { maybe_out(needed, n) };
    if cap < n {
        return Err(Failure::new(
            crate::status::spools_status_t::SPOOLS_ERR_TRUNCATED,
            format!("the string takes {n} bytes with its NUL; the buffer has {cap}"),
        ));
    }
    // SAFETY: `cap >= n > 0` bytes at `buf` (the caller's contract).
    let dst = unsafe { bytes_mut(buf.cast(), n, "buf") }?;
    dst[..s.len()].copy_from_slice(s.as_bytes());
    dst[s.len()] = 0;
    Ok(())
}

/// As [`handle`], for a call that changes the handle.
///
/// # Safety
/// As [`handle`], and no other reference to `*p` is in use meanwhile (the caller does
/// not use the handle from another thread during the call).
#[inline]
pub(crate) unsafe fn handle_mut<'a, T: Handle>(p: *mut T) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller's contract (checks the tag).
    unsafe { handle(p) }?;
    // SAFETY: non-NULL, live, and not otherwise referenced (the caller's contract).
    Ok(unsafe { &mut *p })
}
