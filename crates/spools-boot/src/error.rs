use spools_proto::handshake::HandshakeError;
use spools_proto::WireError;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// The launcher's process-management interface (PMIx, PMI2) failed.
    #[error(transparent)]
    Pmi(#[from] crate::pmi::PmiError),
    /// A system call failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done.
        step: BootStep,
        /// The system's error.
        source: std::io::Error,
    },
    /// The peer failed the secret handshake (or is not a Spools process).
    #[error("handshake with {peer}: {source}")]
    Handshake {
        /// The other end's address.
        peer: String,
        /// Why.
        source: HandshakeError,
    },
    /// The rendezvous server sent something unreadable.
    #[error("malformed message from the rendezvous: {0}")]
    Wire(#[from] WireError),
    /// The server did not let this rank join.
    #[error("the rendezvous refused this rank: {reason}")]
    Refused {
        /// The server's reason, as it sent it.
        reason: String,
    },
    /// Waiting took longer than allowed.
    #[error("timed out after {secs} s waiting for {awaited}")]
    Timeout {
        /// What was awaited.
        awaited: Awaited,
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
    ServerLost(Lost),
    /// The server answered something the protocol does not allow here.
    #[error("protocol error: {0}")]
    Protocol(Violation),
    /// A runtime collective was called with an argument outside the job.
    #[error("broadcast root {root} is not a rank of this job of {size}")]
    BadRoot {
        /// The root asked for.
        root: u32,
        /// Job size.
        size: u32,
    },
    /// This rank already finalised.
    #[error("the job was finalised")]
    Finalized,
}

impl BootError {
    /// Wraps a system error met during `step`.
    pub(crate) fn io(step: BootStep) -> impl FnOnce(std::io::Error) -> BootError {
        move |source| BootError::Io { step, source }
    }
}

/// What the bootstrap was doing when a system call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BootStep {
    /// Drawing random bytes (job id, secret, nonce).
    #[error("drawing random bytes for the {0}")]
    Random(RandomFor),
    /// Binding the rendezvous listener.
    #[error("binding the rendezvous{}", at.as_ref().map(|a| format!(" at {a}")).unwrap_or_default())]
    BindRendezvous {
        /// The address asked for, if one was.
        at: Option<String>,
    },
    /// Using the rendezvous listener or socket.
    #[error("using the rendezvous socket")]
    RendezvousSocket,
    /// Writing the rendezvous file.
    #[error("writing the rendezvous file {}", path.display())]
    WriteRendezvousFile {
        /// The file.
        path: PathBuf,
    },
    /// Resolving an address.
    #[error("cannot resolve {addr}")]
    Resolve {
        /// The address.
        addr: String,
    },
    /// Connecting to a server.
    #[error("connecting to {addr}")]
    Connect {
        /// The server.
        addr: SocketAddr,
    },
    /// Serving a client's handshake.
    #[error("handshake with {peer}")]
    Accept {
        /// The client's address.
        peer: String,
    },
    /// Reading a bootstrap frame.
    #[error("reading a bootstrap frame")]
    ReadFrame,
    /// Writing a bootstrap frame.
    #[error("writing a bootstrap frame")]
    WriteFrame,
    /// Starting a thread.
    #[error("starting the {name} thread")]
    Thread {
        /// Which thread.
        name: &'static str,
    },
}

/// What random bytes were for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RandomFor {
    /// The job id.
    #[error("job id")]
    JobId,
    /// The job secret.
    #[error("job secret")]
    JobSecret,
    /// A handshake nonce.
    #[error("handshake nonce")]
    Nonce,
}

/// What a bootstrap wait was for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Awaited {
    /// Rank 0 to write the rendezvous file.
    #[error("rank 0 to write {}", path.display())]
    RendezvousFile {
        /// The file.
        path: PathBuf,
    },
    /// Every rank at the fence of the launcher's process-management interface.
    #[error("all {ranks} ranks to reach the {} fence (rank 0's address through the launcher)", kind.name())]
    PmiFence {
        /// Which interface.
        kind: crate::pmi::PmiKind,
        /// Ranks in the job.
        ranks: u32,
    },
    /// Every rank to join.
    #[error("all {ranks} ranks to join")]
    Join {
        /// Ranks in the job.
        ranks: u32,
    },
}

/// How the connection to the rendezvous was lost.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Lost {
    /// The server closed it while this rank was joining.
    #[error("it closed the connection while this rank was joining")]
    WhileJoining,
    /// The watchdog thread stopped.
    #[error("the watchdog stopped")]
    WatchdogStopped,
    /// The watchdog saw the connection end.
    #[error("{0}")]
    Watchdog(String),
}

/// An answer of the rendezvous server that the protocol does not allow.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    /// An address table of the wrong size.
    #[error("address table of {got} ranks for a job of {size}")]
    TableSize {
        /// Entries received.
        got: usize,
        /// Ranks in the job.
        size: u32,
    },
    /// A message that has no place while joining.
    #[error("unexpected {kind} while joining")]
    WhileJoining {
        /// The message's kind.
        kind: &'static str,
    },
    /// The answer to another collective.
    #[error("answer to collective #{got} while waiting for #{want}")]
    CollectiveOrder {
        /// Sequence number received.
        got: u64,
        /// Sequence number awaited.
        want: u64,
    },
    /// A collective answered with the wrong number of parts.
    #[error("collective returned {got} parts for {want}")]
    Parts {
        /// Parts received.
        got: usize,
        /// Parts expected.
        want: usize,
    },
}
