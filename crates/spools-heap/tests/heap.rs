//! The shared heap within one process: segments created, found by address, mapped again
//! through the peer cache as a same-host peer would, names off the wire checked, and what
//! a reader sees once the owner freed the buffer. (Real peers in separate processes:
//! `crates/spools/tests/heap.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_heap::{lookup, HeapError, HeapName, HeapNameError, HeapRef, HeapSegment, PeerHeaps};
use spools_proto::auth::Secret;

/// A job id of this test process alone (its pid in the high bits), so that names never
/// meet another test's.
fn job(n: u64) -> u64 {
    (u64::from(std::process::id()) << 16) | 0xbe00 | n
}

fn secret() -> Secret {
    Secret::from_bytes([7; 16])
}

fn fill(seg: &HeapSegment) {
    for i in 0..seg.len() {
        // SAFETY: i < len: inside the segment this test owns; no one else writes it.
        unsafe { seg.data().add(i).write(i as u8 ^ 0x5a) };
    }
}

fn leftovers(job: u64) -> Vec<String> {
    spools_testkit::shm_leftovers(&format!("{job:016x}"))
}

#[test]
fn lookup_finds_sub_slices_only_inside_live_segments() {
    let j = job(1);
    let seg = HeapSegment::create(j, 0, 10_000, &secret()).unwrap();
    assert_eq!(seg.data() as usize % 4096, 0, "user bytes are page aligned");
    let base = seg.data() as *const u8;
    let whole = lookup(base, 10_000).unwrap();
    assert_eq!(
        whole,
        HeapRef {
            name: seg.name(),
            offset: 0
        }
    );
    let sub = lookup(base.wrapping_add(100), 900).unwrap();
    assert_eq!(sub.offset, 100);
    assert!(
        lookup(base.wrapping_add(9_999), 2).is_none(),
        "range crossing the end"
    );
    assert!(lookup(base, 10_001).is_none());
    let v: Vec<u8> = (0..64).collect();
    assert!(lookup(v.as_ptr(), v.len()).is_none(), "an ordinary Vec");
    let name = seg.name();
    drop(seg);
    // Another test of this process may map a segment of its own at the freed address
    // meanwhile: the lookup must not find this one.
    assert!(
        lookup(base, 1).is_none_or(|r| r.name != name),
        "a freed segment is no longer found"
    );
    assert!(leftovers(j).is_empty(), "{:?} of {name}", leftovers(j));
}

#[test]
fn a_peer_cache_maps_the_segment_and_reads_its_bytes() {
    let j = job(2);
    let seg = HeapSegment::create(j, 3, 5_000, &secret()).unwrap();
    fill(&seg);
    // The reference goes over the wire as bytes.
    let r = lookup(seg.data().wrapping_add(1_000), 3_000).unwrap();
    let wire = r.to_bytes();
    let r = HeapRef::from_bytes(&wire).unwrap();
    let peers = PeerHeaps::new(j, secret());
    let pb = peers.bytes(&r, 3_000).unwrap();
    assert_eq!(pb.len(), 3_000);
    let mut got = vec![0u8; 3_000];
    pb.copy_to(0, &mut got).unwrap();
    let want: Vec<u8> = (1_000..4_000).map(|i| i as u8 ^ 0x5a).collect();
    assert_eq!(got, want);
    // Writes go through to the owner's memory.
    // SAFETY: nothing in this process borrows the peer's segment.
    unsafe { pb.copy_from(10, b"peer") }.unwrap();
    // SAFETY: 1_010 + 4 <= len; the write above happened before in this thread.
    let seen = unsafe { std::slice::from_raw_parts(seg.data().add(1_010), 4) };
    assert_eq!(seen, b"peer");
    // Out of the range handed out, and out of the segment.
    assert!(matches!(
        pb.copy_to(2_999, &mut [0; 2]),
        Err(HeapError::OutOfRange { .. })
    ));
    let far = HeapRef { offset: 4_000, ..r };
    assert!(matches!(
        peers.bytes(&far, 1_001),
        Err(HeapError::OutOfRange { .. })
    ));
    let huge = HeapRef {
        offset: u64::MAX,
        ..r
    };
    assert!(matches!(
        peers.bytes(&huge, 2),
        Err(HeapError::OutOfRange { .. })
    ));
    // Mapped once, then cached.
    peers.bytes(&r, 1).unwrap();
    assert_eq!(peers.mapped(), 1);
    drop(seg);
    assert!(leftovers(j).is_empty());
}

#[test]
fn names_off_the_wire_are_checked() {
    assert_eq!(
        HeapRef::from_bytes(b"short"),
        Err(HeapNameError::Length {
            want: HeapRef::WIRE_BYTES,
            got: 5
        })
    );
    let mut bad = HeapRef {
        name: HeapName::new(1, 0, 0),
        offset: 0,
    }
    .to_bytes();
    bad[0] = b'X';
    assert_eq!(
        HeapRef::from_bytes(&bad),
        Err(HeapNameError::Marker(b'X', 1))
    );
    assert!(HeapRef::from_bytes(&[0xff; HeapRef::WIRE_BYTES]).is_err());
    let j = job(3);
    let peers = PeerHeaps::new(j, secret());
    // Another job's name.
    let other = HeapRef {
        name: HeapName::new(j + 1, 0, 0),
        offset: 0,
    };
    assert!(matches!(
        peers.bytes(&other, 0),
        Err(HeapError::ForeignJob { .. })
    ));
    // A well-formed name of this job that no segment has.
    let none = HeapRef {
        name: HeapName::new(j, 0, u64::MAX),
        offset: 0,
    };
    assert!(matches!(peers.bytes(&none, 0), Err(HeapError::Open { .. })));
    // A segment stamped with another secret.
    let seg = HeapSegment::create(j, 1, 100, &Secret::from_bytes([8; 16])).unwrap();
    let r = HeapRef {
        name: seg.name(),
        offset: 0,
    };
    assert!(matches!(
        peers.bytes(&r, 1),
        Err(HeapError::NotASegment { .. })
    ));
    // Something else under a heap segment's name.
    let fake = HeapName::new(j, 2, 0);
    let path = format!("/dev/shm{}", fake.shm_name());
    std::fs::write(&path, vec![0u8; 8192]).unwrap();
    let r = HeapRef {
        name: fake,
        offset: 0,
    };
    let res = peers.bytes(&r, 1);
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(res, Err(HeapError::NotASegment { .. })), "{res:?}");
    drop(seg);
    assert!(leftovers(j).is_empty());
}

