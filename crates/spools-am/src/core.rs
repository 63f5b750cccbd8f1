//! The progress engine: routing, blocking sends with back-pressure, dispatch of incoming
//! messages, and completion of memory operations.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_fabric::{Backoff, FabricError, Incoming, Priority, Transport};
use spools_proto::am::{
    AmHeader, GetData, Short, Status, StatusCode, StatusOp, FLAG_LAST, GET_DATA_HEADER_LEN,
    SHORT_LEN,
};

use crate::region::{RegionMem, Regions};
use crate::registry::Registry;
use crate::{ActiveMessage, AmError};

/// Longest single sleep in a wait; waits re-check the watchdog at least this often.
pub(crate) const NAP: Duration = Duration::from_millis(50);

/// Which transport reaches a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// This rank itself.
    Local,
    /// Shared memory.
    Shm,
    /// TCP.
    Tcp,
}

pub(crate) struct OpState {
    /// A get (data comes back) rather than a put (only a status).
    pub(crate) is_get: bool,
    pub(crate) done: bool,
    pub(crate) code: StatusCode,
    /// Destination of a get: address and length of the caller's buffer.
    pub(crate) dest: usize,
    pub(crate) len: usize,
}

/// Work the progress engine owes a peer (acknowledgements, get data) that did not fit in
/// the peer's buffer yet.
enum Deferred {
    Status(u32, Status),
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
const MAX_HELD_BYTES: usize = 64 << 20;

#[derive(Default)]
pub(crate) struct PollState {
    reasm: HashMap<(u32, u16, u8), Vec<u8>>,
    deferred: VecDeque<Deferred>,
    /// Messages for handler ids beyond this rank's table: a peer that finished
    /// `sync_handlers` first may send before this rank has installed the table. They are
    /// dispatched again once the table grows.
    held: Vec<(u32, u16, Priority, Vec<u8>)>,
    held_bytes: usize,
    held_at_table: usize,
    /// The handler table as of registry generation `handlers_gen`.
    handlers: Arc<Vec<Option<crate::registry::Handler>>>,
    handlers_gen: usize,
}

pub(crate) struct Core {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) cfg: Config,
    pub(crate) boot: Arc<Bootstrap>,
    pub(crate) shm: Option<Arc<dyn Transport>>,
    pub(crate) tcp: Option<Arc<dyn Transport>>,
    pub(crate) routes: Vec<Route>,
    /// The transports some route uses (the only ones worth polling).
    pub(crate) active: Vec<Arc<dyn Transport>>,
    pub(crate) uses_tcp: bool,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) regions: Arc<Regions>,
    pub(crate) next_key: AtomicU32,
    pub(crate) ops: Mutex<HashMap<u32, OpState>>,
    pub(crate) next_token: AtomicU32,
    pub(crate) errors: Mutex<VecDeque<AmError>>,
    pub(crate) poll: Mutex<PollState>,
    pub(crate) self_queue: Mutex<VecDeque<(u16, Priority, Vec<u8>)>>,
    /// Messages in `self_queue` (checked without the lock).
    pub(crate) self_pending: AtomicUsize,
    /// Errors in `errors` (checked without the lock).
    pub(crate) error_count: AtomicUsize,
    /// Length of the global handler table (checked without the registry lock).
    pub(crate) table_len: AtomicUsize,
    /// Bumped whenever handlers are registered or the table is installed.
    pub(crate) registry_gen: AtomicUsize,
    pub(crate) spin: Duration,
    pub(crate) oversubscribed: bool,
    /// Chunk size of fragmented transfers through shared memory.
    pub(crate) fragment: usize,
    /// Chunk size of fragmented transfers through TCP.
    pub(crate) fragment_tcp: usize,
    /// Work of upper layers run at the end of every progress round (see `Worker::add_poller`).
    pub(crate) pollers: RwLock<Vec<Poller>>,
    /// Whether `pollers` is non-empty (checked without the lock).
    pub(crate) has_pollers: std::sync::atomic::AtomicBool,
}

/// Work an upper layer adds to every progress round; returns how much it did. It runs on
/// the thread that progresses, under the progress lock: it must not block.
pub type Poller = Arc<dyn Fn() -> Result<usize, AmError> + Send + Sync>;

