//! Memory regions that remote ranks may put into and get from.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::{Arc, PoisonError, RwLock};

use spools_fabric::{Access, RemoteRegion, Transport};
use spools_heap::{HeapName, HeapSegment};
use spools_proto::auth::Secret;

use crate::error::AmError;
use crate::keys::KeyHold;
use std::collections::HashMap;

/// Key that names a region at its owner.
pub type RegionKey = u32;

pub(crate) struct RegionMem {
    ptr: *mut u8,
    len: usize,
    /// The shared-heap segment holding the bytes (`None`: this process's own heap).
    heap: Option<HeapSegment>,
    /// The network transport the bytes are exposed to for one-sided access, under id
    /// (the region's key), and what peers address them by.
    exposed: Option<(Arc<dyn Transport>, RegionKey, RemoteRegion)>,
    /// The key, held until the exposure is withdrawn (fields drop after `Drop::drop`),
    /// so that no other region or loan takes it while peers may still address it.
    key: Option<KeyHold>,
}

// SAFETY: the allocation is owned by RegionMem and freed only in Drop; concurrent byte
// access from the progress engine and the owner is the documented contract of regions
// (like MPI RMA windows: synchronise with messages), performed with raw copies.
unsafe impl Send for RegionMem {}
// SAFETY: as above.
unsafe impl Sync for RegionMem {}

impl RegionMem {
    fn new(len: usize) -> Result<RegionMem, AmError> {
        if len == 0 {
            return Ok(RegionMem {
                ptr: std::ptr::NonNull::<u64>::dangling().as_ptr() as *mut u8,
                len: 0,
                heap: None,
                exposed: None,
                key: None,
            });
        }
        let layout = Layout::from_size_align(len, 64).map_err(|_| AmError::RegionAlloc { len })?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(AmError::RegionAlloc { len });
        }
        Ok(RegionMem {
            ptr,
            len,
            heap: None,
            exposed: None,
            key: None,
        })
    }

    /// Zeroed bytes in a shared-heap segment named after the region, which the ranks of
    /// this host map to put and get with one copy; `None` if the segment cannot be made.
    fn shared(name: HeapName, len: usize, secret: &Secret) -> Option<RegionMem> {
        let seg = HeapSegment::create_named(name, len, secret).ok()?;
        Some(RegionMem {
            ptr: seg.data(),
            len,
            heap: Some(seg),
            exposed: None,
            key: None,
        })
    }

    /// Exposes the bytes to `net`'s remote memory access under `key`. A refusal (the
    /// provider is out of registrations or lockable memory) leaves the region reachable
    /// by messages only, as peers learn when they ask for its key.
    fn expose(&mut self, net: Option<Arc<dyn Transport>>, key: RegionKey) {
        let Some(net) = net else { return };
        let Some(rma) = net.rma() else { return };
        // SAFETY: the bytes stay allocated and in place until Drop, which withdraws the
        // exposure before freeing them.
        if let Ok(remote) = unsafe { rma.expose(key, self.ptr, self.len, Access::ReadWrite) } {
            self.exposed = Some((net.clone(), key, remote));
        }
    }

    /// What peers' networks address these bytes by, when exposed.
    pub(crate) fn remote(&self) -> Option<RemoteRegion> {
        self.exposed.as_ref().map(|e| e.2)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `src` to `offset`; the caller checked the bounds.
    pub(crate) fn write_at(&self, offset: usize, src: &[u8]) {
        debug_assert!(offset + src.len() <= self.len);
        // SAFETY: offset + len <= self.len (checked by every caller); src does not alias
        // the region (it is a transport buffer or a caller's slice).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) }
    }

    /// Copies from `offset` into `dst`; the caller checked the bounds.
    pub(crate) fn read_at(&self, offset: usize, dst: &mut [u8]) {
        debug_assert!(offset + dst.len() <= self.len);
        // SAFETY: as for write_at.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), dst.as_mut_ptr(), dst.len()) }
    }

    /// A view of `len` bytes at `offset`; the caller checked the bounds.
    pub(crate) fn slice(&self, offset: usize, len: usize) -> &[u8] {
        // SAFETY: in bounds (checked by callers); the bytes may change under concurrent
        // remote puts, which the region contract leaves to the application to order.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }
    }
}

