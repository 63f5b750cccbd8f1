//! `MPI_Register_datarep`: user data representations are recorded (a name registered
//! twice is `MPI_ERR_DUP_DATAREP`, as MPI requires) but not used for I/O: a view in one
//! is refused by name (`MPI_File_set_view`), as `external32` is.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;

/// The names registered.
static REGISTERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether `name` was registered by the program.
pub(crate) fn registered(name: &str) -> bool {
    REGISTERED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|n| n == name)
}

fn register(datarep: *const c_char, call: &'static str) -> Result<(), MpiError> {
    crate::runtime::rt(call)?;
    if datarep.is_null() {
        return Err(MpiError::invalid(MPI_ERR_ARG, format!("{call}: NULL name")));
    }
    // SAFETY: a NUL-terminated string (the caller's contract).
    let name = unsafe { CStr::from_ptr(datarep) }
        .to_string_lossy()
        .into_owned();
    let mut r = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    if matches!(name.as_str(), "native" | "internal" | "external32") || r.contains(&name) {
        return Err(MpiError::invalid(
            MPI_ERR_DUP_DATAREP,
            format!("{call}: data representation {name:?} is registered already"),
        ));
    }
    r.push(name);
    Ok(())
}

/// `MPI_Register_datarep`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: *const c_void,
    write_conversion_fn: *const c_void,
    dtype_file_extent_fn: *const c_void,
    extra_state: *mut c_void,
) -> c_int {
    let _ = (
        read_conversion_fn,
        write_conversion_fn,
        dtype_file_extent_fn,
        extra_state,
    );
    on_self(register(datarep, "MPI_Register_datarep"))
}

/// `MPI_Register_datarep_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: *const c_void,
    write_conversion_fn: *const c_void,
    dtype_file_extent_fn: *const c_void,
    extra_state: *mut c_void,
) -> c_int {
    let _ = (
        read_conversion_fn,
        write_conversion_fn,
        dtype_file_extent_fn,
        extra_state,
    );
    on_self(register(datarep, "MPI_Register_datarep"))
}
