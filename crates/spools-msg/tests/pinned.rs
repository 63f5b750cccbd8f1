//! Non-blocking sends and receives on caller-owned memory (`isend_pinned`,
//! `irecv_pinned`), with real processes: the receive writes the caller's memory in place
//! (same address, no vector given back), a rendezvous send whose request is dropped at
//! once keeps its owner alive until the receiver took the data and then drops it, a
//! short or eager one drops it at once, an unmatched receive whose request is dropped
//! drops it, and a too small receive is a truncation, not an overrun.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use spools::MsgError;
use spools_msg::PinnedBuf;
use spools_testkit::{checked, e, rank_main};

mod common;
use common::{check, run_ranks};

/// Memory whose drop is recorded.
struct Tracked {
    mem: Box<[u8]>,
    dropped: Arc<AtomicBool>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

// SAFETY: the boxed slice does not move with the value; nobody else reaches it.
unsafe impl PinnedBuf for Tracked {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.mem.as_mut_ptr()
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
}

/// Memory the test reads after the engine filled it through another handle.
struct Shared(Arc<Mem>);
struct Mem(UnsafeCell<Box<[u8]>>, Arc<AtomicBool>);
// SAFETY: the test reads the memory only after the operation completed.
unsafe impl Sync for Mem {}

impl Mem {
    fn bytes(&self) -> &[u8] {
        // SAFETY: read only after the engine is done with it (see above).
        unsafe { &*self.0.get() }
    }
    fn addr(&self) -> usize {
        self.bytes().as_ptr() as usize
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.0 .1.store(true, Ordering::SeqCst);
    }
}

// SAFETY: the box's memory stays put while the `Arc` lives; the test does not touch it
// while the operation is pending.
unsafe impl PinnedBuf for Shared {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: as above.
        unsafe { (*self.0 .0.get()).as_mut_ptr() }
    }
    fn len(&self) -> usize {
        self.0.bytes().len()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

const BIG: usize = 1 << 20;

fn role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank();
        let c = w.communicator();
        if me == 0 {
            // A rendezvous send whose request is dropped at once.
            let flag = Arc::new(AtomicBool::new(false));
            let t = Tracked {
                mem: pattern(BIG, 5).into_boxed_slice(),
                dropped: flag.clone(),
            };
            drop(e(c.isend_pinned(t, 1, 4))?);
            check(!flag.load(Ordering::SeqCst), || {
                "rendezvous owner dropped before the receiver took the data".into()
            })?;
            e(c.barrier())?;
            e(w.worker().wait_for(|| flag.load(Ordering::SeqCst)))?;
            // A short message: the owner goes at once.
            let flag2 = Arc::new(AtomicBool::new(false));
            let t = Tracked {
                mem: vec![9u8; 8].into_boxed_slice(),
                dropped: flag2.clone(),
            };
            let r = e(c.isend_pinned(t, 1, 5))?;
            check(flag2.load(Ordering::SeqCst), || "short owner kept".into())?;
            let st = e(r.wait())?;
            check(st.status.len == 8 && st.buf.is_empty(), || {
                format!("short send status {:?}", st.status)
            })?;
            // Too long for the receiver's buffer.
            e(c.send(&pattern(100, 1), 1, 6))?;
        } else if me == 1 {
            e(c.barrier())?;
            let dropped = Arc::new(AtomicBool::new(false));
            let mem = Arc::new(Mem(
                UnsafeCell::new(vec![0u8; BIG].into_boxed_slice()),
                dropped.clone(),
            ));
            let addr = mem.addr();
            let r = e(c.irecv_pinned(Shared(mem.clone()), 0, 4))?;
            let done = e(r.wait())?;
            check(
                done.buf.is_empty() && done.status.len == BIG && dropped.load(Ordering::SeqCst),
                || format!("rendezvous receive {:?}", done.status),
            )?;
            check(mem.addr() == addr && mem.bytes() == pattern(BIG, 5), || {
                "the receive did not fill the caller's memory in place".into()
            })?;
            let mut small = [0u8; 8];
            let st = e(c.recv(&mut small, 0, 5))?;
            check(small == [9; 8] && st.len == 8, || "short message".into())?;
            // An unmatched receive whose request is dropped: cancelled, owner dropped.
            let flag = Arc::new(AtomicBool::new(false));
            let t = Tracked {
                mem: vec![0u8; 64].into_boxed_slice(),
                dropped: flag.clone(),
            };
            drop(e(c.irecv_pinned(t, 0, 77))?);
            check(flag.load(Ordering::SeqCst), || {
                "dropped unmatched receive kept its owner".into()
            })?;
            // Truncation.
            let t = Tracked {
                mem: vec![0u8; 10].into_boxed_slice(),
                dropped: Arc::new(AtomicBool::new(false)),
            };
            let got = c.irecv_pinned(t, 0, 6).map(|r| r.wait());
            check(
                matches!(
                    got,
                    Ok(Err(MsgError::Truncated {
                        len: 100,
                        capacity: 10,
                        ..
                    }))
                ),
                || format!("truncation gave {got:?}"),
            )?;
        } else {
            e(c.barrier())?;
        }
        Ok(())
    });
    println!("pinned ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn pinned_buffers_in_place() {
    rank_main(|_| role());
    for n in [2, 3] {
        run_ranks("pinned_buffers_in_place", "pinned ok", n, &[]);
    }
}
