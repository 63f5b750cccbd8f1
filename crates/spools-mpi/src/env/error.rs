//! Errors: what fails in this layer ([`MpiError`]), the error codes handed to programs
//! (each with its message, for `MPI_Error_string`), error handlers, and the functions
//! `MPI_Error_class`, `MPI_Error_string`, `MPI_Comm_set_errhandler` and friends.

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, PoisonError};

use spools::MsgError;

use crate::abi::*;
use crate::handles::{Kind, Table};

/// What an MPI call can fail with in Spools. Each variant maps to the MPI error class
/// the standard gives for it ([`MpiError::class`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MpiError {
    /// The messaging layer failed: truncation, a bad rank or tag, a dead or finalised
    /// peer, a transport failure, ranks that disagree in a collective.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// Joining the job failed in `MPI_Init`.
    #[error("MPI_Init could not join the job: {0}")]
    Init(String),
    /// A call before `MPI_Init` or after `MPI_Finalize`.
    #[error("{0}: MPI is not initialized (call MPI_Init first) or already finalized")]
    NotInitialized(&'static str),
    /// A handle that is not a live object of the kind the argument needs.
    #[error(
        "{what} handle {handle:#x} is not a valid {what} (freed, never made, or of another kind)"
    )]
    Handle {
        /// The class of the argument (`MPI_ERR_COMM`, `MPI_ERR_TYPE`, ...).
        class: c_int,
        /// What the argument is ("communicator").
        what: &'static str,
        /// The handle passed.
        handle: usize,
    },
    /// An argument the standard defines as erroneous (a negative count, a rank outside
    /// the communicator, a NULL output pointer, an uncommitted datatype).
    #[error("{message}")]
    Invalid {
        /// The MPI error class that names the argument.
        class: c_int,
        /// What was wrong, naming the function and the argument.
        message: String,
    },
    /// A function of the standard ABI that Spools does not implement (yet).
    #[error("{0} is not supported by Spools")]
    Unsupported(&'static str),
    /// The program's own callback (a generalized request's query, free or cancel
    /// function) returned this error code, which the call returns as it is.
    #[error("{what} returned error code {code}")]
    Program {
        /// The code the callback returned.
        code: c_int,
        /// Which callback.
        what: &'static str,
    },
}

impl MpiError {
    /// An invalid argument of class `class`.
    pub(crate) fn invalid(class: c_int, message: impl Into<String>) -> MpiError {
        MpiError::Invalid {
            class,
            message: message.into(),
        }
    }

    /// The MPI error class.
    pub(crate) fn class(&self) -> c_int {
        match self {
            MpiError::Msg(e) => match e {
                MsgError::Truncated { .. } => MPI_ERR_TRUNCATE,
                // A collective's block longer than this rank's buffer for it.
                MsgError::Mismatch { got, want, .. } if got > want => MPI_ERR_TRUNCATE,
                MsgError::BadRank { .. } => MPI_ERR_RANK,
                MsgError::BadTag(_) => MPI_ERR_TAG,
                MsgError::BadBuffer { .. } => MPI_ERR_COUNT,
                MsgError::PeerFinalized { .. } | MsgError::Am(_) => MPI_ERR_PROC_ABORTED,
                _ => MPI_ERR_OTHER,
            },
            MpiError::Init(_) | MpiError::NotInitialized(_) => MPI_ERR_OTHER,
            MpiError::Handle { class, .. } | MpiError::Invalid { class, .. } => *class,
            MpiError::Unsupported(_) => MPI_ERR_UNSUPPORTED_OPERATION,
            MpiError::Program { code, .. } => lookup(*code).map_or(MPI_ERR_OTHER, |(c, _)| c),
        }
    }
}

/// Error codes beyond the classes start here; code `FIRST_CODE + n` is the n-th error
/// reported (its message kept in a ring of `RING` entries).
pub(crate) const FIRST_CODE: c_int = 0x10_0000;
const RING: usize = 4096;

