//! The `external32` data representation (MPI 4.1, 13.5.2): every primitive big-endian,
//! at the standard's sizes (`long` and `unsigned long` in 4 bytes, `wchar_t` in 2,
//! `long double` as IEEE binary128), with no gaps. `MPI_Pack_external`,
//! `MPI_Unpack_external` and `MPI_Pack_external_size` convert through a datatype's
//! type map: the primitives of one element, each at its offset, in order.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::*;
use crate::datatype::{count as ccount, dtype, TypeObj};
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::out::out;

mod prim;
mod typemap;

use prim::Prim;
pub(crate) use typemap::{basic_sizes, offsets};
use typemap::{distinct, typemap};

/// Checks the data representation argument.
///
/// # Safety
/// `datarep` is NULL or a C string.
unsafe fn check_rep(datarep: *const c_char, call: &'static str) -> Result<(), MpiError> {
    if datarep.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: datarep is NULL"),
        ));
    }
    // SAFETY: a C string (the caller's contract).
    let s = unsafe { CStr::from_ptr(datarep) };
    if s.to_bytes() != b"external32" {
        return Err(MpiError::invalid(
            MPI_ERR_UNSUPPORTED_DATAREP,
            format!(
                "{call}: data representation {:?} (only \"external32\")",
                s.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

/// How one element of a type is converted: by its one primitive (cut from its blocks,
/// whatever its size), or by its type map.
enum Layout {
    One(Prim),
    Map(Vec<(isize, Prim)>),
}

impl Layout {
    fn of(t: &TypeObj) -> Result<Layout, MpiError> {
        match distinct(t)?.as_slice() {
            [p] if t.size % p.native() == 0 => Ok(Layout::One(*p)),
            _ => {
                let mut map = Vec::new();
                typemap(t, 0, &mut map)?;
                Ok(Layout::Map(map))
            }
        }
    }

    /// The external32 bytes of one element of `t`.
    fn external_size(&self, t: &TypeObj) -> usize {
        match self {
            Layout::One(p) => t.size / p.native() * p.external(),
            Layout::Map(m) => m.iter().map(|(_, p)| p.external()).sum(),
        }
    }

    /// Calls `f` with each primitive of one element of `t` (its offset), in order.
    fn each(
        &self,
        t: &TypeObj,
        mut f: impl FnMut(isize, Prim) -> Result<(), MpiError>,
    ) -> Result<(), MpiError> {
        match self {
            Layout::One(p) => {
                let n = p.native();
                for &(off, len) in &t.blocks {
                    for k in 0..len / n {
                        f(off + (k * n) as isize, *p)?;
                    }
                }
                Ok(())
            }
            Layout::Map(m) => m.iter().try_for_each(|&(off, p)| f(off, p)),
        }
    }
}

/// The external32 bytes of `n` elements of `t`.
fn size_of(n: usize, t: &TypeObj, call: &'static str) -> Result<usize, MpiError> {
    Layout::of(t)?
        .external_size(t)
        .checked_mul(n)
        .ok_or_else(|| MpiError::invalid(MPI_ERR_COUNT, format!("{call}: too large")))
}

/// Packs `n` elements of `t` at `inbuf` into external32 bytes at `out[pos..]`; the new
/// position.
///
/// # Safety
/// `inbuf` holds `n` elements of `t`.
pub(crate) unsafe fn pack(
    inbuf: *const u8,
    n: usize,
    t: &TypeObj,
    out: &mut [u8],
    mut pos: usize,
    call: &'static str,
) -> Result<usize, MpiError> {
    let layout = Layout::of(t)?;
    let need = layout.external_size(t).saturating_mul(n);
    if pos > out.len() || out.len() - pos < need {
        return Err(MpiError::invalid(
            MPI_ERR_TRUNCATE,
            format!(
                "{call}: {need} bytes do not fit the {} left in the buffer",
                out.len().saturating_sub(pos)
            ),
        ));
    }
    for i in 0..n as isize {
        layout.each(t, |off, p| {
            // SAFETY: a primitive of element `i` (the caller's contract; from MPI_BOTTOM too,
            // hence `wrapping_offset`).
            let src = unsafe {
                std::slice::from_raw_parts(inbuf.wrapping_offset(i * t.extent + off), p.native())
            };
            p.to_external(src, &mut out[pos..pos + p.external()])?;
            pos += p.external();
            Ok(())
        })?;
    }
    Ok(pos)
}

/// Unpacks external32 bytes `data[pos..]` into `n` elements of `t` at `outbuf`; the new
/// position.
///
/// # Safety
/// `outbuf` holds `n` elements of `t`.
pub(crate) unsafe fn unpack(
    data: &[u8],
    mut pos: usize,
    outbuf: *mut u8,
    n: usize,
    t: &TypeObj,
    call: &'static str,
) -> Result<usize, MpiError> {
    let layout = Layout::of(t)?;
    let need = layout.external_size(t).saturating_mul(n);
    if pos > data.len() || data.len() - pos < need {
        return Err(MpiError::invalid(
            MPI_ERR_TRUNCATE,
            format!(
                "{call}: {need} bytes wanted, {} left in the input",
                data.len().saturating_sub(pos)
            ),
        ));
    }
    for i in 0..n as isize {
        layout.each(t, |off, p| {
            // SAFETY: a primitive of element `i` (the caller's contract; from MPI_BOTTOM too,
            // hence `wrapping_offset`).
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    outbuf.wrapping_offset(i * t.extent + off),
                    p.native(),
                )
            };
            p.to_native(&data[pos..pos + p.external()], dst);
            pos += p.external();
            Ok(())
        })?;
    }
    Ok(pos)
}

/// Checks that every primitive of `t` keeps its size in `external32` (so that a file's
/// layout is the same in either representation): what MPI-IO's `external32` views
/// accept.
///
/// # Errors
/// `MPI_ERR_UNSUPPORTED_DATAREP` for a type with `long`, `unsigned long` or `wchar_t`
/// (narrowed in `external32`); `MPI_ERR_INTERN` for a type whose parts are missing.
pub(crate) fn same_size(t: &TypeObj, call: &'static str) -> Result<(), MpiError> {
    if distinct(t)?.iter().any(|p| p.native() != p.external()) {
        return Err(MpiError::invalid(
            MPI_ERR_UNSUPPORTED_DATAREP,
            format!(
                "{call}: external32 file views of types with long, unsigned long or wchar_t \
                 (narrowed in external32) are not supported"
            ),
        ));
    }
    Ok(())
}

/// Converts packed data of `t` (whole or partial elements, as `MPI_Pack` lays them out)
/// between native and `external32` in place: `to_external`, or back. A partial
/// primitive at the end is left as it is.
///
/// # Errors
/// As [`same_size`]; `MPI_ERR_CONVERSION` as the primitives' conversions.
pub(crate) fn convert_packed(
    t: &TypeObj,
    data: &mut [u8],
    to_external: bool,
    call: &'static str,
) -> Result<(), MpiError> {
    same_size(t, call)?;
    let one = |p: Prim, chunk: &mut [u8]| -> Result<(), MpiError> {
        let n = p.native();
        let mut tmp = [0u8; 16];
        tmp[..n].copy_from_slice(chunk);
        if to_external {
            p.to_external(&tmp[..n], chunk)
        } else {
            p.to_native(&tmp[..n], chunk);
            Ok(())
        }
    };
    match Layout::of(t)? {
        Layout::One(p) => data
            .chunks_exact_mut(p.native())
            .try_for_each(|c| one(p, c)),
        Layout::Map(map) => {
            let mut pos = 0usize;
            for &(_, p) in map.iter().cycle() {
                let n = p.native();
                if map.is_empty() || pos + n > data.len() {
                    break;
                }
                one(p, &mut data[pos..pos + n])?;
                pos += n;
            }
            Ok(())
        }
    }
}

/// A position argument as an index.
fn position(p: i64, call: &'static str) -> Result<usize, MpiError> {
    usize::try_from(p)
        .map_err(|_| MpiError::invalid(MPI_ERR_ARG, format!("{call}: position {p} is negative")))
}

/// `MPI_Pack_external` and its large-count form.
///
/// # Safety
/// As `MPI_Pack_external`'s arguments.
unsafe fn pack_external(
    rep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position_io: *mut i64,
    call: &'static str,
) -> c_int {
    on_self((|| {
        // SAFETY: the caller's contract.
        unsafe { check_rep(rep, call) }?;
        let n = ccount(incount, call)?;
        let t = dtype(datatype)?;
        crate::datatype::buffer(inbuf as usize, n, &t, call, "inbuf")?;
        if position_io.is_null() || (outbuf.is_null() && outsize > 0) {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: NULL buffer or position"),
            ));
        }
        let size = ccount(outsize, call)?;
        // SAFETY: non-NULL (checked), the caller's contract.
        let pos = position(unsafe { *position_io }, call)?;
        let out: &mut [u8] = if size == 0 {
            &mut []
        } else {
            // SAFETY: `outsize` writable bytes (the caller's contract).
            unsafe { std::slice::from_raw_parts_mut(outbuf.cast(), size) }
        };
        // SAFETY: the caller's contract.
        let end = unsafe { pack(inbuf.cast(), n, &t, out, pos, call) }?;
        // SAFETY: non-NULL (checked).
        unsafe { *position_io = end as i64 };
        Ok(())
    })())
}

