//! A plain shared mapping between processes of one host, for the raw-limit probes of the
//! benchmarks (a flag bounced through one cache line, a bare single-producer ring).

use std::sync::atomic::AtomicU64;

use super::segment::{map_named, unlink};
use crate::error::FabricError;

/// A shared mapping of `len` bytes, zero-filled, mode 0600.
pub struct RawMapping {
    base: *mut u8,
    len: usize,
    name: String,
}

// SAFETY: the mapping is plain shared memory accessed only through atomics handed out by
// `word`; it stays mapped until Drop.
unsafe impl Send for RawMapping {}
// SAFETY: as above.
unsafe impl Sync for RawMapping {}

impl RawMapping {
    /// Creates (`create = true`) or opens the mapping called `name` (`/...`).
    ///
    /// # Errors
    /// [`FabricError::Io`].
    pub fn open(name: &str, len: usize, create: bool) -> Result<RawMapping, FabricError> {
        let base = map_named(name, len, create)?;
        Ok(RawMapping {
            base,
            len,
            name: name.to_string(),
        })
    }

    /// Removes the name (the mapping stays valid).
    pub fn unlink(&self) {
        unlink(&self.name);
    }

    /// The 64-bit word at byte offset `8 * i` (panics past the end: a caller bug).
    pub fn word(&self, i: usize) -> &AtomicU64 {
        assert!(
            8 * i + 8 <= self.len,
            "word {i} outside a mapping of {} bytes",
            self.len
        );
        // SAFETY: in bounds (checked above), 8-byte aligned (page-aligned base), and the
        // mapping lives as long as self.
        unsafe { &*(self.base.add(8 * i) as *const AtomicU64) }
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        // SAFETY: base/len describe a mapping made by map_named and not unmapped before.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
