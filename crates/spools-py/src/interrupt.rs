//! Ctrl-C in a wait: the interrupt check a wait asks before it sleeps runs Python's
//! signal handlers, and the exception they raised is kept for the failed call to raise.

use pyo3::prelude::*;

use crate::reentry::reentering;

thread_local! {
    /// The exception the interrupt check took from Python's signal handlers (Ctrl-C), for
    /// the failed call to raise instead of the error the interrupt caused. Per thread:
    /// the check runs on the waiting thread, and that thread raises the call's error
    /// (another thread's unrelated error never takes it).
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// The exception of an interrupt that ended a wait, if one did.
pub(crate) fn take_interrupt() -> Option<PyErr> {
    PENDING.with(|p| p.borrow_mut().take())
}

/// The interrupt check: runs Python's pending signal handlers (a wait asks only before
/// it sleeps, so this costs nothing while messages flow).
pub(crate) fn interrupt_check() -> bool {
    reentering(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// Re-delivers this thread's interrupt that no call raised (a wait in a `Drop` that
/// swallowed its error): Python raises `KeyboardInterrupt` at its next check, instead of
/// a later unrelated error turning into it. Run by every
/// [`blocking`](crate::runtime::blocking) call first; a `Drop` that waits may call it after
/// its wait.
pub(crate) fn redeliver_interrupt() {
    if take_interrupt().is_some() {
        // SAFETY: a plain C call of the limited API, documented as callable from any
        // thread, with or without the GIL.
        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
    }
}