/// `MPI_Pack_external`: packs into the `external32` representation.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    // SAFETY: the caller's contract; MPI_Aint is an i64 on the ABI's platforms.
    unsafe {
        pack_external(
            datarep,
            inbuf,
            incount.into(),
            datatype,
            outbuf,
            outsize as i64,
            position.cast(),
            "MPI_Pack_external",
        )
    }
}

/// `MPI_Pack_external_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        pack_external(
            datarep,
            inbuf,
            incount,
            datatype,
            outbuf,
            outsize,
            position,
            "MPI_Pack_external_c",
        )
    }
}

/// `MPI_Unpack_external` and its large-count form.
///
/// # Safety
/// As `MPI_Unpack_external`'s arguments.
unsafe fn unpack_external(
    rep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    position_io: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
    call: &'static str,
) -> c_int {
    on_self((|| {
        // SAFETY: the caller's contract.
        unsafe { check_rep(rep, call) }?;
        let n = ccount(outcount, call)?;
        let t = dtype(datatype)?;
        crate::datatype::buffer(outbuf as usize, n, &t, call, "outbuf")?;
        if position_io.is_null() || (inbuf.is_null() && insize > 0) {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: NULL buffer or position"),
            ));
        }
        let size = ccount(insize, call)?;
        // SAFETY: non-NULL (checked), the caller's contract.
        let pos = position(unsafe { *position_io }, call)?;
        let data: &[u8] = if size == 0 {
            &[]
        } else {
            // SAFETY: `insize` readable bytes (the caller's contract).
            unsafe { std::slice::from_raw_parts(inbuf.cast(), size) }
        };
        // SAFETY: the caller's contract.
        let end = unsafe { unpack(data, pos, outbuf.cast(), n, &t, call) }?;
        // SAFETY: non-NULL (checked).
        unsafe { *position_io = end as i64 };
        Ok(())
    })())
}

