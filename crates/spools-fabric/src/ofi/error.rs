//! Errors of the libfabric backend.

use thiserror::Error;

/// Why the libfabric backend could not start or a libfabric call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OfiError {
    /// `libfabric.so.1` (or one of its functions) cannot be loaded.
    #[error("{0} (install libfabric, e.g. Debian's libfabric1, or choose another transport)")]
    Library(String),
    /// No provider offers what Spools needs (reliable datagram endpoints with messages,
    /// send-after-send order) under the name asked for.
    #[error("no libfabric provider {wanted} offers reliable datagram endpoints with ordered messages: {why}")]
    NoProvider {
        /// The provider asked for (`SPOOLS_OFI_PROVIDER`), or "of any name".
        wanted: String,
        /// libfabric's answer.
        why: String,
    },
    /// The job's ranks chose different providers (their hosts offer different ones).
    #[error("rank {rank} uses libfabric provider {theirs}, this rank {ours}: set SPOOLS_OFI_PROVIDER to one that every host has")]
    ProviderMismatch {
        /// The first rank that differs.
        rank: u32,
        /// Its provider.
        theirs: String,
        /// This rank's.
        ours: String,
    },
    /// A peer's endpoint name cannot be inserted in the address vector.
    #[error("rank {rank}'s libfabric address cannot be used: {why}")]
    BadAddress {
        /// The rank.
        rank: u32,
        /// libfabric's answer.
        why: String,
    },
    /// A libfabric call failed.
    #[error("{call} failed: {text} (libfabric error {code})")]
    Call {
        /// The call (`fi_domain`, `fi_send`, ...).
        call: &'static str,
        /// Its return code, negated (`FI_E*`).
        code: i64,
        /// libfabric's text for it.
        text: String,
    },
    /// A completion reported an error.
    #[error("a {what} to or from rank {peer} failed: {text} (libfabric error {code})")]
    Completion {
        /// "send" or "receive".
        what: &'static str,
        /// The peer (the sender is unknown for a receive: `u32::MAX`).
        peer: u32,
        /// The error code (`FI_E*`).
        code: i64,
        /// The provider's text for it.
        text: String,
    },
}
