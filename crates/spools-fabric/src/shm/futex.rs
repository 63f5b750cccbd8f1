//! Futex wait and wake on a word of a shared mapping (not process-private).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout`.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    // SAFETY: `word` is a valid, aligned 32-bit word for the duration of the call (it lives
    // in a mapping owned by the caller's transport); FUTEX_WAIT only reads it. Errors
    // (EAGAIN when the value already changed, EINTR, ETIMEDOUT) all mean "go and look".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every thread sleeping on `word`, in any process.
pub(crate) fn wake(word: &AtomicU32) {
    // SAFETY: as for `wait`; FUTEX_WAKE does not access the word's memory beyond hashing
    // its address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
