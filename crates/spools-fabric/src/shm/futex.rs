//! Futex wait and wake on a word of a shared mapping (not process-private).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::thread::futex;
use rustix::time::Timespec;

/// Sleeps while `*word == expected`, at most `timeout`. Every outcome (woken, the value
/// already changed, interrupted, timed out) means "go and look", so none is an error.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // Shared (not PRIVATE): the word lives in a mapping other processes wait on.
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(&ts));
}

/// Wakes every thread sleeping on `word`, in any process.
pub(crate) fn wake(word: &AtomicU32) {
    // Waking nobody is not an error; the call cannot fail on a valid word.
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}
