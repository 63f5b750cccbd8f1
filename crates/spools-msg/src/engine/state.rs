//! The [`Engine`] of one rank and its lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use spools_am::{bump, RankGuard, RankLock};

use spools_am::{AmError, Channel, Endpoint, HandlerId, Worker};

use crate::error::MsgError;
use crate::protocol::wire::CTX_STRIDE;
use crate::protocol::{Limits, Protocol};
use crate::rpc::table::RpcTable;

/// The ordered channel of eager messages, RTS and data.
pub(super) const ORDERED: Channel = Channel {
    id: 0,
    high: false,
    unordered: false,
};

/// Most communicators whose collective counts are kept (freed ones are forgotten first).
const MAX_TRACKED: usize = spools_proto::boot::MAX_COMMUNICATORS as usize;

/// How many entries a full list is pruned down to (oldest freed ones first): pruning
/// walks the whole list, so it makes room for many creations at once, not for one.
const TRACKED_AFTER_PRUNE: usize = MAX_TRACKED / 2;

/// Drops the oldest entries of freed communicators (counters nobody else holds) from
/// `list` until it holds at most `keep` entries or none of them is freed.
fn forget_freed(list: &mut Vec<(u32, Arc<AtomicU32>)>, keep: usize) {
    let mut excess = list.len().saturating_sub(keep);
    list.retain(|(_, k)| {
        let drop_it = excess > 0 && Arc::strong_count(k) == 1;
        excess -= usize::from(drop_it);
        !drop_it
    });
}

/// The active-message layer's ids of the engine's handlers.
#[derive(Clone, Copy)]
pub(super) struct HandlerIds {
    pub(super) short: HandlerId,
    pub(super) eager: HandlerId,
    pub(super) rts: HandlerId,
    pub(super) cts: HandlerId,
    pub(super) data: HandlerId,
}

/// Handler names, registered on every rank.
pub(super) const SHORT_HANDLER: &str = "spools.msg.short";
pub(super) const EAGER_HANDLER: &str = "spools.msg.eager";
pub(super) const RTS_HANDLER: &str = "spools.msg.rts";
pub(super) const CTS_HANDLER: &str = "spools.msg.cts";
pub(super) const DATA_HANDLER: &str = "spools.msg.data";

/// An RPC reply the poller owes.
pub(super) struct Reply {
    pub(super) to: u32,
    pub(super) call: u32,
    pub(super) data: Vec<u8>,
}

/// What the engine's lock guards.
pub(super) struct Locked {
    pub(super) protocol: Protocol,
    /// RPC replies to send, in order.
    pub(super) replies: VecDeque<Reply>,
}

