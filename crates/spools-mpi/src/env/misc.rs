//! What the library says about its ABI and the hardware (`MPI_Abi_get_info`,
//! `MPI_Get_hw_resource_info`), user error classes and codes, and `MPI_Buffer_iflush`.

use std::ffi::{c_char, c_int, CStr};
use std::sync::PoisonError;

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::{user_code, MpiError, FIRST_USER, USER};
use crate::out::out;

/// `MPI_Abi_get_info`: the sizes of `MPI_Aint`, `MPI_Count` and `MPI_Offset`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_info(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let v = vec![
            (
                "mpi_aint_size".to_string(),
                std::mem::size_of::<MPI_Aint>().to_string(),
            ),
            (
                "mpi_count_size".to_string(),
                std::mem::size_of::<MPI_Count>().to_string(),
            ),
            (
                "mpi_offset_size".to_string(),
                std::mem::size_of::<MPI_Offset>().to_string(),
            ),
        ];
        // SAFETY: the caller's contract.
        unsafe { out(info, crate::env::info::make(v)?, "MPI_Abi_get_info") }
    })();
    on_self(r)
}

/// `MPI_Abi_get_fortran_info`: `MPI_INFO_NULL` (Spools has no Fortran bindings).
#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_fortran_info(info: *mut MPI_Info) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { out(info, MPI_INFO_NULL, "MPI_Abi_get_fortran_info") })
}

/// `MPI_Get_hw_resource_info`: an empty info object (no hardware topology is known).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_hw_resource_info(hw_info: *mut MPI_Info) -> c_int {
    // SAFETY: the caller's contract.
    on_self(
        crate::env::info::make(Vec::new())
            .and_then(|h| unsafe { out(hw_info, h, "MPI_Get_hw_resource_info") }),
    )
}

fn add(class: Option<c_int>) -> c_int {
    let mut g = USER.lock().unwrap_or_else(PoisonError::into_inner);
    let code = FIRST_USER + g.len() as c_int;
    g.push((code, class.unwrap_or(code), String::new()));
    crate::comm::attr::set_last_used_code(code);
    code
}

/// `MPI_Add_error_class`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { out(errorclass, add(None), "MPI_Add_error_class") })
}

/// `MPI_Add_error_code`: a new code of a class (predefined or added).
#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    let r = (|| {
        let known = (0..=MPI_ERR_ABI).contains(&errorclass)
            || user_code(errorclass).is_some_and(|(c, _)| c == errorclass);
        if !known {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Add_error_code: {errorclass} is not an error class"),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { out(errorcode, add(Some(errorclass)), "MPI_Add_error_code") }
    })();
    on_self(r)
}

