//! The ring's protocol under a model checker (loom): the real [`Ring`] code, on memory
//! whose atomic words are loom's and whose bytes are loom cells, run by a producer and a
//! consumer thread in every interleaving (up to a preemption bound) and every outcome of
//! the memory orderings loom models. A byte read before its writer's release was seen, or
//! written while the consumer may still read it, fails the run (loom's causality check on
//! its cells); so does a message lost, torn or out of order, and a wake-up lost in either
//! handshake: the full ring's (`flag_full` / `drain` / `space_freed`) and the receiver's
//! sleep (the store-then-load pairs of `ShmTransport::notify` and
//! `begin_sleep_elsewhere`, here on words of the model; `futex_model.rs` runs the
//! transport's own code of that handshake, `sleep.rs`).
//!
//! One difference from shared memory: there a cell's header word overlays payload bytes
//! of the message before it; here the header words are kept apart from the cells' bytes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicU64};

use super::ring::{Cells, Ring, TxState, Word, HEADER};

/// Bytes a cell of the model holds (the smallest cell of a real ring is 64).
const CELL: usize = 16;
/// Cells of the model's ring.
const CELLS: usize = 4;

/// The model's memory: what a shared ring's control line and cells hold.
struct Memory {
    headers: Vec<AtomicU64>,
    tail: AtomicU64,
    waiting: AtomicU32,
    bytes: Vec<UnsafeCell<[u8; CELL]>>,
}

// SAFETY: as for the real ring (`Shared`): the SPSC protocol under test is what keeps
// the producer's and the consumer's accesses to a cell apart, and loom checks that it
// does (a cell accessed by both without a happens-before edge fails the run).
unsafe impl Send for Memory {}
// SAFETY: as above.
unsafe impl Sync for Memory {}

#[derive(Clone)]
pub(super) struct Model(Arc<Memory>);

impl Model {
    pub(super) fn new() -> Model {
        Model(Arc::new(Memory {
            headers: (0..CELLS).map(|_| AtomicU64::new(0)).collect(),
            tail: AtomicU64::new(0),
            waiting: AtomicU32::new(0),
            bytes: (0..CELLS).map(|_| UnsafeCell::new([0; CELL])).collect(),
        }))
    }
}

/// Runs an access with `order`; a `SeqCst` store or read-modify-write is followed by a
/// `SeqCst` fence. loom models a `SeqCst` access as acquire / release only (its
/// documentation says so), which would let a store and a later load of another word pass
/// each other, and so fail the store-then-load handshakes that the C++ and Rust memory
/// model (a single order of all `SeqCst` accesses) keeps. The fence after the store gives
/// loom that order back, where x86 has it: a `SeqCst` store or read-modify-write is a
/// locked instruction there (a full barrier), a `SeqCst` load a plain load, so loads go to
/// loom as they are (see [`Word`]'s impls below), as does every other ordering.
///
/// No fence before the access, and none around a load: such a fence would also order a
/// weaker access next to it, and hide its weakness. With fences on both sides of every
/// `SeqCst` access, loom passed the ring with its publishing swap turned into a release
/// store (a lost wake-up on x86, whose store buffer lets the receiver's `sleeping` word
/// be read before the store is seen), because the fence before the sender's `SeqCst` load
/// of `sleeping` ordered the store.
pub(super) fn ordered<T>(order: Ordering, access: impl FnOnce() -> T) -> T {
    let r = access();
    if order == Ordering::SeqCst {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
    r
}

impl Word<u64> for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, v: u64, order: Ordering) {
        ordered(order, || AtomicU64::store(self, v, order))
    }
    fn swap(&self, v: u64, order: Ordering) -> u64 {
        ordered(order, || AtomicU64::swap(self, v, order))
    }
}

impl Word<u32> for AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    fn store(&self, v: u32, order: Ordering) {
        ordered(order, || AtomicU32::store(self, v, order))
    }
    fn swap(&self, v: u32, order: Ordering) -> u32 {
        ordered(order, || AtomicU32::swap(self, v, order))
    }
}

// SAFETY: every word and cell lives in the `Arc` for as long as any copy of the model;
// `write` and `read` stay inside the cells (they index a vector, which panics instead).
unsafe impl Cells for Model {
    type W64 = AtomicU64;
    type W32 = AtomicU32;

    fn header(&self, idx: u64) -> &AtomicU64 {
        &self.0.headers[idx as usize]
    }

    fn tail(&self) -> &AtomicU64 {
        &self.0.tail
    }

    fn producer_waiting(&self) -> &AtomicU32 {
        &self.0.waiting
    }

