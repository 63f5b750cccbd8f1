//! Buffered sends (`MPI_Bsend`): the attached buffer (`MPI_Buffer_attach`) bounds the
//! bytes of buffered sends in flight, each counted with `MPI_BSEND_OVERHEAD`; the data
//! itself is copied once into the send request.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::out::out;

struct Attached {
    addr: usize,
    size: usize,
    /// Buffered sends not yet known complete, with the bytes they count.
    pending: Vec<(spools::Request, usize)>,
}

static BUFFER: Mutex<Option<Attached>> = Mutex::new(None);

/// Takes `len` bytes of the attached buffer for a buffered send.
///
/// # Errors
/// `MPI_ERR_BUFFER` when no buffer is attached or it has no room.
pub(crate) fn reserve(len: usize) -> Result<(), MpiError> {
    let mut g = BUFFER.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(a) = g.as_mut() else {
        return Err(MpiError::invalid(
            MPI_ERR_BUFFER,
            "MPI_Bsend: no buffer is attached (MPI_Buffer_attach)",
        ));
    };
    a.pending.retain_mut(|(r, _)| !matches!(r.test(), Ok(true)));
    let used: usize = a.pending.iter().map(|p| p.1).sum();
    let need = len + MPI_BSEND_OVERHEAD as usize;
    if used + need > a.size {
        return Err(MpiError::invalid(
            MPI_ERR_BUFFER,
            format!(
                "MPI_Bsend: the attached buffer of {} bytes has {} free, {need} are needed",
                a.size,
                a.size.saturating_sub(used)
            ),
        ));
    }
    Ok(())
}

/// Counts a started buffered send against the attached buffer.
pub(crate) fn track(r: spools::Request, len: usize) {
    let mut g = BUFFER.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(a) = g.as_mut() {
        a.pending.push((r, len + MPI_BSEND_OVERHEAD as usize));
    }
}

/// Waits until every buffered send has completed.
///
/// # Errors
/// A send that failed.
pub(crate) fn flush() -> Result<(), MpiError> {
    let pending = {
        let mut g = BUFFER.lock().unwrap_or_else(PoisonError::into_inner);
        g.as_mut()
            .map(|a| std::mem::take(&mut a.pending))
            .unwrap_or_default()
    };
    for (r, _) in pending {
        r.wait()?;
    }
    Ok(())
}

/// `MPI_Buffer_attach`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    let r = (|| {
        let mut g = BUFFER.lock().unwrap_or_else(PoisonError::into_inner);
        if g.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_BUFFER,
                "MPI_Buffer_attach: a buffer is already attached",
            ));
        }
        let size = usize::try_from(size)
            .map_err(|_| MpiError::invalid(MPI_ERR_COUNT, "MPI_Buffer_attach: negative size"))?;
        *g = Some(Attached {
            addr: buffer as usize,
            size,
            pending: Vec::new(),
        });
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Buffer_detach`: waits for the buffered sends, then gives the buffer back.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    let r = (|| {
        flush()?;
        let a = BUFFER
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| {
                MpiError::invalid(MPI_ERR_BUFFER, "MPI_Buffer_detach: no buffer is attached")
            })?;
        // SAFETY: the caller's contract: `buffer_addr` points to a `void *`.
        unsafe {
            out(buffer_addr.cast::<usize>(), a.addr, "MPI_Buffer_detach")?;
            out(size, a.size as c_int, "MPI_Buffer_detach")
        }
    })();
    on_self(r)
}

/// `MPI_Buffer_flush`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_flush() -> c_int {
    on_self(flush())
}

/// `MPI_Buffer_attach_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    let Ok(size) = c_int::try_from(size) else {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_COUNT,
            "MPI_Buffer_attach_c: size beyond 2 GiB",
        )));
    };
    // SAFETY: the caller's contract.
    unsafe { MPI_Buffer_attach(buffer, size) }
}

/// `MPI_Buffer_detach_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach_c(
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    let mut s: c_int = 0;
    // SAFETY: the caller's contract.
    let rc = unsafe { MPI_Buffer_detach(buffer_addr, &mut s) };
    if rc == MPI_SUCCESS {
        // SAFETY: the caller's contract.
        return on_self(unsafe { out(size, MPI_Count::from(s), "MPI_Buffer_detach_c") });
    }
    rc
}