/// The engine of one rank (shared by all its communicators).
pub(crate) struct Engine {
    pub(crate) worker: Worker,
    /// The endpoint tagged messages leave by, and the protocol's state: behind a mutex,
    /// or owned by the rank's one thread at thread level single or funneled.
    pub(super) endpoint: RankLock<Endpoint>,
    pub(super) locked: RankLock<Locked>,
    /// Nonzero when the poller has something to send (checked without the lock).
    pub(super) pending_output: Arc<AtomicUsize>,
    /// Operations completed so far: waiters look their operation up only when it moved.
    pub(super) completions: AtomicU64,
    /// How many messages of collective contexts were queued as unexpected (a waiting
    /// schedule looks at them only when this moved: `Schedule::spot_gone`).
    pub(super) early: AtomicU64,
    pub(super) handler_ids: OnceLock<HandlerIds>,
    /// The protocol's size limits (also outside the lock, for the sending fast path).
    pub(crate) limits: Limits,
    pub(super) next_rpc_call: AtomicU32,
    /// The next free communicator context (a multiple of `protocol::wire::CTX_STRIDE`), as this
    /// rank knows it.
    pub(crate) next_ctx: AtomicU32,
    /// How many communicators this rank made as the leader of a non-blocking dup
    /// (`Communicator::idup`), whose contexts are its own (`create::LEADER_BASE`).
    pub(crate) led_dups: AtomicU32,
    /// How many communicators of this rank are alive (each with contexts of its own:
    /// views and clones share one; [`crate::comm_core::Lease`]).
    pub(crate) live_comms: Arc<AtomicU32>,
    /// Host index of every job rank (ranks with the same index share a host).
    pub(crate) hosts: Vec<u32>,
    pub(crate) rpc: RpcTable,
    /// Whether the non-blocking collectives' poller was added to this engine's worker
    /// (`coll::poller`).
    pub(crate) coll_poller: std::sync::atomic::AtomicBool,
    /// Collectives started per collective context, for every communicator made here.
    pub(super) collectives: Mutex<Vec<(u32, Arc<AtomicU32>)>>,
    /// Messages and bytes this rank sent to ranks on other hosts (a statistic for tests:
    /// it shows which path a host-aware collective took).
    pub(super) cross_host: [AtomicU64; 2],
    /// Tagged messages (short, eager, request-to-send; RPC calls too, not their replies,
    /// which a finalising rank still sends) sent to each job rank, reported when this
    /// rank finalises (end of data).
    pub(super) sent: Vec<AtomicU64>,
    /// Tagged messages arrived from each job rank, counted after the protocol took
    /// them in: once it equals what a finalised rank sent, nothing more comes from it.
    pub(super) arrived: Vec<AtomicU64>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    pub(super) fn lock_state(&self) -> RankGuard<'_, Locked> {
        self.locked.lock()
    }

    /// Runs `f` on the protocol under the lock, then publishes what it produced.
    pub(super) fn with_protocol<R>(&self, f: impl FnOnce(&mut Protocol) -> R) -> R {
        let mut g = self.lock_state();
        let r = f(&mut g.protocol);
        self.publish(&mut g.protocol);
        r
    }

    /// Reads the protocol under the lock (nothing changes, nothing to publish).
    pub(super) fn read_protocol<R>(&self, f: impl FnOnce(&Protocol) -> R) -> R {
        f(&self.lock_state().protocol)
    }

    /// Ends the loans of sends that are over, then tells waiters that operations
    /// completed, and the poller that output is queued. Called under the lock.
    pub(super) fn publish(&self, p: &mut Protocol) {
        self.end_loans(p);
        let n = p.take_completed();
        if n != 0 {
            bump(
                &self.completions,
                n,
                self.locked.is_owned(),
                Ordering::Release,
            );
        }
        let early = p.take_early();
        if early != 0 {
            bump(
                &self.early,
                early,
                self.locked.is_owned(),
                Ordering::Release,
            );
        }
        if p.take_new_output() {
            self.pending_output.fetch_add(1, Ordering::Release);
        }
    }

    pub(super) fn handler_ids(&self) -> Result<HandlerIds, MsgError> {
        self.handler_ids
            .get()
            .copied()
            .ok_or_else(|| MsgError::Am(AmError::UnknownHandlerName(SHORT_HANDLER.into())))
    }

    /// How many operations have completed (and collectives' messages came early, see
    /// `RecvSide`): a waiter rechecks its operation only when this moved.
    pub(crate) fn generation(&self) -> u64 {
        self.completions.load(Ordering::Acquire)
    }

    /// How many messages of collective contexts came early (were queued as unexpected).
    pub(crate) fn early_count(&self) -> u64 {
        self.early.load(Ordering::Acquire)
    }

    /// A new RPC call id (the tag of its call and of its reply).
    pub(crate) fn new_rpc_call_id(&self) -> u32 {
        self.next_rpc_call.fetch_add(1, Ordering::Relaxed) & 0x7FFF_FFFF
    }

    /// A counter of the collectives started in collective context `ctx`, reported by
    /// [`Engine::collectives_started`] even after its communicator is dropped (a freed
    /// communicator's count is final: this rank never starts another collective there).
    pub(crate) fn track_collectives(&self, ctx: u32) -> Arc<AtomicU32> {
        let c = Arc::new(AtomicU32::new(0));
        let mut list = lock(&self.collectives);
        if list.len() >= MAX_TRACKED {
            // Pruning walks the whole list, so it makes room for many creations at once:
            // a program that makes and frees communicators without end (a persistent
            // collective's private one each) pays one walk per many creations.
            forget_freed(&mut list, TRACKED_AFTER_PRUNE - 1);
        }
        list.push((ctx, c.clone()));
        c
    }

    /// Counts a message of `len` bytes to job rank `dest` if `dest` runs on another host.
    pub(super) fn count_cross_host(&self, dest: u32, len: usize) {
        let me = self.worker.rank() as usize;
        if self.hosts.get(dest as usize) != self.hosts.get(me) {
            self.cross_host[0].fetch_add(1, Ordering::Relaxed);
            self.cross_host[1].fetch_add(len as u64, Ordering::Relaxed);
        }
    }

    /// Counts a tagged message sent to job rank `dest`.
    pub(super) fn count_sent(&self, dest: u32) {
        if let Some(c) = self.sent.get(dest as usize) {
            bump(c, 1, self.locked.is_owned(), Ordering::Relaxed);
        }
    }

    /// Counts a tagged message from job rank `from` in context `ctx` that the protocol
    /// has taken in (RPC replies are not counted: a rank serves calls, and replies, after
    /// it announced that it finalises).
    pub(super) fn count_arrived(&self, from: u32, ctx: u32) {
        if ctx == crate::protocol::wire::RPC_REPLY_CTX {
            return;
        }
        if let Some(c) = self.arrived.get(from as usize) {
            bump(c, 1, self.locked.is_owned(), Ordering::Release);
        }
    }

    /// (job rank, tagged messages sent to it) for every rank sent any.
    pub(crate) fn messages_sent(&self) -> Vec<(u32, u64)> {
        self.sent
            .iter()
            .enumerate()
            .filter_map(|(r, c)| {
                let n = c.load(Ordering::SeqCst);
                (n > 0).then_some((r as u32, n))
            })
            .collect()
    }

    /// End of data for receive `id` from one job rank: `Some((rank, sent))` once that
    /// rank finalised and every message it sent this rank has arrived, while the receive
    /// is still unmatched, so that no message can ever match it. `None` while the source
    /// may still send, and for a receive from any source (another thread of this rank
    /// may send to it).
    pub(crate) fn orphaned_recv(&self, id: u64) -> Option<(u32, u64)> {
        let health = self.worker.bootstrap().state();
        let src = self.read_protocol(|p| p.recv_source(id))?;
        let sent = health.end_of_data(src)?;
        let arrived = self.arrived.get(src as usize)?.load(Ordering::Acquire);
        // Every message from it was taken in before the count was read: if the receive
        // is still unmatched now, nothing will match it.
        (arrived >= sent && self.read_protocol(|p| p.recv_unmatched(id))).then_some((src, sent))
    }

    /// (messages, bytes) this rank sent to ranks on other hosts so far.
    pub(crate) fn cross_host_sends(&self) -> (u64, u64) {
        (
            self.cross_host[0].load(Ordering::Relaxed),
            self.cross_host[1].load(Ordering::Relaxed),
        )
    }

    /// (collective context, collectives started) of every communicator this rank made,
    /// its non-blocking collectives' context included: that one's count is made at its
    /// first non-blocking collective (`CommCore::nonblocking`), so a communicator that
    /// has none says 0 there (a rank waiting in one learns this rank never joins it).
    pub(crate) fn collectives_started(&self) -> Vec<(u32, u32)> {
        let list = lock(&self.collectives);
        let mut out: Vec<(u32, u32)> = list
            .iter()
            .map(|(ctx, c)| (*ctx, c.load(Ordering::SeqCst)))
            .collect();
        let known: std::collections::HashSet<u32> = list.iter().map(|(c, _)| *c).collect();
        for (ctx, _) in list.iter() {
            // A blocking collectives' context (`ctx + 1` of a stride-aligned one) and
            // its non-blocking one, `ctx + 3`.
            let nb = ctx + 2;
            if ctx % CTX_STRIDE == 1 && !known.contains(&nb) && out.len() < MAX_TRACKED {
                out.push((nb, 0));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    use super::forget_freed;

    #[test]
    fn forgetting_drops_the_oldest_freed_entries_only_down_to_the_mark() {
        // Contexts 0..10; the even ones are live (a communicator still holds them).
        let held: Vec<_> = (0..10).map(|_| Arc::new(AtomicU32::new(0))).collect();
        let mut list: Vec<_> = held
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u32, c.clone()))
            .collect();
        let live: Vec<_> = held.into_iter().step_by(2).collect();
        forget_freed(&mut list, 7);
        let ctxs: Vec<u32> = list.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            ctxs,
            [0, 2, 4, 6, 7, 8, 9],
            "freed 1, 3, 5 go first, oldest first"
        );
        forget_freed(&mut list, 2);
        let ctxs: Vec<u32> = list.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            ctxs,
            [0, 2, 4, 6, 8],
            "live entries stay even past the mark"
        );
        drop(live);
    }
}