#[test]
fn a_reader_keeps_its_mapping_when_the_owner_frees_the_buffer() {
    let j = job(4);
    let seg = HeapSegment::create(j, 0, 1 << 20, &secret()).unwrap();
    fill(&seg);
    let r = lookup(seg.data(), 1 << 20).unwrap();
    let peers = PeerHeaps::new(j, secret());
    let pb = peers.bytes(&r, 1 << 20).unwrap();
    drop(seg);
    // The name is gone at once; the reader's mapping stays whole: stale bytes, no fault.
    assert!(leftovers(j).is_empty());
    assert!(pb.freed());
    let mut got = vec![0u8; 1 << 20];
    pb.copy_to(0, &mut got).unwrap();
    assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8 ^ 0x5a));
    // Asking again says it was freed, and the cache lets go of it.
    assert!(matches!(peers.bytes(&r, 1), Err(HeapError::Freed { .. })));
    assert_eq!(peers.mapped(), 0);
    drop(pb);
}

#[test]
fn the_cache_drops_freed_segments_when_it_maps_new_ones() {
    let j = job(5);
    let peers = PeerHeaps::new(j, secret());
    for _ in 0..20 {
        let seg = HeapSegment::create(j, 0, 4096, &secret()).unwrap();
        let r = lookup(seg.data(), 1).unwrap();
        drop(peers.bytes(&r, 4096).unwrap());
    }
    assert!(
        peers.mapped() <= 1,
        "{} segments still mapped",
        peers.mapped()
    );
    assert!(leftovers(j).is_empty());
}

#[test]
fn empty_and_oversized_segments() {
    let j = job(6);
    let seg = HeapSegment::create(j, 0, 0, &secret()).unwrap();
    assert!(seg.is_empty());
    let r = lookup(seg.data(), 0).unwrap();
    let peers = PeerHeaps::new(j, secret());
    assert!(peers.bytes(&r, 0).unwrap().is_empty());
    assert!(matches!(
        peers.bytes(&r, 1),
        Err(HeapError::OutOfRange { .. })
    ));
    drop(seg);
    assert!(matches!(
        HeapSegment::create(j, 0, usize::MAX - 10, &secret()),
        Err(HeapError::TooLarge { .. })
    ));
    assert!(leftovers(j).is_empty());
}

#[test]
fn a_segment_larger_than_dev_shm_is_refused_at_creation() {
    let st = rustix::fs::statvfs("/dev/shm").unwrap();
    let total = st.f_blocks * st.f_frsize;
    let j = job(7);
    // Its pages are allocated at creation: no SIGBUS at the first write past the room.
    let r = HeapSegment::create(j, 0, (total + (1 << 20)) as usize, &secret());
    assert!(matches!(r, Err(HeapError::Create { .. })), "{r:?}");
    assert!(leftovers(j).is_empty());
}

#[test]
fn strided_copies_gather_equally_spaced_runs() {
    let j = job(40);
    let seg = HeapSegment::create(j, 0, 8_192, &secret()).unwrap();
    fill(&seg);
    let r = lookup(seg.data(), 8_192).unwrap();
    let peers = PeerHeaps::new(j, secret());
    let pb = peers.bytes(&r, 8_192).unwrap();
    for len in [1usize, 4, 8, 12, 16, 64] {
        for (stride, dst_stride, count) in
            [(len, len, 1), (4 * len, len, 20), (3 * len, 2 * len, 7)]
        {
            let at = 100;
            let mut got = vec![0u8; (count - 1) * dst_stride + len];
            pb.copy_strided_to(at, stride, len, count, &mut got, dst_stride)
                .unwrap();
            let mut want = vec![0u8; got.len()];
            for i in 0..count {
                for k in 0..len {
                    want[i * dst_stride + k] = (at + i * stride + k) as u8 ^ 0x5a;
                }
            }
            assert_eq!(got, want, "len {len} stride {stride} count {count}");
        }
    }
    // Runs beyond the range or beyond the destination are errors, nothing is copied.
    let mut small = vec![0u8; 8];
    assert!(matches!(
        pb.copy_strided_to(8_100, 32, 8, 4, &mut [0u8; 32], 8),
        Err(HeapError::OutOfRange { .. })
    ));
    assert!(matches!(
        pb.copy_strided_to(0, 32, 8, 4, &mut small, 8),
        Err(HeapError::OutOfRange { .. })
    ));
    assert!(matches!(
        pb.copy_strided_to(0, usize::MAX, 8, 4, &mut small, 8),
        Err(HeapError::OutOfRange { .. })
    ));
    assert_eq!(small, [0u8; 8]);
    pb.copy_strided_to(5_000, 8, 8, 0, &mut small, 8).unwrap();
    drop(seg);
    assert!(leftovers(j).is_empty());
}
