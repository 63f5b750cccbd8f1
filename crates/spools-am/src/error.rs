use spools_boot::BootError;
use spools_fabric::FabricError;
use thiserror::Error;

/// Errors of the comm layer.
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
    /// A local offset or length does not fit the local region or buffer.
    #[error("{0}")]
    BadArgument(String),
    /// A peer sent a message this rank cannot interpret.
    #[error("malformed message from rank {peer}: {what}")]
    Protocol {
        /// The sender.
        peer: u32,
        /// What is wrong.
        what: String,
    },
    /// Every endpoint lane is taken.
    #[error("all {lanes} lanes are in use (SPOOLS_LANES sets how many endpoints a rank may open)")]
    NoLane {
        /// Lanes configured.
        lanes: usize,
    },
}
