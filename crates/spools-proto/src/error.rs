use thiserror::Error;

/// Bytes received from a peer that are not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ended before the message did.
    #[error("truncated message: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the message needs.
        need: usize,
        /// Bytes that were there.
        have: usize,
    },
    /// The message kind or tag is not one this version knows.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// The magic number at the start of a handshake is wrong: not a Spools peer.
    #[error("bad magic {0:#010x}: not a Spools peer")]
    BadMagic(u32),
    /// The peer speaks another protocol version.
    #[error("protocol version {got} is not supported (this is version {want})")]
    Version {
        /// Version the peer sent.
        got: u16,
        /// Version this build speaks.
        want: u16,
    },
    /// A length field is larger than the limit for its field.
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Which field.
        what: &'static str,
        /// Length announced.
        len: u64,
        /// Limit.
        max: u64,
    },
    /// A text field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    NotUtf8(&'static str),
    /// A field holds a value outside its range.
    #[error("invalid {what}: {value}")]
    Invalid {
        /// Which field.
        what: &'static str,
        /// The value received.
        value: u64,
    },
    /// Bytes follow the end of a message that must fill its frame.
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}
