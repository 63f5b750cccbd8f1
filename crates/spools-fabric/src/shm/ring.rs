//! A single-producer, single-consumer ring of cache-line cells in shared memory.
//!
//! A message occupies consecutive cells: an 8-byte header word (`len << 32 | stamp`) and
//! then the bytes. The producer copies the bytes and publishes the header last (release);
//! the consumer sees the header (acquire), hands out the bytes in place, then zeroes the
//! header word of every cell it consumed and publishes its position (`tail`). A stamp is
//! odd and encodes the lap, so a zeroed or stale cell never looks ready. A message that
//! would cross the end of the ring is preceded by a padding header that skips to the start.
//! A short message (up to `cell - 8` bytes) is one cache line: one line moves between the
//! cores, and no system call is made.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::Defect;

/// Header length in front of each message.
pub(crate) const HEADER: usize = 8;
const PAD: u32 = u32::MAX;

/// The consumer-owned control line of a ring.
#[repr(C, align(64))]
pub(crate) struct Ctrl {
    /// Cells consumed so far.
    pub(crate) tail: AtomicU64,
    /// Set by a producer that found the ring full; cleared by the consumer when it frees
    /// space (and then wakes the producer).
    pub(crate) producer_waiting: AtomicU32,
}

/// The words and bytes a ring's protocol works on. [`Shared`] is the real one, a control
/// line and cells inside a shared mapping; the model checker's (`ring_model.rs`) runs the
/// same protocol on memory it can watch.
///
/// # Safety
/// `header(idx)` for `idx < cells`, `tail` and `producer_waiting` stay valid for as long
/// as the value (and its copies) live; `write` and `read` touch only the bytes of the
/// cells they are given, after each cell's header word.
pub(crate) unsafe trait Cells {
    /// A 64-bit atomic word.
    type W64: Word<u64>;
    /// A 32-bit atomic word.
    type W32: Word<u32>;
    /// The header word of cell `idx` (`idx < cells`).
    fn header(&self, idx: u64) -> &Self::W64;
    /// Cells consumed so far (the consumer's).
    fn tail(&self) -> &Self::W64;
    /// The producer's "ring full, wake me" flag.
    fn producer_waiting(&self) -> &Self::W32;
    /// Copies `parts`, one after the other, into the cells from `idx` on, after the
    /// first cell's header word.
    ///
    /// # Safety
    /// The bytes fit in the cells from `idx` to the end of the ring, and the producer owns
    /// those cells (the consumer's tail is past them).
    unsafe fn write(&self, idx: u64, parts: &[&[u8]]);
    /// Hands `len` bytes from cell `idx` on (after its header word) to `f`.
    ///
    /// # Safety
    /// The bytes fit in the cells from `idx` to the end of the ring, and their header
    /// was seen published (acquire).
    unsafe fn read(&self, idx: u64, len: usize, f: &mut dyn FnMut(&[u8]));
}

/// An atomic word: what the protocol asks of `AtomicU64` and `AtomicU32`.
pub(crate) trait Word<T> {
    /// `load`.
    fn load(&self, order: Ordering) -> T;
    /// `store`.
    fn store(&self, v: T, order: Ordering);
    /// `swap`.
    fn swap(&self, v: T, order: Ordering) -> T;
}

impl Word<u64> for AtomicU64 {
    #[inline]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    #[inline]
    fn store(&self, v: u64, order: Ordering) {
        AtomicU64::store(self, v, order)
    }
    #[inline]
    fn swap(&self, v: u64, order: Ordering) -> u64 {
        AtomicU64::swap(self, v, order)
    }
}

impl Word<u32> for AtomicU32 {
    #[inline]
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    #[inline]
    fn store(&self, v: u32, order: Ordering) {
        AtomicU32::store(self, v, order)
    }
    #[inline]
    fn swap(&self, v: u32, order: Ordering) -> u32 {
        AtomicU32::swap(self, v, order)
    }
}

/// A ring's control line and cells inside a shared mapping.
#[derive(Clone, Copy)]
pub(crate) struct Shared {
    pub(crate) ctrl: *const Ctrl,
    data: *mut u8,
    cell_shift: u32,
}

