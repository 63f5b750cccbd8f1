//! The fabric layer of Spools: how bytes cross between ranks.
//!
//! One trait, [`Transport`], and two backends: [`shm::ShmTransport`] (rings in shared
//! memory between processes of one host) and [`tcp::TcpTransport`] (sockets, between
//! hosts, or on one host with `SPOOLS_TRANSPORT=tcp`). A transport moves *messages*: byte
//! strings of at most [`Caps::max_message`] bytes, delivered in order per
//! (sender, lane, priority), with back-pressure instead of loss. Each backend states its
//! [`Caps`]; the active-message layer queries them rather than assuming.
//!
//! Sending lanes: every rank has [`Caps::lanes`] lanes; a lane is used by one thread at a
//! time (the active-message layer gives each endpoint its own), so senders on different lanes never
//! contend. Lane 0 belongs to the progress engine.
//!
//! The conformance suite in `tests/conformance.rs` runs every backend through the same
//! tests with real processes.

use std::time::Duration;

use thiserror::Error;

mod lock;
pub mod shm;
pub mod tcp;
mod wait;

pub use wait::{cpu_count, Backoff};

/// Message priority: high-priority traffic never waits behind low-priority traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Normal traffic.
    Low = 0,
    /// Urgent traffic (control, acknowledgements, user high-priority channels).
    High = 1,
}

impl Priority {
    /// Both priorities, high first (the order in which receivers serve them).
    pub const SERVE_ORDER: [Priority; 2] = [Priority::High, Priority::Low];

    /// Index 0 (low) or 1 (high).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// How a transport can copy large transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleCopy {
    /// Only through the transport's buffers (sender copies in, receiver copies out).
    None,
    /// Kernel-assisted: `process_vm_readv` / `process_vm_writev` between processes.
    Cma,
}

/// What a transport can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Backend name.
    pub name: &'static str,
    /// Largest message `try_send` accepts.
    pub max_message: usize,
    /// Largest message that travels in one cell or frame with its header (latency class
    /// of a short active message).
    pub max_inline: usize,
    /// Messages of one (sender, lane, priority) arrive in the order sent.
    pub ordered: bool,
    /// Sending lanes per rank.
    pub lanes: usize,
    /// Single-copy mechanism usable for large transfers, with the reason it was chosen.
    pub single_copy: SingleCopy,
    /// Why `single_copy` is what it is (the start-up probe's measurements).
    pub single_copy_reason: String,
}

/// Errors of the fabric data path.
#[derive(Debug, Error)]
pub enum FabricError {
    /// The peer is not reachable through this transport (another host for shm, itself).
    #[error("rank {0} is not reachable through this transport")]
    Unreachable(u32),
    /// The message is larger than [`Caps::max_message`].
    #[error("message of {len} bytes exceeds this transport's limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No such lane.
    #[error("lane {lane} does not exist (this transport has {lanes})")]
    BadLane {
        /// Lane asked for.
        lane: usize,
        /// Lanes available.
        lanes: usize,
    },
    /// The peer died or the job ended.
    #[error("{0}")]
    PeerFailed(String),
    /// A peer wrote something that breaks the ring or stream format.
    #[error("corrupt data from rank {rank}: {what}")]
    Corrupt {
        /// The sending rank.
        rank: u32,
        /// What is wrong.
        what: String,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Setting up the transport failed in the bootstrap layer.
    #[error(transparent)]
    Boot(#[from] spools_boot::BootError),
}

impl FabricError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FabricError {
        let what = what.into();
        move |source| FabricError::Io { what, source }
    }
}

/// The checks every backend's `try_send` makes before touching its buffers: the message
/// fits, the peer is alive, the lane exists. Returns the message length and the lane's
/// state.
pub(crate) fn check_send<'a, T>(
    caps: &Caps,
    state: &spools_boot::health::JobHealth,
    lanes: &'a [T],
    lane: usize,
    peer: u32,
    parts: &[&[u8]],
) -> Result<(usize, &'a T), FabricError> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > caps.max_message {
        return Err(FabricError::TooLarge {
            len,
            max: caps.max_message,
        });
    }
    if state.troubled() {
        if let Some(f) = state.failure_of(peer) {
            return Err(FabricError::PeerFailed(f.to_string()));
        }
    }
    let lane_state = lanes.get(lane).ok_or(FabricError::BadLane {
        lane,
        lanes: caps.lanes,
    })?;
    Ok((len, lane_state))
}

/// A message handed to a receiver by [`Transport::poll`].
#[derive(Debug)]
pub struct Incoming<'a> {
    /// Sending rank.
    pub from: u32,
    /// Sending lane.
    pub lane: u16,
    /// Priority.
    pub priority: Priority,
    /// The bytes, borrowed from the transport's buffer until the callback returns.
    pub bytes: &'a [u8],
}

/// A transport between the ranks of one job.
pub trait Transport: Send + Sync {
    /// What this transport can do.
    fn caps(&self) -> &Caps;

    /// Whether `peer` can be reached through this transport.
    fn reaches(&self, peer: u32) -> bool;

    /// Sends one message made of `parts` (concatenated) to `peer` on `lane`, or returns
    /// `Ok(false)` if the peer's buffer is full (back-pressure: poll and retry). A
    /// transport may keep part of an accepted message queued (TCP, when the kernel's
    /// buffer is full); it goes out on later sends, [`Transport::flush`] and
    /// [`Transport::poll`], so a sender must keep polling or flushing.
    ///
    /// # Errors
    /// [`FabricError::TooLarge`], [`FabricError::Unreachable`],
    /// [`FabricError::PeerFailed`], [`FabricError::Io`].
    fn try_send(
        &self,
        lane: usize,
        priority: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, FabricError>;

    /// Pushes out anything the transport queued (TCP partial writes). Returns whether
    /// anything is still queued.
    ///
    /// # Errors
    /// [`FabricError::PeerFailed`], [`FabricError::Io`].
    fn flush(&self, lane: usize) -> Result<bool, FabricError>;

    /// Delivers waiting messages to `f`, high priority first; returns how many. Only one
    /// thread polls at a time (others return `Ok(0)` at once).
    ///
    /// # Errors
    /// [`FabricError::Corrupt`] or [`FabricError::Io`]; messages already delivered stay
    /// delivered.
    fn poll(&self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError>;

    /// Sleeps until a message may have arrived, space was freed for a blocked sender,
    /// [`Transport::wake`] was called, or `timeout` passed.
    fn wait(&self, timeout: Duration);

    /// Wakes a thread sleeping in [`Transport::wait`] (used by the watchdog).
    fn wake(&self);
}
