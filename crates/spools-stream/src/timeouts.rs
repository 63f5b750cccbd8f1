//! How long a link's set-up may take, on either side.

use std::time::Duration;

/// Time a link has to connect (to be accepted by the receiver's host): a destination that
/// does not answer (a firewall dropping the packets, a host that is down) fails with
/// [`SendError::Connect`](crate::SendError::Connect) after it, not after the operating system's minutes.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Time a sender has for the secret handshake once it said hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Time a [`Sender`](crate::Sender)'s link waits on a receiver that takes nothing (no byte
/// of a write, no ack while the window is full, not its end while the link finishes)
/// before it fails with [`SendError::Stalled`](crate::SendError::Stalled): 60 seconds by
/// default (`spools send --stall-timeout`; see [`crate::Sender::with_stall_timeout`]).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(60);
