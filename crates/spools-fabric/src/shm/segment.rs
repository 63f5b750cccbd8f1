//! A rank's shared-memory segment: a header with its doorbell, then one ring per
//! (sending local rank, lane, priority) for the messages it receives.

use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};

use spools_proto::auth::Secret;

use super::ring::{Ctrl, Ring};
use crate::FabricError;

const MAGIC: u64 = 0x4d48_5353_4c4f_4f50; // "POOLSSHM" little-endian-ish
const HEADER_BYTES: usize = 4096;

/// Geometry of a segment, stored in its header so that attachers read it rather than
/// assume it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Local ranks that may send (rings per lane and priority for each).
    pub sources: u32,
    /// Lanes per sender.
    pub lanes: u32,
    /// Cell size in bytes (a power of two).
    pub cell: u32,
    /// Low-priority ring bytes.
    pub ring_low: u64,
    /// High-priority ring bytes.
    pub ring_high: u64,
}

impl Geometry {
    fn pair_bytes(&self) -> u64 {
        2 * 64 + self.ring_low + self.ring_high
    }

    /// Total segment size.
    pub fn bytes(&self) -> u64 {
        HEADER_BYTES as u64 + u64::from(self.sources) * u64::from(self.lanes) * self.pair_bytes()
    }
}

/// Shrinks ring sizes (halving both, never below 16 cells) until a segment fits in
/// `budget` bytes. Returns `None` if even the smallest does not fit.
///
/// ```
/// use spools_fabric::shm::{fit_rings, Geometry};
/// let g = Geometry { sources: 8, lanes: 2, cell: 64, ring_low: 1 << 20, ring_high: 1 << 16 };
/// assert_eq!(fit_rings(g, u64::MAX), Some(g));
/// let small = fit_rings(g, 4 << 20).unwrap();
/// assert!(small.bytes() <= 4 << 20 && small.ring_low < g.ring_low);
/// assert_eq!(fit_rings(g, 1000), None);
/// ```
pub fn fit_rings(mut g: Geometry, budget: u64) -> Option<Geometry> {
    let min = 16 * u64::from(g.cell);
    while g.bytes() > budget {
        if g.ring_low <= min && g.ring_high <= min {
            return None;
        }
        g.ring_low = (g.ring_low / 2).max(min);
        g.ring_high = (g.ring_high / 2).max(min);
    }
    Some(g)
}

#[repr(C)]
struct Header {
    magic: u64,
    version: u32,
    sources: u32,
    lanes: u32,
    cell: u32,
    ring_low: u64,
    ring_high: u64,
    owner: u32,
    _pad: u32,
    tag: [u8; 32],
    ready: AtomicU32,
}

/// Offset of the doorbell word (own cache line) and of the "sleeping" flag.
const DOORBELL: usize = 512;
const SLEEPING: usize = 576;

/// A mapped segment.
pub(crate) struct Segment {
    base: *mut u8,
    len: usize,
    pub(crate) geo: Geometry,
}

// SAFETY: the mapping is shared memory accessed only through atomics and the ring
// protocol; the pointer stays valid until Drop unmaps it.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

fn c_name(name: &str) -> Result<CString, FabricError> {
    CString::new(name).map_err(|_| FabricError::Io {
        what: format!("shared-memory name {name:?}"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "contains NUL"),
    })
}

fn tag(secret: &Secret, name: &str) -> [u8; 32] {
    let mut ctx = b"shm segment ".to_vec();
    ctx.extend_from_slice(name.as_bytes());
    secret.tag(&ctx)
}

