//! Layouts (mapping functions) from spec strings.

use std::ffi::c_char;

use spools_map::Layout;

use crate::args::{give_string, handle, out, string, Handle};
use crate::status::{guard, spools_status_t, Failure};

/// A layout: how a dataset is distributed over units (ranks, disks, links). Made from a
/// spec string such as `"f64[768,768] block,block on 2x2"` (the syntax of `spools map`;
/// docs/mapping.md).
pub struct spools_layout_t {
    magic: u64,
    pub(crate) layout: Layout,
}

impl Handle for spools_layout_t {
    const MAGIC: u64 = 0x5350_4f4f_4c4c_4159;
    const NAME: &'static str = "spools_layout_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// Parses a layout spec.
///
/// Thread safety: any thread; a layout may be used by several threads at once.
///
/// ```c
/// spools_layout_t *l;
/// if (spools_layout_parse("f64[8,6] block,* on 4x1", &l) != SPOOLS_OK)
///     fprintf(stderr, "%s\n", spools_last_error_message());
/// ```
///
/// Errors: `SPOOLS_ERR_LAYOUT` with the parser's message (where the spec goes wrong).
///
/// # Safety
/// `spec` is a NUL-terminated string; `layout` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_parse(
    spec: *const c_char,
    layout: *mut *mut spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let spec = unsafe { string(spec, "spec") }?;
        // SAFETY: the caller's contract.
        let layout = unsafe { out(layout, "layout") }?;
        let l: Layout = spec.parse()?;
        *layout = Box::into_raw(Box::new(spools_layout_t {
            magic: spools_layout_t::MAGIC,
            layout: l,
        }));
        Ok(())
    })
}

/// Frees a layout. NULL does nothing.
///
/// # Safety
/// `layout` is NULL or a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_destroy(layout: *mut spools_layout_t) -> spools_status_t {
    guard(|| {
        if layout.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(layout) }?;
        // SAFETY: a live layout made by `Box::into_raw` in `spools_layout_parse`.
        let mut b = unsafe { Box::from_raw(layout) };
        b.magic = 0;
        Ok(())
    })
}

/// The number of units the layout distributes over (ranks that hold a share).
///
/// # Safety
/// `layout` is NULL or a live layout; `units` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_units(
    layout: *const spools_layout_t,
    units: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(layout) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(units, "units") }? = l.layout.units();
        Ok(())
    })
}

/// The size of one element in bytes.
///
/// # Safety
/// `layout` is NULL or a live layout; `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_elem_size(
    layout: *const spools_layout_t,
    size: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(layout) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(size, "size") }? = l.layout.elem_size();
        Ok(())
    })
}

/// The dataset's size in bytes.
///
/// Errors: `SPOOLS_ERR_LAYOUT` for a layout without a size (a stripe layout).
///
/// # Safety
/// `layout` is NULL or a live layout; `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_total_bytes(
    layout: *const spools_layout_t,
    bytes: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(layout) }?;
        // SAFETY: the caller's contract.
        let bytes = unsafe { out(bytes, "bytes") }?;
        *bytes = l.layout.total_bytes().ok_or_else(|| {
            Failure::new(
                spools_status_t::SPOOLS_ERR_LAYOUT,
                format!("the layout {} has no size", l.layout),
            )
        })?;
        Ok(())
    })
}

/// The number of bytes unit `unit` holds (the buffer this rank passes when it is that
/// unit; 0 for a rank past the layout's units).
///
/// Errors: `SPOOLS_ERR_LAYOUT` for a layout without a size.
///
/// # Safety
/// `layout` is NULL or a live layout; `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_local_bytes(
    layout: *const spools_layout_t,
    unit: u64,
    bytes: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(layout) }?;
        // SAFETY: the caller's contract.
        let bytes = unsafe { out(bytes, "bytes") }?;
        *bytes = if unit >= l.layout.units() {
            0
        } else {
            l.layout.local_bytes(unit)?
        };
        Ok(())
    })
}

/// The layout's spec in canonical form, copied with a NUL into `buf` of `cap` bytes;
/// `needed` gets the bytes it takes.
///
/// Errors: `SPOOLS_ERR_TRUNCATED` when `cap < *needed` (nothing written).
///
/// # Safety
/// `layout` is NULL or a live layout; `buf` holds `cap` writable bytes; `needed` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_layout_to_string(
    layout: *const spools_layout_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(layout) }?;
        // SAFETY: the caller's contract.
        unsafe { give_string(&l.layout.to_string(), buf, cap, needed) }
    })
}
