//! A minimal try-lock for state that one thread uses at a time by design (a lane, the
//! receive side): uncontended acquisition is one compare-and-swap.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct TryLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `held` (acquire on lock, release on unlock).
unsafe impl<T: Send> Sync for TryLock<T> {}
// SAFETY: as above; T itself is Send.
unsafe impl<T: Send> Send for TryLock<T> {}

pub(crate) struct Guard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> TryLock<T> {
    pub(crate) fn new(value: T) -> Self {
        TryLock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Guard<'_, T>> {
        if self
            .held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            Some(Guard { lock: self })
        } else {
            None
        }
    }

    /// Spins (yielding) until the lock is free.
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            std::thread::yield_now();
        }
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}
