//! A small shared area of one job on one host, for upper layers that keep flags and data
//! slots in shared memory (the collectives within a host): created exclusively with mode
//! 0600, stamped like the transport's segments with a tag derived from the job secret,
//! opened and checked by the other local ranks, unlinked as soon as every expected member
//! has mapped it. The area hands out atomic words and byte copies at offsets; the layout
//! is its user's business.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use spools_heap::shm::{map, unlink};
use spools_proto::auth::Secret;

use crate::error::{Defect, FabricError};
use crate::shm::futex;
use crate::shm::segment::{attach_error, create_mapped, open_sized};

const MAGIC: u64 = 0x4145_5241_534c_4f4f; // "OOLSAREA" little-endian-ish
/// Bytes of the header page that precedes the user's bytes.
const HEADER_BYTES: usize = 4096;

#[repr(C)]
struct Header {
    magic: u64,
    len: u64,
    tag: [u8; 32],
    /// Members that mapped the area; the one that brings it to `members` unlinks the name.
    attached: AtomicU32,
    members: u32,
    ready: AtomicU32,
}

/// A mapped shared area: `len` user bytes, 64-byte aligned at offset 0.
pub struct SharedArea {
    base: *mut u8,
    map_len: usize,
    len: usize,
    name: String,
}

// SAFETY: the mapping is shared memory, accessed through atomics and through copies whose
// ordering the user establishes with those atomics; the pointer stays valid until Drop
// unmaps it.
unsafe impl Send for SharedArea {}
// SAFETY: as above.
unsafe impl Sync for SharedArea {}

impl std::fmt::Debug for SharedArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedArea")
            .field("name", &self.name)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

fn tag(secret: &Secret, name: &str) -> [u8; 32] {
    let mut ctx = b"shm area ".to_vec();
    ctx.extend_from_slice(name.as_bytes());
    secret.tag(&ctx)
}

impl SharedArea {
    /// Creates (exclusively, mode 0600) and maps an area of `len` zeroed user bytes named
    /// `name` (`/spools-<job>-...`, so that the launcher's clean-up finds it), for
    /// `members` local processes including this one. Publish the name to the others only
    /// after this returns.
    ///
    /// # Errors
    /// [`FabricError::Io`] if the object cannot be created, sized or mapped.
    pub fn create(
        name: &str,
        len: usize,
        members: u32,
        secret: &Secret,
    ) -> Result<SharedArea, FabricError> {
        let map_len = HEADER_BYTES + len.next_multiple_of(64);
        let base = create_mapped(name, map_len)?;
        let area = SharedArea {
            base,
            map_len,
            len,
            name: name.to_owned(),
        };
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned and zero-filled;
        // no other process has mapped it yet (the name is published after this returns).
        unsafe {
            let h = &mut *(base as *mut Header);
            h.magic = MAGIC;
            h.len = len as u64;
            h.tag = tag(secret, name);
            h.members = members;
        }
        area.header().ready.store(1, Ordering::Release);
        area.attached();
        Ok(area)
    }

    /// Maps an area another local process of this job created, and checks that it is one
    /// (magic, the job's tag) of `len` user bytes.
    ///
    /// # Errors
    /// [`FabricError::Io`] if it cannot be opened or mapped, [`FabricError::Corrupt`]
    /// (naming `owner`) if it is not this job's area of that size.
    pub fn open(
        name: &str,
        len: usize,
        owner: u32,
        secret: &Secret,
    ) -> Result<SharedArea, FabricError> {
        let (fd, map_len) = open_sized(name, owner)?;
        let io = attach_error(name, owner);
        let bad = |defect: fn(String) -> Defect| FabricError::Corrupt {
            rank: owner,
            defect: defect(name.to_owned()),
        };
        if map_len != HEADER_BYTES + len.next_multiple_of(64) {
            return Err(bad(|name| Defect::BadGeometry { name }));
        }
        let base = map(&fd, map_len).map_err(io)?;
        let area = SharedArea {
            base,
            map_len,
            len,
            name: name.to_owned(),
        };
        let h = area.header();
        if h.ready.load(Ordering::Acquire) != 1 || h.magic != MAGIC {
            return Err(bad(|name| Defect::NotASegment { name }));
        }
        if h.tag != tag(secret, name) {
            return Err(bad(|name| Defect::ForeignSegment { name }));
        }
        if h.len != len as u64 {
            return Err(bad(|name| Defect::BadGeometry { name }));
        }
        area.attached();
        Ok(area)
    }

