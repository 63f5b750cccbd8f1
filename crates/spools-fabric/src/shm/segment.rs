//! A rank's shared-memory segment: a header with its doorbell, then one ring per
//! (sending local rank, lane, priority) for the messages it receives.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use spools_heap::shm::{map, open_shm, unlink};
use spools_proto::auth::Secret;

use crate::error::{Defect, FabricError, IoStep};
use crate::shm::ring::{Ctrl, Ring};
use crate::shm::sleep::Sleepers;

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
    /// The owner's process id, for reads of its memory (`cma.rs`).
    pid: u32,
    /// Where the owner's cookie lies in its memory, and its value: a reader checks it in
    /// the same system call as the bytes it reads, so that a pid reused by another
    /// process after the owner died never passes for the owner.
    cookie_addr: u64,
    cookie: u64,
    /// Where the owner's loan words lie in its memory (`cma.rs`).
    loans_addr: u64,
}

/// Offset of the doorbell word (own cache line) and of the "sleeping" flag.
const DOORBELL: usize = 512;
const SLEEPING: usize = 576;
/// Offset of the "napping" count (own cache line): the owner's threads asleep outside
/// the transport (on a collective's flags).
const NAPPING: usize = 640;
/// Offset of the owner's CPU as its last wait saw it, plus one (0: unknown; own line).
const CPU: usize = 704;
/// Offset of the count of the owner's helper threads (the progress thread) asleep in the
/// transport (own line): their sleep does not make the rank asleep.
const HELPERS: usize = 768;

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
        let len = geo.bytes() as usize;
        let base = create_mapped(name, len)?;
        let seg = Segment { base, len, geo };
        // SAFETY: the mapping is at least HEADER_BYTES long, page aligned, zero-filled and
        // not yet visible to any other process (its name is not published before the
        // bootstrap barrier that follows creation).
        unsafe {
            let h = &mut *(base as *mut Header);
            h.magic = MAGIC;
            h.version = 2;
            h.sources = geo.sources;
            h.lanes = geo.lanes;
            h.cell = geo.cell;
            h.ring_low = geo.ring_low;
            h.ring_high = geo.ring_high;
            h.owner = owner;
            h.tag = tag(secret, name);
            h.pid = std::process::id();
            (h.cookie_addr, h.cookie) = super::cma::cookie();
            h.loans_addr = super::cma::loans_addr();
        }
        seg.header().ready.store(1, Ordering::Release);
        Ok(seg)
    }

    /// Maps another rank's segment and checks that it belongs to this job.
    pub(crate) fn attach(name: &str, owner: u32, secret: &Secret) -> Result<Segment, FabricError> {
        let (fd, len) = open_sized(name, owner)?;
        let io = attach_error(name, owner);
        if len < HEADER_BYTES {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "segment too small",
            )));
        }
        let base = map(&fd, len).map_err(io)?;
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
        let bad = |defect: fn(String) -> Defect| FabricError::Corrupt {
            rank: owner,
            defect: defect(name.to_owned()),
        };
        if h.ready.load(Ordering::Acquire) != 1 || h.magic != MAGIC || h.version != 2 {
            return Err(bad(|name| Defect::NotASegment { name }));
        }
        if h.tag != tag(secret, name) || h.owner != owner {
            return Err(bad(|name| Defect::ForeignSegment { name }));
        }
        if !geo.cell.is_power_of_two()
            || geo.cell < 64
            || !geo.ring_low.is_power_of_two()
            || !geo.ring_high.is_power_of_two()
            || geo.ring_low < 16 * u64::from(geo.cell)
            || geo.ring_high < 16 * u64::from(geo.cell)
            || geo.bytes() != len as u64
        {
            return Err(bad(|name| Defect::BadGeometry { name }));
        }
        Ok(seg)
    }

    /// The owner's process: its id, its cookie's address in its memory and the value.
    pub(crate) fn process(&self) -> super::cma::Process {
        let h = self.header();
        super::cma::Process {
            pid: h.pid,
            cookie_addr: h.cookie_addr,
            cookie: h.cookie,
            loans_addr: h.loans_addr,
        }
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

    /// The sleep handshake on the owner's doorbell and `sleeping` words.
    #[inline]
    pub(crate) fn sleepers(&self) -> Sleepers<'_> {
        Sleepers::new(self.doorbell(), self.sleeping())
    }

    /// The owner's threads asleep outside the transport (on a collective's flags).
    pub(crate) fn napping(&self) -> &AtomicU32 {
        // SAFETY: NAPPING lies inside the header page and is 4-byte aligned.
        unsafe { &*(self.base.add(NAPPING) as *const AtomicU32) }
    }

    /// The owner's helper threads (the progress thread) asleep in the transport.
    pub(crate) fn helpers(&self) -> &AtomicU32 {
        // SAFETY: HELPERS lies inside the header page and is 4-byte aligned.
        unsafe { &*(self.base.add(HELPERS) as *const AtomicU32) }
    }

    /// The CPU the owner's last wait polled on, plus one (0: unknown).
    pub(crate) fn cpu(&self) -> &AtomicU32 {
        // SAFETY: CPU lies inside the header page and is 4-byte aligned.
        unsafe { &*(self.base.add(CPU) as *const AtomicU32) }
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

/// Creates `name` exclusively (mode 0600), sizes it to `len` zero-filled bytes and maps
/// it; on failure the name is gone again.
pub(crate) fn create_mapped(name: &str, len: usize) -> Result<*mut u8, FabricError> {
    let io = |source: std::io::Error| FabricError::Io {
        step: IoStep::ShmCreate {
            name: name.to_owned(),
        },
        source,
    };
    let fd = open_shm(name, true).map_err(io)?;
    rustix::fs::ftruncate(&fd, len as u64)
        .map_err(std::io::Error::from)
        .and_then(|()| map(&fd, len))
        .map_err(|e| {
            unlink(name);
            io(e)
        })
}

/// The error of attaching to `name`, created by local rank `owner`.
pub(crate) fn attach_error(name: &str, owner: u32) -> impl Fn(std::io::Error) -> FabricError + '_ {
    move |source| FabricError::Io {
        step: IoStep::ShmAttach {
            name: name.to_owned(),
            owner,
        },
        source,
    }
}

/// Opens `name`, created by local rank `owner`, and says how long it is.
pub(crate) fn open_sized(name: &str, owner: u32) -> Result<(OwnedFd, usize), FabricError> {
    let io = attach_error(name, owner);
    let fd = open_shm(name, false).map_err(&io)?;
    let len = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?.st_size;
    Ok((fd, usize::try_from(len).unwrap_or(0)))
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: base/len describe a mapping made by `map` and not unmapped before;
        // no Ring outlives the transport that owns this segment.
        // An unmap of a valid mapping cannot fail in a way the caller could act on.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// Bytes free in `/dev/shm`.
pub(crate) fn shm_free() -> Option<u64> {
    let st = rustix::fs::statvfs("/dev/shm").ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}
