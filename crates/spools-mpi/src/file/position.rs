//! Views and file pointers: `MPI_File_set_view` / `get_view`, `seek`, `get_position`,
//! `get_byte_offset`, `get_type_extent`, and the shared pointer's `seek_shared` /
//! `get_position_shared`.

use std::ffi::{c_char, c_int, CStr};
use std::sync::PoisonError;

use crate::abi::*;
use crate::datatype::{another_handle, committed};
use crate::env::error::{put_string, MpiError};
use crate::file::{file, on_file, FileObj, View};
use crate::out::out;

/// `MPI_File_set_view` (collective): resets both file pointers to 0.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_view(
    fh: MPI_File,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info: MPI_Info,
) -> c_int {
    let call = "MPI_File_set_view";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        let rep = if datarep.is_null() {
            "native".to_string()
        } else {
            // SAFETY: a NUL-terminated string (the caller's contract).
            unsafe { CStr::from_ptr(datarep) }
                .to_string_lossy()
                .into_owned()
        };
        let mine = (|| {
            crate::env::info::entries(info)?;
            match rep.as_str() {
                // external32: the etype and filetype are checked below.
                "native" | "internal" | "external32" => {}
                other if crate::file::datarep::registered(other) => {
                    return Err(MpiError::invalid(
                        MPI_ERR_UNSUPPORTED_DATAREP,
                        format!("{call}: data representation {other:?} is registered, but Spools does I/O in native only"),
                    ))
                }
                other => {
                    return Err(MpiError::invalid(
                        MPI_ERR_UNSUPPORTED_DATAREP,
                        format!("{call}: unknown data representation {other:?}"),
                    ))
                }
            }
            let disp = if disp == -1 {
                // MPI_DISPLACEMENT_CURRENT: the shared pointer's byte position, for files
                // opened with MPI_MODE_SEQUENTIAL.
                if f.amode & MPI_MODE_SEQUENTIAL == 0 {
                    return Err(MpiError::invalid(
                        MPI_ERR_DISP,
                        format!("{call}: MPI_DISPLACEMENT_CURRENT needs a file opened with MPI_MODE_SEQUENTIAL"),
                    ));
                }
                let v = f.view();
                let p = f.shared.as_ref().map_or(0, |s| s.get());
                v.file_offset(p * v.etype.size as u64)
            } else {
                u64::try_from(disp).map_err(|_| {
                    MpiError::invalid(
                        MPI_ERR_DISP,
                        format!("{call}: displacement {disp} is negative"),
                    )
                })?
            };
            let et = committed(etype, call)?;
            let ft = committed(filetype, call)?;
            if rep == "external32" {
                crate::datatype::external::same_size(&et, call)?;
                crate::datatype::external::same_size(&ft, call)?;
            }
            View::new(disp, (etype, et), (filetype, ft), rep.clone(), call)
        })();
        // Whether the shared pointer is at 0 as this rank sees it, folded into the
        // agreement: a rank that moved it before this call sees its own move, so the
        // least over the group is 0 where any rank did. Only then does rank 0 reset it,
        // behind a barrier that no rank passes before the reset; a file whose shared
        // pointer nobody moved (the common case) takes one collective step.
        let at_zero = f.shared.as_ref().is_none_or(|s| s.get() == 0);
        let (v, all_at_zero) = f.agree_min(mine, u32::from(at_zero), call)?;
        *f.view.lock().unwrap_or_else(PoisonError::into_inner) = std::sync::Arc::new(v);
        *f.pos.lock().unwrap_or_else(PoisonError::into_inner) = 0;
        if all_at_zero == 0 {
            if f.comm.rank() == 0 {
                if let Some(s) = &f.shared {
                    s.set(0);
                }
            }
            f.comm.barrier()?;
        }
        Ok(())
    })();
    on_file(fh, r)
}

/// `MPI_File_get_view`: derived types come back as new handles (the program frees them).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_view(
    fh: MPI_File,
    disp: *mut MPI_Offset,
    etype: *mut MPI_Datatype,
    filetype: *mut MPI_Datatype,
    datarep: *mut c_char,
) -> c_int {
    let call = "MPI_File_get_view";
    let r = (|| {
        let f = file(fh, call)?;
        let v = f.view();
        // SAFETY: the caller's contract (datarep holds MPI_MAX_DATAREP_STRING bytes).
        unsafe {
            out(disp, v.disp as MPI_Offset, call)?;
            out(etype, another_handle(v.etype_h, &v.etype)?, call)?;
            out(filetype, another_handle(v.filetype_h, &v.filetype)?, call)?;
            if !datarep.is_null() {
                put_string(
                    &v.datarep,
                    datarep,
                    MPI_MAX_DATAREP_STRING as usize,
                    std::ptr::null_mut(),
                );
            }
        }
        Ok(())
    })();
    on_file(fh, r)
}

