//! Errors of streams sent from a job.

use thiserror::Error;

/// Why a stream operation failed. Every call is collective, and an error on any rank fails
/// the call on every rank: the rank that saw it gets the cause, the others
/// [`StreamError::Remote`] naming it.
#[derive(Debug, Error)]
pub enum StreamError {
    /// A bad format: the connection, stream or ADU cannot be sent this way (no links, a
    /// TU the links do not divide, SUs over the frame limit, an unsized layout...).
    #[error("stream format: {0}")]
    Format(&'static str),
    /// A frame the framebuffer protocol cannot carry (a field without a colour map or
    /// with `lo >= hi`, a side over 65536).
    #[error("not a frame: {0}")]
    Frame(spools_proto::WireError),
    /// The ADU buffer does not hold this rank's share of the ADU's layout.
    #[error("the ADU buffer holds {got} bytes but this rank's share is {need}")]
    BufferSize {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        got: u64,
    },
    /// An ADU whose layout is not the size of the stream's ADUs (a stream's ADUs have the
    /// size of its first, unless it was opened `variable`).
    #[error("stream {stream}: an ADU of {got} bytes, but the stream's ADUs are {want} bytes")]
    AduSize {
        /// The stream.
        stream: u32,
        /// Bytes of the stream's ADUs.
        want: u64,
        /// Bytes of this ADU's layout.
        got: u64,
    },
    /// A stream of a synchronised group would start an ADU before another stream of the
    /// group has sent the previous one (send the group's ADUs with `send_group`).
    #[error("stream {stream} of a lock-step group cannot send ADU {adu}: stream {behind} has sent only {sent}")]
    LockStep {
        /// The stream that would run ahead.
        stream: u32,
        /// The ADU it would send.
        adu: u64,
        /// A stream of its group that is behind.
        behind: u32,
        /// ADUs that stream has sent.
        sent: u64,
    },
    /// No such stream open on this connection (never opened, or closed).
    #[error("no stream {stream} open on this connection")]
    UnknownStream {
        /// The stream's id.
        stream: u32,
    },
    /// `send_group` was not given exactly the open streams of the group, once each.
    #[error("group {group}: {what}")]
    Group {
        /// The group.
        group: u32,
        /// What is wrong.
        what: &'static str,
    },
    /// The layout is not one the stream can plan against.
    #[error(transparent)]
    Layout(#[from] spools_map::LayoutError),
    /// Reshuffling the ADU into the links' stripes failed.
    #[error(transparent)]
    Exchange(#[from] crate::error::ExchangeError),
    /// The destination is unreachable: this rank's link could not connect (refused, timed
    /// out, no route).
    #[error("link {link}: destination {addr} unreachable: {source}")]
    Unreachable {
        /// The link this rank owns.
        link: u16,
        /// The destination.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The destination accepted this rank's link but did not welcome it as a stream.
    #[error("link {link}: the destination did not welcome the connection")]
    Refused {
        /// The link this rank owns.
        link: u16,
    },
    /// The destination requires the job secret's proof and did not take this rank's link:
    /// the link proved no secret (opened without one), or the destination requires another
    /// secret than the job's (`source` says which).
    #[error("the destination requires the job secret's proof; {source}")]
    Unproven {
        /// The link this rank owns.
        link: u16,
        /// What the handshake said.
        source: spools_stream::SendError,
    },
    /// The destination closed this rank's link, or died, while it sent (`at`: the stream
    /// and ADU in the middle of which, if any).
    #[error("link {link}: the destination closed the link{}: {source}", at.map_or(String::new(), |(s, a)| format!(" in the middle of stream {s}, ADU {a}")))]
    PeerClosed {
        /// The link this rank owns.
        link: u16,
        /// The stream and ADU being sent when it failed.
        at: Option<(u32, u64)>,
        /// What happened.
        source: spools_stream::LinkError,
    },
    /// This rank's link failed otherwise.
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
    /// This rank declined its part of a send
    /// ([`StreamConnection::decline_send`](crate::stream::StreamConnection::decline_send)):
    /// a binding's own argument check failed; nothing was sent.
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
    /// The link owner's sending thread could not be started.
    #[error("starting the link's sending thread: {0}")]
    Thread(std::io::Error),
    /// No random source for the connection's id.
    #[error("a random connection id: {0}")]
    Random(std::io::Error),
}

impl StreamError {
    /// The rank this error names as the one at fault (see
    /// [`ExchangeError::remote_rank`](crate::ExchangeError::remote_rank)).
    pub fn remote_rank(&self) -> Option<u32> {
        match self {
            StreamError::Remote { rank, .. } => Some(*rank),
            StreamError::Exchange(x) => x.remote_rank(),
            _ => None,
        }
    }

    /// What kind of failure this is (see [`ErrorKind`](crate::ErrorKind)); a remote
    /// failure is of its cause's kind.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            StreamError::Format(_)
            | StreamError::Frame(_)
            | StreamError::BufferSize { .. }
            | StreamError::UnknownStream { .. }
            | StreamError::Group { .. }
            | StreamError::LockStep { .. } => K::BadArgument,
            StreamError::AduSize { .. } | StreamError::Layout(_) => K::Mismatch,
            StreamError::Exchange(x) => x.kind(),
            StreamError::Msg(_) => K::Transfer,
            StreamError::Remote { cause, .. } | StreamError::Declined(cause) => cause.kind,
            StreamError::PeerClosed { .. } => K::PeerGone,
            StreamError::Unreachable { .. }
            | StreamError::Refused { .. }
            | StreamError::Unproven { .. }
            | StreamError::Link { .. }
            | StreamError::Thread(_)
            | StreamError::Random(_) => K::Transport,
        }
    }

    /// The error of link `link` failing with `source` (while sending ADU `at`, if any).
    pub(crate) fn of_link(
        link: u16,
        at: Option<(u32, u64)>,
        source: spools_stream::SendError,
    ) -> Self {
        use spools_stream::SendError as S;
        match source {
            S::Connect { addr, source } => StreamError::Unreachable { link, addr, source },
            S::NoWelcome { .. } => StreamError::Refused { link },
            S::Link { source, .. } => StreamError::PeerClosed { link, at, source },
            S::ProofRequired { .. } | S::Handshake { .. } | S::NotProven { .. } => {
                StreamError::Unproven { link, source }
            }
            other => StreamError::Link {
                link,
                source: other,
            },
        }
    }
}

impl crate::error::Told for StreamError {
    fn kind(&self) -> crate::ErrorKind {
        StreamError::kind(self)
    }
}
