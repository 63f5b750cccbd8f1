//! What a window carries besides memory: attributes (the predefined `MPI_WIN_BASE`,
//! `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`, `MPI_WIN_MODEL`, and
//! the program's own keyvals), its name, info, error handler and group.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use crate::abi::*;
use crate::comm::attr::{create, delete, free, keyval, set, Of};
use crate::env::errhandler::on_self;
use crate::env::error::{put_string, valid_errhandler, MpiError, ERRHANDLERS};
use crate::out::out;
use crate::win::{on_win, win};

/// `MPI_Win_create_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_keyval(
    win_copy_attr_fn: *const c_void,
    win_delete_attr_fn: *const c_void,
    win_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe {
        create(
            Of::Win,
            win_copy_attr_fn,
            win_delete_attr_fn,
            win_keyval,
            extra_state,
            "MPI_Win_create_keyval",
        )
    })
}

/// `MPI_Win_free_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { free(Of::Win, win_keyval, "MPI_Win_free_keyval") })
}

/// `MPI_Win_get_attr`: the predefined attributes are pointers to the values (the base
/// itself for `MPI_WIN_BASE`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_attr(
    win_h: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let call = "MPI_Win_get_attr";
    let r = (|| {
        let w = win(win_h, call)?;
        let value: Option<usize> = match win_keyval {
            MPI_WIN_BASE => Some(w.base),
            MPI_WIN_SIZE => Some(&raw const w.size_attr as usize),
            MPI_WIN_DISP_UNIT => Some(&raw const w.disp_attr as usize),
            MPI_WIN_CREATE_FLAVOR => Some(&raw const w.flavor as usize),
            MPI_WIN_MODEL => Some(&raw const w.model_attr as usize),
            k => {
                keyval(k, Of::Win, call)?;
                w.attrs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&k)
                    .copied()
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(value.is_some()), call) }?;
        if let Some(v) = value {
            // SAFETY: the caller's contract: `attribute_val` points to a `void *`. The
            // predefined values live in the window object, as long as the window.
            unsafe { out(attribute_val.cast::<usize>(), v, call) }?;
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_set_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_attr(
    win_h: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let call = "MPI_Win_set_attr";
    let r = (|| {
        let w = win(win_h, call)?;
        keyval(win_keyval, Of::Win, call)?;
        set(win_h, &w.attrs, win_keyval, attribute_val as usize)
    })();
    on_win(win_h, r)
}

/// `MPI_Win_delete_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_delete_attr(win_h: MPI_Win, win_keyval: c_int) -> c_int {
    let call = "MPI_Win_delete_attr";
    let r = (|| {
        let w = win(win_h, call)?;
        keyval(win_keyval, Of::Win, call)?;
        delete(win_h, &w.attrs, win_keyval, call)
    })();
    on_win(win_h, r)
}

/// `MPI_Win_get_group`: the group of the window's communicator.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_group(win_h: MPI_Win, group: *mut MPI_Group) -> c_int {
    let call = "MPI_Win_get_group";
    let r = (|| {
        let w = win(win_h, call)?;
        // SAFETY: the caller's contract.
        unsafe { crate::comm::group::give_group(w.labels.clone(), group, call) }
    })();
    on_win(win_h, r)
}

/// `MPI_Win_set_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_name(win_h: MPI_Win, win_name: *const c_char) -> c_int {
    let call = "MPI_Win_set_name";
    let r = (|| {
        let w = win(win_h, call)?;
        if win_name.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, format!("{call}: NULL name")));
        }
        // SAFETY: a NUL-terminated string (the caller's contract).
        let s = unsafe { CStr::from_ptr(win_name) }.to_string_lossy();
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        *w.name.lock().unwrap_or_else(PoisonError::into_inner) = s.chars().take(max).collect();
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_get_name` (empty until set).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_name(
    win_h: MPI_Win,
    win_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let call = "MPI_Win_get_name";
    if win_h == MPI_WIN_NULL {
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe {
            put_string(
                "MPI_WIN_NULL",
                win_name,
                MPI_MAX_OBJECT_NAME as usize,
                resultlen,
            )
        };
        return MPI_SUCCESS;
    }
    let r = win(win_h, call).map(|w| {
        let n = w
            .name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_string(&n, win_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    });
    on_win(win_h, r)
}

/// `MPI_Win_set_info`: replaces the hints (the standard's are kept, for `MPI_Win_get_info`;
/// Spools acts on none of them yet).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_info(win_h: MPI_Win, info: MPI_Info) -> c_int {
    let call = "MPI_Win_set_info";
    let r = (|| {
        let w = win(win_h, call)?;
        let e = crate::env::info::standard(
            crate::env::info::entries(info)?,
            crate::env::info::WIN_HINTS,
        );
        *w.info.lock().unwrap_or_else(PoisonError::into_inner) = e;
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_get_info`: a new info object with the hints given, and the standard's
/// defaults of the accumulate hints not given.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_info(win_h: MPI_Win, info_used: *mut MPI_Info) -> c_int {
    let call = "MPI_Win_get_info";
    let r = (|| {
        let w = win(win_h, call)?;
        let mut e = w
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // The standard's defaults, which MPI's accumulates keep unless told otherwise.
        for (k, v) in [
            ("accumulate_ordering", "rar,raw,war,waw"),
            ("accumulate_ops", "same_op_no_op"),
        ] {
            if !e.iter().any(|(kk, _)| kk == k) {
                e.push((k.to_string(), v.to_string()));
            }
        }
        // SAFETY: the caller's contract.
        unsafe { out(info_used, crate::env::info::make(e)?, call) }
    })();
    on_win(win_h, r)
}

/// `MPI_Win_create_errhandler`: an error handler calling `win_errhandler_fn`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_errhandler(
    win_errhandler_fn: *const c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // A window handler is called as a communicator's is: a handle by pointer, a code by
    // pointer.
    // SAFETY: the caller's contract.
    unsafe { crate::env::errhandler::MPI_Comm_create_errhandler(win_errhandler_fn, errhandler) }
}

/// `MPI_Win_set_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_errhandler(
    win_h: MPI_Win,
    errhandler: MPI_Errhandler,
) -> c_int {
    let call = "MPI_Win_set_errhandler";
    let r = (|| {
        let w = win(win_h, call)?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        w.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_errhandler(
    win_h: MPI_Win,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let call = "MPI_Win_get_errhandler";
    let r = win(win_h, call).and_then(|w| {
        // SAFETY: the caller's contract.
        unsafe { out(errhandler, w.errhandler.load(Ordering::Relaxed), call) }
    });
    on_win(win_h, r)
}

/// `MPI_Win_call_errhandler`: reports `errorcode` on the window as an error of a call.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_call_errhandler(win_h: MPI_Win, errorcode: c_int) -> c_int {
    let call = "MPI_Win_call_errhandler";
    let w = match win(win_h, call) {
        Ok(w) => w,
        Err(e) => return on_win(win_h, Err(e)),
    };
    match w.errhandler.load(Ordering::Relaxed) {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            crate::runtime::fatal(&format!("{call} with error code {errorcode}"), errorcode)
        }
        h => {
            if let Some(f) = ERRHANDLERS.get(h) {
                let (mut wh, mut code) = (win_h, errorcode);
                // SAFETY: a user function of the standard's errhandler type; pointers
                // to locals that live for the call.
                unsafe { f(&mut wh, &mut code) };
            }
            MPI_SUCCESS
        }
    }
}
