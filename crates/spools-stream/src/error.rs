//! What can go wrong while reassembling streams.

use thiserror::Error;

/// A frame that does not fit the streams received so far: the sender is broken or hostile,
/// or the data was damaged. The stream (or the connection, for link errors) cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReassemblyError {
    /// A link's first frame was not a hello, or a second hello came.
    #[error("link {link}: expected {expected}, got {got}")]
    OutOfOrder {
        /// The link.
        link: u16,
        /// What the protocol expects there.
        expected: &'static str,
        /// What came.
        got: &'static str,
    },
    /// The links of one connection disagree (their count, or two hellos for one link).
    #[error("link {link}: {what}")]
    Links {
        /// The link.
        link: u16,
        /// What is inconsistent.
        what: &'static str,
    },
    /// A frame for a stream that was not opened (or opened twice differently).
    #[error("stream {stream}: {what}")]
    Stream {
        /// The stream.
        stream: u32,
        /// What is wrong.
        what: &'static str,
    },
    /// An SU that is not where the stream's format puts it, or came twice.
    #[error("stream {stream}, ADU {adu}, TU {tu}, SU {su} on link {link}: {what}")]
    Misplaced {
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
        /// What is wrong with it.
        what: &'static str,
    },
    /// An SU's payload does not match its CRC32C.
    #[error("stream {stream}, ADU {adu}, TU {tu}, SU {su} on link {link}: checksum mismatch (CRC32C {got:#010x}, frame says {want:#010x})")]
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
        /// The payload's CRC32C.
        got: u32,
        /// The CRC32C in the frame.
        want: u32,
    },
    /// An ADU larger than the receiver accepts, or more bytes buffered than it allows.
    #[error("stream {stream}: {what} of {bytes} bytes exceeds the receiver's limit of {limit}")]
    TooLarge {
        /// The stream.
        stream: u32,
        /// What is too large.
        what: &'static str,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}
