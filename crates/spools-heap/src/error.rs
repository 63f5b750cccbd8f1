//! Errors of the shared heap.

use thiserror::Error;

use crate::HeapName;

/// Errors of allocating shared-heap memory and of reaching a peer's.
#[derive(Debug, Error)]
pub enum HeapError {
    /// The requested size does not fit in the address space.
    #[error("a shared-heap buffer of {elems} elements of {elem_bytes} bytes is too large")]
    TooLarge {
        /// Elements asked for.
        elems: usize,
        /// Bytes per element.
        elem_bytes: usize,
    },
    /// The segment could not be created, sized or mapped (`/dev/shm` full, limits).
    #[error("cannot create shared-heap segment {name}: {source}")]
    Create {
        /// The segment.
        name: HeapName,
        /// The system's error.
        source: std::io::Error,
    },
    /// A peer's segment could not be opened or mapped: it was freed before it was first
    /// mapped here, or the system refused.
    #[error("cannot map rank {}'s shared-heap segment {name}: {source}", name.rank())]
    Open {
        /// The segment.
        name: HeapName,
        /// The system's error.
        source: std::io::Error,
    },
    /// The name belongs to another job than this process's.
    #[error("shared-heap segment {name} belongs to another job (this one is {job:016x})")]
    ForeignJob {
        /// The segment.
        name: HeapName,
        /// This process's job.
        job: u64,
    },
    /// The object under that name is not a shared-heap segment of this job (bad magic,
    /// size or tag).
    #[error("{name} is not a shared-heap segment of this job")]
    NotASegment {
        /// The segment.
        name: HeapName,
    },
    /// The range asked for lies outside the segment.
    #[error("bytes {offset}+{len} lie outside shared-heap segment {name} of {size} bytes")]
    OutOfRange {
        /// The segment.
        name: HeapName,
        /// First byte asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// Bytes the segment holds.
        size: u64,
    },
    /// The owner freed the buffer (its bytes are no longer the owner's data).
    #[error("rank {}'s shared-heap segment {name} was freed", name.rank())]
    Freed {
        /// The segment.
        name: HeapName,
    },
}
