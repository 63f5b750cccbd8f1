//! Peers' heap segments mapped in this process, cached by name.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use spools_proto::auth::Secret;

use crate::segment::{is_freed, Page};
use crate::{HeapError, HeapName, HeapRef, HeapSegment};

/// The peers' shared-heap segments this process has mapped: each one is mapped the first
/// time it is asked for, then cached until its owner frees it (the cache drops freed
/// segments whenever it maps a new one, and when one is asked for again).
pub struct PeerHeaps {
    job: u64,
    secret: Secret,
    cache: Mutex<HashMap<crate::HeapName, Arc<HeapSegment>>>,
    /// Names found not to exist (names are never reused, so they never will).
    absent: Mutex<HashSet<crate::HeapName>>,
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

    /// Creates a segment of `len` zero-filled bytes in this job's heap, owned by the
    /// job's rank `rank` (this process's rank in the job: names are unique per rank),
    /// stamped with the job's tag, so that the other ranks of the host can map it
    /// ([`PeerHeaps::bytes`] with its [`HeapSegment::name`] at offset 0). Dropping it
    /// frees it.
    ///
    /// # Errors
    /// As [`HeapSegment::create`].
    pub fn create(&self, rank: u32, len: usize) -> Result<HeapSegment, HeapError> {
        HeapSegment::create(self.job, rank, len, &self.secret)
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
            cached(&mut cache, name, || self.open(name))?
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
    fn open(&self, name: crate::HeapName) -> Result<Arc<HeapSegment>, HeapError> {
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

/// The cache's answer to a request for segment `name`: the cached mapping, or one mapped
/// now (`open`) and cached, unless its owner freed it. Every request lets go of the
/// segments their owners freed, so that their memory goes back to the system (a mapping
/// holds it while it lives). Written over [`Page`], so that the model checker
/// (`segment_model.rs`) runs it on segments of its own.
pub(crate) fn cached<S: Page>(
    cache: &mut HashMap<HeapName, Arc<S>>,
    name: HeapName,
    open: impl FnOnce() -> Result<Arc<S>, HeapError>,
) -> Result<Arc<S>, HeapError> {
    let hit = cache.get(&name).cloned();
    cache.retain(|_, s| !is_freed(&**s));
    match hit {
        Some(s) if is_freed(&*s) => Err(HeapError::Freed { name }),
        Some(s) => Ok(s),
        None => {
            let s = open()?;
            if is_freed(&*s) {
                return Err(HeapError::Freed { name });
            }
            cache.insert(name, s.clone());
            Ok(s)
        }
    }
}

/// A byte range of a peer's shared-heap segment, mapped in this process for as long as
/// this value lives.
///
/// The owner (and other peers) may write these bytes while this process reads them: they
/// are accessed as raw bytes ([`PeerBytes::copy_to`], [`PeerBytes::copy_from`], or the
/// raw pointers), and the protocol using them orders the accesses (a race gives mixed
/// bytes, never undefined behaviour in this process's own memory). A Rust reference to
/// them is for a protocol under which no process writes them while it lives (the shared
/// windows of a sieved read: `spools-io/src/file/sieve.rs`). If the owner frees the
/// buffer or dies meanwhile, the mapping stays valid: the reader gets stale bytes, never
/// a fault.
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
            Err(self.out_of_range(at, n))
        }
    }

    /// Copies the bytes `[at, at + dst.len())` of the range into `dst`.
    ///
    /// # Errors
    /// [`HeapError::OutOfRange`] if they lie outside the range.
    pub fn copy_to(&self, at: usize, dst: &mut [u8]) -> Result<(), HeapError> {
        self.check(at, dst.len())?;
        // SAFETY: at + dst.len() <= len (checked), so the source lies in the mapping kept
        // alive by `seg`; `dst` is exclusively borrowed, so it is not this mapping's
        // address range (which no reference covers), and the two do not overlap.
        // Concurrent writers in other processes can only make the copied bytes stale or
        // mixed.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), dst.as_mut_ptr(), dst.len()) }
        Ok(())
    }