/// The etypes of the view before the end of the file.
fn end_in_etypes(f: &FileObj, v: &View, call: &'static str) -> Result<u64, MpiError> {
    let len = f.file.len(call, &f.path)?;
    Ok(v.data_before(len) / v.etype.size as u64)
}

/// The new position of a seek from `cur`.
fn seek_to(
    f: &FileObj,
    cur: u64,
    offset: MPI_Offset,
    whence: c_int,
    call: &'static str,
) -> Result<u64, MpiError> {
    let base = match whence {
        MPI_SEEK_SET => 0,
        MPI_SEEK_CUR => cur,
        MPI_SEEK_END => end_in_etypes(f, &f.view(), call)?,
        _ => {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!(
                    "{call}: whence {whence} is none of MPI_SEEK_SET, MPI_SEEK_CUR, MPI_SEEK_END"
                ),
            ))
        }
    };
    let to = base as i128 + offset as i128;
    u64::try_from(to).map_err(|_| {
        MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: the position would be {to}, before the view's start"),
        )
    })
}

/// `MPI_File_seek`: moves the individual pointer (in etypes).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_seek(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
    let call = "MPI_File_seek";
    let r = (|| {
        let f = file(fh, call)?;
        let mut pos = f.pos.lock().unwrap_or_else(PoisonError::into_inner);
        *pos = seek_to(&f, *pos, offset, whence, call)?;
        Ok(())
    })();
    on_file(fh, r)
}

/// `MPI_File_get_position`: the individual pointer, in etypes.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_position(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
    let call = "MPI_File_get_position";
    let r = file(fh, call).and_then(|f| {
        let p = *f.pos.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the caller's contract.
        unsafe { out(offset, p as MPI_Offset, call) }
    });
    on_file(fh, r)
}

/// `MPI_File_get_byte_offset`: the file byte of a view position (in etypes).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_byte_offset(
    fh: MPI_File,
    offset: MPI_Offset,
    disp: *mut MPI_Offset,
) -> c_int {
    let call = "MPI_File_get_byte_offset";
    let r = (|| {
        let f = file(fh, call)?;
        let off = u64::try_from(offset).map_err(|_| {
            MpiError::invalid(MPI_ERR_ARG, format!("{call}: offset {offset} is negative"))
        })?;
        let v = f.view();
        let b = v.file_offset(off * v.etype.size as u64);
        // SAFETY: the caller's contract.
        unsafe { out(disp, b as MPI_Offset, call) }
    })();
    on_file(fh, r)
}

/// `MPI_File_get_type_extent`: a datatype's extent in the file (native: its extent).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_type_extent(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    let call = "MPI_File_get_type_extent";
    let r = (|| {
        file(fh, call)?;
        let t = crate::datatype::dtype(datatype)?;
        // SAFETY: the caller's contract.
        unsafe { out(extent, t.extent as MPI_Aint, call) }
    })();
    on_file(fh, r)
}

/// `MPI_File_get_type_extent_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_type_extent_c(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Count,
) -> c_int {
    let mut e: MPI_Aint = 0;
    // SAFETY: the caller's contract.
    let rc = unsafe { MPI_File_get_type_extent(fh, datatype, &mut e) };
    if rc == MPI_SUCCESS {
        // SAFETY: the caller's contract.
        return on_file(fh, unsafe {
            out(extent, e as MPI_Count, "MPI_File_get_type_extent_c")
        });
    }
    rc
}

/// `MPI_File_seek_shared` (collective).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_seek_shared(
    fh: MPI_File,
    offset: MPI_Offset,
    whence: c_int,
) -> c_int {
    let call = "MPI_File_seek_shared";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        let s = f.shared_pointer(call)?;
        // The group's barrier, and the same offset and whence on every rank (as MPI
        // asks): rank 0's seek, checked there, then stands for every rank's.
        f.same_everywhere(&[offset, i64::from(whence)], "offsets and whences", call)?;
        let mine = if f.comm.rank() == 0 {
            seek_to(&f, s.get(), offset, whence, call).map(|p| s.set(p))
        } else {
            Ok(())
        };
        f.agree(mine, call)
    })();
    on_file(fh, r)
}

/// `MPI_File_get_position_shared`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_position_shared(
    fh: MPI_File,
    offset: *mut MPI_Offset,
) -> c_int {
    let call = "MPI_File_get_position_shared";
    let r = (|| {
        let f = file(fh, call)?;
        let p = f.shared_pointer(call)?.get();
        // SAFETY: the caller's contract.
        unsafe { out(offset, p as MPI_Offset, call) }
    })();
    on_file(fh, r)
}
