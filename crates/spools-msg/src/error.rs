//! Errors of tagged messaging, collectives and RPC.

use spools_am::AmError;
use thiserror::Error;

/// Why a messaging operation failed.
#[derive(Debug, Error)]
pub enum MsgError {
    /// The active-message layer or a transport failed (a dead peer, a malformed message).
    #[error(transparent)]
    Am(#[from] AmError),
    /// A message longer than the receive buffer arrived; nothing was written past the
    /// buffer (MPI_ERR_TRUNCATE).
    #[error("message truncated: {len} bytes from rank {source_rank} (tag {tag}) do not fit a receive buffer of {capacity} bytes")]
    Truncated {
        /// The message's length.
        len: usize,
        /// The buffer's length.
        capacity: usize,
        /// The sender (communicator rank).
        source_rank: u32,
        /// The message's tag.
        tag: i32,
    },
    /// A rank outside the communicator.
    #[error("rank {rank} is not in this communicator of {size} ranks")]
    BadRank {
        /// The rank asked for.
        rank: u32,
        /// Communicator size.
        size: u32,
    },
    /// A negative tag (user tags are 0 to i32::MAX).
    #[error("tag {0} is negative (tags are 0 to {max})", max = i32::MAX)]
    BadTag(i32),
    /// Buffers or counts of a collective do not have the sizes it needs.
    #[error("{op}: {rule} ({got}, where {want} is needed)")]
    BadBuffer {
        /// The operation.
        op: &'static str,
        /// The rule broken.
        rule: &'static str,
        /// What was given.
        got: usize,
        /// What the rule needs.
        want: usize,
    },
    /// Ranks called a collective with arguments that disagree (root, counts): a block of
    /// another size than this rank expected arrived.
    #[error("{op}: ranks disagree: {got} bytes arrived{}, {want} were expected", from.map(|r| format!(" from rank {r}")).unwrap_or_default())]
    Mismatch {
        /// The operation.
        op: &'static str,
        /// The rank that sent it, when known.
        from: Option<u32>,
        /// Bytes that arrived.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
    /// A rank of the communicator finalised (its `World` was dropped or finalised)
    /// without starting the collective this rank waits in: it can never complete.
    #[error("job rank {rank} finalised after {started} collective(s) on this communicator, so it never joins collective #{waiting} that this rank waits in")]
    PeerFinalized {
        /// The job rank that finalised.
        rank: u32,
        /// How many collectives of this communicator it started.
        started: u32,
        /// The collective waited in (counted from 0).
        waiting: u32,
    },
    /// A receive waits for a message from job rank `rank`, which finalised (its `World`
    /// was dropped or finalised) after sending this rank `sent` messages: all of them
    /// arrived and none matches, so the receive can never complete (end of data). (A
    /// receive from any source is not failed this way: another thread of this rank may
    /// still send to it.)
    #[error("job rank {rank} finalised after sending this rank {sent} message(s), none of which matches this receive from it: it can never complete")]
    SourceFinalized {
        /// The job rank that finalised.
        rank: u32,
        /// How many tagged messages it sent this rank in all.
        sent: u64,
    },
    /// No communicator context id is left: a member holds
    /// [`crate::MAX_LIVE_COMMUNICATORS`] communicators already, more than 2^29 were agreed
    /// on by blocking creation, or a leader's range of non-blocking dups is used up.
    #[error("no communicator context ids are left")]
    NoContext,
    /// The thread running a non-blocking collective panicked.
    #[error("the thread running a non-blocking {0} panicked")]
    Panicked(&'static str),
    /// The messaging state broke an invariant (a message or operation that cannot be
    /// where it is); the operation fails instead of the process.
    #[error("messaging state broken near rank {peer}: {what}")]
    Protocol {
        /// The peer involved (job rank), or this rank.
        peer: u32,
        /// The invariant broken.
        what: &'static str,
    },
}

/// Why a remote procedure call failed.
#[derive(Debug, Error)]
pub enum RpcError {
    /// Sending the call or receiving the reply failed.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// The target has no function registered under that name.
    #[error("rank {rank} has no RPC function named {name:?}")]
    UnknownFunction {
        /// The target.
        rank: u32,
        /// The name called.
        name: String,
    },
    /// The remote function returned an error.
    #[error("RPC {name:?} on rank {rank} failed: {message}")]
    Remote {
        /// The target.
        rank: u32,
        /// The function.
        name: String,
        /// Its error message.
        message: String,
    },
    /// The remote function panicked.
    #[error("RPC {name:?} on rank {rank} panicked")]
    Panicked {
        /// The target.
        rank: u32,
        /// The function.
        name: String,
    },
    /// A function name is registered twice, empty, or longer than 255 bytes.
    #[error("bad RPC function name {0:?} (non-empty, at most 255 bytes, registered once)")]
    BadName(String),
    /// The reply could not be decoded.
    #[error("malformed RPC reply from rank {0}")]
    BadReply(u32),
}