impl Segment {
    /// Creates (exclusively, mode 0600) and maps a segment.
    pub(crate) fn create(
        name: &str,
        geo: Geometry,
        owner: u32,
        secret: &Secret,
    ) -> Result<Segment, FabricError> {
        let c = c_name(name)?;
        let what = format!("creating shared memory /dev/shm{name}");
        // SAFETY: c is a valid NUL-terminated string; the flags create a new object.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(FabricError::io(what)(std::io::Error::last_os_error()));
        }
        let len = geo.bytes() as usize;
        let res = (|| {
            // SAFETY: fd is the descriptor just opened.
            if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            map(fd, len)
        })();
        // SAFETY: fd is ours; the mapping (if any) keeps the object alive.
        unsafe { libc::close(fd) };
        let base = match res {
            Ok(b) => b,
            Err(e) => {
                unlink(name);
                return Err(FabricError::io(what)(e));
            }
        };
        let seg = Segment { base, len, geo };
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned, zero-filled and
        // not yet visible to any other process (its name is not published before the
        // bootstrap barrier that follows creation).
        unsafe {
            let h = &mut *(base as *mut Header);
            h.magic = MAGIC;
            h.version = 1;
            h.sources = geo.sources;
            h.lanes = geo.lanes;
            h.cell = geo.cell;
            h.ring_low = geo.ring_low;
            h.ring_high = geo.ring_high;
            h.owner = owner;
            h.tag = tag(secret, name);
        }
        seg.header().ready.store(1, Ordering::Release);
        Ok(seg)
    }

    /// Maps another rank's segment and checks that it belongs to this job.
    pub(crate) fn attach(name: &str, owner: u32, secret: &Secret) -> Result<Segment, FabricError> {
        let c = c_name(name)?;
        let what = format!("opening rank {owner}'s shared memory /dev/shm{name}");
        // SAFETY: c is a valid NUL-terminated string.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(FabricError::io(what)(std::io::Error::last_os_error()));
        }
        // SAFETY: an all-zero stat is a valid value to be overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is valid and st is writable.
        let res = if unsafe { libc::fstat(fd, &mut st) } != 0 {
            Err(std::io::Error::last_os_error())
        } else if (st.st_size as usize) < HEADER_BYTES {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "segment too small",
            ))
        } else {
            map(fd, st.st_size as usize)
        };
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        let base = res.map_err(FabricError::io(&what))?;
        let len = st.st_size as usize;
        // SAFETY: the mapping is at least HEADER_BYTES long.
        let h = unsafe { &*(base as *const Header) };
        let geo = Geometry {
            sources: h.sources,
            lanes: h.lanes,
            cell: h.cell,
            ring_low: h.ring_low,
            ring_high: h.ring_high,
        };
        let seg = Segment { base, len, geo };
        let bad = |why: &str| FabricError::Corrupt {
            rank: owner,
            what: format!("shared memory /dev/shm{name}: {why}"),
        };
        if h.ready.load(Ordering::Acquire) != 1 || h.magic != MAGIC || h.version != 1 {
            return Err(bad("not a Spools segment"));
        }
        if h.tag != tag(secret, name) || h.owner != owner {
            return Err(bad(
                "it belongs to another job (its tag does not match the job secret)",
            ));
        }
        if !geo.cell.is_power_of_two()
            || geo.cell < 64
            || !geo.ring_low.is_power_of_two()
            || !geo.ring_high.is_power_of_two()
            || geo.ring_low < 16 * u64::from(geo.cell)
            || geo.ring_high < 16 * u64::from(geo.cell)
            || geo.bytes() != len as u64
        {
            return Err(bad("inconsistent geometry"));
        }
        Ok(seg)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header and lives as long as self.
        unsafe { &*(self.base as *const Header) }
    }

    /// The owner's doorbell (futex word).
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        // SAFETY: DOORBELL lies inside the header page and is 4-byte aligned.
        unsafe { &*(self.base.add(DOORBELL) as *const AtomicU32) }
    }

    /// Set while the owner sleeps on its doorbell.
    pub(crate) fn sleeping(&self) -> &AtomicU32 {
        // SAFETY: SLEEPING lies inside the header page and is 4-byte aligned.
        unsafe { &*(self.base.add(SLEEPING) as *const AtomicU32) }
    }

    /// The ring that carries messages from local sender `src` on `lane` at `prio`.
    pub(crate) fn ring(&self, src: u32, lane: u32, high: bool) -> Ring {
        let g = &self.geo;
        let pair = HEADER_BYTES as u64
            + (u64::from(src) * u64::from(g.lanes) + u64::from(lane)) * g.pair_bytes();
        let (off, bytes) = if high {
            (pair + 64 + g.ring_low, g.ring_high)
        } else {
            (pair, g.ring_low)
        };
        debug_assert!(off + 64 + bytes <= self.len as u64);
        let shift = g.cell.trailing_zeros();
        // SAFETY: off + 64 + bytes <= len (geometry checked at attach/create); the control
        // line and the cells are 64-byte aligned inside the mapping.
        unsafe {
            let ctrl = self.base.add(off as usize) as *const Ctrl;
            let data = self.base.add(off as usize + 64);
            Ring::new(ctrl, data, bytes >> shift, shift)
        }
    }
}

fn map(fd: libc::c_int, len: usize) -> std::io::Result<*mut u8> {
    // SAFETY: fd is a valid shared-memory descriptor of at least `len` bytes; a fresh
    // mapping aliases no Rust object.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

/// Creates (exclusively, mode 0600, zero-filled) or opens a named shared mapping.
pub(crate) fn map_named(name: &str, len: usize, create: bool) -> Result<*mut u8, FabricError> {
    let c = c_name(name)?;
    let what = format!("shared memory /dev/shm{name}");
    let flags = if create {
        libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC
    } else {
        libc::O_RDWR | libc::O_CLOEXEC
    };
    // SAFETY: c is a valid NUL-terminated string.
    let fd = unsafe { libc::shm_open(c.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(FabricError::io(what)(std::io::Error::last_os_error()));
    }
    let res = (|| {
        // SAFETY: fd is the descriptor just opened.
        if create && unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        map(fd, len)
    })();
    // SAFETY: fd is ours; the mapping keeps the object alive.
    unsafe { libc::close(fd) };
    res.map_err(FabricError::io(what))
}

/// Removes a segment's name (mappings stay valid).
pub(crate) fn unlink(name: &str) {
    if let Ok(c) = CString::new(name) {
        // SAFETY: c is a valid NUL-terminated string.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: base/len describe a mapping made by `map` and not unmapped before;
        // no Ring outlives the transport that owns this segment.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Bytes free in `/dev/shm`.
pub(crate) fn shm_free() -> Option<u64> {
    let path = CString::new("/dev/shm").ok()?;
    // SAFETY: an all-zero statvfs is a valid value to be overwritten.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is valid and st writable.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}
