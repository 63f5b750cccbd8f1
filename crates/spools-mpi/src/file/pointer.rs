//! The shared file pointer of an open file: one 64-bit word (in etypes of the view) in
//! a shared-heap buffer of the file's rank 0, mapped by every rank of the group, moved
//! by atomic additions, so `MPI_File_write_shared` needs no message and no call of any
//! other rank. Built for groups within one host.

use std::sync::atomic::{AtomicU64, Ordering};

use spools::{Communicator, HeapRef, PeerBytes, SharedBuf, World};

use crate::abi::*;
use crate::env::error::MpiError;

/// The shared file pointer.
pub(crate) struct SharedPointer {
    word: PeerBytes,
    /// Rank 0's buffer (freed with the file).
    _own: Option<SharedBuf<u8>>,
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
        let nomem = |e: spools::HeapError| {
            MpiError::invalid(
                MPI_ERR_NO_MEM,
                format!("{call}: the shared file pointer: {e}"),
            )
        };
        // Rank 0 takes part in the broadcast whatever happens: an empty name (no shared
        // memory) makes every rank fail alike.
        let (own, failed) = if comm.rank() == 0 {
            match world.alloc::<u8>(8) {
                Ok(mut b) => {
                    b.copy_from_slice(&start.to_ne_bytes());
                    (Some(b), None)
                }
                Err(e) => (None, Some(nomem(e))),
            }
        } else {
            (None, None)
        };
        let name = own
            .as_ref()
            .map(|b| b.heap_ref().to_bytes().to_vec())
            .unwrap_or_default();
        let name = comm.bcast_bytes(0, &name)?;
        if let Some(e) = failed {
            return Err(e);
        }
        let at = HeapRef::from_bytes(&name).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: rank 0's pointer name is malformed"),
            )
        })?;
        let word = world.map_shared(&at, 8).map_err(nomem)?;
        Ok(Some(SharedPointer { word, _own: own }))
    }

    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: the mapping holds 8 bytes, 4096-aligned, alive as long as `self`;
        // every rank reaches them only through this atomic.
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