// SAFETY: `Ring::new`'s contract: the control line and `cells << cell_shift` bytes of
// 64-byte-aligned cells live in a mapping that outlives every copy.
unsafe impl Cells for Shared {
    type W64 = AtomicU64;
    type W32 = AtomicU32;

    #[inline]
    fn header(&self, idx: u64) -> &AtomicU64 {
        // SAFETY: idx < cells, so the word lies inside the data area; cells are at least
        // 64-byte aligned, so the word is aligned for AtomicU64.
        unsafe { &*(self.data.add((idx << self.cell_shift) as usize) as *const AtomicU64) }
    }

    #[inline]
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: see `Ring::new`: the pointer is valid for the ring's life.
        unsafe { &(*self.ctrl).tail }
    }

    #[inline]
    fn producer_waiting(&self) -> &AtomicU32 {
        // SAFETY: as for `tail`.
        unsafe { &(*self.ctrl).producer_waiting }
    }

    #[inline]
    unsafe fn write(&self, idx: u64, parts: &[&[u8]]) {
        // SAFETY: the caller's contract: the bytes fit and are the producer's.
        unsafe {
            let mut dst = self.data.add((idx << self.cell_shift) as usize + HEADER);
            for p in parts {
                std::ptr::copy_nonoverlapping(p.as_ptr(), dst, p.len());
                dst = dst.add(p.len());
            }
        }
    }

    #[inline]
    unsafe fn read(&self, idx: u64, len: usize, f: &mut dyn FnMut(&[u8])) {
        // SAFETY: the caller's contract: the bytes fit and were published.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                self.data.add((idx << self.cell_shift) as usize + HEADER),
                len,
            )
        };
        f(bytes);
    }
}

/// A ring: its memory ([`Shared`] but in the model checker) and its geometry.
#[derive(Clone, Copy)]
pub(crate) struct Ring<C: Cells = Shared> {
    pub(crate) mem: C,
    cells: u64,
    cell_shift: u32,
}

// SAFETY: `Shared` is a pair of pointers into a shared mapping that outlives every ring
// (the transport keeps the mapping until it is dropped); access follows the SPSC protocol
// above, with the producer and consumer sides each used by one thread at a time (enforced
// by the transport's lane and receiver locks).
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

/// Producer-side private state.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TxState {
    pub(crate) head: u64,
    pub(crate) cached_tail: u64,
}

#[inline]
fn stamp(pos: u64, cell_bits: u32) -> u32 {
    (((pos >> cell_bits) as u32) << 1) | 1
}

impl Ring {
    /// # Safety
    /// `ctrl` must point to a `Ctrl` and `data` to `cells << cell_shift` bytes, both in a
    /// shared mapping that outlives the ring; `cells` must be a power of two.
    pub(crate) unsafe fn new(
        ctrl: *const Ctrl,
        data: *mut u8,
        cells: u64,
        cell_shift: u32,
    ) -> Ring {
        Ring {
            mem: Shared {
                ctrl,
                data,
                cell_shift,
            },
            cells,
            cell_shift,
        }
    }
}

impl<C: Cells> Ring<C> {
    /// A ring on `mem`, of `cells` cells (a power of two, at least 2) of `1 << cell_shift`
    /// bytes (at least 16).
    #[cfg(test)]
    pub(crate) fn on(mem: C, cells: u64, cell_shift: u32) -> Ring<C> {
        Ring {
            mem,
            cells,
            cell_shift,
        }
    }

    fn cell_bits(&self) -> u32 {
        self.cells.trailing_zeros()
    }

    #[inline]
    fn header(&self, idx: u64) -> &C::W64 {
        self.mem.header(idx)
    }

    /// Largest message that fits (half the ring, so that padding never blocks it).
    pub(crate) fn max_message(&self) -> usize {
        ((self.cells / 2) << self.cell_shift) as usize - HEADER
    }

    /// Largest message that fits in one cell.
    pub(crate) fn max_inline(&self) -> usize {
        (1usize << self.cell_shift) - HEADER
    }

