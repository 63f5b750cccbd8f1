//! A fixed pool of equal buffers in one page-aligned allocation (registered with the
//! provider as one region), each with the context space an operation on it needs
//! (`struct fi_context2`: eight pointers, owned by the application until completion).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;
use std::ffi::c_void;

/// Pointers in one operation context (`fi_context2`).
const CONTEXT_WORDS: usize = 8;

/// The pool.
pub(crate) struct Pool {
    base: *mut u8,
    layout: Layout,
    slot: usize,
    count: usize,
    /// Written by the provider while an operation is in flight.
    contexts: Box<[UnsafeCell<[usize; CONTEXT_WORDS]>]>,
    /// Never freed: the provider may still hold buffers or contexts of it.
    leaked: bool,
}

impl Pool {
    /// `count` buffers of `slot` bytes.
    pub(crate) fn new(count: usize, slot: usize) -> Pool {
        let slot = slot.next_multiple_of(64);
        let layout = Layout::from_size_align(slot * count, 4096).unwrap_or_else(|_| {
            // The sizes are constants of this crate: a layout error is a bug.
            unreachable!("pool of {count} x {slot} bytes")
        });
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Pool {
            base,
            layout,
            slot,
            count,
            contexts: (0..count)
                .map(|_| UnsafeCell::new([0; CONTEXT_WORDS]))
                .collect(),
            leaked: false,
        }
    }

    /// Keeps the pool's memory and contexts allocated for the life of the process (the
    /// provider still holds operations on them that will never be completed).
    pub(crate) fn leak(&mut self) {
        self.leaked = true;
    }

    /// The first byte of the pool.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// The pool's length in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.layout.size()
    }

    /// Bytes of one buffer.
    pub(crate) fn slot_len(&self) -> usize {
        self.slot
    }

    /// The first byte of buffer `b` (`b` < count).
    pub(crate) fn slot(&self, b: u32) -> *mut u8 {
        debug_assert!((b as usize) < self.count);
        // SAFETY: `b` < count, so the offset stays inside the allocation.
        unsafe { self.base.add(b as usize * self.slot) }
    }

    /// The operation context of buffer `b`.
    pub(crate) fn context(&self, b: u32) -> *mut c_void {
        self.contexts[b as usize].get() as *mut c_void
    }

    /// The buffer whose context `ctx` is, if it is one of this pool's.
    pub(crate) fn index_of(&self, ctx: *mut c_void) -> Option<u32> {
        let first = self.contexts.as_ptr() as usize;
        let at = (ctx as usize).checked_sub(first)?;
        let size = std::mem::size_of::<UnsafeCell<[usize; CONTEXT_WORDS]>>();
        let b = at / size;
        (at % size == 0 && b < self.count).then_some(b as u32)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.leaked {
            std::mem::forget(std::mem::take(&mut self.contexts));
            return;
        }
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.base, self.layout) };
    }
}