/// `MPI_Unpack_external`: unpacks from the `external32` representation.
#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract; MPI_Aint is an i64 on the ABI's platforms.
    unsafe {
        unpack_external(
            datarep,
            inbuf,
            insize as i64,
            position.cast(),
            outbuf,
            outcount.into(),
            datatype,
            "MPI_Unpack_external",
        )
    }
}

/// `MPI_Unpack_external_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        unpack_external(
            datarep,
            inbuf,
            insize,
            position,
            outbuf,
            outcount,
            datatype,
            "MPI_Unpack_external_c",
        )
    }
}

/// `MPI_Pack_external_size`: the bytes `incount` elements take in `external32`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
) -> c_int {
    on_self((|| {
        let call = "MPI_Pack_external_size";
        // SAFETY: the caller's contract.
        unsafe { check_rep(datarep, call) }?;
        let s = size_of(ccount(incount.into(), call)?, &*dtype(datatype)?, call)?;
        // SAFETY: the caller's contract.
        unsafe { out(size, s as MPI_Aint, call) }
    })())
}

/// `MPI_Pack_external_size_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    on_self((|| {
        let call = "MPI_Pack_external_size_c";
        // SAFETY: the caller's contract.
        unsafe { check_rep(datarep, call) }?;
        let s = size_of(ccount(incount, call)?, &*dtype(datatype)?, call)?;
        // SAFETY: the caller's contract.
        unsafe { out(size, s as MPI_Count, call) }
    })())
}
