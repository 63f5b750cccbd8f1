//! Locks for the rank's state, chosen by its thread level ([`ThreadLevel`]).
//!
//! When several threads may call (`serialized`, `multiple`, or the progress thread), the
//! state is locked: [`RankLock`] is a mutex, the transports' `TryLock` (crate-private)
//! one compare-and-swap. When one thread drives the rank (`single`, `funneled`), the
//! state belongs to the thread that built it and is reached with no atomic
//! read-modify-write at all: a thread-local read and a compare check that the caller is
//! that thread, and a plain flag that no guard is already out. A call from another thread
//! ends the process with an error naming the level: the program broke the level it asked
//! for (MPI calls it erroneous), and going on would race.

use std::cell::{Cell, UnsafeCell};
use std::io::Write;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use spools_boot::config::ThreadLevel;

/// The calling thread's number, for the life of the process (a thread-local's address
/// may be reused by a later thread; these numbers never are). One atomic increment per
/// thread, on its first call.
#[inline]
fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: Cell<u64> = const { Cell::new(0) };
    }
    NUMBER.with(|n| match n.get() {
        0 => {
            let v = NEXT.fetch_add(1, Ordering::Relaxed);
            n.set(v);
            v
        }
        v => v,
    })
}

/// The owner a lock built at `level` gets: the calling thread when one thread drives the
/// rank, else none (0).
fn owner_at(level: ThreadLevel) -> u64 {
    if level.one_thread() {
        thread_number()
    } else {
        0
    }
}

/// Checks that the caller owns state owned by thread `owner`, ending the process if not.
#[inline]
fn check_owner(owner: u64, level: ThreadLevel) {
    if thread_number() != owner {
        misuse(
            "called from a thread other than the one that initialised",
            level,
        );
    }
}

#[cold]
fn misuse(what: &str, level: ThreadLevel) -> ! {
    // Not eprintln!: a closed stderr must not turn the abort into an unwind.
    let _ = writeln!(
        std::io::stderr(),
        "spools: the rank's messaging state was {what}, at thread level {level} \
         (SPOOLS_THREAD_LEVEL, or MPI_Init_thread's level): ask for \"serialized\" or \
         \"multiple\" to call from several threads"
    );
    std::process::abort()
}

/// A try-lock for state one thread uses at a time by design (a lane, the receive side):
/// an uncontended acquisition is one compare-and-swap, or, owned by the rank's one
/// thread, a load and a store.
pub(crate) struct TryLock<T> {
    held: AtomicBool,
    /// The owning thread's number; 0: any thread (locked).
    owner: u64,
    level: ThreadLevel,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `held` (acquire on lock, release on unlock);
// an owned lock is only ever acquired by its owner thread (checked on every acquisition).
unsafe impl<T: Send> Sync for TryLock<T> {}
// SAFETY: as above; T itself is Send.
unsafe impl<T: Send> Send for TryLock<T> {}

/// Access to a [`TryLock`]'s value; released when dropped, on the thread that took it
/// (neither `Send` nor `Sync` by itself: an owned lock's flag is only ever touched by its
/// owner thread).
pub(crate) struct Guard<'a, T> {
    lock: &'a TryLock<T>,
    _here: PhantomData<*const ()>,
}

// SAFETY: a shared guard gives out `&T` only, as `MutexGuard` does.
unsafe impl<T: Sync> Sync for Guard<'_, T> {}

impl<T> TryLock<T> {
    /// `value`, owned by the calling thread when `level` is single or funneled.
    pub(crate) fn new(value: T, level: ThreadLevel) -> Self {
        TryLock {
            held: AtomicBool::new(false),
            owner: owner_at(level),
            level,
            value: UnsafeCell::new(value),
        }
    }

    /// The state, or `None` while a guard is out (on another thread, or, owned, further
    /// up the owner's stack).
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Guard<'_, T>> {
        if self.owner != 0 {
            check_owner(self.owner, self.level);
            // Relaxed: only the owner thread reads or writes `held`.
            if self.held.load(Ordering::Relaxed) {
                return None;
            }
            self.held.store(true, Ordering::Relaxed);
            return Some(Guard {
                lock: self,
                _here: PhantomData,
            });
        }
        if self
            .held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            Some(Guard {
                lock: self,
                _here: PhantomData,
            })
        } else {
            None
        }
    }

    /// Spins (yielding) until the lock is free. Owned, a guard already out can only be
    /// further up the owner's stack, which would wait forever: that ends the process.
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            if self.owner != 0 {
                misuse("re-entered while in use", self.level);
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
        // A plain store either way (owned: only the owner reads it).
        self.lock.held.store(false, Ordering::Release);
    }
}

