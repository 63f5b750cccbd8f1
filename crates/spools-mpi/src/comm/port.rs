//! Ports (`MPI_Open_port`, `MPI_Close_port`): names only. Spools does not connect
//! processes dynamically: `MPI_Comm_accept` and `MPI_Comm_connect` (like
//! `MPI_Comm_spawn` and `MPI_Comm_join`) are refused, at once and on every rank that
//! calls them, before any communication. Opening a port is a local call that succeeds,
//! so that the refusal comes from those collective calls, made by every rank alike: a
//! program whose rank 0 opens a port and sends its name to rank 1 then sees every rank
//! fail in accept or connect, where a refused `MPI_Open_port` left rank 1 waiting for
//! the name forever.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::{put_string, MpiError};
use crate::runtime::rt;

/// The ports this process opened and has not closed.
static OPEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
/// The number of the next port this process opens.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// `MPI_Open_port`: a new port name, unique in the job (`spools-port:RANK:PID:N`). No
/// process can connect to it (`MPI_Comm_accept` and `MPI_Comm_connect` are refused).
#[no_mangle]
pub unsafe extern "C" fn MPI_Open_port(info: MPI_Info, port_name: *mut c_char) -> c_int {
    let _ = info;
    let call = "MPI_Open_port";
    let r = (|| {
        let rank = rt(call)?.rank;
        if port_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: port_name is NULL"),
            ));
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("spools-port:{rank}:{}:{n}", std::process::id());
        OPEN.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashSet::new)
            .insert(name.clone());
        // SAFETY: `port_name` holds MPI_MAX_PORT_NAME bytes (the caller's contract).
        unsafe {
            put_string(
                &name,
                port_name,
                MPI_MAX_PORT_NAME as usize,
                std::ptr::null_mut(),
            )
        };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Close_port`: forgets a port this process opened (`MPI_ERR_PORT` for another).
#[no_mangle]
pub unsafe extern "C" fn MPI_Close_port(port_name: *const c_char) -> c_int {
    let call = "MPI_Close_port";
    let r = (|| {
        rt(call)?;
        if port_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: port_name is NULL"),
            ));
        }
        // SAFETY: a NUL-terminated string (the caller's contract).
        let name = unsafe { CStr::from_ptr(port_name) }.to_string_lossy();
        let closed = OPEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .is_some_and(|s| s.remove(name.as_ref()));
        if !closed {
            return Err(MpiError::invalid(
                MPI_ERR_PORT,
                format!("{call}: {name:?} is not a port this process opened"),
            ));
        }
        Ok(())
    })();
    on_self(r)
}
