//! How long a link's set-up may take, on either side.

use std::time::Duration;

/// Time a link has to connect (to be accepted by the receiver's host): a destination that
/// does not answer (a firewall dropping the packets, a host that is down) fails with
/// [`SendError::Connect`](crate::SendError::Connect) after it, not after the operating system's minutes.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Time a sender has for the secret handshake once it said hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
