//! A plain named shared mapping between two processes of one host, for the raw-limit
//! probes (a flag bounced through one cache line, a bare single-producer ring).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use rustix::fs::{ftruncate, Mode};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use rustix::shm;

use crate::error::BenchError;

/// A shared mapping of `len` bytes, zero-filled, mode 0600, used only through 64-bit
/// atomic words.
pub(crate) struct SharedMapping {
    base: NonNull<c_void>,
    len: usize,
    name: String,
}

impl SharedMapping {
    /// Creates (`create = true`: exclusively, zero-filled) or opens the shared-memory
    /// object called `name` (`/...`) and maps `len` bytes of it.
    pub(crate) fn open(name: &str, len: usize, create: bool) -> Result<SharedMapping, BenchError> {
        let what = format!("shared memory /dev/shm{name}");
        let flags = if create {
            shm::OFlags::CREATE | shm::OFlags::EXCL | shm::OFlags::RDWR
        } else {
            shm::OFlags::RDWR
        };
        let fd = shm::open(name, flags, Mode::RUSR | Mode::WUSR)
            .map_err(|e| BenchError::io(what.clone())(e.into()))?;
        if create {
            ftruncate(&fd, len as u64).map_err(|e| BenchError::io(what.clone())(e.into()))?;
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (null hint) aliases no Rust
        // object; fd is a shared-memory object of at least `len` bytes (made so above, or
        // by the creating rank before the barrier that precedes every open).
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|e| BenchError::io(what.clone())(e.into()))?;
        // The descriptor closes here; the mapping keeps the object alive.
        drop(fd);
        let base = NonNull::new(base).ok_or_else(|| {
            BenchError::io(what)(std::io::Error::other("mmap returned a null mapping"))
        })?;
        Ok(SharedMapping {
            base,
            len,
            name: name.to_string(),
        })
    }

    /// Removes the name (the mapping stays valid).
    pub(crate) fn unlink(&self) {
        let _ = shm::unlink(self.name.as_str());
    }

    /// The 64-bit word at byte offset `8 * i`.
    ///
    /// # Panics
    /// Past the end of the mapping (a caller bug: the probes use fixed offsets).
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        assert!(
            8 * i + 8 <= self.len,
            "word {i} outside a mapping of {} bytes",
            self.len
        );
        // SAFETY: in bounds (checked above), 8-byte aligned (the base is page-aligned),
        // and the mapping lives as long as self; the other process touches these bytes
        // only through atomics too.
        unsafe {
            &*(self
                .base
                .as_ptr()
                .cast::<u8>()
                .add(8 * i)
                .cast::<AtomicU64>())
        }
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: base/len describe the mapping made in `open`, not unmapped before, and
        // no reference from `word` outlives self.
        let _ = unsafe { munmap(self.base.as_ptr(), self.len) };
    }
}
