//! The shared heap's segment protocol under a model checker (loom): the real header
//! protocol of `segment.rs` (`publish`, `check`, `retire`, `is_freed`) and the peer
//! cache's decision (`peer::cached`), on a header page whose flags are loom's words and
//! whose fields are a loom cell, run by an owner and a peer in every interleaving and
//! every outcome of the memory orderings loom models. A peer that reads the fields
//! without having seen `ready` set after the owner wrote them fails the run (loom's
//! causality check on the cell), as does a header that does not check out once `ready`
//! is seen, and a peer that reports a buffer live after it saw it freed.
//!
//! The system's part is modelled: the name of a segment is a flag under a lock (the
//! kernel serialises `shm_open` and `shm_unlink` of a name), and every mapping of a
//! segment is the same memory. Both caches of the peer stand for two worlds in one
//! process, each with its own `PeerHeaps`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU32;
use loom::sync::Mutex;

use crate::peer::cached;
use crate::segment::{
    check, is_freed, publish, retire, Fields, Flag, Page, HEADER_BYTES, MAGIC, VERSION,
};
use crate::{HeapError, HeapName};

/// The segment of the model: rank 3's buffer 9 of job 1, of `LEN` user bytes.
fn name() -> HeapName {
    HeapName::new(1, 3, 9)
}
const LEN: usize = 100;
const MAP_LEN: usize = 2 * HEADER_BYTES;
const TAG: [u8; 32] = [0xa5; 32];

fn fields() -> Fields {
    Fields {
        magic: MAGIC,
        version: VERSION,
        owner: name().rank(),
        len: LEN as u64,
        tag: TAG,
    }
}

/// A flag of the model; it also notes that a load saw it set (for `freed`: the peer's
/// observations of a free, whichever code path made them). The note is bookkeeping of
/// the test, outside the model (a std atomic, which loom does not schedule around).
struct Word {
    value: AtomicU32,
    seen_set: std::sync::atomic::AtomicBool,
}

