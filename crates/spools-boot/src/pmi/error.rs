//! What can go wrong talking to the launcher's process-management interface.

use thiserror::Error;

use super::PmiKind;

/// A failure of the launcher's process-management interface.
#[derive(Debug, Error)]
pub enum PmiError {
    /// The launcher offers the interface but its library cannot be loaded.
    #[error("the launcher offers {} but {} cannot be loaded ({source}); install Debian's {} or set SPOOLS_BOOTSTRAP=file:PATH (a file on a shared file system)", kind.name(), kind.library(), kind.package())]
    Load {
        /// Which interface.
        kind: PmiKind,
        /// Why `dlopen` or `dlsym` failed.
        source: libloading::Error,
    },
    /// The interface's variables are set but its server does not take this process in.
    #[error("{} variables are set ({}) but no {} server took this process in: {message} ({code}); start the program with the launcher that set them (mpirun, srun --mpi=pmix or --mpi=pmi2), or set SPOOLS_BOOTSTRAP, which wins", kind.name(), kind.variable(), kind.name())]
    Init {
        /// Which interface.
        kind: PmiKind,
        /// The status the initialisation returned.
        code: i32,
        /// Its meaning.
        message: String,
    },
    /// A call into the interface failed (its initialisation: [`PmiError::Init`]).
    #[error("{call} failed: {message} ({code})")]
    Call {
        /// The function called, e.g. `PMIx_Fence`.
        call: &'static str,
        /// The status it returned.
        code: i32,
        /// Its meaning, as the library words it (or the number).
        message: String,
    },
    /// The server answered with a value of the wrong type or shape.
    #[error("{} gave rank {rank}'s {key:?} as {what}; expected {expected}", kind.name())]
    BadValue {
        /// Which interface.
        kind: PmiKind,
        /// Whose value.
        rank: u32,
        /// The key.
        key: String,
        /// What came.
        what: String,
        /// What should have.
        expected: &'static str,
    },
    /// The interface has no way to start processes that Spools uses (PMI2).
    #[error("{} has no process spawn that Spools uses", kind.name())]
    NoSpawn {
        /// Which interface.
        kind: PmiKind,
    },
    /// The thread that makes the call could not be started, or ended without an answer
    /// (the library aborted it).
    #[error("the thread calling {call} could not start or ended without an answer: {why}")]
    Thread {
        /// The function.
        call: &'static str,
        /// What happened.
        why: String,
    },
    /// The call did not return within the time allowed.
    #[error("{call} did not return within {secs} s")]
    NoReturn {
        /// The function called.
        call: &'static str,
        /// How long it was given.
        secs: u64,
    },
    /// A key or value holds a byte the interface cannot carry or is too long for it.
    #[error("{} cannot carry {what:?} ({})", kind.name(), match max {
        Some(m) => format!("a NUL byte, a byte it reserves, or more than {m} bytes"),
        None => "a NUL byte".to_string(),
    })]
    Unencodable {
        /// Which interface.
        kind: PmiKind,
        /// The key or value.
        what: String,
        /// The interface's length limit, if it has one.
        max: Option<usize>,
    },
}

impl PmiError {
    /// The error for status `code` (worded `message`) returned by `call` of `kind`: the
    /// initialisation's is [`PmiError::Init`], any other call's [`PmiError::Call`].
    pub(super) fn status(kind: PmiKind, call: &'static str, code: i32, message: String) -> Self {
        if call.ends_with("_Init") {
            PmiError::Init {
                kind,
                code,
                message,
            }
        } else {
            PmiError::Call {
                call,
                code,
                message,
            }
        }
    }
}
