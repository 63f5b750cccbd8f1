//! Generalized requests (`MPI_Grequest_start`, `MPI_Grequest_complete`): requests for
//! operations the program carries out itself (a thread of its own, a library's I/O),
//! which MPI's waits and tests then treat as any other. The program's three callbacks
//! give the status (`query_fn`, at each wait, test or status query that finds the
//! request complete), release its state (`free_fn`, once, when the request is freed by
//! a wait, a test or `MPI_Request_free`, after `MPI_Grequest_complete`) and cancel it
//! (`cancel_fn`, at `MPI_Cancel`, told whether it already completed).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::{empty_status, give, Op, ProgramOp};

/// `MPI_Grequest_query_function`.
type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
/// `MPI_Grequest_free_function`.
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// A generalized request: the program's callbacks and state, and whether the program
/// said it completed.
pub(crate) struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    /// The program's `extra_state` (an address, passed back as given).
    extra: usize,
    /// `MPI_Grequest_complete` was called.
    done: AtomicBool,
    /// The program freed the request (`MPI_Request_free`) before it completed: `free_fn`
    /// runs at `MPI_Grequest_complete`.
    orphan: AtomicBool,
}

/// The generalized requests not yet completed, by handle: `MPI_Grequest_complete` finds
/// them here even after the program freed its handle (the handle is not reused
/// meanwhile, see [`orphan`]).
static PENDING: Mutex<Vec<(MPI_Request, Arc<Greq>)>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<(MPI_Request, Arc<Greq>)>> {
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The error a callback returned: its code, as the program gave it.
fn failed(code: c_int, what: &'static str) -> MpiError {
    MpiError::Program { code, what }
}

impl ProgramOp for Greq {
    /// Whether `MPI_Grequest_complete` was called.
    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits until the program completes it (another of its threads calls
    /// `MPI_Grequest_complete`).
    fn wait_done(&self) {
        while !self.is_done() {
            std::thread::yield_now();
        }
    }

    /// The status the program's `query_fn` gives.
    ///
    /// # Errors
    /// The error code `query_fn` returned.
    fn query(&self) -> Result<MPI_Status, MpiError> {
        let mut s = empty_status();
        if let Some(q) = self.query {
            // SAFETY: the program's callback of the standard's type, with its own state
            // and a status that lives for the call.
            let rc = unsafe { q(self.extra as *mut c_void, &mut s) };
            if rc != MPI_SUCCESS {
                return Err(failed(rc, "MPI_Grequest_query_function"));
            }
        }
        Ok(s)
    }

    /// Runs the program's `free_fn`.
    ///
    /// # Errors
    /// The error code `free_fn` returned.
    fn release(&self) -> Result<(), MpiError> {
        if let Some(f) = self.free {
            // SAFETY: the program's callback of the standard's type, with its own state.
            let rc = unsafe { f(self.extra as *mut c_void) };
            if rc != MPI_SUCCESS {
                return Err(failed(rc, "MPI_Grequest_free_function"));
            }
        }
        Ok(())
    }

    /// `MPI_Cancel` on it: the program's `cancel_fn`, told whether it completed.
    ///
    /// # Errors
    /// The error code `cancel_fn` returned.
    fn cancel(&self) -> Result<(), MpiError> {
        if let Some(c) = self.cancel {
            // SAFETY: the program's callback of the standard's type, with its own state.
            let rc = unsafe { c(self.extra as *mut c_void, c_int::from(self.is_done())) };
            if rc != MPI_SUCCESS {
                return Err(failed(rc, "MPI_Grequest_cancel_function"));
            }
        }
        Ok(())
    }

    /// `MPI_Request_free` before it completed: `free_fn` runs at its completion.
    /// Whether it completed already (then the caller runs `free_fn` now).
    fn orphan(&self) -> bool {
        let g = pending();
        if self.is_done() {
            return true;
        }
        self.orphan.store(true, Ordering::Release);
        drop(g);
        false
    }
}

/// A callback argument: NULL or a function of type `F`.
///
/// # Safety
/// `p` is NULL or a function of the type `F` names.
unsafe fn callback<F: Copy>(p: *const c_void) -> Option<F> {
    // SAFETY: the caller's contract; a function pointer and a data pointer have the
    // same size on every platform the standard ABI covers.
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*const c_void, F>(&p) })
}

/// `MPI_Grequest_start`: a request for an operation the program carries out; it
/// completes when the program calls `MPI_Grequest_complete`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Grequest_start(
    query_fn: *const c_void,
    free_fn: *const c_void,
    cancel_fn: *const c_void,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    let g = Arc::new(Greq {
        // SAFETY: the program passes functions of the standard's types (or NULL).
        query: unsafe { callback::<QueryFn>(query_fn) },
        // SAFETY: as above.
        free: unsafe { callback::<FreeFn>(free_fn) },
        // SAFETY: as above.
        cancel: unsafe { callback::<CancelFn>(cancel_fn) },
        extra: extra_state as usize,
        done: AtomicBool::new(false),
        orphan: AtomicBool::new(false),
    });
    on_self((|| {
        let mut p = pending();
        let h = give(Op::Greq(g.clone()), MPI_COMM_SELF)?;
        p.push((h, g));
        drop(p);
        // SAFETY: the caller's contract.
        unsafe { out(request, h, "MPI_Grequest_start") }
    })())
}

/// `MPI_Grequest_complete`: the program's operation is done; a wait for the request
/// can now return. A request the program freed before is released here (`free_fn`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Grequest_complete(request: MPI_Request) -> c_int {
    let mut p = pending();
    let Some(i) = p.iter().position(|(h, _)| *h == request) else {
        drop(p);
        return on_self(Err(MpiError::invalid(
            MPI_ERR_REQUEST,
            format!(
                "MPI_Grequest_complete: request {request:#x} is not a generalized request \
                 waiting for completion"
            ),
        )));
    };
    let (h, g) = p.swap_remove(i);
    g.done.store(true, Ordering::Release);
    drop(p);
    if g.orphan.load(Ordering::Acquire) {
        crate::p2p::request::forget(h);
        return on_self(g.release());
    }
    MPI_SUCCESS
}