    /// Copies `src` into the bytes `[at, at + src.len())` of the range.
    ///
    /// # Errors
    /// [`HeapError::OutOfRange`] if they lie outside the range.
    ///
    /// # Safety
    /// The range must not be memory that this process borrows elsewhere: a segment of
    /// this process's own heap (a `SharedBuf` mapped a second time through its name) may
    /// be behind a live `&[T]`, which this write would change. Another process's
    /// segment is never borrowed in this one.
    pub unsafe fn copy_from(&self, at: usize, src: &[u8]) -> Result<(), HeapError> {
        self.check(at, src.len())?;
        // SAFETY: at + src.len() <= len (checked), so the destination lies in the
        // mapping kept alive by `seg`, mapped writable and holding plain bytes (any bit
        // pattern is valid); no reference of this process covers it (the caller's
        // contract); `src` is a separate allocation of this process.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(at), src.len()) }
        Ok(())
    }

    /// Copies `count` runs of `len` bytes, run `i` from byte `at + i * stride` of the range
    /// to byte `i * dst_stride` of `dst`: a gather of equally spaced short runs (an element
    /// to every p-th slot), with a fixed-size loop for runs of 4, 8 and 16 bytes.
    ///
    /// # Errors
    /// [`HeapError::OutOfRange`] if a run lies outside the range; `dst` too short for the
    /// runs is reported the same way (with the destination's length as `size`).
    pub fn copy_strided_to(
        &self,
        at: usize,
        stride: usize,
        len: usize,
        count: usize,
        dst: &mut [u8],
        dst_stride: usize,
    ) -> Result<(), HeapError> {
        let Some(last) = count.checked_sub(1) else {
            return Ok(());
        };
        let span = |s: usize| s.checked_mul(last).and_then(|x| x.checked_add(len));
        let (Some(src_span), Some(dst_span)) = (span(stride), span(dst_stride)) else {
            return Err(self.out_of_range(at, usize::MAX));
        };
        self.check(at, src_span)?;
        if dst_span > dst.len() {
            return Err(HeapError::OutOfRange {
                name: self.seg.name(),
                offset: 0,
                len: dst_span as u64,
                size: dst.len() as u64,
            });
        }
        // SAFETY: run i reads [at + i * stride, + len) with i <= last, inside
        // [at, at + src_span) which lies in the range (checked), in the mapping kept alive
        // by `seg`; it writes [i * dst_stride, + len) inside `dst[..dst_span]` (checked),
        // exclusively borrowed and so not this mapping (which no reference covers).
        // Concurrent writers in other processes can only make the copied bytes stale.
        unsafe {
            let (from, to) = (self.ptr.add(at), dst.as_mut_ptr());
            match len {
                4 => gather::<4>(from, stride, to, dst_stride, count),
                8 => gather::<8>(from, stride, to, dst_stride, count),
                16 => gather::<16>(from, stride, to, dst_stride, count),
                _ => {
                    for i in 0..count {
                        std::ptr::copy_nonoverlapping(
                            from.add(i * stride),
                            to.add(i * dst_stride),
                            len,
                        );
                    }
                }
            }
        }
        Ok(())
    }

    fn out_of_range(&self, at: usize, n: usize) -> HeapError {
        HeapError::OutOfRange {
            name: self.seg.name(),
            offset: at as u64,
            len: n as u64,
            size: self.len as u64,
        }
    }
}

/// `count` runs of `N` bytes from `from + i * stride` to `to + i * to_stride`.
///
/// # Safety
/// Every run must be readable at `from` and writable at `to`, and the two must not overlap.
#[inline(always)]
unsafe fn gather<const N: usize>(
    from: *const u8,
    stride: usize,
    to: *mut u8,
    to_stride: usize,
    count: usize,
) {
    for i in 0..count {
        // SAFETY: the caller's contract, for run i.
        unsafe { std::ptr::copy_nonoverlapping(from.add(i * stride), to.add(i * to_stride), N) }
    }
}
