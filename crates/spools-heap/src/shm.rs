//! POSIX shared-memory objects: the calls both the shared heap's segments and the
//! transport's rings (`spools-fabric`) are made with.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::Mode;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::shm::OFlags;

/// Opens `name`, or creates it exclusively (`create`), read-write with mode 0600; the
/// descriptor is close-on-exec.
///
/// ```
/// let name = format!("/spools-doc-open-{}", std::process::id());
/// let fd = spools_heap::shm::open_shm(&name, true).expect("created");
/// assert!(spools_heap::shm::open_shm(&name, true).is_err(), "exclusive");
/// spools_heap::shm::unlink(&name);
/// drop(fd);
/// ```
///
/// # Errors
/// The system's: the name exists (`create`) or does not (open), limits, permissions.
pub fn open_shm(name: &str, create: bool) -> std::io::Result<OwnedFd> {
    let flags = if create {
        OFlags::CREATE | OFlags::EXCL | OFlags::RDWR
    } else {
        OFlags::RDWR
    };
    Ok(rustix::shm::open(name, flags, Mode::RUSR | Mode::WUSR)?)
}

/// Maps `len` bytes of a shared-memory object, shared and writable. The mapping outlives
/// the descriptor; its owner unmaps it (`rustix::mm::munmap`).
///
/// ```
/// let name = format!("/spools-doc-map-{}", std::process::id());
/// let fd = spools_heap::shm::open_shm(&name, true).expect("created");
/// rustix::fs::ftruncate(&fd, 4096).expect("sized");
/// let p = spools_heap::shm::map(&fd, 4096).expect("mapped");
/// // SAFETY: p is a fresh mapping of 4096 writable bytes that nothing else uses.
/// unsafe { p.write(7) };
/// spools_heap::shm::unlink(&name);
/// ```
///
/// # Errors
/// The system's (`mmap`): no address space left, `len` beyond the object.
pub fn map(fd: &OwnedFd, len: usize) -> std::io::Result<*mut u8> {
    // SAFETY: a fresh mapping at an address the kernel chooses aliases no Rust object;
    // `fd` is a valid shared-memory descriptor of at least `len` bytes.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd.as_fd(),
            0,
        )
    }?;
    Ok(p.cast::<u8>())
}

/// Removes an object's name (mappings stay valid). A name already gone is what the
/// caller wants, so nothing is reported.
pub fn unlink(name: &str) {
    let _ = rustix::shm::unlink(name);
}
