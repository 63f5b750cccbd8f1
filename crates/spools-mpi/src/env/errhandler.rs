//! Reporting an error as MPI does: its code made, then the error handler of the object
//! it is about applied ([`raise`], [`on_comm`], [`on_self`]); the calls that make and
//! free user error handlers, and `MPI_Error_class` and `MPI_Error_string`.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::abi::*;
use crate::env::error::{
    class_name, code_of, lookup, put_string, CommErrhandlerFn, MpiError, ERRHANDLERS, FIRST_CODE,
};

/// What an error is reported on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    /// A communicator: its error handler decides. `gen/exports.py` writes it for a
    /// refused call that takes a communicator; every such call of the ABI is
    /// implemented today.
    #[allow(dead_code)]
    Comm(MPI_Comm),
    /// No object: the handler of [`no_object`]'s communicator decides.
    Self_,
}

/// Reports `e` on `comm` as MPI does: makes its code, then applies the communicator's
/// error handler (ARE_FATAL and ABORT end the job; RETURN returns the code; a user
/// handler is called, then the code is returned).
pub(crate) fn raise(comm: MPI_Comm, e: &MpiError) -> c_int {
    let mut code = code_of(e);
    let handler = crate::comm::errhandler_of(comm);
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(&e.to_string(), e.class()),
        h => match ERRHANDLERS.get(h) {
            Some(f) => {
                let mut c = comm;
                // SAFETY: the handler is a user function of the C type the standard
                // gives; it receives pointers to locals that live for the call.
                unsafe { f(&mut c, &mut code) };
                code
            }
            None => code,
        },
    }
}

/// The result of a call whose errors go to communicator `comm`.
pub(crate) fn on_comm(comm: MPI_Comm, r: Result<(), MpiError>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(comm, &e),
    }
}

/// Whether the program has given `MPI_COMM_SELF` an error handler of its own.
static SELF_SET: AtomicBool = AtomicBool::new(false);

/// Notes that the program set `MPI_COMM_SELF`'s error handler (`MPI_Comm_set_errhandler`).
pub(crate) fn self_handler_set() {
    SELF_SET.store(true, Ordering::Relaxed);
}

/// The communicator whose error handler decides an error that is about no object (a
/// datatype, group or info call, an invalid handle of no communicator). MPI 4.1 (9.3)
/// raises such errors on `MPI_COMM_SELF`; MPI 3.1 and the programs written for it
/// (MPICH's own test suite among them) on `MPI_COMM_WORLD`, and MPICH keeps doing so.
/// Spools takes `MPI_COMM_SELF` once the program has set its handler, and
/// `MPI_COMM_WORLD` until then: a program that sets only `MPI_COMM_WORLD`'s
/// `MPI_ERRORS_RETURN` has these errors returned, one that sets `MPI_COMM_SELF`'s gets
/// what MPI 4.1 says, and one that sets neither ends, as both say.
pub(crate) fn no_object() -> MPI_Comm {
    if SELF_SET.load(Ordering::Relaxed) {
        MPI_COMM_SELF
    } else {
        MPI_COMM_WORLD
    }
}

/// The result of a call whose errors are not about an object (the handler of
/// [`no_object`]'s communicator decides).
pub(crate) fn on_self(r: Result<(), MpiError>) -> c_int {
    on_comm(no_object(), r)
}

/// The stub of a function Spools does not implement: `MPI_ERR_UNSUPPORTED_OPERATION`
/// with a message naming it, on `scope`.
pub(crate) fn unsupported(name: &'static str, scope: Scope) -> c_int {
    let e = MpiError::Unsupported(name);
    match scope {
        // An invalid communicator is that, whatever the function.
        Scope::Comm(c) if crate::comm::comm(c, name).is_err() => raise(
            c,
            &MpiError::Handle {
                class: MPI_ERR_COMM,
                what: "communicator",
                handle: c,
            },
        ),
        Scope::Comm(c) => raise(c, &e),
        Scope::Self_ => raise(no_object(), &e),
    }
}

/// `MPI_Error_class`: the class of an error code.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    let r = match lookup(errorcode) {
        Some((class, _)) if !errorclass.is_null() => {
            // SAFETY: non-NULL, writable (the caller's contract).
            unsafe { *errorclass = class };
            Ok(())
        }
        Some(_) => Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Error_class: errorclass is NULL",
        )),
        None => Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("MPI_Error_class: {errorcode} is not an error code"),
        )),
    };
    on_self(r)
}

/// `MPI_Error_string`: the message of an error code (at most `MPI_MAX_ERROR_STRING`
/// bytes with the NUL).
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = match lookup(errorcode) {
        Some((class, msg)) => {
            let text = if errorcode >= FIRST_CODE {
                format!("{msg} ({})", class_name(class).unwrap_or("error"))
            } else {
                msg
            };
            // SAFETY: the standard's contract: MPI_MAX_ERROR_STRING bytes.
            unsafe { put_string(&text, string, MPI_MAX_ERROR_STRING as usize, resultlen) };
            Ok(())
        }
        None => Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("MPI_Error_string: {errorcode} is not an error code"),
        )),
    };
    on_self(r)
}

/// `MPI_Comm_create_errhandler`: an error handler calling `comm_errhandler_fn`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_errhandler(
    comm_errhandler_fn: *const std::ffi::c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        if comm_errhandler_fn.is_null() || errhandler.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Comm_create_errhandler: NULL function or output",
            ));
        }
        // SAFETY: a C function of the standard's errhandler type (the caller's contract).
        let f: CommErrhandlerFn = unsafe { std::mem::transmute(comm_errhandler_fn) };
        let h = ERRHANDLERS
            .insert(f)
            .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many error handlers"))?;
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *errhandler = h };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Errhandler_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
    let r = (|| {
        if errhandler.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Errhandler_free: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let h = unsafe { *errhandler };
        if !matches!(
            h,
            MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN
        ) {
            // Communicators that use it keep its handle working (freed when unused in
            // MPI; here the slot stays until the handle is reused).
            ERRHANDLERS.get(h).ok_or(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: h,
            })?;
        }
        // SAFETY: as above.
        unsafe { *errhandler = MPI_ERRHANDLER_NULL };
        Ok(())
    })();
    on_self(r)
}
