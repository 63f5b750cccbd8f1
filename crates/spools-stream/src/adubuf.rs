//! The buffer of an ADU being received, shared by the threads of its links: each writes the
//! SUs it claimed ([`Claim`]) straight into it, at once, without a lock; the reassembly hands
//! out the bytes once every SU is in.
//!
//! The soundness argument: a [`Claim`] is made only by the reassembly, under its lock, for
//! an SU `(TU, SU)` of the ADU that nobody claimed before, and the ranges of distinct SUs
//! of one ADU (one size, one TU size, one link count: the stream's) are disjoint
//! (`spools_proto::stream::su_range`). So the slices handed out by claims never overlap, and
//! the buffer lives as long as any claim holds it (an `Arc`).

use std::cell::UnsafeCell;
use std::sync::Arc;

/// The bytes of one ADU.
pub(crate) struct AduBuf {
    bytes: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the bytes are written only through `Claim::dest`, whose slices are disjoint (see
// the module's documentation) and read only by `into_vec`, which needs the one reference
// left, once no claim exists.
unsafe impl Sync for AduBuf {}

impl AduBuf {
    /// A buffer of `size` bytes (the caller checked `size` against its limits): `reused`,
    /// a buffer of exactly that size whose old bytes are all overwritten before anyone
    /// reads them (an ADU is read only once whole), or a zeroed one.
    pub(crate) fn new(size: usize, reused: Option<Vec<u8>>) -> Arc<AduBuf> {
        let bytes: Box<[u8]> = match reused {
            Some(v) if v.len() == size && v.capacity() == size => v.into_boxed_slice(),
            _ => {
                let b = vec![0u8; size].into_boxed_slice();
                huge_pages(&b);
                b
            }
        };
        // SAFETY: `UnsafeCell<u8>` has the same layout as `u8` (it is `repr(transparent)`),
        // so a boxed slice of one is a boxed slice of the other, with the same allocation.
        let bytes = unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) };
        Arc::new(AduBuf { bytes })
    }

    /// The bytes, once this is the last reference (every claim completed); else a copy.
    pub(crate) fn into_vec(this: Arc<AduBuf>) -> Vec<u8> {
        match Arc::try_unwrap(this) {
            Ok(b) => {
                let raw = Box::into_raw(b.bytes) as *mut [u8];
                // SAFETY: the reverse of `new`'s cast, on the allocation it made.
                Vec::from(unsafe { Box::from_raw(raw) })
            }
            Err(shared) => shared
                .bytes
                .iter()
                .map(|c| {
                    // SAFETY: never reached while a claim writes: the reassembly completes
                    // every claim (dropping it) before it hands an ADU out.
                    unsafe { *c.get() }
                })
                .collect(),
        }
    }
}

/// Buffers from this size on ask for transparent huge pages.
const HUGE_FROM: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of a large, fresh buffer with huge
/// pages: receiving into it then takes a page fault per 2 MiB rather than per 4 KiB, which
/// otherwise costs more than the copy from the socket. Only advice: nothing changes when
/// the kernel does not follow it.
fn huge_pages(bytes: &[u8]) {
    const HUGE: usize = 2 << 20;
    if bytes.len() < HUGE_FROM {
        return;
    }
    let start = bytes.as_ptr() as usize;
    let from = start.next_multiple_of(HUGE);
    let to = (start + bytes.len()) / HUGE * HUGE;
    if to > from {
        // SAFETY: the range lies inside `bytes`' allocation, which this module owns; the
        // advice changes how its pages are backed, not their contents (they are zero and
        // stay so).
        let _ = unsafe {
            rustix::mm::madvise(
                from as *mut std::ffi::c_void,
                to - from,
                rustix::mm::Advice::LinuxHugepage,
            )
        };
    }
}

/// The right to write bytes `at..at + len` of an ADU's buffer: one SU, claimed once.
pub(crate) struct Claim {
    buf: Arc<AduBuf>,
    at: usize,
    len: usize,
}

impl Claim {
    /// Made by the reassembly only, for an SU no one claimed before (see the module).
    pub(crate) fn new(buf: Arc<AduBuf>, at: usize, len: usize) -> Option<Claim> {
        (at.checked_add(len)? <= buf.bytes.len()).then_some(Claim { buf, at, len })
    }

    /// Where the SU's payload goes.
    pub(crate) fn dest(&mut self) -> &mut [u8] {
        let cells = &self.buf.bytes[self.at..self.at + self.len];
        // SAFETY: the range is inside the buffer (checked in `new`), no other claim covers
        // any byte of it (the module's argument), and `&mut self` makes this the only
        // slice of this claim at a time; `UnsafeCell<u8>` has the layout of `u8`.
        unsafe { std::slice::from_raw_parts_mut(UnsafeCell::raw_get(cells.as_ptr()), self.len) }
    }
}