    unsafe fn write(&self, idx: u64, parts: &[&[u8]]) {
        let data: Vec<u8> = parts.concat();
        let start = idx as usize * CELL + HEADER;
        // One access per cell touched (loom checks each against every other access).
        for cell in start / CELL..(start + data.len()).div_ceil(CELL) {
            // SAFETY: loom's cell hands out a pointer to its array for this access only.
            self.0.bytes[cell].with_mut(|c| unsafe {
                for at in (cell * CELL).max(start)..((cell + 1) * CELL).min(start + data.len()) {
                    (*c)[at % CELL] = data[at - start];
                }
            });
        }
    }

    unsafe fn read(&self, idx: u64, len: usize, f: &mut dyn FnMut(&[u8])) {
        let start = idx as usize * CELL + HEADER;
        let mut got = vec![0u8; len];
        for cell in start / CELL..(start + len).div_ceil(CELL) {
            // SAFETY: as in `write`.
            self.0.bytes[cell].with(|c| unsafe {
                for at in (cell * CELL).max(start)..((cell + 1) * CELL).min(start + len) {
                    got[at - start] = (*c)[at % CELL];
                }
            });
        }
        f(&got);
    }
}

/// The messages of both models: two of two cells each fill the ring, so the third waits
/// for the consumer; the second pads to the ring's start.
fn messages() -> Vec<Vec<u8>> {
    vec![vec![1; 5], vec![2; 20], vec![3; 20]]
}

pub(super) fn ring(m: &Model) -> Ring<Model> {
    Ring::on(m.clone(), CELLS as u64, CELL.trailing_zeros())
}

fn checker() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b
}

/// The producer's side of `ShmTransport::try_send`: write; else say the ring is full and
/// look again; else wait until the consumer clears the flag.
fn send_all(r: &Ring<Model>, after: impl Fn()) {
    let mut st = TxState::default();
    for m in messages() {
        loop {
            if r.try_write(&mut st, &[&m], m.len()) {
                break;
            }
            r.flag_full(&mut st);
            if r.try_write(&mut st, &[&m], m.len()) {
                break;
            }
            while !r.space_freed() {
                loom::thread::yield_now();
            }
        }
        after();
    }
}

#[test]
fn messages_arrive_whole_and_in_order_through_a_full_ring() {
    checker().check(|| {
        let m = Model::new();
        let tx = ring(&m);
        let producer = loom::thread::spawn(move || send_all(&tx, || {}));
        let rx = ring(&m);
        let mut pos = 0;
        let mut got: Vec<Vec<u8>> = Vec::new();
        while got.len() < messages().len() {
            let (n, _waiting) = rx
                .drain(&mut pos, 8, &mut |b| got.push(b.to_vec()))
                .expect("the model's headers are well formed");
            if n == 0 {
                loom::thread::yield_now();
            }
        }
        producer.join().expect("the producer ends");
        assert_eq!(got, messages());
    });
}

#[test]
fn a_receiver_that_goes_to_sleep_is_woken_by_the_next_message() {
    checker().check(|| {
        let m = Model::new();
        // The receiver's `sleeping` word and its futex (the doorbell).
        let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
        let tx = ring(&m);
        let w = words.clone();
        // `ShmTransport::notify`: after the publishing swap, read `sleeping`; ring if set.
        let producer = loom::thread::spawn(move || {
            send_all(&tx, || {
                if Word::load(&w.0, Ordering::SeqCst) != 0 {
                    ordered(Ordering::SeqCst, || w.1.fetch_add(1, Ordering::SeqCst));
                }
            })
        });
        let rx = ring(&m);
        let mut pos = 0;
        let mut got: Vec<Vec<u8>> = Vec::new();
        while got.len() < messages().len() {
            let (n, _) = rx
                .drain(&mut pos, 8, &mut |b| got.push(b.to_vec()))
                .expect("the model's headers are well formed");
            if n > 0 {
                continue;
            }
            // `begin_sleep_elsewhere`: announce the sleep, then look; sleep on the
            // doorbell's value from before the look (a futex wait on it).
            ordered(Ordering::SeqCst, || words.0.fetch_add(1, Ordering::SeqCst));
            let ticket = Word::load(&words.1, Ordering::SeqCst);
            if !rx.ready(pos) {
                while Word::load(&words.1, Ordering::SeqCst) == ticket {
                    loom::thread::yield_now();
                }
            }
            ordered(Ordering::SeqCst, || words.0.fetch_sub(1, Ordering::SeqCst));
        }
        producer.join().expect("the producer ends");
        assert_eq!(got, messages());
    });
}
