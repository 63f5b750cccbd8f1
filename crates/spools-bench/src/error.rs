//! Why a benchmark failed.

use thiserror::Error;

/// Why a benchmark failed. Errors of the libraries pass through unchanged; the others say
/// what the benchmark was doing, with the cause as their source.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The configuration (SPOOLS_* variables) could not be read.
    #[error("configuration")]
    Config(#[source] spools_boot::config::ConfigError),
    /// The job environment `spools run` (or another launcher) sets is missing or wrong.
    #[error("job environment")]
    JobEnv(#[source] spools_boot::identity::IdentityError),
    /// The runtime did not start.
    #[error("starting the runtime")]
    Init(#[source] spools::InitError),
    /// The job's bootstrap (for example the final barrier) failed.
    #[error(transparent)]
    Boot(#[from] spools_boot::BootError),
    /// A handler could not be registered.
    #[error("registering handlers")]
    Register(#[source] spools::AmError),
    /// Active messages: handlers, sends, puts, waits.
    #[error(transparent)]
    Am(#[from] spools::AmError),
    /// Tagged messages and collectives.
    #[error(transparent)]
    Msg(#[from] spools::MsgError),
    /// A parallel-file operation.
    #[error(transparent)]
    File(#[from] spools::FileError),
    /// An in-memory redistribution.
    #[error(transparent)]
    Exchange(#[from] spools::ExchangeError),
    /// A parallel pipe.
    #[error(transparent)]
    Pipe(#[from] spools_io::PipeError),
    /// A stream out of the job failed (on every rank).
    #[error(transparent)]
    Stream(#[from] spools::StreamError),
    /// Planning a redistribution.
    #[error(transparent)]
    Plan(#[from] spools_map::PlanError),
    /// A layout's extents or sizes.
    #[error(transparent)]
    Layout(#[from] spools_map::LayoutError),
    /// A layout given on the command line does not parse: `what` is the option and its
    /// value, e.g. `--layout u8[4] blok on 2`.
    #[error("{what}")]
    Spec {
        /// The option and its value.
        what: String,
        /// Why it does not parse.
        source: spools_map::SpecError,
    },
    /// A size given on the command line does not parse.
    #[error("size {spec:?}: {reason}")]
    Size {
        /// The text given.
        spec: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A size does not fit in memory addresses.
    #[error("size too large")]
    SizeTooLarge(#[source] std::num::TryFromIntError),
    /// A system call or file operation failed; `what` says what was being done.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A JSON document could not be made.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The options or the job do not fit the benchmark (wrong number of ranks, a missing
    /// option), or a result failed its check.
    #[error("{0}")]
    Invalid(String),
    /// A buffer could not be allocated in the shared heap.
    #[error("shared heap: {0}")]
    Heap(#[from] spools::HeapError),
}

impl BenchError {
    /// A closure wrapping an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }

    /// A closure wrapping a layout spec error with the option and its value.
    pub(crate) fn spec(
        option: &str,
        value: &str,
    ) -> impl FnOnce(spools_map::SpecError) -> BenchError {
        let what = format!("{option} {value}");
        move |source| BenchError::Spec { what, source }
    }
}

/// Fails with [`BenchError::Invalid`] unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::error::BenchError::Invalid(format!($($msg)+)));
        }
    };
}

/// Fails with [`BenchError::Invalid`].
macro_rules! bail {
    ($($msg:tt)+) => {
        return Err($crate::error::BenchError::Invalid(format!($($msg)+)))
    };
}

pub(crate) use {bail, ensure};
