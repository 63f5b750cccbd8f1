//! What the stream files share: stream errors as exceptions and the `"tcp:HOST:PORT"`
//! address argument.

use std::net::{SocketAddr, ToSocketAddrs};

use pyo3::prelude::*;
use spools_io::{StreamError, StreamRecvError};

use crate::errors::{self, Kind};
use crate::pipes::exchange_kind;

/// A stream error (the sending side) as its exception.
pub(super) fn stream_error(e: StreamError) -> PyErr {
    let kind = match &e {
        StreamError::Format(_)
        | StreamError::Frame(_)
        | StreamError::BufferSize { .. }
        | StreamError::AduSize { .. } => return errors::value_error(e.to_string()),
        StreamError::UnknownStream { .. }
        | StreamError::Group { .. }
        | StreamError::LockStep { .. } => Kind::InvalidArgument,
        StreamError::Layout(_) => Kind::Layout,
        StreamError::Exchange(x) => exchange_kind(x),
        StreamError::Msg(m) => errors::msg_kind(m),
        StreamError::PeerClosed { .. } => Kind::PeerGone,
        StreamError::Unreachable { .. }
        | StreamError::Refused { .. }
        | StreamError::Unproven { .. }
        | StreamError::Link { .. } => Kind::Transport,
        _ => Kind::Spools,
    };
    errors::raise(kind, e.to_string())
}

/// A stream error (the receiving side) as its exception.
pub(super) fn recv_error(e: StreamRecvError) -> PyErr {
    let kind = match &e {
        StreamRecvError::BufferSize { .. } => return errors::value_error(e.to_string()),
        StreamRecvError::AduSize { .. } | StreamRecvError::Unsized | StreamRecvError::Layout(_) => {
            Kind::Layout
        }
        StreamRecvError::Exchange(x) => exchange_kind(x),
        StreamRecvError::Msg(m) => errors::msg_kind(m),
        StreamRecvError::Incomplete { .. }
        | StreamRecvError::Missing { .. }
        | StreamRecvError::Cut { .. } => Kind::PeerGone,
        StreamRecvError::Bind { .. }
        | StreamRecvError::Receiver { .. }
        | StreamRecvError::Checksum { .. }
        | StreamRecvError::Refused { .. } => Kind::Transport,
        _ => Kind::Spools,
    };
    errors::raise(kind, e.to_string())
}

/// `"tcp:HOST:PORT"` or `"HOST:PORT"` as a socket address (the first the name resolves
/// to).
pub(super) fn socket_addr(s: &str, what: &str) -> PyResult<SocketAddr> {
    let a = s.strip_prefix("tcp:").unwrap_or(s);
    let bad = |why: String| {
        errors::value_error(format!(
            "{what} must be \"tcp:HOST:PORT\" or \"HOST:PORT\", got {s:?}{why}"
        ))
    };
    match a.to_socket_addrs() {
        Ok(mut it) => it.next().ok_or_else(|| bad(" (no address)".into())),
        Err(e) => Err(bad(format!(" ({e})"))),
    }
}
