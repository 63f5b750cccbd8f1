//! `MPI_Alloc_mem` / `MPI_Free_mem` (ordinary memory: Spools' transfers need no
//! registration), `MPI_Reduce_local`, and the remaining small environment calls.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::coll::op::Reducer;
use crate::datatype::{committed, count as ccount};
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::out::out;

/// Sizes of the blocks `MPI_Alloc_mem` gave, by address (for `MPI_Free_mem`).
static BLOCKS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

const ALIGN: usize = 64;

/// `MPI_Alloc_mem`: `size` bytes aligned to 64.
#[no_mangle]
pub unsafe extern "C" fn MPI_Alloc_mem(
    size: MPI_Aint,
    info: MPI_Info,
    baseptr: *mut c_void,
) -> c_int {
    let _ = info;
    let r = (|| {
        let n = usize::try_from(size).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_SIZE,
                format!("MPI_Alloc_mem: size {size} is negative"),
            )
        })?;
        let layout = std::alloc::Layout::from_size_align(n.max(1), ALIGN).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_SIZE,
                format!("MPI_Alloc_mem: size {size} is too large"),
            )
        })?;
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_NO_MEM,
                format!("MPI_Alloc_mem: no memory for {size} bytes"),
            ));
        }
        BLOCKS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((p as usize, n.max(1)));
        // SAFETY: the caller's contract: `baseptr` points to a pointer.
        unsafe { out(baseptr.cast::<usize>(), p as usize, "MPI_Alloc_mem") }
    })();
    on_self(r)
}

/// `MPI_Free_mem`: frees a block of `MPI_Alloc_mem`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Free_mem(base: *mut c_void) -> c_int {
    let r = (|| {
        let mut g = BLOCKS.lock().unwrap_or_else(PoisonError::into_inner);
        let i = g
            .iter()
            .position(|&(p, _)| p == base as usize)
            .ok_or_else(|| {
                MpiError::invalid(MPI_ERR_BASE, "MPI_Free_mem: not a block of MPI_Alloc_mem")
            })?;
        let (p, n) = g.swap_remove(i);
        let layout = std::alloc::Layout::from_size_align(n, ALIGN)
            .map_err(|_| MpiError::invalid(MPI_ERR_BASE, "MPI_Free_mem: bad block"))?;
        // SAFETY: allocated by MPI_Alloc_mem with this layout.
        unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        Ok(())
    })();
    on_self(r)
}

fn reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> Result<(), MpiError> {
    let call = "MPI_Reduce_local";
    let n = ccount(count, call)?;
    let t = committed(datatype, call)?;
    let red = Reducer::new(op, datatype, &t, n)?;
    crate::datatype::buffer(inbuf as usize, n, &t, call, "inbuf")?;
    crate::datatype::buffer(inoutbuf as usize, n, &t, call, "inoutbuf")?;
    if n > 0 && t.size > 0 && std::ptr::eq(inbuf, inoutbuf.cast_const()) {
        return Err(MpiError::invalid(
            MPI_ERR_BUFFER,
            format!("{call}: inbuf and inoutbuf are the same buffer"),
        ));
    }
    // SAFETY: both buffers hold `count` elements (MPI's contract).
    unsafe {
        let a = red.input(inbuf.cast());
        let b = red.input(inoutbuf.cast_const().cast());
        let r = red.fold(&[&a, &b]);
        red.output(&r, inoutbuf.cast());
    }
    Ok(())
}

/// `MPI_Reduce_local`: `inoutbuf = inbuf op inoutbuf`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    on_self(reduce_local(inbuf, inoutbuf, count.into(), datatype, op))
}

/// `MPI_Reduce_local_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    on_self(reduce_local(inbuf, inoutbuf, count, datatype, op))
}

/// `MPI_Pcontrol`: profiling control; nothing to do without a profiler.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pcontrol(level: c_int) -> c_int {
    let _ = level;
    MPI_SUCCESS
}
