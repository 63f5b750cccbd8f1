//! What the progress engine keeps between rounds: reassembly buffers, replies it owes
//! peers that had no room yet, and messages held for handler ids not yet in the table.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use spools_fabric::Priority;
use spools_proto::am::AmHeader;

use crate::poller::Poller;
use crate::region::RegionMem;
use crate::registry::Handler;

/// Work the progress engine owes a peer (acknowledgements, get data) that did not fit in
/// the peer's buffer yet.
pub(crate) enum Deferred {
    /// A short answer (a status, a region's network key) owed to a peer.
    Reply(u32, AmHeader),
    GetStream {
        peer: u32,
        token: u32,
        mem: Arc<RegionMem>,
        offset: usize,
        len: usize,
        sent: usize,
    },
}

/// Most bytes held for handler ids this rank's table does not have yet; beyond, such
/// messages are refused as unknown handlers.
pub(crate) const MAX_HELD_BYTES: usize = 64 << 20;

#[derive(Default)]
pub(crate) struct PollState {
    pub(crate) reasm: HashMap<(u32, u16, u8), Vec<u8>>,
    pub(crate) deferred: VecDeque<Deferred>,
    /// Regions peers are accessing one-sidedly, by (peer, token of its ask): kept, memory
    /// and registration, until the peer says it is done, even if withdrawn meanwhile.
    pub(crate) leases: HashMap<(u32, u32), Arc<RegionMem>>,
    /// Messages for handler ids beyond this rank's table: a peer that finished
    /// `sync_handlers` first may send before this rank has installed the table. They are
    /// dispatched again once the table grows.
    pub(crate) held: Vec<(u32, u16, Priority, Vec<u8>)>,
    pub(crate) held_bytes: usize,
    pub(crate) held_at_table: usize,
    /// The handler table as of registry generation `handlers_gen`.
    pub(crate) handlers: Arc<Vec<Option<Handler>>>,
    pub(crate) handlers_gen: usize,
    /// Upper layers' pollers, as of `pollers_seen` pollers added (see `Core::pollers`).
    pub(crate) pollers: Vec<Poller>,
    pub(crate) pollers_seen: usize,
}