impl Core {
    pub(crate) fn transport(&self, peer: u32) -> Result<&Arc<dyn Transport>, AmError> {
        let t = match self.routes.get(peer as usize) {
            Some(Route::Shm) => self.shm.as_ref(),
            Some(Route::Tcp) => self.tcp.as_ref(),
            Some(Route::Local) => None,
            None => {
                return Err(AmError::BadRank {
                    rank: peer,
                    size: self.size,
                })
            }
        };
        t.ok_or(AmError::Fabric(FabricError::Unreachable(peer)))
    }

    /// Chunk size of fragmented transfers to `peer`.
    pub(crate) fn fragment_for(&self, peer: u32) -> usize {
        match self.routes.get(peer as usize) {
            Some(Route::Tcp) => self.fragment_tcp,
            _ => self.fragment,
        }
    }

    pub(crate) fn check_rank(&self, peer: u32) -> Result<(), AmError> {
        if peer >= self.size {
            return Err(AmError::BadRank {
                rank: peer,
                size: self.size,
            });
        }
        Ok(())
    }

    /// Sends one message, waiting (and serving incoming traffic) while the peer is full.
    pub(crate) fn send_raw(
        &self,
        lane: usize,
        prio: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<(), AmError> {
        if peer == self.rank {
            self.check_rank(peer)?;
            self.self_queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back((lane as u16, prio, parts.concat()));
            self.self_pending.fetch_add(1, Ordering::Release);
            return Ok(());
        }
        let t = self.transport(peer)?;
        if t.try_send(lane, prio, peer, parts)? {
            return Ok(());
        }
        let mut backoff = Backoff::new(self.spin, self.oversubscribed);
        loop {
            // Serve our own incoming traffic while the peer is full, so that two ranks
            // flooding each other both make progress.
            if self.progress()? > 0 {
                backoff.reset();
            }
            if t.try_send(lane, prio, peer, parts)? {
                return Ok(());
            }
            if !backoff.spin() {
                t.wait(NAP);
            }
        }
    }

    /// Waits until `done()` holds, driving progress: spin, then sleep until woken.
    /// Fails when `peer` dies (or, with no peer, when any rank does). With
    /// `report_async`, errors that targets sent back (unknown handlers) end the wait too.
    pub(crate) fn wait_until(
        &self,
        done: impl FnMut() -> bool,
        peer: Option<u32>,
        report_async: bool,
    ) -> Result<(), AmError> {
        self.wait_until_or(done, || false, peer, report_async)
            .map(|_| ())
    }

    /// [`Core::wait_until`] that also gives up, returning `Ok(false)`, when `stop()`
    /// holds while nothing progresses (checked before each sleep).
    pub(crate) fn wait_until_or(
        &self,
        mut done: impl FnMut() -> bool,
        mut stop: impl FnMut() -> bool,
        peer: Option<u32>,
        report_async: bool,
    ) -> Result<bool, AmError> {
        let mut backoff = Backoff::new(self.spin, self.oversubscribed);
        loop {
            if done() {
                return Ok(true);
            }
            let n = self.progress()?;
            if report_async {
                if let Some(e) = self.take_error() {
                    return Err(e);
                }
            }
            if n > 0 {
                backoff.reset();
                continue;
            }
            let failure = match peer {
                Some(p) => self.boot.state().failure_of(p),
                None => self.boot.state().any_failure(),
            };
            if let Some(f) = failure {
                return Err(AmError::Fabric(FabricError::PeerFailed(f.to_string())));
            }
            if stop() {
                return Ok(false);
            }
            if !backoff.spin() {
                self.sleep(NAP);
            }
        }
    }

    /// Sleeps on the transport this rank receives most from.
    pub(crate) fn sleep(&self, timeout: Duration) {
        match (&self.shm, &self.tcp) {
            (Some(s), Some(t)) if self.routes.contains(&Route::Tcp) => {
                if self.routes.contains(&Route::Shm) {
                    // Both in use: alternate short sleeps.
                    s.wait(Duration::from_millis(1).min(timeout));
                    t.wait(Duration::from_millis(1).min(timeout));
                } else {
                    t.wait(timeout)
                }
            }
            (Some(s), _) => s.wait(timeout),
            (None, Some(t)) => t.wait(timeout),
            (None, None) => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }

    pub(crate) fn wake_waiters(&self) {
        if let Some(s) = &self.shm {
            s.wake();
        }
        if let Some(t) = &self.tcp {
            t.wake();
        }
    }

    /// Runs handlers for waiting messages and sends owed replies; returns how many
    /// messages were handled. Only one thread progresses at a time; others get `Ok(0)`.
    pub(crate) fn progress(&self) -> Result<usize, AmError> {
        let mut ps = match self.poll.try_lock() {
            Ok(g) => g,
            // A handler panicked on another thread: the state is still consistent (the
            // message being handled is simply gone), so carry on.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(0),
        };
        let mut n = 0;
        let mut completed = false;
        let mut err = None;
        let gen = self.registry_gen.load(Ordering::Acquire);
        if gen != ps.handlers_gen {
            ps.handlers = self
                .registry
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .snapshot();
            ps.handlers_gen = gen;
        }
        if !ps.held.is_empty() && ps.handlers.len() > ps.held_at_table {
            let held = std::mem::take(&mut ps.held);
            ps.held_bytes = 0;
            for (from, lane, priority, bytes) in held {
                n += 1;
                let inc = Incoming {
                    from,
                    lane,
                    priority,
                    bytes: &bytes,
                };
                if let Err(e) = self.dispatch(&mut ps, inc, &mut completed) {
                    err.get_or_insert(e);
                }
            }
        }
        let own: Vec<_> = if self.self_pending.load(Ordering::Acquire) > 0 {
            let mut q = self
                .self_queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.self_pending.store(0, Ordering::Release);
            q.drain(..).collect()
        } else {
            Vec::new()
        };
        for (lane, priority, bytes) in own {
            n += 1;
            let inc = Incoming {
                from: self.rank,
                lane,
                priority,
                bytes: &bytes,
            };
            if let Err(e) = self.dispatch(&mut ps, inc, &mut completed) {
                err.get_or_insert(e);
            }
        }
        for t in self.active.iter() {
            n += t.poll(&mut |inc| {
                if let Err(e) = self.dispatch(&mut ps, inc, &mut completed) {
                    err.get_or_insert(e);
                }
            })?;
        }
        if !ps.deferred.is_empty() {
            self.send_deferred(&mut ps)?;
        }
        if self.has_pollers.load(Ordering::Acquire) {
            // Pollers never register pollers, so the read lock can be held while they
            // run (no allocation per round).
            let pollers = self.pollers.read().unwrap_or_else(PoisonError::into_inner);
            for p in pollers.iter() {
                match p() {
                    Ok(k) => n += k,
                    Err(e) => {
                        err.get_or_insert(e);
                    }
                }
            }
        }
        if self.uses_tcp {
            if let Some(t) = &self.tcp {
                t.flush(0)?;
            }
        }
        // Wake threads sleeping on a condition a handler or a completion may have set
        // (cheap when nobody sleeps).
        if completed || n > 0 {
            self.wake_waiters();
        }
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    fn defer_status(&self, ps: &mut PollState, peer: u32, st: Status) {
        ps.deferred.push_back(Deferred::Status(peer, st));
    }

    fn send_deferred(&self, ps: &mut PollState) -> Result<(), AmError> {
        while let Some(d) = ps.deferred.front_mut() {
            let more = match d {
                Deferred::Status(peer, st) => {
                    let mut b = Vec::with_capacity(8);
                    AmHeader::Status(*st).encode(&mut b);
                    !self.try_send_lane0(Priority::High, *peer, &[&b])?
                }
                Deferred::GetStream {
                    peer,
                    token,
                    mem,
                    offset,
                    len,
                    sent,
                } => {
                    let mut stalled = false;
                    loop {
                        let chunk = (*len - *sent).min(self.fragment_for(*peer));
                        let last = *sent + chunk == *len;
                        let mut h = Vec::with_capacity(GET_DATA_HEADER_LEN);
                        AmHeader::GetData(GetData {
                            token: *token,
                            chunk: *sent as u64,
                            flags: if last { FLAG_LAST } else { 0 },
                        })
                        .encode(&mut h);
                        let data = mem.slice(*offset + *sent, chunk);
                        if !self.try_send_lane0(Priority::Low, *peer, &[&h, data])? {
                            stalled = true;
                            break;
                        }
                        *sent += chunk;
                        if last {
                            break;
                        }
                    }
                    stalled
                }
            };
            if more {
                break;
            }
            ps.deferred.pop_front();
        }
        Ok(())
    }

    /// The region `key` if `len` bytes at `offset` lie inside it; else the status that
    /// refuses the access (nothing is touched).
    fn region_range(&self, key: u32, offset: u64, len: u64) -> Result<Arc<RegionMem>, StatusCode> {
        let mem = self
            .regions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()
            .ok_or(StatusCode::UnknownRegion)?;
        match offset.checked_add(len) {
            Some(end) if end <= mem.len() as u64 => Ok(mem),
            _ => Err(StatusCode::OutOfBounds),
        }
    }

    pub(crate) fn try_send_lane0(
        &self,
        prio: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, AmError> {
        if peer == self.rank {
            self.self_queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back((0, prio, parts.concat()));
            self.self_pending.fetch_add(1, Ordering::Release);
            return Ok(true);
        }
        let t = self.transport(peer)?;
        match t.try_send(0, prio, peer, parts) {
            Ok(sent) => Ok(sent),
            // A dead peer no longer needs its replies.
            Err(FabricError::PeerFailed(_)) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// Keeps a message for a handler id beyond the local table until the table grows;
    /// returns false (the message is then an error) when too many are held.
    fn hold(&self, ps: &mut PollState, inc: &Incoming<'_>) -> bool {
        if ps.held_bytes + inc.bytes.len() > MAX_HELD_BYTES {
            return false;
        }
        ps.held_bytes += inc.bytes.len();
        ps.held_at_table = ps.handlers.len();
        ps.held
            .push((inc.from, inc.lane, inc.priority, inc.bytes.to_vec()));
        true
    }

    #[inline]
    fn run_short(&self, from: u32, s: &Short, ps: &mut PollState) {
        match ps.handlers.get(s.handler as usize).and_then(Option::as_ref) {
            Some(h) => {
                h(&ActiveMessage {
                    from,
                    channel: s.channel,
                    args: s.args,
                    payload: &[],
                });
            }
            None => {
                self.defer_status(
                    ps,
                    from,
                    Status {
                        op: StatusOp::Message,
                        code: StatusCode::UnknownHandler,
                        token: s.handler,
                    },
                );
            }
        }
    }

    fn dispatch(
        &self,
        ps: &mut PollState,
        inc: Incoming<'_>,
        completed: &mut bool,
    ) -> Result<(), AmError> {
        let from = inc.from;
        let (hdr, payload) = AmHeader::decode(inc.bytes).map_err(|e| AmError::Protocol {
            peer: from,
            what: e.to_string(),
        })?;
        // Decide from the same table snapshot the handlers run from; and while a message of
        // this stream (sender, lane, priority) is held, hold the ones after it too, so that
        // nothing overtakes it.
        let table = ps.handlers.len();
        let holding = ps
            .held
            .iter()
            .any(|h| h.0 == from && h.1 == inc.lane && h.2 == inc.priority);
        let beyond_table = |id: u32| holding || id as usize >= table;
        match hdr {
            AmHeader::Short(s) => {
                if beyond_table(s.handler) && self.hold(ps, &inc) {
                    return Ok(());
                }
                self.run_short(from, &s, ps)
            }
            AmHeader::Batch { .. } => {
                // The decoder checked that the payload is whole records. Hold the batch if
                // any record names a handler beyond the table; else run them in order.
                let beyond = payload
                    .chunks_exact(SHORT_LEN)
                    .any(|r| beyond_table(u32::from_le_bytes([r[4], r[5], r[6], r[7]])));
                if beyond && self.hold(ps, &inc) {
                    return Ok(());
                }
                for rec in payload.chunks_exact(SHORT_LEN) {
                    let Ok(rec) = <&[u8; SHORT_LEN]>::try_from(rec) else {
                        continue;
                    };
                    let s = Short::from_array(rec).map_err(|e| AmError::Protocol {
                        peer: from,
                        what: e.to_string(),
                    })?;
                    self.run_short(from, &s, ps);
                }
            }
            AmHeader::Bulk(b) => {
                // A peer's announced total is bounded by this rank's own bulk limit, so
                // reassembly never grows past it.
                if u64::from(b.total) > self.cfg.bulk_limit {
                    return Err(AmError::Protocol {
                        peer: from,
                        what: format!(
                            "bulk message of {} bytes exceeds the bulk limit of {}",
                            b.total, self.cfg.bulk_limit
                        ),
                    });
                }
                if beyond_table(b.handler) && self.hold(ps, &inc) {
                    return Ok(());
                }
                let key = (from, inc.lane, inc.priority as u8);
                let whole;
                let body: &[u8] = if b.offset == 0 && payload.len() == b.total as usize {
                    payload
                } else {
                    let buf = ps.reasm.entry(key).or_default();
                    if buf.len() != b.offset as usize {
                        ps.reasm.remove(&key);
                        return Err(AmError::Protocol {
                            peer: from,
                            what: format!("bulk fragment at offset {} out of sequence", b.offset),
                        });
                    }
                    buf.extend_from_slice(payload);
                    if buf.len() < b.total as usize {
                        return Ok(());
                    }
                    whole = ps.reasm.remove(&key).unwrap_or_default();
                    &whole
                };
                match ps
                    .handlers
                    .get(b.handler as usize)
                    .and_then(Option::as_ref)
                    .cloned()
                {
                    Some(h) => {
                        h(&ActiveMessage {
                            from,
                            channel: b.channel,
                            args: b.args,
                            payload: body,
                        });
                    }
                    None => {
                        self.defer_status(
                            ps,
                            from,
                            Status {
                                op: StatusOp::Message,
                                code: StatusCode::UnknownHandler,
                                token: b.handler,
                            },
                        );
                    }
                }
            }
            AmHeader::Put(p) => {
                let code = match self.region_range(p.key, p.offset, p.total) {
                    Ok(m) => {
                        m.write_at((p.offset + p.chunk) as usize, payload);
                        StatusCode::Ok
                    }
                    Err(code) => code,
                };
                if p.flags & FLAG_LAST != 0 {
                    let st = Status {
                        op: StatusOp::Put,
                        code,
                        token: p.token,
                    };
                    self.defer_status(ps, from, st);
                }
            }
            AmHeader::Get(g) => match self.region_range(g.key, g.offset, g.len) {
                Ok(mem) => ps.deferred.push_back(Deferred::GetStream {
                    peer: from,
                    token: g.token,
                    mem,
                    offset: g.offset as usize,
                    len: g.len as usize,
                    sent: 0,
                }),
                Err(code) => {
                    let st = Status {
                        op: StatusOp::Get,
                        code,
                        token: g.token,
                    };
                    self.defer_status(ps, from, st);
                }
            },
            AmHeader::GetData(d) => {
                let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
                // An unknown token is a get its initiator gave up on: drop the data. Data for
                // a put's token is malformed.
                if let Some(op) = ops.get_mut(&d.token).filter(|op| op.is_get) {
                    let end = d.chunk.checked_add(payload.len() as u64);
                    if end.is_none_or(|e| e > op.len as u64) {
                        op.done = true;
                        op.code = StatusCode::Malformed;
                    } else {
                        if !payload.is_empty() {
                            // SAFETY: `dest` is the buffer of a get() call that is still
                            // waiting (it removes its op before returning), and the
                            // non-empty range lies inside it (checked above).
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    payload.as_ptr(),
                                    (op.dest as *mut u8).add(d.chunk as usize),
                                    payload.len(),
                                );
                            }
                        }
                        if d.flags & FLAG_LAST != 0 {
                            op.done = true;
                            op.code = StatusCode::Ok;
                        }
                    }
                    *completed |= op.done;
                }
            }
            AmHeader::Status(st) => match st.op {
                StatusOp::Put | StatusOp::Get => {
                    let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
                    let want_get = st.op == StatusOp::Get;
                    if let Some(op) = ops.get_mut(&st.token).filter(|op| op.is_get == want_get) {
                        op.done = true;
                        op.code = st.code;
                        *completed = true;
                    }
                }
                StatusOp::Message => {
                    let name = self
                        .registry
                        .read()
                        .unwrap_or_else(PoisonError::into_inner)
                        .name(st.token);
                    self.push_error(AmError::NoHandlerAtTarget {
                        peer: from,
                        id: st.token,
                        name,
                    });
                    *completed = true;
                }
            },
        }
        Ok(())
    }

    /// Records an error for the next `poll` to return.
    pub(crate) fn push_error(&self, e: AmError) {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(e);
        self.error_count.fetch_add(1, Ordering::Release);
    }

    /// Takes the oldest recorded error.
    pub(crate) fn take_error(&self) -> Option<AmError> {
        if self.error_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let e = self
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if e.is_some() {
            self.error_count.fetch_sub(1, Ordering::Release);
        }
        e
    }
}
