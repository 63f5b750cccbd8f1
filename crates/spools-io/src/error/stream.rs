//! Errors of streams sent from a job.

use thiserror::Error;

/// Why a stream operation failed. An error on any rank fails the call on every rank.
#[derive(Debug, Error)]
pub enum StreamError {
    /// The format cannot be sent this way.
    #[error("stream format: {0}")]
    Format(&'static str),
    /// The ADU buffer does not hold this rank's share of the ADU's layout.
    #[error("the ADU buffer holds {got} bytes but this rank's share is {need}")]
    BufferSize {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        got: u64,
    },
    /// The layout is not one the stream can plan against.
    #[error(transparent)]
    Layout(#[from] spools_map::LayoutError),
    /// Reshuffling the ADU into the links' stripes failed.
    #[error(transparent)]
    Exchange(#[from] crate::error::ExchangeError),
    /// This rank's link failed: the destination is unreachable, closed it, or died.
    #[error("link {link}: {source}")]
    Link {
        /// The link this rank owns.
        link: u16,
        /// What happened.
        source: spools_stream::SendError,
    },
    /// The job's ranks could not agree (a peer failed).
    #[error(transparent)]
    Msg(#[from] spools_msg::MsgError),
    /// Another rank failed its part (its own error says why).
    #[error("rank {rank} failed its part of the stream operation")]
    Remote {
        /// The first rank that failed.
        rank: u32,
    },
    /// The link owner's sending thread could not be started.
    #[error("starting the link's sending thread: {0}")]
    Thread(std::io::Error),
    /// No random source for the connection's id.
    #[error("a random connection id: {0}")]
    Random(std::io::Error),
}
