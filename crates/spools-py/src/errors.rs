//! Rust errors as Python exceptions. The classes live in `spools/errors.py` (so that
//! `LayoutError` can also be a `ValueError`); this file picks the class for each Rust
//! error and raises it with the Rust error's message.
//!
//! Each area maps its own error types with [`raise`] and the classifiers here
//! ([`msg_kind`], [`am_kind`], ...) for the messaging errors they wrap.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use spools::{AmError, BootError, FabricError, MsgError};
use spools_io::ErrorKind;

/// Which exception of `spools.errors` an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `SpoolsError`: any other runtime failure.
    Spools,
    /// `InitError`: the rank could not join its job (environment, rendezvous, transports).
    Init,
    /// `FinalizedError`: the runtime was finalised (or aborted) before this call.
    Finalized,
    /// `TruncatedError`: a message longer than the receive buffer.
    Truncated,
    /// `PeerGoneError`: a rank died, aborted or finalised while this one needed it.
    PeerGone,
    /// `LayoutError`: a layout that does not parse or does not fit (also a `ValueError`).
    Layout,
    /// `FileDamageError`: a parallel file whose data or metadata is damaged.
    FileDamage,
    /// `UnsupportedError`: a file or a write that uses what Spools does not implement.
    Unsupported,
    /// `InvalidArgumentError` (also a `ValueError`): a bad argument the runtime found.
    InvalidArgument,
    /// `UnavailableError`: a library or build feature this installation lacks.
    Unavailable,
    /// `RemoteError`: a remote procedure raised on the rank that ran it.
    Remote,
    /// `TransportError`: a transport or system failure (sockets, shared memory).
    Transport,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Spools => "SpoolsError",
            Kind::Init => "InitError",
            Kind::Finalized => "FinalizedError",
            Kind::Truncated => "TruncatedError",
            Kind::PeerGone => "PeerGoneError",
            Kind::Layout => "LayoutError",
            Kind::FileDamage => "FileDamageError",
            Kind::Unsupported => "UnsupportedError",
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::Unavailable => "UnavailableError",
            Kind::Remote => "RemoteError",
            Kind::Transport => "TransportError",
        }
    }
}

/// The exception of class `kind` with message `msg`. An interrupt that ended the failed
/// wait (Ctrl-C) wins over the error it caused: then `KeyboardInterrupt` is raised.
pub(crate) fn raise(kind: Kind, msg: impl Into<String>) -> PyErr {
    if let Some(e) = crate::interrupt::take_interrupt() {
        return e;
    }
    let msg = msg.into();
    Python::attach(|py| {
        let class = py
            .import("spools.errors")
            .and_then(|m| m.getattr(kind.class_name()));
        match class {
            Ok(c) => PyErr::from_value(match c.call1((msg.clone(),)) {
                Ok(v) => v,
                Err(e) => return e,
            }),
            Err(_) => PyRuntimeError::new_err(msg),
        }
    })
}

/// The kind of a transport error.
pub(crate) fn fabric_kind(e: &FabricError) -> Kind {
    match e {
        FabricError::PeerFailed(_) | FabricError::ConnectionLost { .. } => Kind::PeerGone,
        FabricError::Boot(b) => boot_kind(b),
        _ => Kind::Transport,
    }
}

/// The kind of a bootstrap error.
pub(crate) fn boot_kind(e: &BootError) -> Kind {
    match e {
        BootError::PeerDied { .. } | BootError::ServerLost(_) => Kind::PeerGone,
        BootError::Finalized => Kind::Finalized,
        _ => Kind::Spools,
    }
}

/// The kind of an active-message error.
pub(crate) fn am_kind(e: &AmError) -> Kind {
    match e {
        AmError::Fabric(f) => fabric_kind(f),
        AmError::Boot(b) => boot_kind(b),
        _ => Kind::Spools,
    }
}

/// The kind of a messaging error.
pub(crate) fn msg_kind(e: &MsgError) -> Kind {
    match e {
        MsgError::Am(a) => am_kind(a),
        MsgError::Truncated { .. } => Kind::Truncated,
        MsgError::PeerFinalized { .. } | MsgError::SourceFinalized { .. } => Kind::PeerGone,
        _ => Kind::Spools,
    }
}

