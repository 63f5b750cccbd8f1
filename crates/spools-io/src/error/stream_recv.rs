//! Errors of streams received by a job.

use thiserror::Error;

/// Why receiving a stream into the job failed. Collective like the calls that return it:
/// what rank 0 (the interface rank) saw of the stream is the same error on every rank;
/// a rank's own local failure is its own error, and [`StreamRecvError::Remote`] on the
/// others.
#[derive(Debug, Error)]
pub enum StreamRecvError {
    /// Rank 0 could not listen at the address.
    #[error("listening at {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Rank 0 could not start its receiving thread.
    #[error("starting the receiving thread: {0}")]
    Thread(std::io::Error),
    /// The receiver itself failed (accepting a connection), or its thread ended early.
    #[error("the stream receiver failed: {what}")]
    Receiver {
        /// What happened.
        what: String,
    },
    /// An ADU that will never be whole: the sender died or a link was lost in the middle
    /// of it, or the stream was closed without it.
    #[error("stream {stream}: ADU {adu} incomplete ({have} of {size} bytes arrived)")]
    Incomplete {
        /// The stream.
        stream: u32,
        /// The ADU's number.
        adu: u64,
        /// Bytes that arrived.
        have: u64,
        /// Bytes of the whole ADU.
        size: u64,
    },
    /// ADUs of which nothing arrived before the stream was closed.
    #[error("stream {stream}: ADUs {from}..{to} never arrived")]
    Missing {
        /// The stream.
        stream: u32,
        /// The first missing ADU.
        from: u64,
        /// One past the last.
        to: u64,
    },
    /// A stream that ended before its sender closed it (a link was lost between ADUs).
    #[error("stream {stream} was cut short after {adus} ADUs: the sender did not close it")]
    Cut {
        /// The stream.
        stream: u32,
        /// The ADUs it had.
        adus: u64,
    },
    /// An SU's payload did not match its CRC32C: the sender's connection was dropped, and
    /// nothing of that ADU is handed out.
    #[error("stream {stream}, ADU {adu}, TU {tu}, SU {su} on link {link}: checksum mismatch")]
    Checksum {
        /// The stream.
        stream: u32,
        /// The ADU.
        adu: u64,
        /// The TU.
        tu: u64,
        /// The SU.
        su: u16,
        /// The link it came on.
        link: u16,
    },
    /// The receiver refused the sender's frames for another reason than a checksum:
    /// an SU out of place, a frame that does not fit its stream, a link broken mid-frame.
    /// Nothing of the ADU it happened in is handed out.
    #[error("the sender's frames were refused: {reason}")]
    Refused {
        /// The receiver's reason, naming the stream, ADU, TU, SU and link where it has them.
        reason: String,
    },
    /// The layout does not hold the ADU: its size is not the ADU's (the ADU stays the
    /// next one, to receive with another layout).
    #[error("the next ADU holds {expected} bytes but the layout holds {got}")]
    AduSize {
        /// Bytes of the ADU.
        expected: u64,
        /// Bytes of the layout.
        got: u64,
    },
    /// A layout without a size (a byte-stream layout without `size=`).
    #[error("the layout has no size")]
    Unsized,
    /// The buffer does not hold this rank's share of the layout.
    #[error("the ADU buffer holds {got} bytes but this rank's share is {need}")]
    BufferSize {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        got: u64,
    },
    /// The layout is not one the job can scatter into.
    #[error(transparent)]
    Layout(#[from] spools_map::LayoutError),
    /// Scattering the ADU into the ranks' buffers failed.
    #[error(transparent)]
    Exchange(#[from] crate::error::ExchangeError),
    /// The job's ranks could not agree (a peer failed).
    #[error(transparent)]
    Msg(#[from] spools_msg::MsgError),
    /// This rank declined its part of a receive
    /// ([`StreamReader::decline_recv`](crate::stream::StreamReader::decline_recv)): a
    /// binding's own argument check failed; nothing was received.
    #[error("{0}")]
    Declined(crate::Cause),
    /// Another rank failed its part.
    #[error("rank {rank} failed its part of the stream operation: {cause}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// Its error's kind and message.
        cause: crate::Cause,
    },
}

impl StreamRecvError {
    /// What kind of failure this is (see [`ErrorKind`](crate::ErrorKind)); a remote
    /// failure is of its cause's kind.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            StreamRecvError::BufferSize { .. } => K::BadArgument,
            StreamRecvError::AduSize { .. }
            | StreamRecvError::Unsized
            | StreamRecvError::Layout(_) => K::Mismatch,
            StreamRecvError::Exchange(x) => x.kind(),
            StreamRecvError::Msg(_) => K::Transfer,
            StreamRecvError::Remote { cause, .. } | StreamRecvError::Declined(cause) => cause.kind,
            StreamRecvError::Incomplete { .. }
            | StreamRecvError::Missing { .. }
            | StreamRecvError::Cut { .. } => K::PeerGone,
            StreamRecvError::Bind { .. }
            | StreamRecvError::Thread(_)
            | StreamRecvError::Receiver { .. }
            | StreamRecvError::Checksum { .. }
            | StreamRecvError::Refused { .. } => K::Transport,
        }
    }
}

impl crate::error::Told for StreamRecvError {
    fn kind(&self) -> crate::ErrorKind {
        StreamRecvError::kind(self)
    }
}
