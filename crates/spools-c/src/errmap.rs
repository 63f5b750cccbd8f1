//! Which status each Rust error of the runtime becomes. The message is always the Rust
//! error's own (with its sources), so that C sees exactly what Rust would print.

use spools::{
    AmError, BootError, ExchangeError, FabricError, FileError, InitError, MsgError, RpcError,
};
use spools_io::{ErrorKind, PipeError, StreamError, StreamRecvError};
use spools_map::{LayoutError, SpecError};

use crate::status::{chain, spools_status_t as S, Failure};

fn boot_status(e: &BootError) -> S {
    match e {
        BootError::PeerDied { .. } | BootError::ServerLost(_) => S::SPOOLS_ERR_PEER_GONE,
        BootError::Finalized => S::SPOOLS_ERR_FINALIZED,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

fn fabric_status(e: &FabricError) -> S {
    match e {
        FabricError::PeerFailed(_) | FabricError::ConnectionLost { .. } => S::SPOOLS_ERR_PEER_GONE,
        FabricError::Boot(b) => boot_status(b),
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

fn am_status(e: &AmError) -> S {
    match e {
        AmError::Fabric(f) => fabric_status(f),
        AmError::Boot(b) => boot_status(b),
        AmError::UnknownHandlerName(_) | AmError::UnknownRegion { .. } => S::SPOOLS_ERR_NOT_FOUND,
        AmError::UnknownHandlerId(_)
        | AmError::DuplicateHandler(_)
        | AmError::OutOfBounds { .. }
        | AmError::TooLarge { .. }
        | AmError::BadRank { .. }
        | AmError::OutsideRegion { .. } => S::SPOOLS_ERR_INVALID_ARG,
        AmError::NoHandlerAtTarget { .. } => S::SPOOLS_ERR_REMOTE,
        AmError::Interrupted => S::SPOOLS_ERR_INTERRUPTED,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

fn msg_status(e: &MsgError) -> S {
    match e {
        MsgError::Am(a) => am_status(a),
        MsgError::Truncated { .. } => S::SPOOLS_ERR_TRUNCATED,
        MsgError::PeerFinalized { .. } | MsgError::SourceFinalized { .. } => {
            S::SPOOLS_ERR_PEER_GONE
        }
        MsgError::BadRank { .. }
        | MsgError::BadTag(_)
        | MsgError::BadBuffer { .. }
        | MsgError::Mismatch { .. } => S::SPOOLS_ERR_INVALID_ARG,
        MsgError::Panicked(_) => S::SPOOLS_ERR_INTERNAL,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

/// The status of an I/O error (a file, an exchange, a pipe, a stream) by its kind: one
/// status per [`ErrorKind`] (Python's exception classes follow the same kinds:
/// `spools-py/src/errors.rs`). A messaging failure (`Transfer`) has the status of the
/// messaging error it wraps (`wrapped`). A rank that only heard of another rank's failure
/// gets that rank's kind, so every rank returns one status.
fn io_status(kind: ErrorKind, wrapped: Option<&MsgError>) -> S {
    match kind {
        ErrorKind::Transfer => wrapped.map_or(S::SPOOLS_ERR_TRANSPORT, msg_status),
        ErrorKind::Damaged => S::SPOOLS_ERR_DAMAGED,
        ErrorKind::Unsupported => S::SPOOLS_ERR_UNSUPPORTED,
        ErrorKind::BadArgument | ErrorKind::WrongType | ErrorKind::Exists => {
            S::SPOOLS_ERR_INVALID_ARG
        }
        ErrorKind::Unavailable => S::SPOOLS_ERR_UNAVAILABLE,
        ErrorKind::Mismatch => S::SPOOLS_ERR_LAYOUT,
        ErrorKind::NotFound => S::SPOOLS_ERR_NOT_FOUND,
        ErrorKind::Io => S::SPOOLS_ERR_IO,
        ErrorKind::Transport => S::SPOOLS_ERR_TRANSPORT,
        ErrorKind::PeerGone => S::SPOOLS_ERR_PEER_GONE,
        ErrorKind::Remote => S::SPOOLS_ERR_REMOTE,
    }
}

/// The messaging error an exchange error wraps, if any.
fn exchange_msg(e: &ExchangeError) -> Option<&MsgError> {
    match e {
        ExchangeError::Msg(m) => Some(m),
        _ => None,
    }
}

fn exchange_status(e: &ExchangeError) -> S {
    io_status(e.kind(), exchange_msg(e))
}

fn file_status(e: &FileError) -> S {
    let wrapped = match e {
        FileError::Msg(m) => Some(m),
        FileError::Exchange(x) => exchange_msg(x),
        _ => None,
    };
    io_status(e.kind(), wrapped)
}

fn pipe_status(e: &PipeError) -> S {
    let wrapped = match e {
        PipeError::Msg(m) => Some(m),
        PipeError::Exchange(x) => exchange_msg(x),
        _ => None,
    };
    io_status(e.kind(), wrapped)
}

fn stream_status(e: &StreamError) -> S {
    let wrapped = match e {
        StreamError::Msg(m) => Some(m),
        StreamError::Exchange(x) => exchange_msg(x),
        _ => None,
    };
    io_status(e.kind(), wrapped)
}

fn stream_recv_status(e: &StreamRecvError) -> S {
    let wrapped = match e {
        StreamRecvError::Msg(m) => Some(m),
        StreamRecvError::Exchange(x) => exchange_msg(x),
        _ => None,
    };
    io_status(e.kind(), wrapped)
}

fn rpc_status(e: &RpcError) -> S {
    match e {
        RpcError::Msg(m) => msg_status(m),
        RpcError::UnknownFunction { .. } => S::SPOOLS_ERR_NOT_FOUND,
        RpcError::Remote { .. } | RpcError::Panicked { .. } => S::SPOOLS_ERR_REMOTE,
        _ => S::SPOOLS_ERR_INVALID_ARG,
    }
}

fn init_status(e: &InitError) -> S {
    match e {
        InitError::Boot(BootError::Finalized) => S::SPOOLS_ERR_FINALIZED,
        _ => S::SPOOLS_ERR_INIT,
    }
}

macro_rules! into_failure {
    ($($t:ty => $f:ident),* $(,)?) => {$(
        impl From<$t> for Failure {
            fn from(e: $t) -> Failure {
                Failure::new($f(&e), chain(&e))
            }
        }
    )*};
}

fn layout_status(_: &LayoutError) -> S {
    S::SPOOLS_ERR_LAYOUT
}

fn spec_status(_: &SpecError) -> S {
    S::SPOOLS_ERR_LAYOUT
}

into_failure!(
    BootError => boot_status,
    AmError => am_status,
    MsgError => msg_status,
    ExchangeError => exchange_status,
    FileError => file_status,
    PipeError => pipe_status,
    StreamError => stream_status,
    StreamRecvError => stream_recv_status,
    RpcError => rpc_status,
    InitError => init_status,
    LayoutError => layout_status,
    SpecError => spec_status,
);
