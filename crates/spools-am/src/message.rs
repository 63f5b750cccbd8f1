//! What a handler sees ([`ActiveMessage`]), how a short message is handed over
//! ([`Delivery`]), and the logical channel it travels on ([`Channel`]).

use spools_fabric::Priority;
use spools_proto::am::FLAG_UNORDERED;

/// A message as a handler sees it.
#[derive(Debug)]
pub struct ActiveMessage<'a> {
    /// Sending rank.
    pub from: u32,
    /// Channel it travelled on.
    pub channel: u16,
    /// The four arguments.
    pub args: [u64; 4],
    /// The payload (empty for short messages), borrowed until the handler returns.
    pub payload: &'a [u8],
}

/// How a short message is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// Now: lowest latency.
    #[default]
    Immediate,
    /// Queued in host memory and handed over with others (at the batch size, or at
    /// [`Endpoint::flush`](crate::Endpoint::flush)): highest message rate.
    Batched,
}

/// A logical channel: an id the handler sees, a priority, and whether order matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channel {
    /// Channel id.
    pub id: u16,
    /// High priority: never stuck behind low-priority traffic.
    pub high: bool,
    /// Unordered: the runtime may deliver out of order (currently it never does).
    pub unordered: bool,
}

impl Channel {
    /// Channel `id`, low priority, ordered.
    pub fn new(id: u16) -> Channel {
        Channel {
            id,
            high: false,
            unordered: false,
        }
    }

    /// The same channel at high priority.
    pub fn high(mut self) -> Channel {
        self.high = true;
        self
    }

    /// The same channel, unordered.
    pub fn unordered(mut self) -> Channel {
        self.unordered = true;
        self
    }

    pub(crate) fn priority(self) -> Priority {
        if self.high {
            Priority::High
        } else {
            Priority::Low
        }
    }

    pub(crate) fn flags(self) -> u8 {
        if self.unordered {
            FLAG_UNORDERED
        } else {
            0
        }
    }
}
