//! The handshake between a rank's threads going to sleep and the threads that wake them,
//! on two words of its segment's header: the doorbell (the futex word, moved by every
//! wake-up) and `sleeping` (who sleeps: futex sleepers in the low 16 bits, sleepers in an
//! event loop watching the rank's bell in units of [`BELL_SLEEPER`]).
//!
//! A sleeper announces itself (raises `sleeping`), then looks for work, and sleeps only if
//! it found none; a waker makes its work visible (a message's publishing swap in
//! `Ring::try_write`, or the doorbell's increment), then reads `sleeping` and wakes the
//! kinds of sleeper it finds. Every access is `SeqCst`, so of a sleeper's announcement and
//! a waker's read one comes first in the single order of `SeqCst` accesses: either the
//! sleeper's look sees the work, or the waker sees the sleeper. A futex sleeper sleeps on
//! the doorbell's value read before its announcement, so a wake-up that moved the doorbell
//! since makes its wait return at once.
//!
//! The code is written over [`FutexWord`], so that the model checker (`futex_model.rs`)
//! runs this same code on loom's words; the transport's words are the mapping's
//! `AtomicU32`s.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::bell::BELL_SLEEPER;
use super::futex::FutexWord;

/// A rank's doorbell and `sleeping` words.
pub(crate) struct Sleepers<'a, W: FutexWord = AtomicU32> {
    doorbell: &'a W,
    sleeping: &'a W,
}

impl<'a, W: FutexWord> Sleepers<'a, W> {
    /// The handshake on a rank's `doorbell` and `sleeping` words.
    #[inline]
    pub(crate) fn new(doorbell: &'a W, sleeping: &'a W) -> Sleepers<'a, W> {
        Sleepers { doorbell, sleeping }
    }

    /// A thread of the rank sleeps on its futex, at most `timeout`, unless
    /// `nothing_to_do` (asked after the sleep is announced) finds work
    /// (`Transport::wait`).
    #[inline]
    pub(crate) fn sleep(&self, timeout: Duration, nothing_to_do: impl FnOnce() -> bool) {
        let ticket = self.doorbell.load(Ordering::SeqCst);
        self.sleeping.fetch_add(1, Ordering::SeqCst);
        if nothing_to_do() {
            self.doorbell.wait(ticket, timeout);
        }
        self.sleeping.fetch_sub(1, Ordering::SeqCst);
    }

    /// A thread of the rank announces a sleep in an event loop watching the rank's bell
    /// (senders ring it from now on), then asks `nothing_to_do`; `false`: there is work,
    /// do not sleep. Always followed by [`Sleepers::end_bell_sleep`].
    #[inline]
    pub(crate) fn begin_bell_sleep(&self, nothing_to_do: impl FnOnce() -> bool) -> bool {
        self.sleeping.fetch_add(BELL_SLEEPER, Ordering::SeqCst);
        nothing_to_do()
    }

    /// Ends what [`Sleepers::begin_bell_sleep`] began (the caller then empties the bell).
    #[inline]
    pub(crate) fn end_bell_sleep(&self) {
        self.sleeping.fetch_sub(BELL_SLEEPER, Ordering::SeqCst);
    }

    /// A sender, after publishing a message to the rank (with a `SeqCst` access, the
    /// ring's publishing swap, so no fence here): wakes the rank's sleepers if it has
    /// any, its bell through `ring_bell`. Returns whether it woke some.
    #[inline]
    pub(crate) fn notify(&self, ring_bell: impl FnOnce()) -> bool {
        // SeqCst (a plain load on x86): with the publishing swap, the sender's half of
        // the store-then-load handshake with a receiver going to sleep.
        let sleeping = self.sleeping.load(Ordering::SeqCst);
        if sleeping == 0 {
            return false;
        }
        self.doorbell.fetch_add(1, Ordering::SeqCst);
        self.rouse(sleeping, ring_bell);
        true
    }

    /// Wakes the rank's sleepers with nothing published but the doorbell's move (space
    /// freed for a blocked sender, `Transport::wake`): the move, then the look at
    /// `sleeping`.
    #[inline]
    pub(crate) fn wake(&self, ring_bell: impl FnOnce()) {
        self.doorbell.fetch_add(1, Ordering::SeqCst);
        let sleeping = self.sleeping.load(Ordering::SeqCst);
        if sleeping != 0 {
            self.rouse(sleeping, ring_bell);
        }
    }

    /// Wakes the sleepers that `sleeping` (read after the doorbell's move or the
    /// message's publication) counts: those on the futex, and the bell's.
    #[inline]
    fn rouse(&self, sleeping: u32, ring_bell: impl FnOnce()) {
        if sleeping % BELL_SLEEPER != 0 {
            self.doorbell.wake();
        }
        if sleeping >= BELL_SLEEPER {
            ring_bell();
        }
    }
}
