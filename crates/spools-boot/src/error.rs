use spools_proto::handshake::HandshakeError;
use spools_proto::WireError;
use thiserror::Error;

use crate::config::ConfigError;
use crate::identity::IdentityError;

/// Why a rank could not start, or a bootstrap operation failed.
#[derive(Debug, Error)]
pub enum BootError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The environment does not describe a job.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The peer failed the secret handshake (or is not a Spools process).
    #[error("{what}: {source}")]
    Handshake {
        /// Which connection.
        what: String,
        /// Why.
        source: HandshakeError,
    },
    /// The rendezvous server sent something unreadable.
    #[error("malformed message from the rendezvous: {0}")]
    Wire(#[from] WireError),
    /// The server did not let this rank join.
    #[error("the rendezvous refused this rank: {0}")]
    Refused(String),
    /// Waiting took longer than allowed.
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The limit.
        secs: u64,
    },
    /// Another rank died; the job is over.
    #[error("rank {rank} died ({cause}); the job is over")]
    PeerDied {
        /// The dead rank.
        rank: u32,
        /// How it died.
        cause: String,
    },
    /// The connection to the rendezvous server (the launcher or rank 0) was lost.
    #[error("lost the connection to the job's rendezvous ({0}); the launcher or rank 0 is gone")]
    ServerLost(String),
    /// The server answered something the protocol does not allow here.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// This rank already finalised.
    #[error("the job was finalised")]
    Finalized,
}

impl BootError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BootError {
        let what = what.into();
        move |source| BootError::Io { what, source }
    }
}