    /// Counts this mapping; the last expected member removes the name.
    fn attached(&self) {
        let h = self.header();
        if h.attached.fetch_add(1, Ordering::AcqRel) + 1 >= h.members {
            unlink(&self.name);
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header and lives as long as self.
        unsafe { &*(self.base as *const Header) }
    }

    /// Removes the name now (when a member will not come to map it).
    pub fn unlink(&self) {
        unlink(&self.name);
    }

    /// User bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the area has no user bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name it was created under (unlinked once every member mapped it).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn at(&self, off: usize, len: usize, align: usize) -> *mut u8 {
        assert!(
            off % align == 0 && off.checked_add(len).is_some_and(|e| e <= self.len),
            "shared area access {off}+{len} outside {} bytes or misaligned",
            self.len
        );
        // SAFETY: off + len <= self.len, and the user bytes start HEADER_BYTES into a
        // mapping of HEADER_BYTES + len (rounded up) bytes.
        unsafe { self.base.add(HEADER_BYTES + off) }
    }

    /// The 32-bit word at user offset `off` (4-byte aligned).
    ///
    /// # Panics
    /// If the word lies outside the area or is misaligned (a bug in the caller's layout).
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        let p = self.at(off, 4, 4);
        // SAFETY: in bounds and aligned (checked by `at`); shared words are only ever
        // accessed atomically, and the reference lives no longer than the mapping.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// The 64-bit word at user offset `off` (8-byte aligned).
    ///
    /// # Panics
    /// As [`SharedArea::u32_at`].
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        let p = self.at(off, 8, 8);
        // SAFETY: as in `u32_at`, with 8-byte alignment.
        unsafe { &*(p as *const AtomicU64) }
    }

    /// Copies `src` into the area at `off`. The caller publishes it to readers with a
    /// release store to a flag word after this returns, and no reader copies out of the
    /// same bytes concurrently (the protocol's job; a race would give the reader mixed
    /// bytes, never undefined behaviour in this process's own memory).
    ///
    /// # Panics
    /// If the bytes lie outside the area.
    pub fn write(&self, off: usize, src: &[u8]) {
        let p = self.at(off, src.len(), 1);
        // SAFETY: `p..p+len` lies inside the shared mapping (checked by `at`) and cannot
        // overlap `src`, which is this process's own memory; the mapping is plain bytes,
        // so any bit pattern is valid.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
    }

    /// Copies bytes at `off` out of the area into `dst`, after an acquire load of the flag
    /// that published them.
    ///
    /// # Panics
    /// If the bytes lie outside the area.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        let p = self.at(off, dst.len(), 1);
        // SAFETY: as in `write`, in the other direction; `dst` is exclusively borrowed.
        unsafe { std::ptr::copy_nonoverlapping(p as *const u8, dst.as_mut_ptr(), dst.len()) }
    }

    /// Sleeps while the word at `off` holds `expected`, at most `timeout` (any process may
    /// wake it with [`SharedArea::wake`]). Returning says only "go and look".
    ///
    /// # Panics
    /// As [`SharedArea::u32_at`].
    pub fn wait(&self, off: usize, expected: u32, timeout: Duration) {
        futex::wait(self.u32_at(off), expected, timeout);
    }

    /// Whether this process may set the flags of shared areas with a release store and a
    /// compiler barrier before it looks whether anyone sleeps, rather than with a
    /// sequentially consistent store: it is registered for [`SharedArea::heavy_fence`],
    /// which a member about to sleep then runs (Linux's global expedited `membarrier`).
    /// The same answer at every call. Every member of an area must agree to it: one that
    /// cannot register stores its flags sequentially consistent, and its sleepers need
    /// every setter to.
    ///
    /// ```
    /// let on = spools_fabric::shm::SharedArea::light_fences();
    /// assert_eq!(on, spools_fabric::shm::SharedArea::light_fences());
    /// ```
    pub fn light_fences() -> bool {
        super::fence::light_fences()
    }

    /// The other side of [`SharedArea::light_fences`]: a full barrier on every running
    /// thread of every registered process, run by a member after it said it sleeps and
    /// before its last look at the flags. `false` if the kernel refused.
    pub fn heavy_fence() -> bool {
        super::fence::heavy_fence()
    }

    /// Wakes every thread, in any process, sleeping on the word at `off`.
    ///
    /// # Panics
    /// As [`SharedArea::u32_at`].
    pub fn wake(&self, off: usize) {
        futex::wake(self.u32_at(off));
    }
}

impl Drop for SharedArea {
    fn drop(&mut self) {
        // A member that never came (it died first) leaves the name behind until the
        // launcher's clean-up at job end: unlinking here could pull it away from a member
        // still on its way to open it.
        // SAFETY: base/map_len describe a mapping made by `map` and not unmapped before;
        // every reference handed out borrows self, so none outlives this.
        // An unmap of a valid mapping cannot fail in a way the caller could act on.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.map_len) };
    }
}
