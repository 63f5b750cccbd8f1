//! One shared-heap segment: a header page, then the user's bytes (page aligned,
//! zero-filled). The owner creates it and registers its range; peers open it by name.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spools_proto::auth::Secret;

use crate::shm::{map, open_shm, unlink};
use crate::{registry, HeapError, HeapName};

const MAGIC: u64 = 0x5041_4548_534c_4f4f; // "OOLSHEAP" little-endian-ish
const VERSION: u32 = 1;
/// Bytes of the header page; the user's bytes start here, so they are 4096-aligned.
pub(crate) const HEADER_BYTES: usize = 4096;

/// Numbers segments within this process (names are never reused, so a peer's cached
/// mapping can never stand for a newer buffer).
static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

#[repr(C)]
struct Header {
    magic: u64,
    version: u32,
    owner: u32,
    len: u64,
    tag: [u8; 32],
    /// Set by the owner when it frees the buffer (before it unmaps and unlinks it).
    freed: AtomicU32,
    ready: AtomicU32,
}

/// A mapped shared-heap segment: either this process's own (created by
/// [`HeapSegment::create`], registered for [`lookup`](crate::lookup), unlinked and
/// marked freed when dropped) or a peer's (opened through
/// [`PeerHeaps`](crate::PeerHeaps); dropping only unmaps it).
pub struct HeapSegment {
    base: *mut u8,
    map_len: usize,
    len: usize,
    name: HeapName,
    owned: bool,
}

// SAFETY: the mapping is shared memory; the header is read through atomics or written
// once before the name is published, and user bytes are accessed through raw pointers
// whose ordering the protocol using them establishes. The pointer stays valid until Drop.
unsafe impl Send for HeapSegment {}
// SAFETY: as above.
unsafe impl Sync for HeapSegment {}

impl std::fmt::Debug for HeapSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapSegment")
            .field("name", &self.name)
            .field("len", &self.len)
            .field("owned", &self.owned)
            .finish_non_exhaustive()
    }
}

fn tag(secret: &Secret, name: &HeapName) -> [u8; 32] {
    let mut ctx = b"heap segment ".to_vec();
    ctx.extend_from_slice(name.shm_name().as_bytes());
    secret.tag(&ctx)
}

fn map_len(len: usize) -> Option<usize> {
    len.checked_next_multiple_of(HEADER_BYTES)?
        .checked_add(HEADER_BYTES)
        .filter(|&l| isize::try_from(l).is_ok())
}

/// Sizes a fresh object to `len` bytes with its pages allocated now: a full `/dev/shm`
/// is an error here rather than a SIGBUS at the first write into the buffer. Where the
/// file system cannot allocate ahead, it is only sized.
fn reserve(fd: &std::os::fd::OwnedFd, len: u64) -> std::io::Result<()> {
    match rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {
            Ok(rustix::fs::ftruncate(fd, len)?)
        }
        Err(e) => Err(e.into()),
    }
}

impl HeapSegment {
    /// Creates (exclusively, mode 0600), sizes and maps a segment of `len` zero-filled
    /// user bytes for `rank` of `job`, and registers its range in this process.
    ///
    /// # Errors
    /// [`HeapError::TooLarge`] if `len` does not fit the address space,
    /// [`HeapError::Create`] if the system refuses (`/dev/shm` full, limits).
    pub fn create(
        job: u64,
        rank: u32,
        len: usize,
        secret: &Secret,
    ) -> Result<HeapSegment, HeapError> {
        let name = HeapName::new(job, rank, NEXT_SEQ.fetch_add(1, Ordering::Relaxed));
        HeapSegment::create_named(name, len, secret)
    }

    /// [`HeapSegment::create`] under a name the caller chose (unique in the job, such as
    /// [`HeapName::region`]).
    ///
    /// # Errors
    /// As [`HeapSegment::create`]; [`HeapError::Create`] also if the name exists.
    pub fn create_named(
        name: HeapName,
        len: usize,
        secret: &Secret,
    ) -> Result<HeapSegment, HeapError> {
        let map_len = map_len(len).ok_or(HeapError::TooLarge {
            elems: len,
            elem_bytes: 1,
        })?;
        let shm = name.shm_name();
        let io = |source: std::io::Error| HeapError::Create { name, source };
        let fd = open_shm(&shm, true).map_err(io)?;
        let base = reserve(&fd, map_len as u64)
            .and_then(|()| map(&fd, map_len))
            .map_err(|e| {
                unlink(&shm);
                io(e)
            })?;
        let seg = HeapSegment {
            base,
            map_len,
            len,
            name,
            owned: true,
        };
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned and zero-filled.
        // A peer may already open it (a region's name is derived from its key), but
        // `open` reads nothing of the header before `ready` is set (Acquire), which
        // happens after these writes (Release).
        unsafe {
            let h = &mut *(base as *mut Header);
            h.magic = MAGIC;
            h.version = VERSION;
            h.owner = name.rank();
            h.len = len as u64;
            h.tag = tag(secret, &name);
        }
        seg.header().ready.store(1, Ordering::Release);
        registry::insert(seg.data() as usize, len, name);
        Ok(seg)
    }

    /// Maps a peer's segment and checks that it is one of this job's (magic, owner,
    /// size, the tag derived from the job's secret).
    pub(crate) fn open(name: HeapName, secret: &Secret) -> Result<HeapSegment, HeapError> {
        let io = |source: std::io::Error| HeapError::Open { name, source };
        let fd = open_shm(&name.shm_name(), false).map_err(io)?;
        let size = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?.st_size;
        let map_len = usize::try_from(size).unwrap_or(0);
        if map_len < HEADER_BYTES || map_len % HEADER_BYTES != 0 {
            return Err(HeapError::NotASegment { name });
        }
        let base = map(&fd, map_len).map_err(io)?;
        let mut seg = HeapSegment {
            base,
            map_len,
            len: 0,
            name,
            owned: false,
        };
        let h = seg.header();
        let len = usize::try_from(h.len).ok();
        if h.ready.load(Ordering::Acquire) != 1
            || h.magic != MAGIC
            || h.version != VERSION
            || h.owner != name.rank()
            || h.tag != tag(secret, &name)
            || len.and_then(self::map_len) != Some(map_len)
        {
            return Err(HeapError::NotASegment { name });
        }
        seg.len = len.unwrap_or(0);
        Ok(seg)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header and lives as long as self.
        unsafe { &*(self.base as *const Header) }
    }

    /// The first user byte (4096-aligned).
    pub fn data(&self) -> *mut u8 {
        // SAFETY: the mapping is HEADER_BYTES + len (rounded up) long.
        unsafe { self.base.add(HEADER_BYTES) }
    }

    /// User bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment has no user bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its name.
    pub fn name(&self) -> HeapName {
        self.name
    }

    /// Whether the owner has freed it.
    pub fn freed(&self) -> bool {
        self.header().freed.load(Ordering::Acquire) != 0
    }
}

impl Drop for HeapSegment {
    fn drop(&mut self) {
        if self.owned {
            registry::remove(self.data() as usize);
            self.header().freed.store(1, Ordering::Release);
            unlink(&self.name.shm_name());
        }
        // Peers that still map the object keep a valid mapping of its full size (a
        // segment is never shrunk, so their reads never fault).
        // SAFETY: base/map_len describe a mapping made by `map` and not unmapped before;
        // the owner's buffer type borrows this segment, so no slice of it outlives it.
        // An unmap of a valid mapping cannot fail in a way the caller could act on.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.map_len) };
    }
}
