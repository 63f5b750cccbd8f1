//! The status every call returns, the thread's last error message, and the guard that
//! runs each call's body: it turns a Rust error into a status and its message, and a
//! panic into `SPOOLS_ERR_INTERNAL` (no unwinding ever crosses into C).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call did. Every function of the library returns one; the values are stable
/// (a value never changes meaning, new ones are only added at the end).
/// `spools_strerror()` names a value, `spools_last_error_message()` gives the full
/// message of the last failure on the calling thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::enum_variant_names)]
pub enum spools_status_t {
    /// Success.
    SPOOLS_OK = 0,
    /// A NULL pointer, a bad length, rank, tag, data type, operator, option or string.
    SPOOLS_ERR_INVALID_ARG = 1,
    /// A message longer than the receive buffer (nothing past the buffer was written).
    SPOOLS_ERR_TRUNCATED = 2,
    /// A rank died, aborted or finalised while this one needed it.
    SPOOLS_ERR_PEER_GONE = 3,
    /// A layout that does not parse, or a dataset, buffer or file that does not fit it.
    SPOOLS_ERR_LAYOUT = 4,
    /// A file or socket operation failed (the message names the path and the system's error).
    SPOOLS_ERR_IO = 5,
    /// Damaged data or metadata: a checksum that fails, a lost unit, chunk or shard, a
    /// malformed header or manifest. Only for damage: a file Spools cannot read for
    /// another reason is `SPOOLS_ERR_UNSUPPORTED` or `SPOOLS_ERR_UNAVAILABLE`.
    SPOOLS_ERR_DAMAGED = 6,
    /// Something named does not exist: a file, a handler, an RPC function.
    SPOOLS_ERR_NOT_FOUND = 7,
    /// This process could not join its job (environment, rendezvous, transports).
    SPOOLS_ERR_INIT = 8,
    /// The runtime was finalised or aborted before this call.
    SPOOLS_ERR_FINALIZED = 9,
    /// A function run for this call on another rank failed there (an RPC), or another rank
    /// failed a collective call and what it said is not understood (a collective call
    /// otherwise returns the failing rank's status on every rank).
    SPOOLS_ERR_REMOTE = 10,
    /// A transport or system failure (sockets, shared memory, threads).
    SPOOLS_ERR_TRANSPORT = 11,
    /// The library is older than the header the program was built with, or of another
    /// major version.
    SPOOLS_ERR_VERSION = 12,
    /// A wait was interrupted.
    SPOOLS_ERR_INTERRUPTED = 13,
    /// A bug in Spools (a Rust panic caught at the boundary); the message says where.
    SPOOLS_ERR_INTERNAL = 14,
    /// A well-formed file, or a write, that uses what Spools does not implement: a Zarr
    /// codec, data type or chunk grid, a chunked or big-endian HDF5 dataset, a `.npy`
    /// structured dtype. The file is not damaged.
    SPOOLS_ERR_UNSUPPORTED = 15,
    /// Something the call needs is missing from this installation: a library that
    /// cannot be loaded (HDF5's libhdf5) or a feature the library was built without.
    SPOOLS_ERR_UNAVAILABLE = 16,
}

use spools_status_t as S;

/// A failed call: its status and its message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: spools_status_t,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: spools_status_t, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// `SPOOLS_ERR_INVALID_ARG` with `message`.
    pub(crate) fn arg(message: impl Into<String>) -> Failure {
        Failure::new(S::SPOOLS_ERR_INVALID_ARG, message)
    }
}

pub(crate) use spools_io::message_chain as chain;

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last(message: &str) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs the body of a call: its error becomes the status it returns (and the thread's
/// last error message), and a panic becomes `SPOOLS_ERR_INTERNAL`.
#[inline]
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Failure>) -> spools_status_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => S::SPOOLS_OK,
        Ok(Err(e)) => {
            set_last(&e.message);
            e.status
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            set_last(&format!(
                "internal error in Spools (please report it): {what}"
            ));
            S::SPOOLS_ERR_INTERNAL
        }
    }
}

/// The name and meaning of a status, as a static string ("SPOOLS_ERR_TRUNCATED: message
/// truncated"); an unknown value gives "unknown status". Never NULL.
///
/// Thread safety: any thread, any time (also before `spools_init()`).
#[no_mangle]
pub extern "C" fn spools_strerror(status: c_int) -> *const c_char {
    let s: &'static [u8] = match status {
        0 => b"SPOOLS_OK: success\0",
        1 => b"SPOOLS_ERR_INVALID_ARG: invalid argument\0",
        2 => b"SPOOLS_ERR_TRUNCATED: message truncated\0",
        3 => b"SPOOLS_ERR_PEER_GONE: a peer rank is gone\0",
        4 => b"SPOOLS_ERR_LAYOUT: layout error\0",
        5 => b"SPOOLS_ERR_IO: I/O error\0",
        6 => b"SPOOLS_ERR_DAMAGED: damaged data or metadata\0",
        7 => b"SPOOLS_ERR_NOT_FOUND: not found\0",
        8 => b"SPOOLS_ERR_INIT: could not join the job\0",
        9 => b"SPOOLS_ERR_FINALIZED: the runtime is finalised\0",
        10 => b"SPOOLS_ERR_REMOTE: failed on another rank\0",
        11 => b"SPOOLS_ERR_TRANSPORT: transport error\0",
        12 => b"SPOOLS_ERR_VERSION: incompatible library version\0",
        13 => b"SPOOLS_ERR_INTERRUPTED: interrupted\0",
        14 => b"SPOOLS_ERR_INTERNAL: internal error\0",
        15 => b"SPOOLS_ERR_UNSUPPORTED: not supported by Spools\0",
        16 => b"SPOOLS_ERR_UNAVAILABLE: a library or feature is unavailable\0",
        _ => b"unknown status\0",
    };
    s.as_ptr().cast()
}

/// The full message of the last call that failed on the calling thread (empty if none
/// has). The pointer stays valid until the next failing call on this thread; copy the
/// text to keep it. Successful calls leave it as it is (as `errno`). Never NULL.
///
/// Thread safety: any thread; each thread has its own message.
#[no_mangle]
pub extern "C" fn spools_last_error_message() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}
