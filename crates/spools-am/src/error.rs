use spools_boot::BootError;
use spools_fabric::FabricError;
use spools_proto::am::StatusCode;
use spools_proto::WireError;
use thiserror::Error;

/// Errors of the active-message layer.
#[derive(Debug, Error)]
pub enum AmError {
    /// The transport failed (peer death, corrupt data, system error).
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// A bootstrap collective failed.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// No handler of that name is in the global table (register it on some rank, then
    /// call `sync_handlers`).
    #[error("no handler named {0:?} in the global table (register it, then call sync_handlers)")]
    UnknownHandlerName(String),
    /// A handler id outside the global table.
    #[error("handler id {0} is not in the global table")]
    UnknownHandlerId(u32),
    /// A handler name was registered twice on this rank.
    #[error("handler {0:?} is already registered on this rank")]
    DuplicateHandler(String),
    /// The target has no handler for a message this rank sent (returned by the target).
    #[error("rank {peer} has no handler for id {id} ({name}); the message was dropped there")]
    NoHandlerAtTarget {
        /// The target.
        peer: u32,
        /// The handler id sent.
        id: u32,
        /// Its name in the global table.
        name: String,
    },
    /// A put or get named a region key the target does not have.
    #[error("rank {peer} has no memory region with key {key}")]
    UnknownRegion {
        /// The target.
        peer: u32,
        /// The key.
        key: u32,
    },
    /// A put or get fell outside the target region; no memory was touched.
    #[error("{op} of {len} bytes at offset {offset} is outside rank {peer}'s region {key}; nothing was touched")]
    OutOfBounds {
        /// "put" or "get".
        op: &'static str,
        /// The target.
        peer: u32,
        /// Region key.
        key: u32,
        /// Offset asked.
        offset: u64,
        /// Length asked.
        len: u64,
    },
    /// A read of lent bytes asked for more than were lent; nothing moved.
    #[error("a read of {asked} bytes exceeds the {lent} bytes rank {peer} lent; nothing moved")]
    LoanExceeded {
        /// The lender.
        peer: u32,
        /// Bytes lent.
        lent: u64,
        /// Bytes asked.
        asked: u64,
    },
    /// A payload larger than the configured bulk limit.
    #[error("bulk payload of {len} bytes exceeds the bulk limit of {limit} (SPOOLS_BULK_LIMIT); use a memory transfer")]
    TooLarge {
        /// Payload length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A rank number outside the job.
    #[error("rank {rank} is not in this job of {size} ranks")]
    BadRank {
        /// The rank.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// A region of this many bytes cannot be described or allocated.
    #[error("cannot allocate a memory region of {len} bytes")]
    RegionAlloc {
        /// Bytes asked for.
        len: usize,
    },
    /// A local read or write of a region leaves it.
    #[error("{len} bytes at offset {offset} do not fit this region of {region_len} bytes")]
    OutsideRegion {
        /// Offset asked.
        offset: usize,
        /// Length asked.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// A background thread of the runtime could not be started.
    #[error("cannot start the {what} thread: {source}")]
    ThreadSpawn {
        /// Which thread ("progress", or the collective it runs).
        what: &'static str,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A peer sent bytes that do not decode as an active message.
    #[error("malformed message from rank {peer}: {source}")]
    Malformed {
        /// The sender.
        peer: u32,
        /// What the decoder found.
        #[source]
        source: WireError,
    },
    /// A peer announced a bulk message above this rank's bulk limit.
    #[error("rank {peer} sent a bulk message of {total} bytes, above the bulk limit of {limit}")]
    BulkOverLimit {
        /// The sender.
        peer: u32,
        /// Announced length.
        total: u64,
        /// This rank's bulk limit.
        limit: u64,
    },
    /// A fragment of a bulk message arrived out of sequence.
    #[error("rank {peer} sent a bulk fragment at offset {offset}, expected offset {expected}")]
    FragmentOutOfSequence {
        /// The sender.
        peer: u32,
        /// Offset received.
        offset: u32,
        /// Offset expected next.
        expected: usize,
    },
    /// A target answered a put or get with a status that makes no sense for it.
    #[error("rank {peer} answered a {op} with {code:?}")]
    BadReply {
        /// The target.
        peer: u32,
        /// "put" or "get".
        op: &'static str,
        /// The status it sent.
        code: StatusCode,
    },
    /// Every endpoint lane is taken.
    #[error("all {lanes} lanes are in use (SPOOLS_LANES sets how many endpoints a rank may open)")]
    NoLane {
        /// Lanes configured.
        lanes: usize,
    },
    /// The process's interrupt check ended a wait (see `Worker::set_interrupt`): a
    /// signal such as Ctrl-C, for a language binding.
    #[error("interrupted while waiting")]
    Interrupted,
}
