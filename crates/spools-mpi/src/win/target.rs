//! How this rank reaches one target's window memory: its own memory, a peer's
//! shared-heap segment mapped here (`MPI_Win_allocate`, `MPI_Win_allocate_shared`), or a
//! peer's ordinary memory through cross-memory attach (`process_vm_readv` /
//! `process_vm_writev`: `MPI_Win_create`, `MPI_Win_create_dynamic`). Every way is one
//! copy by the origin, with nothing asked of the target.

use spools::PeerBytes;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::win::ctl::{Ctl, LockKind};
use crate::win::mem::{Mem, Run};
use crate::win::remote;

/// Most iovecs one `process_vm_*v` call takes (Linux's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// One target of a window.
pub(crate) struct Target {
    pub(crate) mem: Mem,
    /// Bytes of its window (0 for a dynamic window: see [`Target::dynamic`]).
    pub(crate) len: usize,
    pub(crate) disp_unit: usize,
    /// Displacements are addresses in the target, checked against its attached regions.
    pub(crate) dynamic: bool,
    /// Its control block, mapped here (`None` for a remote target: its words are
    /// reached by messages).
    pub(crate) ctl: Option<PeerBytes>,
    /// Its address for `MPI_WIN_BASE` and `MPI_Win_shared_query` (0: not shared).
    pub(crate) base: usize,
}

/// The runs of an access: one (a contiguous type, kept without a vector) or many.
pub(crate) enum Runs {
    One(Run),
    Many(Vec<Run>),
}

impl std::ops::Deref for Runs {
    type Target = [Run];

    fn deref(&self) -> &[Run] {
        match self {
            Runs::One(r) => std::slice::from_ref(r),
            Runs::Many(v) => v,
        }
    }
}

impl Target {
    /// Its control block, when mapped here.
    pub(crate) fn ctl(&self) -> Option<&Ctl> {
        // SAFETY: `ctl` maps a whole control block, zero-filled when made (all-zero
        // atomics are valid), 4096-aligned; only atomics are reached through it, and it
        // stays mapped as long as `self`.
        self.ctl
            .as_ref()
            .map(|c| unsafe { &*c.as_ptr().cast::<Ctl>() })
    }

    /// Whether it is reached by messages.
    pub(crate) fn remote(&self) -> bool {
        matches!(self.mem, Mem::Remote { .. })
    }

    /// The address of its window's first byte in this process, when its bytes are
    /// mapped here (this rank's own window or a peer's shared-heap segment) and its
    /// displacements are offsets (not a dynamic window): the one-copy fast path of
    /// `rma.rs`, which checks the range against [`Target::len`] itself.
    #[inline]
    pub(crate) fn direct(&self) -> Option<*mut u8> {
        if self.dynamic {
            return None;
        }
        match &self.mem {
            Mem::Local(base) => Some(*base as *mut u8),
            Mem::Mapped(b) => Some(b.as_mut_ptr()),
            Mem::Cma { .. } | Mem::Remote { .. } => None,
        }
    }

    /// Tries to take its passive-target lock as `kind`.
    ///
    /// # Errors
    /// A remote target's call failing (a dead rank).
    pub(crate) fn try_lock(&self, kind: LockKind) -> Result<bool, MpiError> {
        match self.ctl() {
            Some(c) => Ok(c.try_lock(kind)),
            None => remote::try_lock(&self.mem, kind),
        }
    }

    /// Releases its passive-target lock taken as `kind`.
    ///
    /// # Errors
    /// As [`Target::try_lock`].
    pub(crate) fn unlock(&self, kind: LockKind) -> Result<(), MpiError> {
        match self.ctl() {
            Some(c) => {
                c.unlock(kind);
                Ok(())
            }
            None => remote::unlock(&self.mem, kind),
        }
    }

    /// Tries to take its accumulate lock.
    ///
    /// # Errors
    /// As [`Target::try_lock`].
    pub(crate) fn try_acc(&self) -> Result<bool, MpiError> {
        match self.ctl() {
            Some(c) => Ok(c.try_acc()),
            None => remote::try_acc(&self.mem),
        }
    }

