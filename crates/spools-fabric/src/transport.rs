//! The one seam of the fabric: the [`Transport`] trait, the [`Incoming`] messages it
//! delivers, and the checks every backend's `try_send` shares.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::caps::{Caps, Priority};
use crate::error::FabricError;

/// How long a transport that lost a peer waits for the watchdog's verdict on it (the
/// peer exited, crashed or gave up: a better error than the network's; the launcher
/// reaps a dead rank within milliseconds) before it reports the network's error (a peer
/// that is alive but unreachable).
pub(crate) const VERDICT_WAIT: Duration = Duration::from_secs(2);

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
            return Err(FabricError::PeerFailed(f));
        }
    }
    // A match, not `ok_or`: the error `ok_or` builds would be dropped on every send.
    let Some(lane_state) = lanes.get(lane) else {
        return Err(FabricError::BadLane {
            lane,
            lanes: caps.lanes,
        });
    };
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
    /// buffer is full; libfabric, sends its provider has not completed); it goes out on
    /// later sends, [`Transport::flush`] and [`Transport::poll`], so a sender must keep
    /// polling or flushing until `flush` says nothing is queued.
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

    /// Pushes out anything the transport queued (TCP partial writes; libfabric sends
    /// the provider has not completed). Returns whether anything is still queued. Once
    /// it returns `false`, every message accepted so far reaches its receiver through
    /// the receiver's calls alone: the sender need not call the transport again.
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

    /// [`Transport::poll`] for the messages of one sender, `peer`, only: a wait that
    /// knows which rank will answer looks there first (a whole round reads every local
    /// sender's rings). Transports that cannot tell senders apart cheaply poll them all.
    ///
    /// # Errors
    /// As [`Transport::poll`].
    fn poll_from(&self, peer: u32, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        let _ = peer;
        self.poll(f)
    }

    /// Sleeps until a message may have arrived, space was freed for a blocked sender,
    /// [`Transport::wake`] was called, or `timeout` passed.
    fn wait(&self, timeout: Duration);

    /// Wakes a thread sleeping in [`Transport::wait`] (used by the watchdog).
    fn wake(&self);

    /// Whether a send woke a receiver from its sleep since the last call. Such a receiver
    /// answers no sooner than its wake-up time, so its sender had better wait asleep
    /// than spin (spinning competes with the woken rank for a CPU). Transports that
    /// cannot tell return `false`.
    fn take_roused(&self) -> bool {
        false
    }

    /// The job's ranks on this host that are awake (not asleep in a wait), and how many
    /// of the others were last seen on this rank's CPU; asking also records this rank's
    /// CPU for the others (only waits ask). `None` when the transport cannot tell (waits
    /// then assume that every local rank is awake). Waits choose their pace from it
    /// ([`crate::Pace`]).
    fn awake_local(&self) -> Option<crate::Awake> {
        None
    }

    /// A helper thread of this rank (the progress thread) begins (`true`) or ends
    /// (`false`) a sleep in the transports: for [`Transport::awake_local`] as other ranks
    /// ask it, the rank is asleep only when its application's threads are (a rank whose
    /// progress thread sleeps while its application polls is awake).
    fn note_helper_sleep(&self, asleep: bool) {
        let _ = asleep;
    }

    /// This rank's thread begins (`true`) or ends (`false`) a sleep outside the
    /// transports (on a collective's flags in memory of its own), for
    /// [`Transport::awake_local`] as other ranks ask it.
    fn note_nap(&self, napping: bool) {
        let _ = napping;
    }

    /// Remote memory access through this transport, when its network offers it
    /// (libfabric providers with `FI_RMA`; shared memory's reads of a local peer's
    /// memory by cross-memory attach, where the start-up probe chose single copy, for
    /// reads only); `None` otherwise (TCP, libfabric without `FI_RMA`).
    fn rma(&self) -> Option<&dyn crate::Rma> {
        None
    }

    /// A descriptor that turns readable when this transport wants a sleeper woken, so
    /// that one sleep in another transport's [`Transport::wait_with`] covers both; `None`
    /// when it has none (shared memory has one: its bell).
    fn bell(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Announces a sleep elsewhere watching [`Transport::bell`] (senders ring the bell
    /// from now on); returns `false` when there is already something to do and the
    /// caller must not sleep. Always followed by [`Transport::end_sleep_elsewhere`].
    fn begin_sleep_elsewhere(&self) -> bool {
        true
    }

    /// Ends what [`Transport::begin_sleep_elsewhere`] began (and empties the bell).
    fn end_sleep_elsewhere(&self) {}

    /// [`Transport::wait`] that also returns when `bell` (another transport's
    /// [`Transport::bell`]) turns readable. A transport that cannot watch a descriptor
    /// naps for at most 1 ms instead.
    fn wait_with(&self, bell: BorrowedFd<'_>, timeout: Duration) {
        let _ = bell;
        self.wait(timeout.min(Duration::from_millis(1)));
    }
}