impl Word {
    fn new() -> Word {
        Word {
            value: AtomicU32::new(0),
            seen_set: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Flag for Word {
    fn load(&self, order: Ordering) -> u32 {
        let v = self.value.load(order);
        if v != 0 {
            self.seen_set.store(true, Ordering::Relaxed);
        }
        v
    }
    fn store(&self, v: u32, order: Ordering) {
        self.value.store(v, order);
    }
}

/// A header page of the model: what every mapping of the segment sees.
struct Header {
    ready: Word,
    freed: Word,
    fields: UnsafeCell<Fields>,
}

// SAFETY: as for a real segment: the protocol under test is what keeps the owner's write
// of the fields apart from the peers' reads, and loom checks that it does (an access to
// the cell without a happens-before edge to the other fails the run).
unsafe impl Send for Header {}
// SAFETY: as above.
unsafe impl Sync for Header {}

#[derive(Clone)]
struct Segment(Arc<Header>);

// SAFETY: the flags and the fields live in the `Arc` as long as any mapping of the model;
// `write` and `read` touch the fields only.
unsafe impl Page for Segment {
    type Flag = Word;

    fn ready(&self) -> &Word {
        &self.0.ready
    }

    fn freed(&self) -> &Word {
        &self.0.freed
    }

    unsafe fn write(&self, f: &Fields) {
        // SAFETY: loom's cell hands out a pointer to the fields for this access only (and
        // checks it against every other access).
        self.0.fields.with_mut(|p| unsafe { *p = *f });
    }

    unsafe fn read(&self) -> Fields {
        // SAFETY: as in `write`.
        self.0.fields.with(|p| unsafe { *p })
    }
}

/// The segment and its name in `/dev/shm`.
struct Shm {
    segment: Segment,
    linked: Mutex<bool>,
}

impl Shm {
    /// A segment not created yet (zero-filled, as a fresh object is).
    fn new() -> Arc<Shm> {
        Arc::new(Shm {
            segment: Segment(Arc::new(Header {
                ready: Word::new(),
                freed: Word::new(),
                fields: UnsafeCell::new(Fields {
                    magic: 0,
                    version: 0,
                    owner: 0,
                    len: 0,
                    tag: [0; 32],
                }),
            })),
            linked: Mutex::new(false),
        })
    }

    /// The owner's `HeapSegment::create_named`: creates the name, then fills the header.
    fn create(&self) {
        *self.linked.lock().unwrap() = true;
        publish(&self.segment, &fields());
    }

    /// The owner's drop of its `HeapSegment`: `freed`, then the name goes.
    fn free(&self) {
        retire(&self.segment, || *self.linked.lock().unwrap() = false);
    }

    /// A peer's `HeapSegment::open`: the name, then the header's check; its user length.
    fn open(&self) -> Result<Segment, HeapError> {
        if !*self.linked.lock().unwrap() {
            return Err(HeapError::Open {
                name: name(),
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        let len = check(&self.segment, name(), &TAG, MAP_LEN)?;
        assert_eq!(len, LEN, "a segment that checks out has the owner's length");
        Ok(self.segment.clone())
    }

    /// Whether a load of `ready` by the peer has seen it set.
    fn ready_seen(&self) -> bool {
        self.segment.0.ready.seen_set.load(Ordering::Relaxed)
    }

    /// Whether a load of `freed` by the peer has seen it set.
    fn free_seen(&self) -> bool {
        self.segment.0.freed.seen_set.load(Ordering::Relaxed)
    }
}

fn checker() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    b
}

#[test]
fn a_peer_that_sees_ready_sees_the_whole_header() {
    checker().check(|| {
        let shm = Shm::new();
        let owner = {
            let shm = shm.clone();
            loom::thread::spawn(move || shm.create())
        };
        // Opens while the owner creates: not there yet, not ready yet, or whole.
        for _ in 0..2 {
            match shm.open() {
                Ok(_) | Err(HeapError::Open { .. }) => {}
                Err(HeapError::NotASegment { .. }) => {
                    assert!(
                        !shm.ready_seen(),
                        "`ready` seen, yet the header is not whole"
                    );
                }
                Err(e) => panic!("{e}"),
            }
        }
        owner.join().unwrap();
        assert!(shm.open().is_ok(), "a created segment checks out");
    });
}

#[test]
fn a_peer_never_reports_a_buffer_live_after_it_saw_it_freed() {
    checker().check(|| {
        let shm = Shm::new();
        shm.create();
        // Two worlds of the peer's process; the second has mapped the segment already.
        let mut worlds: [HashMap<HeapName, Arc<Segment>>; 2] = Default::default();
        let open = || shm.open().map(Arc::new);
        cached(&mut worlds[1], name(), open).expect("a live segment is mapped");
        let owner = {
            let shm = shm.clone();
            loom::thread::spawn(move || shm.free())
        };
        // The peer learns that the buffer is gone from any request that fails (or a
        // look at `freed` on the way); no request may then report it live.
        let mut gone = false;
        for world in [0, 1, 0, 1] {
            match cached(&mut worlds[world], name(), open) {
                Ok(s) => {
                    assert!(!gone, "reported live after it was seen gone");
                    assert!(!shm.free_seen(), "reported live after `freed` was seen");
                    // `PeerBytes::freed` on the bytes handed out.
                    gone |= is_freed(&*s);
                }
                Err(HeapError::Freed { .. }) | Err(HeapError::Open { .. }) => gone = true,
                Err(e) => panic!("{e}"),
            }
            gone |= shm.free_seen();
        }
        owner.join().unwrap();
        // Once the free happened before a request, every world's request fails.
        for world in &mut worlds {
            assert!(matches!(
                cached(world, name(), open),
                Err(HeapError::Freed { .. }) | Err(HeapError::Open { .. })
            ));
        }
    });
}
