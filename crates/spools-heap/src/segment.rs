//! One shared-heap segment: a header page, then the user's bytes (page aligned,
//! zero-filled). The owner creates it and registers its range; peers open it by name.
//!
//! The header's protocol between the owner and its peers: the owner writes the header's
//! fields, then sets `ready` (release); a peer reads `ready` (acquire) and only then the
//! fields, so a peer that sees `ready` sees the whole header, and one that does not reads
//! nothing of it. Freeing, the owner sets `freed` (release), then unlinks the name: a peer
//! that finds the name gone would see `freed` in any mapping of the segment it still
//! holds. The protocol is written over a [`Page`] trait, so that the model checker
//! (`segment_model.rs`) runs this same code on loom's words; a segment's page is the
//! mapping's.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spools_proto::auth::Secret;

use crate::shm::{map, open_shm, unlink};
use crate::{registry, HeapError, HeapName};

pub(crate) const MAGIC: u64 = 0x5041_4548_534c_4f4f; // "OOLSHEAP" little-endian-ish
pub(crate) const VERSION: u32 = 1;
/// Bytes of the header page; the user's bytes start here, so they are 4096-aligned.
pub(crate) const HEADER_BYTES: usize = 4096;

/// Numbers segments within this process (names are never reused, so a peer's cached
/// mapping can never stand for a newer buffer).
static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// A flag of the header: what the protocol asks of an `AtomicU32`.
pub(crate) trait Flag {
    /// `load`.
    fn load(&self, order: Ordering) -> u32;
    /// `store`.
    fn store(&self, v: u32, order: Ordering);
}

impl Flag for AtomicU32 {
    #[inline]
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    #[inline]
    fn store(&self, v: u32, order: Ordering) {
        AtomicU32::store(self, v, order)
    }
}

/// The fields of a header that the owner writes once, before `ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) magic: u64,
    pub(crate) version: u32,
    pub(crate) owner: u32,
    pub(crate) len: u64,
    pub(crate) tag: [u8; 32],
}

/// A segment's header page as its protocol sees it: the fields and the two flags.
/// [`HeapSegment`] is the real one, the header of a shared mapping.
///
/// # Safety
/// `ready` and `freed` stay valid as long as the value; `write` and `read` touch the
/// fields only.
pub(crate) unsafe trait Page {
    /// A flag word.
    type Flag: Flag;
    /// Set by the owner once the fields are written.
    fn ready(&self) -> &Self::Flag;
    /// Set by the owner when it frees the buffer.
    fn freed(&self) -> &Self::Flag;
    /// Writes the fields.
    ///
    /// # Safety
    /// The owner only, once, before it sets `ready`.
    unsafe fn write(&self, f: &Fields);
    /// Reads the fields.
    ///
    /// # Safety
    /// `ready` was seen set (acquire).
    unsafe fn read(&self) -> Fields;
}

/// The owner: writes the header's fields, then sets `ready` (release), which a peer's
/// acquire pairs with ([`opened`]).
pub(crate) fn publish<P: Page>(page: &P, f: &Fields) {
    // SAFETY: the owner, once, before `ready`.
    unsafe { page.write(f) };
    page.ready().store(1, Ordering::Release);
}

/// A peer: the header's fields, if the owner has set `ready`; nothing of the header is
/// read before `ready` is seen.
pub(crate) fn opened<P: Page>(page: &P) -> Option<Fields> {
    if page.ready().load(Ordering::Acquire) != 1 {
        return None;
    }
    // SAFETY: `ready` was seen set (acquire, after the owner's release).
    Some(unsafe { page.read() })
}

/// A peer: the user length of the segment `name` whose header is `page`, if it is one of
/// this job's (ready, magic, version, owner, the tag derived from the job's secret, and a
/// length that makes the `map_len` bytes mapped).
pub(crate) fn check<P: Page>(
    page: &P,
    name: HeapName,
    tag: &[u8; 32],
    map_len: usize,
) -> Result<usize, HeapError> {
    let bad = || HeapError::NotASegment { name };
    let f = opened(page).ok_or_else(bad)?;
    let len = usize::try_from(f.len).map_err(|_| bad())?;
    if f.magic != MAGIC
        || f.version != VERSION
        || f.owner != name.rank()
        || f.tag != *tag
        || self::map_len(len) != Some(map_len)
    {
        return Err(bad());
    }
    Ok(len)
}

/// The owner, freeing: sets `freed` (release), then removes the name (`unlink`).
pub(crate) fn retire<P: Page>(page: &P, unlink: impl FnOnce()) {
    page.freed().store(1, Ordering::Release);
    unlink();
}

/// Whether the owner has freed the segment whose header is `page`.
pub(crate) fn is_freed<P: Page>(page: &P) -> bool {
    page.freed().load(Ordering::Acquire) != 0
}

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
        // A peer may already open it (a region's name is derived from its key), but
        // `open` reads nothing of the header before `ready` is set (Acquire), which
        // happens after these writes (Release).
        publish(
            &seg,
            &Fields {
                magic: MAGIC,
                version: VERSION,
                owner: name.rank(),
                len: len as u64,
                tag: tag(secret, &name),
            },
        );
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
        seg.len = check(&seg, name, &tag(secret, &name), map_len)?;
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
        is_freed(self)
    }
}

// SAFETY: the header lies at the start of the mapping, which lives as long as the
// segment; `write` and `read` touch its fields only.
unsafe impl Page for HeapSegment {
    type Flag = AtomicU32;

    fn ready(&self) -> &AtomicU32 {
        &self.header().ready
    }

    fn freed(&self) -> &AtomicU32 {
        &self.header().freed
    }

    unsafe fn write(&self, f: &Fields) {
        let h = self.base as *mut Header;
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned and zero-filled;
        // the caller is the owner, before `ready`, so no one reads these fields yet.
        // Written in place (no reference to the header, whose flags peers may read).
        unsafe {
            std::ptr::addr_of_mut!((*h).magic).write(f.magic);
            std::ptr::addr_of_mut!((*h).version).write(f.version);
            std::ptr::addr_of_mut!((*h).owner).write(f.owner);
            std::ptr::addr_of_mut!((*h).len).write(f.len);
            std::ptr::addr_of_mut!((*h).tag).write(f.tag);
        }
    }

    unsafe fn read(&self) -> Fields {
        let h = self.header();
        Fields {
            magic: h.magic,
            version: h.version,
            owner: h.owner,
            len: h.len,
            tag: h.tag,
        }
    }
}

impl Drop for HeapSegment {
    fn drop(&mut self) {
        if self.owned {
            registry::remove(self.data() as usize);
            retire(self, || unlink(&self.name.shm_name()));
        }
        // Peers that still map the object keep a valid mapping of its full size (a
        // segment is never shrunk, so their reads never fault).
        // SAFETY: base/map_len describe a mapping made by `map` and not unmapped before;
        // the owner's buffer type borrows this segment, so no slice of it outlives it.
        // An unmap of a valid mapping cannot fail in a way the caller could act on.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.map_len) };
    }
}
