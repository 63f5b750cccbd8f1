//! The shared file pointer of an open file: one 64-bit word (in etypes of the view) in
//! a shared-heap buffer of the file's rank 0, mapped by every rank of the group, moved
//! by atomic additions, so `MPI_File_write_shared` needs no message and no call of any
//! other rank. Built for groups within one host. The words come from pages that a
//! process keeps for its life ([`PAGES`]): opening a file creates no segment and maps
//! none once the first file of its rank 0 did.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use spools::{Communicator, HeapError, HeapRef, PeerBytes, SharedBuf, World};

use crate::abi::*;
use crate::env::error::MpiError;

/// Pointer words per page (8 bytes each: 4 KiB).
const WORDS: usize = 512;

/// This process's pages of pointer words, as the rank 0 of files' groups: a file takes a
/// free word at its open and gives it back at its close. The pages stay for the
/// process's life, so the other ranks' heaps keep them mapped between files (a segment
/// per open cost a `/dev/shm` file, its mapping on every rank and its unmapping, most of
/// an open's time).
static PAGES: Mutex<Pages> = Mutex::new(Pages {
    pages: Vec::new(),
    free: Vec::new(),
    generation: 0,
});

struct Pages {
    pages: Vec<SharedBuf<u8>>,
    /// The words no file holds: (page, word).
    free: Vec<(usize, usize)>,
    /// How many times the pages were released: a word of older pages is not given back.
    generation: u64,
}

/// A word of this process's pages that a file holds (given back when it goes).
struct Word {
    page: usize,
    word: usize,
    generation: u64,
}

impl Drop for Word {
    fn drop(&mut self) {
        let mut p = PAGES.lock().unwrap_or_else(PoisonError::into_inner);
        // Not after the pages went (a file still open when the job was left).
        if self.generation == p.generation {
            p.free.push((self.page, self.word));
        }
    }
}

/// Frees this process's pages (their names leave `/dev/shm`): when the process leaves
/// the job. A file still open keeps its word mapped (its mapping outlives the name).
pub(crate) fn release_pages() {
    let mut p = PAGES.lock().unwrap_or_else(PoisonError::into_inner);
    p.free.clear();
    p.pages.clear();
    p.generation += 1;
}

/// Takes a free word of this process's pages (a new page when none is free): the word,
/// and where it lies for the other ranks.
fn take_word(world: &World) -> Result<(Word, HeapRef), HeapError> {
    let mut p = PAGES.lock().unwrap_or_else(PoisonError::into_inner);
    let (page, word) = match p.free.pop() {
        Some(w) => w,
        None => {
            let buf = world.alloc::<u8>(8 * WORDS)?;
            let page = p.pages.len();
            p.pages.push(buf);
            p.free.extend((1..WORDS).rev().map(|w| (page, w)));
            (page, 0)
        }
    };
    let base = p.pages[page].heap_ref();
    let at = HeapRef {
        name: base.name,
        offset: base.offset + 8 * word as u64,
    };
    let generation = p.generation;
    Ok((
        Word {
            page,
            word,
            generation,
        },
        at,
    ))
}

/// The shared file pointer.
pub(crate) struct SharedPointer {
    word: PeerBytes,
    /// Rank 0's word of its pages (given back with the file).
    _own: Option<Word>,
}

impl SharedPointer {
    /// Makes the pointer (collective over `comm`), starting at `start`; `None` when the
    /// group spans hosts.
    ///
    /// # Errors
    /// No shared memory, or a peer failing.
    pub(crate) fn new(
        world: &World,
        comm: &Communicator,
        start: u64,
        call: &'static str,
    ) -> Result<Option<SharedPointer>, MpiError> {
        if (0..comm.size()).any(|r| !comm.same_host(r)) {
            return Ok(None);
        }
        let nomem = |e: HeapError| {
            MpiError::invalid(
                MPI_ERR_NO_MEM,
                format!("{call}: the shared file pointer: {e}"),
            )
        };
        // Rank 0 takes part in the broadcast whatever happens: an empty name (no shared
        // memory) makes every rank fail alike. Its word holds `start` before the others
        // hear of it.
        let (own, failed) = if comm.rank() == 0 {
            let made = take_word(world).and_then(|(w, at)| {
                let p = SharedPointer {
                    word: world.map_shared(&at, 8)?,
                    _own: Some(w),
                };
                p.set(start);
                Ok((p, at))
            });
            match made {
                Ok(m) => (Some(m), None),
                Err(e) => (None, Some(nomem(e))),
            }
        } else {
            (None, None)
        };
        let name = own
            .as_ref()
            .map(|(_, at)| at.to_bytes().to_vec())
            .unwrap_or_default();
        let name = comm.bcast_bytes(0, &name)?;
        if let Some(e) = failed {
            return Err(e);
        }
        if let Some((p, _)) = own {
            return Ok(Some(p));
        }
        let at = HeapRef::from_bytes(&name).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: rank 0's pointer name is malformed"),
            )
        })?;
        let word = world.map_shared(&at, 8).map_err(nomem)?;
        Ok(Some(SharedPointer { word, _own: None }))
    }

    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: the mapping holds 8 bytes, 8-aligned (a word of a page that starts
        // 4096-aligned), alive as long as `self`; every rank reaches them only through
        // this atomic.
        unsafe { &*self.word.as_ptr().cast::<AtomicU64>() }
    }

    /// Moves the pointer by `n` etypes; where it was.
    pub(crate) fn fetch_add(&self, n: u64) -> u64 {
        self.atomic().fetch_add(n, Ordering::AcqRel)
    }

    /// Where it is.
    pub(crate) fn get(&self) -> u64 {
        self.atomic().load(Ordering::Acquire)
    }

    /// Sets it.
    pub(crate) fn set(&self, v: u64) {
        self.atomic().store(v, Ordering::Release);
    }
}
