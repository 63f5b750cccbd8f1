//! Why an exchange failed ([`ExchangeError`]).

use spools_map::{LayoutError, PlanError};
use spools_msg::MsgError;

use crate::error::side::Side;

/// Why an exchange (a plan executed between the ranks' buffers) failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Messaging failed: a peer died, a transport broke.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// The two layouts cannot be planned against each other.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A layout could not describe a unit.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The owner list does not have one rank per unit of the layout.
    #[error("{side} owners list has {got} entries for a layout of {expected} units")]
    Owners {
        /// Which side.
        side: Side,
        /// Units in the layout.
        expected: u64,
        /// Entries given.
        got: usize,
    },
    /// A layout has more units than the communicator has ranks.
    #[error("{side} layout has {units} units but the communicator has {ranks} ranks")]
    TooManyUnits {
        /// Which side.
        side: Side,
        /// Units in the layout.
        units: u64,
        /// Ranks in the communicator.
        ranks: u32,
    },
    /// A unit's owner is not a rank of the communicator.
    #[error("{side} unit {unit} is owned by rank {rank}, beyond the communicator's {size} ranks")]
    OwnerOutOfRange {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// The owner given.
        rank: u32,
        /// Ranks in the communicator.
        size: u32,
    },
    /// This rank owns a unit but gave no buffer for it, or gave one for a unit it does
    /// not own.
    #[error("{side} unit {unit}: {what}")]
    Buffers {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A buffer is smaller than its unit's share of the dataset.
    #[error("{side} buffer of unit {unit} holds {got} bytes but the layout puts {need} there")]
    BufferSize {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// Bytes the layout stores on the unit.
        need: u64,
        /// Bytes in the buffer.
        got: u64,
    },
    /// The buffer length is not a whole number of elements.
    #[error("buffer element size {elem} bytes does not match the layout's {layout} bytes")]
    ElementSize {
        /// Size of the buffer's element type.
        elem: u64,
        /// Element size of the layout.
        layout: u64,
    },
    /// A transfer unit arrived with a checksum that does not match its data.
    #[error("transfer unit {index} from rank {from} failed its CRC32C check (sent {sent:#010x}, got {got:#010x})")]
    Checksum {
        /// The sending rank.
        from: u32,
        /// The transfer unit's index in the stream from that rank.
        index: u64,
        /// The checksum the sender computed.
        sent: u32,
        /// The checksum of what arrived.
        got: u32,
    },
    /// Another rank found a problem with its part; nothing was moved.
    #[error("rank {rank} could not take part in the exchange: {cause}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// Its error's kind and message.
        cause: crate::Cause,
    },
    /// This rank declined its part ([`ExchangeOptions::declined`](crate::ExchangeOptions)):
    /// a binding's own argument check failed; nothing was moved.
    #[error("{0}")]
    Declined(crate::Cause),
    /// A transfer unit arrived with an unexpected length.
    #[error("transfer unit {index} from rank {from} has {got} bytes, expected {expected}")]
    Length {
        /// The sending rank.
        from: u32,
        /// Its index in the stream.
        index: u64,
        /// The expected length.
        expected: usize,
        /// The length that arrived.
        got: usize,
    },
    /// A peer's description of its buffers for a single copy, or its answer to one, is
    /// not a valid message (a different version or corrupted).
    #[error("single-copy message from rank {from} is invalid: {what}")]
    Descriptor {
        /// The rank that sent it.
        from: u32,
        /// What is wrong.
        what: &'static str,
    },
    /// Copying runs straight out of a peer's memory failed (the peer died, or its buffer
    /// went away).
    #[error("single copy from rank {from}'s memory failed: {source}")]
    Pull {
        /// The rank whose memory was read.
        from: u32,
        /// The system's error.
        source: std::io::Error,
    },
    /// A rank copying out of this rank's buffer reported that its copy failed (its own
    /// error says why); this rank's buffer was not changed.
    #[error("rank {rank} failed to copy its runs out of this rank's buffer (see its error)")]
    Puller {
        /// The rank that failed.
        rank: u32,
    },
    /// Copying runs straight out of a peer's shared-heap buffer failed (the buffer
    /// cannot be mapped, or its owner freed it during the copy).
    #[error("single copy from rank {from}'s shared heap failed: {source}")]
    Heap {
        /// The rank that owns the buffer.
        from: u32,
        /// Why.
        source: spools_heap::HeapError,
    },
    /// The ranks passed different `ExchangeOptions::single_copy` values (every rank must
    /// pass the same: the two ends of a stream would wait for different messages).
    #[error("the ranks disagree on ExchangeOptions::single_copy (every rank must pass the same)")]
    MixedSingleCopy,
    /// The ranks passed different arguments (`what`: the layouts, a format) to one
    /// collective call: found from a digest of every rank's arguments before anything
    /// moved, and reported alike on every rank.
    #[error(
        "rank{} {} passed {what} other than rank {first}'s to the same collective call (every rank must pass the same); nothing was moved",
        if ranks.len() == 1 { "" } else { "s" },
        crate::collective::rank_list(ranks)
    )]
    ArgumentsDiffer {
        /// The ranks whose arguments differ from `first`'s, in rank order.
        ranks: Vec<u32>,
        /// The rank they are compared with: the first whose part was not declined
        /// (rank 0, unless a binding declined its part).
        first: u32,
        /// What the digest covered.
        what: &'static str,
    },
}

impl ExchangeError {
    /// The rank this error names as the one at fault ([`ExchangeError::Remote`]): this
    /// rank only heard that it failed, and why (the error's cause).
    ///
    /// ```
    /// use spools_exchange::{Cause, ErrorKind, ExchangeError};
    /// let e = ExchangeError::Remote { rank: 2, cause: Cause::new(ErrorKind::BadArgument, "x") };
    /// assert_eq!(e.remote_rank(), Some(2));
    /// assert_eq!(e.kind(), ErrorKind::BadArgument);
    /// ```
    pub fn remote_rank(&self) -> Option<u32> {
        match self {
            ExchangeError::Remote { rank, .. } => Some(*rank),
            _ => None,
        }
    }

    /// What kind of failure this is (see [`ErrorKind`](crate::ErrorKind)); a remote
    /// failure is of its cause's kind.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            ExchangeError::Msg(_) => K::Transfer,
            ExchangeError::Plan(_)
            | ExchangeError::Layout(_)
            | ExchangeError::Owners { .. }
            | ExchangeError::TooManyUnits { .. }
            | ExchangeError::OwnerOutOfRange { .. }
            | ExchangeError::Buffers { .. }
            | ExchangeError::BufferSize { .. }
            | ExchangeError::ElementSize { .. }
            | ExchangeError::ArgumentsDiffer { .. } => K::Mismatch,
            ExchangeError::Checksum { .. } => K::Damaged,
            ExchangeError::Remote { cause, .. } | ExchangeError::Declined(cause) => cause.kind,
            ExchangeError::Length { .. }
            | ExchangeError::Descriptor { .. }
            | ExchangeError::Pull { .. }
            | ExchangeError::Puller { .. }
            | ExchangeError::Heap { .. }
            | ExchangeError::MixedSingleCopy => K::Transport,
        }
    }
}

impl crate::error::Told for ExchangeError {
    fn kind(&self) -> crate::ErrorKind {
        ExchangeError::kind(self)
    }
}
