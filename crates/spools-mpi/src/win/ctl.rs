//! A window's control block at one rank: the words origins take and release in shared
//! memory, with no message to the target and no call of the target's (passive target
//! made truly passive): the passive-target lock, the accumulate lock that makes
//! accumulates element-wise atomic, and, for a dynamic window, the regions attached.
//!
//! Each rank's block lives in a shared-heap buffer of its own; the ranks of the window
//! map every block (windows are built within one host).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Most regions attached to a dynamic window at one rank at a time (a linked list of
/// a thousand elements, each attached, as MPICH's tests build).
pub(crate) const MAX_ATTACH: usize = 1024;

/// The writer bit of [`Ctl::lock`]; the bits below count shared holders.
const WRITER: u64 = 1 << 63;

/// The control block (`#[repr(C)]`: its layout is the same in every rank's mapping).
#[repr(C)]
pub(crate) struct Ctl {
    /// The passive-target lock: [`WRITER`] when held exclusively, else the number of
    /// shared holders.
    lock: AtomicU64,
    /// Held (1) while an accumulate reads, combines and writes this rank's memory.
    acc: AtomicU32,
    /// Regions attached to a dynamic window, written under `acc`.
    attached: AtomicU32,
    /// One past the highest slot of `regions` ever used: lookups go no further (a
    /// region takes the lowest free slot).
    high: AtomicU32,
    /// `(address, length)` of each attached region (0 length: a free slot).
    regions: [[AtomicU64; 2]; MAX_ATTACH],
}

/// Bytes of a control block.
pub(crate) const CTL_BYTES: usize = std::mem::size_of::<Ctl>();

/// A lock type of `MPI_Win_lock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    Shared,
    Exclusive,
}

impl Ctl {
    /// Takes the passive-target lock if it is free for `kind`; whether it did.
    pub(crate) fn try_lock(&self, kind: LockKind) -> bool {
        match kind {
            LockKind::Exclusive => self
                .lock
                .compare_exchange(0, WRITER, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok(),
            LockKind::Shared => {
                let v = self.lock.load(Ordering::Relaxed);
                v & WRITER == 0
                    && self
                        .lock
                        .compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
            }
        }
    }

    /// Releases the passive-target lock taken as `kind`.
    pub(crate) fn unlock(&self, kind: LockKind) {
        // A release that does not match the word (a stray or repeated unlock) leaves it
        // as it is, rather than wrapping it into a lock nobody holds.
        match kind {
            LockKind::Exclusive => {
                let _ = self
                    .lock
                    .compare_exchange(WRITER, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
            LockKind::Shared => {
                let _ = self
                    .lock
                    .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |v| {
                        (v & WRITER == 0 && v > 0).then(|| v - 1)
                    });
            }
        }
    }

    /// Takes the accumulate lock if it is free; whether it did.
    pub(crate) fn try_acc(&self) -> bool {
        self.acc
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the accumulate lock.
    pub(crate) fn release_acc(&self) {
        self.acc.store(0, Ordering::Release);
    }

    /// Records an attached region (under the accumulate lock); `false` when every slot
    /// is taken.
    pub(crate) fn attach(&self, addr: u64, len: u64) -> bool {
        for (i, r) in self.regions.iter().enumerate() {
            if r[1].load(Ordering::Relaxed) == 0 {
                r[0].store(addr, Ordering::Relaxed);
                r[1].store(len, Ordering::Release);
                self.attached.fetch_add(1, Ordering::Relaxed);
                self.high.fetch_max(i as u32 + 1, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// The slots that may hold a region.
    fn used(&self) -> &[[AtomicU64; 2]] {
        let n = (self.high.load(Ordering::Acquire) as usize).min(MAX_ATTACH);
        &self.regions[..n]
    }

    /// Forgets the region attached at `addr` (under the accumulate lock); whether one
    /// was.
    pub(crate) fn detach(&self, addr: u64) -> bool {
        for r in self.used() {
            if r[1].load(Ordering::Relaxed) != 0 && r[0].load(Ordering::Relaxed) == addr {
                r[1].store(0, Ordering::Release);
                self.attached.fetch_sub(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Whether `[addr, addr + len)` lies within attached memory: one region, or
    /// regions that adjoin (attached one after another from one allocation).
    pub(crate) fn covers(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        // The region holding byte `at`, by its end.
        let holding = |at: u64| {
            self.used().iter().find_map(|r| {
                // The length first (acquire): the address stored before it is then seen.
                let l = r[1].load(Ordering::Acquire);
                let a = r[0].load(Ordering::Relaxed);
                (l != 0 && at >= a && at - a < l).then(|| a.saturating_add(l))
            })
        };
        let mut at = addr;
        loop {
            match holding(at) {
                Some(e) if e >= end => return true,
                Some(e) => at = e,
                None => {
                    return len == 0 && holding(addr.saturating_sub(1)).is_some_and(|e| e >= addr)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Box<Ctl> {
        // SAFETY: every field is an atomic integer, for which all-zero bytes are valid.
        Box::new(unsafe { std::mem::zeroed() })
    }

    #[test]
    fn shared_holders_exclude_a_writer_and_a_writer_excludes_all() {
        let c = block();
        assert!(c.try_lock(LockKind::Shared));
        assert!(c.try_lock(LockKind::Shared));
        assert!(!c.try_lock(LockKind::Exclusive));
        c.unlock(LockKind::Shared);
        assert!(!c.try_lock(LockKind::Exclusive));
        c.unlock(LockKind::Shared);
        assert!(c.try_lock(LockKind::Exclusive));
        assert!(!c.try_lock(LockKind::Shared));
        assert!(!c.try_lock(LockKind::Exclusive));
        c.unlock(LockKind::Exclusive);
        assert!(c.try_lock(LockKind::Shared));
        // Stray releases change nothing.
        c.unlock(LockKind::Exclusive);
        c.unlock(LockKind::Shared);
        c.unlock(LockKind::Shared);
        assert!(c.try_lock(LockKind::Exclusive));
    }

    #[test]
    fn attached_regions_cover_only_their_bytes() {
        let c = block();
        assert!(!c.covers(100, 1));
        assert!(c.attach(100, 50));
        assert!(c.covers(100, 50) && c.covers(120, 30));
        assert!(!c.covers(99, 2) && !c.covers(140, 11) && !c.covers(u64::MAX, 2));
        // Adjoining regions cover an access across them; a gap does not.
        assert!(c.attach(150, 50));
        assert!(c.covers(140, 20) && c.covers(100, 100) && !c.covers(100, 101));
        assert!(c.detach(150));
        assert!(c.detach(100) && !c.detach(100));
        assert!(!c.covers(100, 1));
        for i in 0..MAX_ATTACH as u64 {
            assert!(c.attach(1000 * (i + 1), 10));
        }
        assert!(!c.attach(1, 1));
    }
}