/// An I/O error (a parallel file, an exchange, a pipe, a stream) as its exception: one
/// class per [`ErrorKind`], with message `msg` (the C interface's statuses follow the same
/// kinds: `spools-c/src/errmap.rs`). A messaging failure (`Transfer`) is classified by
/// the messaging error it wraps (`wrapped`). A rank that only heard of another rank's
/// failure gets that rank's kind, so every rank raises one class.
pub(crate) fn from_io(kind: ErrorKind, wrapped: Option<&MsgError>, msg: String) -> PyErr {
    let class = match kind {
        ErrorKind::Damaged => Kind::FileDamage,
        ErrorKind::Unsupported => Kind::Unsupported,
        ErrorKind::BadArgument => Kind::InvalidArgument,
        ErrorKind::Unavailable => Kind::Unavailable,
        ErrorKind::Mismatch => Kind::Layout,
        ErrorKind::Io | ErrorKind::Transport => Kind::Transport,
        ErrorKind::PeerGone => Kind::PeerGone,
        ErrorKind::Transfer => wrapped.map_or(Kind::Spools, msg_kind),
        ErrorKind::Remote => Kind::Spools,
        // Python's own classes: an interrupt that ended the failed wait wins, as in `raise`.
        ErrorKind::WrongType | ErrorKind::NotFound | ErrorKind::Exists => {
            if let Some(e) = crate::interrupt::take_interrupt() {
                return e;
            }
            return match kind {
                ErrorKind::WrongType => pyo3::exceptions::PyTypeError::new_err(msg),
                ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(msg),
                _ => pyo3::exceptions::PyFileExistsError::new_err(msg),
            };
        }
    };
    raise(class, msg)
}

/// The messaging error an exchange error wraps, if any.
pub(crate) fn exchange_msg(e: &spools_io::ExchangeError) -> Option<&MsgError> {
    match e {
        spools_io::ExchangeError::Msg(m) => Some(m),
        _ => None,
    }
}

/// What this rank tells the others when its own check of a collective call's arguments
/// raised `e` (it takes part only to fail; see `spools_io::ExchangeOptions::declined`):
/// the kind [`from_io`] maps back to `e`'s class (or a base of it) and `e`'s message.
pub(crate) fn declined(py: Python<'_>, e: &PyErr) -> spools_io::Cause {
    let is = |name: &str| {
        py.import("spools.errors")
            .and_then(|m| m.getattr(name))
            .map(|c| e.get_type(py).is_subclass(&c).unwrap_or(false))
            .unwrap_or(false)
    };
    // The classes `from_io` raises, most derived first.
    let kind = if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
        ErrorKind::WrongType
    } else if is("LayoutError") {
        ErrorKind::Mismatch
    } else if is("FileDamageError") {
        ErrorKind::Damaged
    } else if is("UnsupportedError") {
        ErrorKind::Unsupported
    } else if is("UnavailableError") {
        ErrorKind::Unavailable
    } else if is("PeerGoneError") {
        ErrorKind::PeerGone
    } else if is("TransportError") {
        ErrorKind::Transport
    } else if e.is_instance_of::<pyo3::exceptions::PyFileNotFoundError>(py) {
        ErrorKind::NotFound
    } else if e.is_instance_of::<pyo3::exceptions::PyFileExistsError>(py) {
        ErrorKind::Exists
    } else if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
        ErrorKind::BadArgument
    } else {
        ErrorKind::Remote
    };
    let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    spools_io::Cause::new(kind, msg)
}

/// A messaging error as its exception.
pub(crate) fn from_msg(e: MsgError) -> PyErr {
    raise(msg_kind(&e), e.to_string())
}

/// A bootstrap error as its exception.
pub(crate) fn from_boot(e: BootError) -> PyErr {
    raise(boot_kind(&e), e.to_string())
}

/// A message of `errors.py`'s own checks: wrong types and values are `TypeError` and
/// `ValueError` naming the expected and the given (see `buffer.rs`).
pub(crate) fn value_error(msg: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(msg.into())
}

/// As [`value_error`], for a wrong type.
pub(crate) fn type_error(msg: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(msg.into())
}
