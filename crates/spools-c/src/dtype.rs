//! Element types of typed buffers (`spools_dtype_t`), and typed views of C buffers.

use std::borrow::Cow;
use std::ffi::c_void;

use crate::status::Failure;

/// The element type of a collective's buffers. A plain integer so that a program built
/// against an older header passes only values it knows; an unknown value is
/// `SPOOLS_ERR_INVALID_ARG`.
pub type spools_dtype_t = u32;

/// `uint8_t`.
pub const SPOOLS_DTYPE_U8: spools_dtype_t = 1;
/// `int8_t`.
pub const SPOOLS_DTYPE_I8: spools_dtype_t = 2;
/// `uint16_t`.
pub const SPOOLS_DTYPE_U16: spools_dtype_t = 3;
/// `int16_t`.
pub const SPOOLS_DTYPE_I16: spools_dtype_t = 4;
/// `uint32_t`.
pub const SPOOLS_DTYPE_U32: spools_dtype_t = 5;
/// `int32_t`.
pub const SPOOLS_DTYPE_I32: spools_dtype_t = 6;
/// `uint64_t`.
pub const SPOOLS_DTYPE_U64: spools_dtype_t = 7;
/// `int64_t`.
pub const SPOOLS_DTYPE_I64: spools_dtype_t = 8;
/// `float` (IEEE 754 binary32).
pub const SPOOLS_DTYPE_F32: spools_dtype_t = 9;
/// `double` (IEEE 754 binary64).
pub const SPOOLS_DTYPE_F64: spools_dtype_t = 10;

/// The element type `d` spells, in the one vocabulary of element types
/// (`spools_map::DType`); `None` for a value that is no `spools_dtype_t`.
pub(crate) fn element(d: spools_dtype_t) -> Option<spools::Carrier> {
    use spools::DType;
    let t = match d {
        SPOOLS_DTYPE_U8 => DType::U8,
        SPOOLS_DTYPE_I8 => DType::I8,
        SPOOLS_DTYPE_U16 => DType::U16,
        SPOOLS_DTYPE_I16 => DType::I16,
        SPOOLS_DTYPE_U32 => DType::U32,
        SPOOLS_DTYPE_I32 => DType::I32,
        SPOOLS_DTYPE_U64 => DType::U64,
        SPOOLS_DTYPE_I64 => DType::I64,
        SPOOLS_DTYPE_F32 => DType::F32,
        SPOOLS_DTYPE_F64 => DType::F64,
        _ => return None,
    };
    spools::Carrier::of(t)
}

/// Runs `$body` with `$T` the Rust type of dtype `$dt` (through [`element`] and the
/// facade's `with_carrier!`); an unknown dtype is an error.
macro_rules! with_dtype {
    ($dt:expr, $T:ident => $body:expr) => {{
        let dt = $dt;
        match $crate::dtype::element(dt) {
            Some(c) => spools::with_carrier!(c, $T => $body),
            None => Err($crate::dtype::bad_dtype(dt)),
        }
    }};
}
pub(crate) use with_dtype;

/// The error for an unknown dtype value.
pub(crate) fn bad_dtype(d: spools_dtype_t) -> Failure {
    Failure::arg(format!(
        "dtype {d} is not a spools_dtype_t (SPOOLS_DTYPE_U8 = 1 to SPOOLS_DTYPE_F64 = 10)"
    ))
}

fn check<T>(p: *const c_void, count: usize, what: &str) -> Result<(), Failure> {
    let size = std::mem::size_of::<T>();
    let bytes = count
        .checked_mul(size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| Failure::arg(format!("{what} has an impossible count of {count}")))?;
    if p.is_null() {
        return Err(Failure::arg(format!(
            "{what} is NULL with a count of {count}"
        )));
    }
    if (p as usize) % std::mem::align_of::<T>() != 0 {
        return Err(Failure::arg(format!(
            "{what} ({p:p}) is not aligned for {}-byte elements",
            std::mem::align_of::<T>()
        )));
    }
    if (p as usize).checked_add(bytes).is_none() {
        return Err(Failure::arg(format!(
            "{what} wraps around the address space"
        )));
    }
    Ok(())
}

/// `count` elements at `p` to read (`p` may be NULL when `count` is 0).
///
/// # Safety
/// When `count > 0`, `p` points to `count` readable `T`s that live for `'a`.
pub(crate) unsafe fn typed<'a, T>(
    p: *const c_void,
    count: usize,
    what: &str,
) -> Result<&'a [T], Failure> {
    if count == 0 {
        return Ok(&[]);
    }
    check::<T>(p, count, what)?;
    // SAFETY: checked non-NULL, aligned and in range; readable (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<T>(), count) })
}

/// `count` elements at `p` to write (`p` may be NULL when `count` is 0).
///
/// # Safety
/// When `count > 0`, `p` points to `count` writable `T`s that live for `'a`, not
/// accessed otherwise meanwhile.
pub(crate) unsafe fn typed_mut<'a, T>(
    p: *mut c_void,
    count: usize,
    what: &str,
) -> Result<&'a mut [T], Failure> {
    if count == 0 {
        return Ok(&mut []);
    }
    check::<T>(p, count, what)?;
    // SAFETY: checked non-NULL, aligned and in range; writable (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<T>(), count) })
}

/// The `count` elements at `send` of a collective whose receive buffer is `rcount`
/// elements at `recv`: borrowed, or copied first when the two overlap (a call with one
/// buffer for both, as MPI programs pass with `MPI_IN_PLACE`), so that the runtime never
/// reads memory it is writing.
///
/// # Safety
/// As [`typed`] for `send`; `recv` is only compared, never read.
pub(crate) unsafe fn send_view<'a, T: Copy>(
    send: *const c_void,
    count: usize,
    recv: *const c_void,
    rcount: usize,
    what: &str,
) -> Result<Cow<'a, [T]>, Failure> {
    // SAFETY: the caller's contract.
    let s = unsafe { typed::<T>(send, count, what) }?;
    let size = std::mem::size_of::<T>();
    let (a, b) = (send as usize, recv as usize);
    let overlap = count > 0
        && rcount > 0
        && a < b.saturating_add(rcount.saturating_mul(size))
        && b < a.saturating_add(count * size);
    Ok(if overlap {
        Cow::Owned(s.to_vec())
    } else {
        Cow::Borrowed(s)
    })
}