/// Who may reach a [`RankLock`]'s state, chosen when it is built.
enum Access<T> {
    /// Only thread `owner` (the one that built it): no lock.
    Owned {
        owner: u64,
        /// Set while the owner holds a guard: a second guard would alias it.
        busy: AtomicBool,
        value: UnsafeCell<T>,
    },
    /// Any thread, one at a time.
    Shared(Mutex<T>),
}

/// State that threads may wait for: a mutex at thread level `serialized` and
/// `multiple`; at `single` and `funneled`, plain memory of the thread that built it,
/// checked to be the caller on every access.
///
/// ```
/// use spools_boot::config::ThreadLevel;
/// use spools_fabric::lock::RankLock;
///
/// let owned = RankLock::new(1u32, ThreadLevel::Funneled);
/// assert!(owned.is_owned());
/// *owned.lock() += 1;
/// assert_eq!(*owned.lock(), 2);
/// let shared = RankLock::new(0u32, ThreadLevel::Multiple);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| *shared.lock() += 1);
///     }
/// });
/// assert_eq!(*shared.lock(), 2);
/// ```
pub struct RankLock<T> {
    access: Access<T>,
    level: ThreadLevel,
}

// SAFETY: `Shared` is a mutex. `Owned` hands its value out only to the owner thread
// (checked before every access, `RankLock::lock`), one guard at a time (`busy`), so no
// two threads ever touch the value; `T: Send` lets the owner be another thread than the
// one that drops it.
unsafe impl<T: Send> Sync for RankLock<T> {}

/// Access to a [`RankLock`]'s state; released when dropped. Reaching the value is one
/// pointer whichever way it is held (a branch per access made the protocol's code slower).
pub struct RankGuard<'a, T> {
    value: NonNull<T>,
    hold: Hold<'a, T>,
    /// Borrows the state mutably for `'a` (invariant in `T`, as a `&mut T`).
    _state: PhantomData<&'a mut T>,
}

/// What a guard releases.
enum Hold<'a, T> {
    /// The owner's `busy` flag.
    Owned(&'a AtomicBool),
    /// A held mutex (`value` points into it), unlocked when dropped.
    Shared { _locked: MutexGuard<'a, T> },
}

impl<T> RankLock<T> {
    /// `value`, owned by the calling thread when `level` is single or funneled.
    pub fn new(value: T, level: ThreadLevel) -> Self {
        let access = if level.one_thread() {
            Access::Owned {
                owner: thread_number(),
                busy: AtomicBool::new(false),
                value: UnsafeCell::new(value),
            }
        } else {
            Access::Shared(Mutex::new(value))
        };
        RankLock { access, level }
    }

    /// Whether one thread owns the state (no lock is taken).
    pub fn is_owned(&self) -> bool {
        matches!(self.access, Access::Owned { .. })
    }

    /// Whether the calling thread may reach the state: any thread when it is locked,
    /// only the owner when it is owned (for code that runs on whatever thread, such as a
    /// process's exit hook, and must not end the process for it).
    pub fn reachable_here(&self) -> bool {
        match &self.access {
            Access::Owned { owner, .. } => thread_number() == *owner,
            Access::Shared(_) => true,
        }
    }

    /// The state, waiting for other threads' guards. Owned, a call from another thread,
    /// or while the owner already holds a guard (which would wait forever), ends the
    /// process with an error naming the thread level.
    #[inline]
    pub fn lock(&self) -> RankGuard<'_, T> {
        match &self.access {
            Access::Owned { owner, busy, value } => self
                .owned(*owner, busy, value)
                .unwrap_or_else(|| misuse("re-entered while in use", self.level)),
            Access::Shared(m) => shared(m.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }

    /// The state, or `None` while a guard is out (on another thread, or, owned, further
    /// up the owner's stack). A lock poisoned by a panic is taken as it is. Owned, a call
    /// from another thread ends the process.
    #[inline]
    pub fn try_lock(&self) -> Option<RankGuard<'_, T>> {
        match &self.access {
            Access::Owned { owner, busy, value } => self.owned(*owner, busy, value),
            Access::Shared(m) => match m.try_lock() {
                Ok(g) => Some(shared(g)),
                Err(TryLockError::Poisoned(p)) => Some(shared(p.into_inner())),
                Err(TryLockError::WouldBlock) => None,
            },
        }
    }

    /// The owner's guard on owned state, or `None` while one is out; a caller other than
    /// the owner ends the process.
    #[inline]
    fn owned<'a>(
        &self,
        owner: u64,
        busy: &'a AtomicBool,
        value: &'a UnsafeCell<T>,
    ) -> Option<RankGuard<'a, T>> {
        check_owner(owner, self.level);
        // Relaxed: only the owner thread ever reads or writes `busy`.
        if busy.load(Ordering::Relaxed) {
            return None;
        }
        busy.store(true, Ordering::Relaxed);
        Some(RankGuard {
            // SAFETY: an UnsafeCell's pointer is never null.
            value: unsafe { NonNull::new_unchecked(value.get()) },
            hold: Hold::Owned(busy),
            _state: PhantomData,
        })
    }
}