struct Codes {
    next: u32,
    ring: Vec<(u32, c_int, String)>,
}

static CODES: Mutex<Codes> = Mutex::new(Codes {
    next: 0,
    ring: Vec::new(),
});

/// Gives `e` an error code of its own, whose class is `e`'s and whose string is its
/// message.
pub(crate) fn code_of(e: &MpiError) -> c_int {
    if let MpiError::Program { code, .. } = e {
        return *code;
    }
    let class = e.class();
    let mut c = CODES.lock().unwrap_or_else(PoisonError::into_inner);
    let n = c.next % (i32::MAX as u32 - FIRST_CODE as u32);
    c.next = n + 1;
    let slot = (n as usize) % RING;
    let entry = (n, class, e.to_string());
    if c.ring.len() <= slot {
        c.ring.push(entry);
    } else {
        c.ring[slot] = entry;
    }
    FIRST_CODE + n as c_int
}

/// User error classes and codes: (code, class, string). Classes and codes are numbered
/// from `FIRST_USER`, below the codes Spools gives its own errors.
pub(crate) static USER: Mutex<Vec<(c_int, c_int, String)>> = Mutex::new(Vec::new());

pub(crate) const FIRST_USER: c_int = MPI_ERR_LASTCODE + 1;

/// The class and string of a user error code or class.
pub(crate) fn user_code(code: c_int) -> Option<(c_int, String)> {
    USER.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|e| e.0 == code)
        .map(|e| (e.1, e.2.clone()))
}

/// The class and message of `code`: a class, or a code `code_of` made.
pub(crate) fn lookup(code: c_int) -> Option<(c_int, String)> {
    if let Some(u) = user_code(code) {
        return Some(u);
    }
    if (0..FIRST_CODE).contains(&code) {
        return class_name(code).map(|m| (code, m.to_string()));
    }
    let n = u32::try_from(code.checked_sub(FIRST_CODE)?).ok()?;
    let c = CODES.lock().unwrap_or_else(PoisonError::into_inner);
    let (seq, class, msg) = c.ring.get(n as usize % RING)?;
    (*seq == n).then(|| (*class, msg.clone()))
}

