//! Where one target's window memory is, seen from this rank ([`Mem`]), and a byte range
//! of it ([`Run`]): what the local paths (`target.rs`) and the memory messages
//! (`remote.rs`) both address.

use spools::PeerBytes;

/// Where one target's window memory is, seen from this rank.
pub(crate) enum Mem {
    /// This rank's own window, at this address.
    Local(usize),
    /// A peer's segment mapped here (the window's bytes start at its pointer).
    Mapped(PeerBytes),
    /// A peer's memory, at `base` in process `pid`.
    Cma { pid: i32, base: usize },
    /// A peer on another host (or any peer with `SPOOLS_MPI_WIN_MESSAGES=1`): memory
    /// messages to job rank `rank` of `comm` (the world), naming the window `id`.
    Remote {
        comm: spools::Communicator,
        rank: u32,
        id: u64,
    },
}

/// A byte range of a target's window: (offset from the window's start, or an address
/// for a dynamic window; length).
pub(crate) type Run = (usize, usize);