    /// Releases its accumulate lock.
    ///
    /// # Errors
    /// As [`Target::try_lock`].
    pub(crate) fn release_acc(&self) -> Result<(), MpiError> {
        match self.ctl() {
            Some(c) => {
                c.release_acc();
                Ok(())
            }
            None => remote::release_acc(&self.mem),
        }
    }

    /// Checks that every run lies in the window (or in a region attached to it).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` naming the run and the window's size.
    pub(crate) fn check(&self, runs: &[Run], call: &'static str) -> Result<(), MpiError> {
        for &(at, len) in runs {
            let ok = if self.dynamic {
                // A remote target checks its own attached regions.
                len == 0 || self.ctl().is_none_or(|c| c.covers(at as u64, len as u64))
            } else {
                at.checked_add(len).is_some_and(|e| e <= self.len)
            };
            if !ok {
                let what = if self.dynamic {
                    "no region attached at the target holds it".to_string()
                } else {
                    format!("the target's window has {} bytes", self.len)
                };
                return Err(MpiError::invalid(
                    MPI_ERR_RMA_RANGE,
                    format!(
                        "{call}: bytes [{at}, {}) are outside the window: {what}",
                        at.saturating_add(len)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Copies `data` (the runs' bytes, in order) into the target's runs (checked).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` for cross-memory attach that fails (the target's memory is
    /// not mapped there any more).
    pub(crate) fn write(
        &self,
        runs: &[Run],
        data: &[u8],
        call: &'static str,
    ) -> Result<(), MpiError> {
        match &self.mem {
            Mem::Local(base) => copy_runs(*base, runs, data.as_ptr().cast_mut(), true),
            Mem::Mapped(b) => copy_runs(
                b.as_mut_ptr() as usize,
                runs,
                data.as_ptr().cast_mut(),
                true,
            ),
            Mem::Cma { pid, base } => {
                return cma(
                    *pid,
                    *base,
                    runs,
                    data.as_ptr().cast_mut(),
                    true,
                    self.dynamic,
                    call,
                )
            }
            Mem::Remote { .. } => return remote::put(&self.mem, runs, data, call),
        }
        Ok(())
    }

    /// Copies the target's runs (checked) into `out`, in order.
    ///
    /// # Errors
    /// As [`Target::write`].
    pub(crate) fn read(
        &self,
        runs: &[Run],
        out: &mut [u8],
        call: &'static str,
    ) -> Result<(), MpiError> {
        match &self.mem {
            Mem::Local(base) => copy_runs(*base, runs, out.as_mut_ptr(), false),
            Mem::Mapped(b) => copy_runs(b.as_mut_ptr() as usize, runs, out.as_mut_ptr(), false),
            Mem::Cma { pid, base } => {
                return cma(
                    *pid,
                    *base,
                    runs,
                    out.as_mut_ptr(),
                    false,
                    self.dynamic,
                    call,
                )
            }
            Mem::Remote { .. } => return remote::get(&self.mem, runs, out, call),
        }
        Ok(())
    }
}

/// Copies between the runs at `base` (an address in this process) and `buf`, in order;
/// `into` copies from `buf` into the runs.
fn copy_runs(base: usize, runs: &[Run], buf: *mut u8, into: bool) {
    let mut at = 0usize;
    for &(off, len) in runs {
        let mem = base.wrapping_add(off) as *mut u8;
        // SAFETY: the runs were checked against the window (whose bytes are mapped
        // here: this rank's own, or a peer's segment kept mapped by the target), and
        // `buf` holds the runs' total length (the callers size it so). Window memory
        // is reached only by raw copies: concurrent copies give mixed bytes, as MPI
        // says conflicting accesses do, never undefined behaviour in Rust's terms.
        unsafe {
            if into {
                std::ptr::copy(buf.add(at), mem, len);
            } else {
                std::ptr::copy(mem, buf.add(at), len);
            }
        }
        at += len;
    }
}

/// Copies between the runs of process `pid`'s window at `base` (at address 0 for a
/// dynamic window) and `buf`, many runs per system call.
fn cma(
    pid: i32,
    base: usize,
    runs: &[Run],
    buf: *mut u8,
    into: bool,
    dynamic: bool,
    call: &'static str,
) -> Result<(), MpiError> {
    let mut local: Vec<libc::iovec> = Vec::with_capacity(runs.len().min(MAX_IOV));
    let mut remote: Vec<libc::iovec> = Vec::with_capacity(runs.len().min(MAX_IOV));
    let mut at = 0usize;
    let flush = |local: &mut Vec<libc::iovec>,
                 remote: &mut Vec<libc::iovec>|
     -> Result<(), MpiError> {
        let want: usize = local.iter().map(|v| v.iov_len).sum();
        if want == 0 {
            local.clear();
            remote.clear();
            return Ok(());
        }
        // SAFETY: the local iovecs lie in `buf` (sized by the caller), the remote ones
        // in the target's window (checked); the kernel checks the remote side itself.
        let n = unsafe {
            if into {
                libc::process_vm_writev(
                    pid,
                    local.as_ptr(),
                    local.len() as _,
                    remote.as_ptr(),
                    remote.len() as _,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid,
                    local.as_ptr(),
                    local.len() as _,
                    remote.as_ptr(),
                    remote.len() as _,
                    0,
                )
            }
        };
        local.clear();
        remote.clear();
        if n < 0 || n as usize != want {
            let e = std::io::Error::last_os_error();
            return Err(MpiError::invalid(
                MPI_ERR_RMA_RANGE,
                format!("{call}: cross-memory attach to the target (pid {pid}) moved {n} of {want} bytes: {e}"),
            ));
        }
        Ok(())
    };
    for &(off, len) in runs {
        if len == 0 {
            continue;
        }
        let addr = if dynamic { off } else { base.wrapping_add(off) };
        local.push(libc::iovec {
            // SAFETY: within `buf` (the caller's contract).
            iov_base: unsafe { buf.add(at) }.cast(),
            iov_len: len,
        });
        remote.push(libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        });
        at += len;
        if local.len() == MAX_IOV {
            flush(&mut local, &mut remote)?;
        }
    }
    flush(&mut local, &mut remote)
}

/// Whether this process may read process `pid`'s memory at `addr` (cross-memory attach
/// allowed by the kernel's ptrace policy).
pub(crate) fn cma_allowed(pid: i32, addr: usize) -> bool {
    let mut b = 0u8;
    let local = libc::iovec {
        iov_base: (&raw mut b).cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: one byte into a local; the kernel checks the remote address.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    n == 1
}

/// The runs of `count` elements of type `t` placed at byte `start` of the window,
/// merged where they touch.
///
/// # Errors
/// `MPI_ERR_RMA_RANGE` for a run that would start before the window.
pub(crate) fn runs_of(
    start: isize,
    count: usize,
    t: &crate::datatype::TypeObj,
    call: &'static str,
) -> Result<Runs, MpiError> {
    if t.contiguous() {
        // One run, whatever the count (a window of bytes moves as one copy).
        let len = count * t.size;
        if len == 0 {
            return Ok(Runs::Many(Vec::new()));
        }
        let at = usize::try_from(start).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_RMA_RANGE,
                format!("{call}: displacement {start} lies before the window"),
            )
        })?;
        return Ok(Runs::One((at, len)));
    }
    let mut runs: Vec<Run> = Vec::with_capacity(count * t.blocks.len().max(1));
    for i in 0..count {
        let el = start + i as isize * t.extent;
        for &(off, len) in &t.blocks {
            if len == 0 {
                continue;
            }
            let at = usize::try_from(el + off).map_err(|_| {
                MpiError::invalid(
                    MPI_ERR_RMA_RANGE,
                    format!(
                        "{call}: a byte at displacement {} lies before the window",
                        el + off
                    ),
                )
            })?;
            match runs.last_mut() {
                Some(r) if r.0 + r.1 == at => r.1 += len,
                _ => runs.push((at, len)),
            }
        }
    }
    Ok(Runs::Many(runs))
}
