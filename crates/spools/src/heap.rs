//! Buffers in the shared heap ([`World::alloc`](crate::World::alloc)).

use std::marker::PhantomData;

use spools_heap::{HeapError, HeapRef, HeapSegment};
use spools_msg::Element;
use spools_proto::auth::Secret;

/// A buffer of `n` elements in the shared heap: a shared-memory segment of its own that
/// the ranks of the same host can map, so that transfers between such buffers take one
/// copy. It derefs to `[T]` and `&mut [T]`, so it goes wherever a slice goes. Zero-filled
/// when allocated; its first element is 4096-byte aligned.
///
/// Dropping it unmaps it and removes its name: a peer that still maps it keeps a valid
/// mapping (it reads stale bytes, never faults), and its next attempt to reach the buffer
/// fails with [`HeapError::Freed`]. As with any buffer handed to a non-blocking operation,
/// do not touch it while an operation that reads or writes it is in flight.
pub struct SharedBuf<T: Element> {
    seg: HeapSegment,
    n: usize,
    _elem: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for SharedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBuf")
            .field("elem", &T::NAME)
            .field("len", &self.n)
            .field("segment", &self.seg.name())
            .finish()
    }
}

impl<T: Element> SharedBuf<T> {
    /// Allocates `n` zeroed elements for `rank` of `job`.
    pub(crate) fn create(
        job: u64,
        rank: u32,
        secret: &Secret,
        n: usize,
    ) -> Result<SharedBuf<T>, HeapError> {
        let bytes = n
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(HeapError::TooLarge {
                elems: n,
                elem_bytes: std::mem::size_of::<T>(),
            })?;
        let seg = HeapSegment::create(job, rank, bytes, secret)?;
        Ok(SharedBuf {
            seg,
            n,
            _elem: PhantomData,
        })
    }

    /// Where the buffer's first byte lies in the shared heap (what a peer needs to map
    /// it); for a sub-slice, use [`spools_heap::lookup`].
    pub fn heap_ref(&self) -> HeapRef {
        HeapRef {
            name: self.seg.name(),
            offset: 0,
        }
    }
}

impl<T: Element> std::ops::Deref for SharedBuf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the segment holds n * size_of::<T>() zero-initialised bytes starting at a
        // 4096-aligned address (enough for any Element), mapped as long as `self`; every
        // bit pattern is a valid Element. Peers write into it only through operations
        // this rank started on it, during which the buffer is not to be touched.
        unsafe { std::slice::from_raw_parts(self.seg.data() as *const T, self.n) }
    }
}

impl<T: Element> std::ops::DerefMut for SharedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` makes the view exclusive in this process.
        unsafe { std::slice::from_raw_parts_mut(self.seg.data().cast::<T>(), self.n) }
    }
}

impl<T: Element> AsRef<[T]> for SharedBuf<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: Element> AsMut<[T]> for SharedBuf<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self
    }
}

// SAFETY: the segment's bytes stay mapped at one address for as long as the value lives
// (moving a SharedBuf moves only the handle), readable and writable; while the engine
// holds the value, nobody in this process can reach them (it owns the only handle), and
// peers reach them only through operations on this buffer that the owner started.
unsafe impl<T: Element> spools_msg::PinnedBuf for SharedBuf<T> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.seg.data()
    }
    fn len(&self) -> usize {
        self.seg.len()
    }
}