/// The guard on shared state whose mutex `g` holds.
#[inline]
fn shared<T>(mut g: MutexGuard<'_, T>) -> RankGuard<'_, T> {
    RankGuard {
        value: NonNull::from(&mut *g),
        hold: Hold::Shared { _locked: g },
        _state: PhantomData,
    }
}

impl<T> Deref for RankGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: `value` points to the state, which this guard has to itself until it
        // drops: the owner thread with `busy` set, or the mutex held in `hold` (the value
        // lives in the mutex, so moving the guard does not move it).
        unsafe { self.value.as_ref() }
    }
}

impl<T> DerefMut for RankGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { self.value.as_mut() }
    }
}

impl<T> Drop for RankGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // A held mutex unlocks when `hold` drops, after this.
        if let Hold::Owned(busy) = self.hold {
            busy.store(false, Ordering::Relaxed);
        }
    }
}

/// Adds `n` to a counter that only the rank's one thread writes when `owned` (a load and
/// a store, no locked instruction), atomically otherwise.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let c = AtomicU64::new(5);
/// spools_fabric::lock::bump(&c, 2, true, Ordering::Release);
/// spools_fabric::lock::bump(&c, 3, false, Ordering::Release);
/// assert_eq!(c.load(Ordering::Relaxed), 10);
/// ```
#[inline]
pub fn bump(counter: &AtomicU64, n: u64, owned: bool, order: Ordering) {
    if owned {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), order);
    } else {
        counter.fetch_add(n, order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_state_counts_every_thread_and_owned_state_needs_no_lock() {
        let owned = RankLock::new(1u32, ThreadLevel::Single);
        assert!(owned.is_owned());
        *owned.lock() += 1;
        {
            let _g = owned.lock();
            assert!(
                owned.try_lock().is_none(),
                "a second owned guard would alias"
            );
        }
        assert_eq!(owned.try_lock().map(|g| *g), Some(2));
        let shared = std::sync::Arc::new(RankLock::new(0u32, ThreadLevel::Multiple));
        assert!(!shared.is_owned());
        std::thread::scope(|s| {
            for _ in 0..4 {
                let l = shared.clone();
                s.spawn(move || {
                    for _ in 0..1000 {
                        *l.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*shared.lock(), 4000);
    }

    #[test]
    fn an_owned_try_lock_is_refused_while_its_guard_is_out() {
        let t = TryLock::new(0u8, ThreadLevel::Funneled);
        let g = t.try_lock();
        assert!(g.is_some());
        assert!(t.try_lock().is_none());
        drop(g);
        assert!(t.try_lock().is_some());
        let shared = TryLock::new(0u8, ThreadLevel::Serialized);
        let g = shared.try_lock();
        assert!(g.is_some());
        std::thread::scope(|s| {
            let other = s.spawn(|| shared.try_lock().is_none()).join();
            assert!(matches!(other, Ok(true)));
        });
    }

    #[test]
    fn threads_get_distinct_numbers_for_life() {
        let me = thread_number();
        assert_eq!(thread_number(), me);
        let other = std::thread::spawn(thread_number).join().unwrap_or(me);
        assert_ne!(other, me);
    }
}
