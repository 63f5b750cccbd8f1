//! Peers' heap segments mapped in this process, cached by name.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use spools_proto::auth::Secret;

use crate::heap::{HeapError, HeapRef, HeapSegment};

/// The peers' shared-heap segments this process has mapped: each one is mapped the first
/// time it is asked for, then cached until its owner frees it (the cache drops freed
/// segments whenever it maps a new one, and when one is asked for again).
pub struct PeerHeaps {
    job: u64,
    secret: Secret,
    cache: Mutex<HashMap<crate::heap::HeapName, Arc<HeapSegment>>>,
    /// Names found not to exist (names are never reused, so they never will).
    absent: Mutex<HashSet<crate::heap::HeapName>>,
}

impl std::fmt::Debug for PeerHeaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerHeaps")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl PeerHeaps {
    /// An empty cache for the segments of `job`, whose ranks share `secret` (segments are
    /// stamped with a tag derived from it, and checked when mapped).
    pub fn new(job: u64, secret: Secret) -> PeerHeaps {
        PeerHeaps {
            job,
            secret,
            cache: Mutex::new(HashMap::new()),
            absent: Mutex::new(HashSet::new()),
        }
    }

    /// The job whose segments this cache maps.
    pub fn job(&self) -> u64 {
        self.job
    }

    /// Maps (once, then cached) the segment `r` names and returns its bytes
    /// `[r.offset, r.offset + len)`, bounds-checked. The result keeps the mapping alive.
    ///
    /// # Errors
    /// [`HeapError::ForeignJob`] if the name is another job's, [`HeapError::Open`] if the
    /// segment cannot be opened (freed before it was first mapped here) or mapped,
    /// [`HeapError::NotASegment`] if the object is not this job's heap segment,
    /// [`HeapError::Freed`] if its owner freed it, [`HeapError::OutOfRange`] if the bytes
    /// lie outside it.
    pub fn bytes(&self, r: &HeapRef, len: usize) -> Result<PeerBytes, HeapError> {
        let name = r.name;
        if name.job() != self.job {
            return Err(HeapError::ForeignJob {
                name,
                job: self.job,
            });
        }
        let seg = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            match cache.get(&name) {
                Some(s) if s.freed() => {
                    cache.remove(&name);
                    return Err(HeapError::Freed { name });
                }
                Some(s) => s.clone(),
                None => {
                    let s = self.open(name)?;
                    cache.retain(|_, s| !s.freed());
                    if s.freed() {
                        return Err(HeapError::Freed { name });
                    }
                    cache.insert(name, s.clone());
                    s
                }
            }
        };
        let size = seg.len() as u64;
        let end = r.offset.checked_add(len as u64);
        if end.is_none_or(|e| e > size) {
            return Err(HeapError::OutOfRange {
                name,
                offset: r.offset,
                len: len as u64,
                size,
            });
        }
        // SAFETY: offset + len <= the segment's user bytes (checked above), so the
        // pointer stays inside the mapping, which `seg` keeps alive.
        let ptr = unsafe { seg.data().add(r.offset as usize) };
        Ok(PeerBytes { seg, ptr, len })
    }

    /// Opens a segment not mapped here yet; remembers names that do not exist.
    fn open(&self, name: crate::heap::HeapName) -> Result<Arc<HeapSegment>, HeapError> {
        let gone = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let mut absent = self.absent.lock().unwrap_or_else(PoisonError::into_inner);
        if absent.contains(&name) {
            return Err(HeapError::Open {
                name,
                source: gone(),
            });
        }
        match HeapSegment::open(name, &self.secret) {
            Ok(s) => Ok(Arc::new(s)),
            Err(HeapError::Open { name, source }) if source.kind() == gone().kind() => {
                absent.insert(name);
                Err(HeapError::Open { name, source })
            }
            Err(e) => Err(e),
        }
    }

    /// Segments mapped now.
    pub fn mapped(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A byte range of a peer's shared-heap segment, mapped in this process for as long as
/// this value lives.
///
/// The owner (and other peers) may write these bytes while this process reads them: they
/// are only ever accessed as raw bytes ([`PeerBytes::copy_to`], [`PeerBytes::copy_from`],
/// or the raw pointers), never through Rust references, and the protocol using them
/// orders the accesses (a race gives mixed bytes, never undefined behaviour in this
/// process's own memory). If the owner frees the buffer or dies meanwhile, the mapping
/// stays valid: the reader gets stale bytes, never a fault.
pub struct PeerBytes {
    seg: Arc<HeapSegment>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is into a shared mapping kept alive by `seg` (Send + Sync); the
// bytes are only accessed through raw copies.
unsafe impl Send for PeerBytes {}
// SAFETY: as above.
unsafe impl Sync for PeerBytes {}

impl std::fmt::Debug for PeerBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerBytes")
            .field("segment", &self.seg.name())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl PeerBytes {
    /// The first byte (for vectored copies of many runs; stay within `len()` bytes and
    /// access them only as raw bytes).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The first byte, for writing into the peer's buffer (same rules as
    /// [`PeerBytes::as_ptr`]).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the owner has freed the buffer since (its bytes are then stale).
    pub fn freed(&self) -> bool {
        self.seg.freed()
    }

    fn check(&self, at: usize, n: usize) -> Result<(), HeapError> {
        if at.checked_add(n).is_some_and(|e| e <= self.len) {
            Ok(())
        } else {
            Err(HeapError::OutOfRange {
                name: self.seg.name(),
                offset: at as u64,
                len: n as u64,
                size: self.len as u64,
            })
        }
    }

    /// Copies the bytes `[at, at + dst.len())` of the range into `dst`.
    ///
    /// # Errors
    /// [`HeapError::OutOfRange`] if they lie outside the range.
    pub fn copy_to(&self, at: usize, dst: &mut [u8]) -> Result<(), HeapError> {
        self.check(at, dst.len())?;
        // SAFETY: at + dst.len() <= len (checked), so the source lies in the mapping kept
        // alive by `seg`; `dst` is this process's own exclusively borrowed memory, which
        // cannot overlap a peer's segment that this process does not own (and if it did,
        // a byte copy of plain bytes is still defined). Concurrent writers in other
        // processes can only make the copied bytes stale or mixed.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), dst.as_mut_ptr(), dst.len()) }
        Ok(())
    }

    /// Copies `src` into the bytes `[at, at + src.len())` of the range.
    ///
    /// # Errors
    /// [`HeapError::OutOfRange`] if they lie outside the range.
    pub fn copy_from(&self, at: usize, src: &[u8]) -> Result<(), HeapError> {
        self.check(at, src.len())?;
        // SAFETY: as in `copy_to`, in the other direction; the segment is mapped
        // writable and holds plain bytes, so any bit pattern is valid.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(at), src.len()) }
        Ok(())
    }
}