/// `MPI_Add_error_string`: the string of a user error class or code.
#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    let r = (|| {
        if string.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Add_error_string: NULL string",
            ));
        }
        // SAFETY: NUL-terminated (the caller's contract).
        let s = unsafe { CStr::from_ptr(string) }
            .to_string_lossy()
            .into_owned();
        let mut g = USER.lock().unwrap_or_else(PoisonError::into_inner);
        let e = g.iter_mut().find(|e| e.0 == errorcode).ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Add_error_string: {errorcode} is not a user error class or code"),
            )
        })?;
        e.2 = s.chars().take(MPI_MAX_ERROR_STRING as usize - 1).collect();
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Buffer_iflush`: flushes the buffered sends now; the request is complete.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_iflush(request: *mut MPI_Request) -> c_int {
    let r = (|| {
        crate::p2p::buffer::flush()?;
        let h = crate::p2p::request::give(
            crate::p2p::request::Op::Done(crate::p2p::request::empty_status()),
            MPI_COMM_SELF,
        )?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, "MPI_Buffer_iflush") }
    })();
    on_self(r)
}

fn remove(code: c_int, call: &'static str) -> Result<(), MpiError> {
    let mut g = USER.lock().unwrap_or_else(PoisonError::into_inner);
    let i = g.iter().position(|e| e.0 == code).ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: {code} is not a user error class or code"),
        )
    })?;
    if g.iter().any(|e| e.1 == code && e.0 != code) {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: class {code} still has codes (remove them first)"),
        ));
    }
    if !g[i].2.is_empty() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: {code} still has a string (MPI_Remove_error_string first)"),
        ));
    }
    g.remove(i);
    Ok(())
}

/// `MPI_Remove_error_class`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_class(errorclass: c_int) -> c_int {
    on_self(remove(errorclass, "MPI_Remove_error_class"))
}

/// `MPI_Remove_error_code`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_code(errorcode: c_int) -> c_int {
    on_self(remove(errorcode, "MPI_Remove_error_code"))
}

/// `MPI_Remove_error_string`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_string(errorcode: c_int) -> c_int {
    let r = (|| {
        let mut g = USER.lock().unwrap_or_else(PoisonError::into_inner);
        let e = g.iter_mut().find(|e| e.0 == errorcode).ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Remove_error_string: {errorcode} is not a user error class or code"),
            )
        })?;
        e.2.clear();
        Ok(())
    })();
    on_self(r)
}

/// Buffers attached to a communicator or session are the process's buffer
/// (`MPI_Buffer_attach`): buffered sends on any communicator use it.
macro_rules! attach_to_process {
    ($attach:ident, $attach_c:ident, $detach:ident, $detach_c:ident, $flush:ident, $iflush:ident; $obj:ty) => {
        #[doc = concat!("`", stringify!($attach), "` (the process's buffer).")]
        #[no_mangle]
        pub unsafe extern "C" fn $attach(
            obj: $obj,
            buffer: *mut std::ffi::c_void,
            size: c_int,
        ) -> c_int {
            let _ = obj;
            // SAFETY: the caller's contract.
            unsafe { crate::p2p::buffer::MPI_Buffer_attach(buffer, size) }
        }

        #[doc = concat!("`", stringify!($attach_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $attach_c(
            obj: $obj,
            buffer: *mut std::ffi::c_void,
            size: MPI_Count,
        ) -> c_int {
            let _ = obj;
            // SAFETY: the caller's contract.
            unsafe { crate::p2p::buffer::MPI_Buffer_attach_c(buffer, size) }
        }

        #[doc = concat!("`", stringify!($detach), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $detach(
            obj: $obj,
            buffer_addr: *mut std::ffi::c_void,
            size: *mut c_int,
        ) -> c_int {
            let _ = obj;
            // SAFETY: the caller's contract.
            unsafe { crate::p2p::buffer::MPI_Buffer_detach(buffer_addr, size) }
        }

        #[doc = concat!("`", stringify!($detach_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $detach_c(
            obj: $obj,
            buffer_addr: *mut std::ffi::c_void,
            size: *mut MPI_Count,
        ) -> c_int {
            let _ = obj;
            // SAFETY: the caller's contract.
            unsafe { crate::p2p::buffer::MPI_Buffer_detach_c(buffer_addr, size) }
        }

        #[doc = concat!("`", stringify!($flush), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $flush(obj: $obj) -> c_int {
            let _ = obj;
            // SAFETY: no arguments.
            unsafe { crate::p2p::buffer::MPI_Buffer_flush() }
        }

        #[doc = concat!("`", stringify!($iflush), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $iflush(obj: $obj, request: *mut MPI_Request) -> c_int {
            let _ = obj;
            // SAFETY: the caller's contract.
            unsafe { MPI_Buffer_iflush(request) }
        }
    };
}
attach_to_process!(MPI_Comm_attach_buffer, MPI_Comm_attach_buffer_c, MPI_Comm_detach_buffer, MPI_Comm_detach_buffer_c, MPI_Comm_flush_buffer, MPI_Comm_iflush_buffer; MPI_Comm);
attach_to_process!(MPI_Session_attach_buffer, MPI_Session_attach_buffer_c, MPI_Session_detach_buffer, MPI_Session_detach_buffer_c, MPI_Session_flush_buffer, MPI_Session_iflush_buffer; MPI_Session);