/// The standard's description of an error class.
pub(crate) fn class_name(class: c_int) -> Option<&'static str> {
    Some(match class {
        MPI_SUCCESS => "no error",
        MPI_ERR_BUFFER => "invalid buffer pointer",
        MPI_ERR_COUNT => "invalid count argument",
        MPI_ERR_TYPE => "invalid datatype",
        MPI_ERR_TAG => "invalid tag",
        MPI_ERR_COMM => "invalid communicator",
        MPI_ERR_RANK => "invalid rank",
        MPI_ERR_REQUEST => "invalid request",
        MPI_ERR_ROOT => "invalid root",
        MPI_ERR_GROUP => "invalid group",
        MPI_ERR_OP => "invalid operation",
        MPI_ERR_TOPOLOGY => "invalid topology",
        MPI_ERR_DIMS => "invalid dimension argument",
        MPI_ERR_ARG => "invalid argument",
        MPI_ERR_UNKNOWN => "unknown error",
        MPI_ERR_TRUNCATE => "message truncated",
        MPI_ERR_OTHER => "other error",
        MPI_ERR_INTERN => "internal error",
        MPI_ERR_PENDING => "pending request",
        MPI_ERR_IN_STATUS => "error code is in status",
        MPI_ERR_ACCESS => "permission denied",
        MPI_ERR_AMODE => "invalid file access mode",
        MPI_ERR_ASSERT => "invalid assert argument",
        MPI_ERR_BAD_FILE => "invalid file name",
        MPI_ERR_BASE => "invalid base argument",
        MPI_ERR_CONVERSION => "data conversion error",
        MPI_ERR_DISP => "invalid displacement argument",
        MPI_ERR_DUP_DATAREP => "data representation already defined",
        MPI_ERR_FILE_EXISTS => "file exists",
        MPI_ERR_FILE_IN_USE => "file in use",
        MPI_ERR_FILE => "invalid file handle",
        MPI_ERR_INFO_KEY => "invalid info key",
        MPI_ERR_INFO_NOKEY => "info key not defined",
        MPI_ERR_INFO_VALUE => "invalid info value",
        MPI_ERR_INFO => "invalid info object",
        MPI_ERR_IO => "I/O error",
        MPI_ERR_KEYVAL => "invalid keyval",
        MPI_ERR_LOCKTYPE => "invalid lock type",
        MPI_ERR_NAME => "invalid service name",
        MPI_ERR_NO_MEM => "out of memory",
        MPI_ERR_NOT_SAME => "arguments differ between processes",
        MPI_ERR_NO_SPACE => "no space left on device",
        MPI_ERR_NO_SUCH_FILE => "no such file",
        MPI_ERR_PORT => "invalid port name",
        MPI_ERR_QUOTA => "quota exceeded",
        MPI_ERR_READ_ONLY => "read-only file or file system",
        MPI_ERR_RMA_ATTACH => "memory cannot be attached",
        MPI_ERR_RMA_CONFLICT => "conflicting RMA accesses",
        MPI_ERR_RMA_RANGE => "RMA target outside the window",
        MPI_ERR_RMA_SHARED => "memory cannot be shared",
        MPI_ERR_RMA_SYNC => "wrong RMA synchronization",
        MPI_ERR_SERVICE => "invalid service",
        MPI_ERR_SIZE => "invalid size argument",
        MPI_ERR_SPAWN => "spawn failed",
        MPI_ERR_UNSUPPORTED_DATAREP => "unsupported data representation",
        MPI_ERR_UNSUPPORTED_OPERATION => "unsupported operation",
        MPI_ERR_WIN => "invalid window",
        MPI_ERR_RMA_FLAVOR => "wrong window flavor",
        MPI_ERR_PROC_ABORTED => "a process aborted or died",
        MPI_ERR_VALUE_TOO_LARGE => "value too large",
        MPI_ERR_SESSION => "invalid session",
        MPI_ERR_ERRHANDLER => "invalid error handler",
        MPI_ERR_ABI => "ABI mismatch",
        _ => return None,
    })
}

/// A user error handler: `fn(MPI_Comm *, int *, ...)`.
pub(crate) type CommErrhandlerFn = unsafe extern "C" fn(*mut MPI_Comm, *mut c_int);

/// The user error handlers (`MPI_Comm_create_errhandler`).
pub(crate) static ERRHANDLERS: Table<CommErrhandlerFn> = Table::new(Kind::Errhandler);

/// Writes `s` into a C buffer of `cap` bytes with a NUL, and its length into `len`.
///
/// # Safety
/// `buf` holds `cap` writable bytes; `len` is NULL or writable.
pub(crate) unsafe fn put_string(s: &str, buf: *mut c_char, cap: usize, len: *mut c_int) {
    if buf.is_null() || cap == 0 {
        return;
    }
    let n = s.len().min(cap - 1);
    // SAFETY: `buf` holds `cap > n` bytes (the caller's contract); `s` holds `n`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    if !len.is_null() {
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { *len = n as c_int };
    }
}

/// Whether `h` is an error handler a communicator may take.
pub(crate) fn valid_errhandler(h: MPI_Errhandler) -> bool {
    matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN
    ) || ERRHANDLERS.get(h).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_class_and_message() {
        let e = MpiError::Unsupported("MPI_T_init_thread");
        let code = code_of(&e);
        assert!(code >= FIRST_CODE);
        let (class, msg) = lookup(code).unwrap();
        assert_eq!(class, MPI_ERR_UNSUPPORTED_OPERATION);
        assert!(msg.contains("MPI_T_init_thread"), "{msg}");
        assert_eq!(lookup(MPI_ERR_TRUNCATE).unwrap().1, "message truncated");
        assert!(lookup(-5).is_none());
    }
}