impl Drop for RegionMem {
    fn drop(&mut self) {
        if let Some((net, key, _)) = self.exposed.take() {
            if let Some(rma) = net.rma() {
                rma.withdraw(key);
            }
        }
        // A shared-heap segment unmaps itself (dropped with `heap`).
        if self.len > 0 && self.heap.is_none() {
            if let Ok(layout) = Layout::from_size_align(self.len, 64) {
                // SAFETY: ptr was allocated with this layout in `new`.
                unsafe { dealloc(self.ptr, layout) }
            }
        }
    }
}

pub(crate) type Regions = RwLock<HashMap<RegionKey, Arc<RegionMem>>>;

/// A registered memory region: remote ranks put into it and get from it by key and
/// offset; the progress engine checks every access against its length. Dropping it
/// withdraws it (later accesses fail at the initiator with an unknown-region error).
///
/// Remote puts land while the owner may be reading: order them with messages (for
/// instance a short message after the put completes), as with MPI RMA windows.
pub struct Region {
    key: RegionKey,
    mem: Arc<RegionMem>,
    regions: Arc<Regions>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("key", &self.key)
            .field("len", &self.mem.len)
            .finish()
    }
}

impl Region {
    pub(crate) fn new(
        key: KeyHold,
        len: usize,
        regions: Arc<Regions>,
        net: Option<Arc<dyn Transport>>,
    ) -> Result<Region, AmError> {
        Region::register(key, RegionMem::new(len)?, regions, net)
    }

    /// A region in the shared heap (segment [`HeapName::region`] of `rank` in `job`), or
    /// in this process's own memory if the segment cannot be made.
    pub(crate) fn new_shared(
        key: KeyHold,
        len: usize,
        regions: Arc<Regions>,
        (job, rank, secret): (u64, u32, &Secret),
        net: Option<Arc<dyn Transport>>,
    ) -> Result<Region, AmError> {
        let mem = match RegionMem::shared(HeapName::region(job, rank, key.key()), len, secret) {
            Some(m) => m,
            None => RegionMem::new(len)?,
        };
        Region::register(key, mem, regions, net)
    }

    /// Enters `mem` in the table under `key`, exposed to `net` (the network transport
    /// with remote memory access, if the job uses one).
    fn register(
        hold: KeyHold,
        mut mem: RegionMem,
        regions: Arc<Regions>,
        net: Option<Arc<dyn Transport>>,
    ) -> Result<Region, AmError> {
        let key = hold.key();
        mem.expose(net, key);
        mem.key = Some(hold);
        let mem = Arc::new(mem);
        regions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, mem.clone());
        Ok(Region { key, mem, regions })
    }

    /// The key remote ranks use.
    pub fn key(&self) -> RegionKey {
        self.key
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.mem.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), AmError> {
        if offset.checked_add(len).is_none_or(|e| e > self.mem.len) {
            return Err(AmError::OutsideRegion {
                offset,
                len,
                region_len: self.mem.len,
            });
        }
        Ok(())
    }

    /// Copies bytes out of the region.
    ///
    /// # Errors
    /// [`AmError::OutsideRegion`] if the range leaves the region.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), AmError> {
        self.check(offset, dst.len())?;
        self.mem.read_at(offset, dst);
        Ok(())
    }

    /// Copies bytes into the region.
    ///
    /// # Errors
    /// [`AmError::OutsideRegion`] if the range leaves the region.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), AmError> {
        self.check(offset, src.len())?;
        self.mem.write_at(offset, src);
        Ok(())
    }

    /// Whether the bytes lie in the shared heap (same-host peers then put and get with
    /// one copy, straight into and out of them).
    pub fn is_shared(&self) -> bool {
        self.mem.heap.is_some()
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        self.mem.slice(0, self.mem.len).to_vec()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.regions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}
