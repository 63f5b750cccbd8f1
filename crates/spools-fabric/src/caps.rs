//! What a transport offers: [`Priority`], the single-copy mechanism ([`SingleCopy`]) and
//! its capabilities ([`Caps`]).

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
    /// Only through the transport's buffers (sender copies in, receiver copies out):
    /// where kernel-assisted reads are refused, or one takes as long as two copies.
    None,
    /// Kernel-assisted: `process_vm_readv` between processes (the receiver of a
    /// rendezvous reads the sender's buffer), for every large transfer.
    Cma,
    /// Kernel-assisted for the transfers of collectives only, where every rank moves
    /// data at once and one copy per transfer halves each core's work; point-to-point
    /// transfers go through the transport's buffers, whose two copies run in parallel on
    /// two cores (chosen where one `process_vm_readv` is slower than one `memcpy` but
    /// faster than two).
    CmaCollectives,
}

impl SingleCopy {
    /// Whether a large transfer goes by one read of the sender's memory: every one under
    /// [`SingleCopy::Cma`], a collective's (`collective`) under
    /// [`SingleCopy::CmaCollectives`].
    ///
    /// ```
    /// use spools_fabric::SingleCopy;
    /// assert!(SingleCopy::Cma.reads(false));
    /// assert!(SingleCopy::CmaCollectives.reads(true));
    /// assert!(!SingleCopy::CmaCollectives.reads(false));
    /// assert!(!SingleCopy::None.reads(true));
    /// ```
    pub fn reads(self, collective: bool) -> bool {
        match self {
            SingleCopy::None => false,
            SingleCopy::Cma => true,
            SingleCopy::CmaCollectives => collective,
        }
    }
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
