//! The protocol's vocabulary: what goes in (wire messages as they arrive), what comes out
//! (clear-to-send messages and data chunks to transmit, RPC calls to run, how receives
//! end) and the typed errors of unexpected wire messages.

use spools_am::RemoteRegion;
use spools_heap::HeapRef;
use thiserror::Error;

/// Inline bytes of a short message.
pub(crate) const SHORT_MAX: usize = 24;

/// The size limits that choose a message's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Largest message sent inline in one short active message (at most [`SHORT_MAX`]).
    pub(crate) short_limit: usize,
    /// Largest message sent eagerly; longer ones go by rendezvous.
    pub(crate) eager_limit: usize,
}

/// How a message of some length travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendProtocol {
    /// Inline in one short active message.
    Short,
    /// In one bulk active message into the receiver's pre-allocated buffers.
    Eager,
    /// Request-to-send, clear-to-send, then the data in chunks.
    Rendezvous,
}

impl Limits {
    /// Limits with the short limit capped at what a short message can carry.
    pub(crate) fn new(short_limit: usize, eager_limit: usize) -> Limits {
        Limits {
            short_limit: short_limit.min(SHORT_MAX),
            eager_limit,
        }
    }

    /// The protocol of a message of `len` bytes.
    pub(crate) fn protocol_for(&self, len: usize) -> SendProtocol {
        if len <= self.short_limit {
            SendProtocol::Short
        } else if len <= self.eager_limit {
            SendProtocol::Eager
        } else {
            SendProtocol::Rendezvous
        }
    }
}

/// A short, eager or request-to-send message as it arrives (its data still in the
/// transport's buffer).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Incoming<'a> {
    /// The whole message (short or eager).
    Data(&'a [u8]),
    /// A request-to-send: `len` bytes wait in the sender's send operation `send_id`.
    Rts {
        /// The message's length.
        len: u64,
        /// The sender's operation id, to name in the clear-to-send.
        send_id: u64,
        /// Where the receiver may take the bytes itself, when the sender says.
        at: Option<DataAt>,
    },
}

/// Where the receiver of a request-to-send may take the message's bytes itself, rather
/// than wait for them to stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataAt {
    /// In the sender's shared heap (the sender runs on this host): copied from there.
    Heap(HeapRef),
    /// Lent to this rank through the network's remote memory access: read one-sidedly.
    Net(RemoteRegion),
}

/// The sender, tag and length of a matched message (the sender as a job rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MessageInfo {
    /// The sender (job rank).
    pub(crate) src: u32,
    /// The message's tag.
    pub(crate) tag: u32,
    /// The message's length in bytes.
    pub(crate) len: usize,
}

/// How a receive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvOutcome {
    /// The whole message is in the buffer.
    Received(MessageInfo),
    /// The message was longer than the buffer's `capacity`; nothing was written past it
    /// (MPI_ERR_TRUNCATE).
    Truncated {
        /// The message.
        msg: MessageInfo,
        /// The receive buffer's length.
        capacity: usize,
    },
    /// Cancelled before any message matched it.
    Cancelled,
}

/// A clear-to-send the protocol owes a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cts {
    /// The sender (job rank).
    pub(crate) to: u32,
    /// The sender's operation.
    pub(crate) send_id: u64,
    /// The receive the data goes to.
    pub(crate) recv_id: u64,
    /// The sender completes without sending the data: the receive does not take it
    /// (truncation), or took it from the sender's shared heap itself.
    pub(crate) discard: bool,
}

/// A receive that matched a request-to-send whose data the receiver may take itself
/// ([`DataAt`]): the engine copies or reads the bytes into the receive through
/// [`super::Protocol::pulled`], which then queues the clear-to-send that completes the
/// send without data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pull {
    /// The receive.
    pub(crate) recv_id: u64,
    /// The sender (job rank).
    pub(crate) from: u32,
    /// The sender's operation.
    pub(crate) send_id: u64,
    /// Where the message's bytes lie.
    pub(crate) at: DataAt,
    /// The message's length.
    pub(crate) len: usize,
}

/// A chunk of rendezvous data to transmit (see [`super::Protocol::next_chunk`]).
#[derive(Debug)]
pub(crate) struct Chunk<'a> {
    /// Where the stream sits in the protocol's list (pass it back to
    /// [`super::Protocol::chunk_sent`], or skip past it when the transport is full).
    pub(crate) slot: usize,
    /// The receiver (job rank).
    pub(crate) to: u32,
    /// The receive the data goes to.
    pub(crate) recv_id: u64,
    /// Where the bytes go in the message.
    pub(crate) offset: usize,
    /// The bytes.
    pub(crate) bytes: &'a [u8],
}

/// An RPC call whose arguments have arrived, waiting to run.
#[derive(Debug)]
pub(crate) struct RpcCall {
    /// The caller (job rank).
    pub(crate) caller: u32,
    /// The call id (the reply's tag).
    pub(crate) call: u32,
    /// The call's body (function name and arguments).
    pub(crate) body: Vec<u8>,
}

/// A wire message the protocol cannot accept. The engine drops such a message: it is
/// either stale (for an operation finished early, such as a receive whose blocking call
/// failed) or malformed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum ProtocolError {
    /// A clear-to-send names no send operation of this rank.
    #[error("clear-to-send from rank {peer} for unknown send {send_id}")]
    UnknownSend {
        /// The rank it came from.
        peer: u32,
        /// The send it names.
        send_id: u64,
    },
    /// A clear-to-send from a rank the send is not for.
    #[error("clear-to-send from rank {peer} for send {send_id} to rank {dest}")]
    CtsFromWrongPeer {
        /// The rank it came from.
        peer: u32,
        /// The send it names.
        send_id: u64,
        /// The send's destination.
        dest: u32,
    },
    /// A second clear-to-send for a send that already streams or is complete.
    #[error("clear-to-send from rank {peer} for send {send_id}, which does not wait for one")]
    DuplicateCts {
        /// The rank it came from.
        peer: u32,
        /// The send it names.
        send_id: u64,
    },
    /// Rendezvous data for no receive of this rank.
    #[error("data from rank {peer} for unknown receive {recv_id}")]
    UnknownRecv {
        /// The rank it came from.
        peer: u32,
        /// The receive it names.
        recv_id: u64,
    },
    /// Rendezvous data for a receive that does not stream from that rank (not matched
    /// yet, already complete, or matched with another sender).
    #[error("data from rank {peer} for receive {recv_id}, which does not stream from it")]
    NotStreaming {
        /// The rank it came from.
        peer: u32,
        /// The receive it names.
        recv_id: u64,
    },
    /// Rendezvous data past the message's announced length.
    #[error("data from rank {peer} for receive {recv_id}: bytes {offset}..+{len} past the message's {total}")]
    OutOfBounds {
        /// The rank it came from.
        peer: u32,
        /// The receive it names.
        recv_id: u64,
        /// The chunk's offset.
        offset: u64,
        /// The chunk's length.
        len: usize,
        /// The message's length.
        total: usize,
    },
}
