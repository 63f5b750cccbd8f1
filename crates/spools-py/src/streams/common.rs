//! What the stream files share: stream errors as exceptions and the `"tcp:HOST:PORT"`
//! address argument.

use std::net::{SocketAddr, ToSocketAddrs};

use pyo3::prelude::*;
use spools_io::{StreamError, StreamRecvError};

use crate::errors;

/// A stream error (the sending side) as its exception, by its kind (`StreamError::kind`).
pub(super) fn stream_error(e: StreamError) -> PyErr {
    let wrapped = match &e {
        StreamError::Msg(m) => Some(m),
        StreamError::Exchange(x) => errors::exchange_msg(x),
        _ => None,
    };
    errors::from_io(e.kind(), wrapped, e.to_string())
}

/// A stream error (the receiving side) as its exception, by its kind
/// (`StreamRecvError::kind`).
pub(super) fn recv_error(e: StreamRecvError) -> PyErr {
    let wrapped = match &e {
        StreamRecvError::Msg(m) => Some(m),
        StreamRecvError::Exchange(x) => errors::exchange_msg(x),
        _ => None,
    };
    errors::from_io(e.kind(), wrapped, e.to_string())
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
