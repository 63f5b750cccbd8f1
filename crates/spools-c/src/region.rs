//! Memory regions that other ranks put into and get from (remote memory access).

use std::ffi::c_void;

use spools::Region;

use crate::args::{bytes, bytes_mut, handle, out, Handle};
use crate::status::{guard, spools_status_t};
use crate::world::spools_world_t;

/// A memory region of this rank, named job-wide by (rank, key): other ranks
/// `spools_put()` into it and `spools_get()` from it.
pub struct spools_region_t {
    magic: u64,
    region: Region,
}

impl Handle for spools_region_t {
    const MAGIC: u64 = 0x5350_4f4f_4c52_4547;
    const NAME: &'static str = "spools_region_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// Registers a zero-filled region of `len` bytes. With `shared` non-zero, it lives in
/// shared memory, so that ranks on this host copy into it directly (falls back to an
/// ordinary region when shared memory cannot hold it).
///
/// Thread safety: any thread.
///
/// ```c
/// spools_region_t *r;
/// spools_region_create(world, 4096, 0, &r);
/// uint32_t key;
/// spools_region_key(r, &key);   /* tell the peers, e.g. with spools_allgather */
/// ```
///
/// Errors: `SPOOLS_ERR_TRANSPORT` when the memory cannot be had.
///
/// # Safety
/// `world` is NULL or a live world; `region` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_region_create(
    world: *const spools_world_t,
    len: usize,
    shared: i32,
    region: *mut *mut spools_region_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let region = unsafe { out(region, "region") }?;
        let r = if shared != 0 {
            w.world.worker().shared_region(len)?
        } else {
            w.world.worker().region(len)?
        };
        *region = Box::into_raw(Box::new(spools_region_t {
            magic: spools_region_t::MAGIC,
            region: r,
        }));
        Ok(())
    })
}

/// The region's key (with this rank, what a peer names it by).
///
/// # Safety
/// `region` is NULL or a live region; `key` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_region_key(
    region: *const spools_region_t,
    key: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { handle(region) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(key, "key") }? = r.region.key();
        Ok(())
    })
}

/// Copies `len` bytes of the region from `offset` into `dst`.
///
/// Thread safety: any thread; bytes that a peer puts meanwhile may be seen old or new.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` past the region's end.
///
/// # Safety
/// `region` is NULL or a live region; `dst` holds `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_region_read(
    region: *const spools_region_t,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { handle(region) }?;
        // SAFETY: the caller's contract.
        let dst = unsafe { bytes_mut(dst, len, "dst") }?;
        r.region.read(offset, dst)?;
        Ok(())
    })
}

/// Copies `len` bytes from `src` into the region at `offset`.
///
/// Thread safety: as `spools_region_read()`.
///
/// # Safety
/// `region` is NULL or a live region; `src` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_region_write(
    region: *const spools_region_t,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { handle(region) }?;
        // SAFETY: the caller's contract.
        let src = unsafe { bytes(src, len, "src") }?;
        r.region.write(offset, src)?;
        Ok(())
    })
}

/// Frees a region (peers must no longer put into or get from it). NULL does nothing.
///
/// Thread safety: when no other thread uses it.
///
/// # Safety
/// `region` is NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn spools_region_destroy(region: *mut spools_region_t) -> spools_status_t {
    guard(|| {
        if region.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(region) }?;
        // SAFETY: a live region made by `Box::into_raw` in `spools_region_create`.
        let mut b = unsafe { Box::from_raw(region) };
        b.magic = 0;
        Ok(())
    })
}

/// Writes `len` bytes of `data` into region `key` of rank `peer` at `offset`; returns
/// when they are in place (packetised as the route needs; straight into shared memory
/// on this host).
///
/// Thread safety: any thread (RMA of the world goes out one call at a time).
///
/// Errors: `SPOOLS_ERR_NOT_FOUND` (no such region), `SPOOLS_ERR_INVALID_ARG` (past its
/// end), `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `world` is NULL or a live world; `data` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_put(
    world: *const spools_world_t,
    peer: u32,
    key: u32,
    offset: u64,
    data: *const c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let d = unsafe { bytes(data, len, "data") }?;
        w.with_endpoint(|ep| Ok(ep.put(peer, key, offset, d)?))
    })
}

/// Reads `len` bytes of region `key` of rank `peer` at `offset` into `buf`.
///
/// Thread safety: as `spools_put()`.
///
/// Errors: as `spools_put()`.
///
/// # Safety
/// `world` is NULL or a live world; `buf` holds `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_get(
    world: *const spools_world_t,
    peer: u32,
    key: u32,
    offset: u64,
    buf: *mut c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let b = unsafe { bytes_mut(buf, len, "buf") }?;
        w.with_endpoint(|ep| Ok(ep.get(peer, key, offset, b)?))
    })
}
