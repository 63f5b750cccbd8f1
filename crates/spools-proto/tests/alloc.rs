//! Length fields cannot make a decoder allocate: an oversized frame is refused from its
//! prefix alone, and counts and lengths inside a frame are checked against the bytes that
//! are really there before anything is reserved for them. A counting global allocator
//! (per thread, so parallel tests do not disturb each other) measures it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use spools_proto::am::AmHeader;
use spools_proto::boot::{decode_frame, Frame, ToRank, ToServer, MAX_FRAME, MAX_RANKS};
use spools_proto::WireError;

mod common;

struct Counting;

thread_local! {
    /// Bytes requested by this thread (allocations and growth), whatever was freed since.
    static REQUESTED: Cell<usize> = const { Cell::new(0) };
}

fn count(n: usize) {
    // `try_with`: nothing to count once the thread's locals are gone.
    let _ = REQUESTED.try_with(|c| c.set(c.get().saturating_add(n)));
}

// SAFETY: every method forwards to the system allocator with the caller's arguments,
// unchanged, so the system allocator's guarantees carry over; the counting itself does
// not allocate (a `const`-initialised thread-local `Cell` of an integer).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, hence from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from `System` with `layout`; the caller guarantees the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result and the bytes it requested from the allocator.
fn requested<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = REQUESTED.with(Cell::get);
    let r = f();
    let after = REQUESTED.with(Cell::get);
    (r, after - before)
}

#[test]
fn the_counter_counts() {
    let (v, n) = requested(|| vec![0u8; 1000]);
    assert_eq!(v.len(), 1000);
    assert!(n >= 1000, "{n}");
}

#[test]
fn oversized_frame_is_refused_without_allocating() {
    for len in [MAX_FRAME as u32 + 1, u32::MAX] {
        let mut buf = len.to_le_bytes().to_vec();
        buf.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 0]);
        let (r, n) = requested(|| decode_frame::<ToServer>(&buf));
        assert!(matches!(r, Err(WireError::TooLong { .. })), "{r:?}");
        assert_eq!(n, 0);
        let (r, n) = requested(|| decode_frame::<ToRank>(&buf[..4]));
        assert!(matches!(r, Err(WireError::TooLong { .. })), "{r:?}");
        assert_eq!(n, 0);
    }
    // A frame at the limit that has not arrived yet costs nothing either.
    let buf = (MAX_FRAME as u32).to_le_bytes();
    let (r, n) = requested(|| decode_frame::<ToRank>(&buf));
    assert_eq!(r, Ok(None));
    assert_eq!(n, 0);
}

#[test]
fn lying_lengths_inside_a_frame_do_not_allocate() {
    // ToServer::Collective announcing MAX_FRAME bytes of data, carrying 3.
    let mut body = vec![2u8];
    body.extend_from_slice(&7u64.to_le_bytes());
    body.push(2);
    body.extend_from_slice(&(MAX_FRAME as u32).to_le_bytes());
    body.extend_from_slice(b"abc");
    let (r, n) = requested(|| ToServer::decode_body(&body));
    assert!(matches!(r, Err(WireError::Truncated { .. })), "{r:?}");
    assert_eq!(n, 0);

    // ToRank::Table announcing MAX_RANKS endpoints, carrying one.
    let one = ToRank::Table {
        job: 1,
        endpoints: vec![Default::default()],
    }
    .encode();
    let mut body = one[4..].to_vec();
    body[9..13].copy_from_slice(&MAX_RANKS.to_le_bytes());
    let (r, n) = requested(|| ToRank::decode_body(&body));
    assert!(matches!(r, Err(WireError::Truncated { .. })), "{r:?}");
    assert!(n < 1024, "{n} bytes for a {}-byte body", body.len());

    // ToRank::Collective announcing MAX_RANKS parts, the first of MAX_FRAME bytes.
    let mut body = vec![2u8];
    body.extend_from_slice(&7u64.to_le_bytes());
    body.extend_from_slice(&MAX_RANKS.to_le_bytes());
    body.extend_from_slice(&(MAX_FRAME as u32).to_le_bytes());
    body.extend_from_slice(&[0; 16]);
    let (r, n) = requested(|| ToRank::decode_body(&body));
    assert!(matches!(r, Err(WireError::Truncated { .. })), "{r:?}");
    assert_eq!(n, 0);

    // Active-message headers never allocate: payloads are borrowed.
    let mut b = Vec::new();
    AmHeader::Batch { count: u16::MAX }.encode(&mut b);
    let (r, n) = requested(|| AmHeader::decode(&b).map(|_| ()));
    assert!(r.is_err());
    assert_eq!(n, 0);
}

proptest! {
    #![proptest_config(common::config())]

    /// Whatever the bytes, a decoder requests at most a small multiple of the input's size
    /// (the in-memory form of an entry is larger than its 4 or 16 wire bytes, and vectors
    /// grow by doubling).
    #[test]
    fn decoding_allocates_in_proportion_to_the_input(
        tag in 1u8..=5,
        count in prop_oneof![0u32..64, Just(MAX_RANKS)],
        fill in prop::collection::vec(any::<u8>(), 0..1024),
        zeros in any::<bool>(),
    ) {
        let mut body = vec![tag];
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&count.to_le_bytes());
        if zeros {
            // Empty entries: the most entries per input byte.
            body.extend(std::iter::repeat_n(0u8, fill.len()));
        } else {
            body.extend_from_slice(&fill);
        }
        let (_, n) = requested(|| {
            let _ = ToRank::decode_body(&body);
            let _ = ToServer::decode_body(&body);
            let _ = AmHeader::decode(&body);
        });
        prop_assert!(n <= 64 * body.len() + 1024, "{} bytes for a {}-byte body", n, body.len());
    }
}
