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
