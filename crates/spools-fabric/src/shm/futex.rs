//! Futex wait and wake on a word of a shared mapping (not process-private).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rustix::thread::futex;
use rustix::time::Timespec;

use super::ring::Word;

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

/// A 32-bit word that threads count themselves into and out of, and sleep on: what the
/// sleep handshake (`sleep.rs`) asks of a segment's doorbell and `sleeping` words. The
/// real one is an `AtomicU32` of the mapping with the futex calls above; the model
/// checker's (`futex_model.rs`) is a loom word with a lock and a condition variable that
/// keep a futex's promise: a wait returns at once when the word no longer holds the value
/// it was given, and a wake reaches every waiter that found it did.
pub(crate) trait FutexWord: Word<u32> {
    /// `fetch_add`.
    fn fetch_add(&self, v: u32, order: Ordering) -> u32;
    /// `fetch_sub`.
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32;
    /// [`wait`] on this word.
    fn wait(&self, expected: u32, timeout: Duration);
    /// [`wake`] on this word.
    fn wake(&self);
}

impl FutexWord for AtomicU32 {
    #[inline]
    fn fetch_add(&self, v: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, v, order)
    }
    #[inline]
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, v, order)
    }
    #[inline]
    fn wait(&self, expected: u32, timeout: Duration) {
        wait(self, expected, timeout);
    }
    #[inline]
    fn wake(&self) {
        wake(self);
    }
}
