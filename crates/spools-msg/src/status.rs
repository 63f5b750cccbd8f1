//! What a receive selects (a source and a tag, either may be any) and what a completed
//! operation reports.

/// Which sender a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Any rank (MPI_ANY_SOURCE).
    Any,
    /// This rank of the communicator.
    Rank(u32),
}

impl From<u32> for Source {
    fn from(r: u32) -> Source {
        Source::Rank(r)
    }
}

/// Which tag a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Any tag (MPI_ANY_TAG).
    Any,
    /// This tag (0 to i32::MAX).
    Is(i32),
}

impl From<i32> for Tag {
    fn from(t: i32) -> Tag {
        Tag::Is(t)
    }
}

/// Any sender.
pub const ANY_SOURCE: Source = Source::Any;
/// Any tag.
pub const ANY_TAG: Tag = Tag::Any;

/// What a completed receive (or send) reports: MPI's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender, as a rank of the communicator (for a send: this rank).
    pub source: u32,
    /// The message's tag.
    pub tag: i32,
    /// Bytes received (for a send: bytes sent).
    pub len: usize,
    /// Whether the receive was cancelled before any message matched it.
    pub cancelled: bool,
}

impl Status {
    /// Elements of type `T` received (whole elements only).
    pub fn count<T>(&self) -> usize {
        self.len / std::mem::size_of::<T>().max(1)
    }
}

/// A completed non-blocking operation: its buffer back, and its status.
#[derive(Debug)]
pub struct Completion {
    /// The buffer given to `isend` or `irecv`, with the message in it for a receive.
    pub buf: Vec<u8>,
    /// What happened.
    pub status: Status,
}
