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

fn exchange_status(e: &ExchangeError) -> S {
    match e {
        ExchangeError::Msg(m) => msg_status(m),
        ExchangeError::Plan(_)
        | ExchangeError::Layout(_)
        | ExchangeError::Buffers { .. }
        | ExchangeError::BufferSize { .. }
        | ExchangeError::ElementSize { .. }
        | ExchangeError::Owners { .. }
        | ExchangeError::TooManyUnits { .. }
        | ExchangeError::OwnerOutOfRange { .. } => S::SPOOLS_ERR_LAYOUT,
        ExchangeError::Checksum { .. } => S::SPOOLS_ERR_DAMAGED,
        ExchangeError::Remote { .. } => S::SPOOLS_ERR_REMOTE,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

/// A file error's status, by its kind ([`FileError::kind`]); the Python interface's
/// exception classes follow the same kinds (`spools-py/src/errors.rs`).
fn file_status(e: &FileError) -> S {
    match e.kind() {
        ErrorKind::Transfer => match e {
            FileError::Exchange(x) => exchange_status(x),
            FileError::Msg(m) => msg_status(m),
            _ => S::SPOOLS_ERR_TRANSPORT,
        },
        ErrorKind::Damaged => S::SPOOLS_ERR_DAMAGED,
        ErrorKind::Unsupported => S::SPOOLS_ERR_UNSUPPORTED,
        ErrorKind::BadArgument | ErrorKind::Exists => S::SPOOLS_ERR_INVALID_ARG,
        ErrorKind::Unavailable => S::SPOOLS_ERR_UNAVAILABLE,
        ErrorKind::Mismatch => S::SPOOLS_ERR_LAYOUT,
        ErrorKind::NotFound => S::SPOOLS_ERR_NOT_FOUND,
        ErrorKind::Io => S::SPOOLS_ERR_IO,
        ErrorKind::Remote => S::SPOOLS_ERR_REMOTE,
    }
}

fn pipe_status(e: &PipeError) -> S {
    match e {
        PipeError::Exchange(x) => exchange_status(x),
        PipeError::Msg(m) => msg_status(m),
        PipeError::Plan(_)
        | PipeError::Layout(_)
        | PipeError::Mismatch { .. }
        | PipeError::PeerTooManyUnits { .. } => S::SPOOLS_ERR_LAYOUT,
        PipeError::PeerGone { .. } => S::SPOOLS_ERR_PEER_GONE,
        PipeError::Checksum { .. } => S::SPOOLS_ERR_DAMAGED,
        PipeError::BadName(_) | PipeError::BufferSize { .. } => S::SPOOLS_ERR_INVALID_ARG,
        PipeError::Remote { .. } => S::SPOOLS_ERR_REMOTE,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

fn stream_status(e: &StreamError) -> S {
    match e {
        StreamError::Format(_)
        | StreamError::Frame(_)
        | StreamError::BufferSize { .. }
        | StreamError::UnknownStream { .. }
        | StreamError::Group { .. }
        | StreamError::LockStep { .. } => S::SPOOLS_ERR_INVALID_ARG,
        StreamError::AduSize { .. } | StreamError::Layout(_) => S::SPOOLS_ERR_LAYOUT,
        StreamError::Exchange(x) => exchange_status(x),
        StreamError::Msg(m) => msg_status(m),
        StreamError::Remote { .. } => S::SPOOLS_ERR_REMOTE,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
}

fn stream_recv_status(e: &StreamRecvError) -> S {
    match e {
        StreamRecvError::BufferSize { .. } => S::SPOOLS_ERR_INVALID_ARG,
        StreamRecvError::AduSize { .. } | StreamRecvError::Unsized | StreamRecvError::Layout(_) => {
            S::SPOOLS_ERR_LAYOUT
        }
        StreamRecvError::Exchange(x) => exchange_status(x),
        StreamRecvError::Msg(m) => msg_status(m),
        StreamRecvError::Remote { .. } => S::SPOOLS_ERR_REMOTE,
        StreamRecvError::Incomplete { .. }
        | StreamRecvError::Missing { .. }
        | StreamRecvError::Cut { .. } => S::SPOOLS_ERR_PEER_GONE,
        _ => S::SPOOLS_ERR_TRANSPORT,
    }
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