    /// Writes one message made of `parts`; `false` if the ring lacks room.
    /// The caller has checked `len <= max_message()`.
    #[inline]
    pub(crate) fn try_write(&self, st: &mut TxState, parts: &[&[u8]], len: usize) -> bool {
        let cell = 1u64 << self.cell_shift;
        let k = (len as u64 + HEADER as u64).div_ceil(cell);
        let idx = st.head & (self.cells - 1);
        let pad = if idx + k > self.cells {
            self.cells - idx
        } else {
            0
        };
        let need = pad + k;
        if st.head + need - st.cached_tail > self.cells {
            st.cached_tail = self.mem.tail().load(Ordering::Acquire);
            if st.head + need - st.cached_tail > self.cells {
                return false;
            }
        }
        let bits = self.cell_bits();
        if pad > 0 {
            self.header(idx).store(
                (u64::from(PAD) << 32) | u64::from(stamp(st.head, bits)),
                Ordering::Release,
            );
            st.head += pad;
        }
        let idx = st.head & (self.cells - 1);
        // SAFETY: cells [idx, idx + k) lie inside the data area (idx + k <= cells after
        // padding) and belong to the producer until the header is published: the
        // consumer's tail is at most `head + need - cells` behind.
        unsafe { self.mem.write(idx, parts) };
        // A swap (a locked instruction on x86) publishes the header and is also the full
        // barrier between this store and the caller's check of the receiver's "sleeping"
        // flag (cheaper than a store followed by a fence).
        self.header(idx).swap(
            ((len as u64) << 32) | u64::from(stamp(st.head, bits)),
            Ordering::SeqCst,
        );
        st.head += k;
        true
    }

    /// Whether a message is ready at consumer position `pos`.
    #[inline]
    pub(crate) fn ready(&self, pos: u64) -> bool {
        // SeqCst (a plain load on x86): the other half of the receiver's
        // "sleeping"-then-recheck handshake with the sender's publishing swap.
        let h = self.header(pos & (self.cells - 1)).load(Ordering::SeqCst);
        h as u32 == stamp(pos, self.cell_bits())
    }

    /// Consumes up to `budget` messages from `*pos`, handing each to `f`; publishes the new
    /// tail and returns (messages consumed, whether a producer waits for space).
    /// `Err` describes a corrupt header.
    #[inline]
    pub(crate) fn drain(
        &self,
        pos: &mut u64,
        budget: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(usize, bool), Defect> {
        let start = *pos;
        let bits = self.cell_bits();
        let mask = self.cells - 1;
        let mut n = 0;
        while n < budget {
            let idx = *pos & mask;
            let h = self.header(idx).load(Ordering::Acquire);
            if h as u32 != stamp(*pos, bits) {
                break;
            }
            let len = (h >> 32) as u32;
            if len == PAD {
                self.header(idx).store(0, Ordering::Relaxed);
                *pos += self.cells - idx;
                continue;
            }
            let k = (u64::from(len) + HEADER as u64).div_ceil(1 << self.cell_shift);
            if idx + k > self.cells || k > self.cells / 2 {
                return Err(Defect::RingOverrun { len: len as usize });
            }
            // SAFETY: the header was published with release after the bytes were written;
            // the bytes lie inside the data area (checked above) and the producer does not
            // touch them until the tail moves past them.
            unsafe { self.mem.read(idx, len as usize, f) };
            for c in idx..idx + k {
                self.header(c).store(0, Ordering::Relaxed);
            }
            *pos += k;
            n += 1;
        }
        if *pos != start {
            // The swap publishes the tail and orders it before the load of the producer's
            // waiting flag (the other half of the producer's flag-then-recheck).
            self.mem.tail().swap(*pos, Ordering::SeqCst);
            let flag = self.mem.producer_waiting();
            let waiting = flag.load(Ordering::SeqCst) != 0 && flag.swap(0, Ordering::SeqCst) != 0;
            return Ok((n, waiting));
        }
        Ok((n, false))
    }

    /// Marks the producer as waiting for space (then re-checks).
    pub(crate) fn flag_full(&self, st: &mut TxState) {
        self.mem.producer_waiting().store(1, Ordering::SeqCst);
        st.cached_tail = self.mem.tail().load(Ordering::SeqCst);
    }

    /// Whether the consumer cleared this producer's waiting flag (space was freed).
    pub(crate) fn space_freed(&self) -> bool {
        self.mem.producer_waiting().load(Ordering::SeqCst) == 0
    }
}
