//! The tagged-message engine of one rank: the three protocols over the comm layer.
//!
//! - *short*: up to `short_limit` (24 B) inline in one short active message;
//! - *eager*: up to `eager_limit` in one bulk active message, which lands in the
//!   receiver's pre-allocated ring (or socket buffer); the handler copies it straight into
//!   a matching posted receive, or else into a pooled buffer queued as unexpected;
//! - *rendezvous*: a request-to-send (RTS) short message; once matched, the receiver
//!   answers clear-to-send (CTS) and the sender streams the data straight from its buffer,
//!   in one-fragment chunks, into the receiver's buffer (pipelined through the transport).
//!
//! Handlers run under the comm layer's progress lock and never send; what they decide
//! (CTS, data chunks, RPC replies) is queued and sent by the engine's poller, which runs
//! at the end of every progress round on whichever thread progresses: a Spools call, or
//! the progress thread, which makes the rendezvous asynchronous.

use std::collections::VecDeque;

use crate::idhash::IdMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use spools_am::{ActiveMessage, AmError, Channel, Delivery, Endpoint, HandlerId, Worker};

use crate::matching::{Envelope, Matcher, Pattern};
use crate::rpc::RpcTable;
use crate::MsgError;

/// Context of RPC calls and of their replies.
pub(crate) const RPC_CTX: u32 = 0xFFFF_FFFE;
pub(crate) const RPC_REPLY_CTX: u32 = 0xFFFF_FFFF;
/// Contexts below this are for communicators (each takes two: point-to-point and
/// collective).
pub(crate) const MAX_CTX: u32 = 0xFFFF_FF00;
/// Inline bytes of a short message.
pub(crate) const SHORT_MAX: usize = 24;
/// Largest message a receive that sizes its own buffer accepts (a larger announced
/// length is refused as truncated rather than allocated).
const MAX_ALLOC: usize = 1 << 40;
/// Unexpected-message buffers kept for reuse.
const POOL_KEEP: usize = 64;

const CH: Channel = Channel {
    id: 0,
    high: false,
    unordered: false,
};

/// A caller's buffer: address and length, and the vector that owns it when the engine
/// keeps it (non-blocking calls). A borrowed buffer (blocking calls) stays valid because
/// the call removes its operation from the engine, under the state lock, before it
/// returns; every access happens under that lock.
pub(crate) struct Buf {
    ptr: *mut u8,
    len: usize,
    owner: Option<Vec<u8>>,
}

// SAFETY: the pointer is either into `owner` (moved with it; a Vec's heap block does not
// move) or into a buffer borrowed by a blocking call that outlives the operation (see
// above); it is dereferenced only under the engine's state lock.
unsafe impl Send for Buf {}

impl Buf {
    pub(crate) fn owned(mut v: Vec<u8>) -> Buf {
        Buf {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            owner: Some(v),
        }
    }

    /// # Safety
    /// The caller keeps `s` borrowed until the operation is removed from the engine.
    pub(crate) unsafe fn borrowed(s: &mut [u8]) -> Buf {
        Buf {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            owner: None,
        }
    }

    /// # Safety
    /// As [`Buf::borrowed`]; the engine only reads through it.
    pub(crate) unsafe fn borrowed_ro(s: &[u8]) -> Buf {
        Buf {
            ptr: s.as_ptr().cast_mut(),
            len: s.len(),
            owner: None,
        }
    }

    fn write(&mut self, off: usize, data: &[u8]) {
        debug_assert!(off + data.len() <= self.len);
        if !data.is_empty() {
            // SAFETY: in bounds (checked by callers against `len`); the memory is valid
            // (see the type's contract) and does not overlap `data` (a transport buffer).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
        }
    }

    fn read(&self, off: usize, len: usize) -> &[u8] {
        debug_assert!(off + len <= self.len);
        if len == 0 {
            return &[];
        }
        // SAFETY: as for `write`.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    pub(crate) fn take(self) -> Vec<u8> {
        self.owner.unwrap_or_default()
    }
}

/// What `start_send` did.
pub(crate) enum Started {
    /// The message left; here is the buffer back.
    Sent(Buf),
    /// A rendezvous: wait for this operation.
    Pending(u64),
}

/// The arguments of a short message carrying `data` (at most 24 bytes) inline.
fn short_args(ctx: u32, tag: u32, data: &[u8]) -> [u64; 4] {
    let mut inline = [0u8; SHORT_MAX];
    inline[..data.len()].copy_from_slice(data);
    let w = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&inline[i..i + 8]);
        u64::from_le_bytes(b)
    };
    [pack(ctx, tag), w(0), w(8), w(16)]
}

/// How a completed receive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    pub(crate) src: u32,
    pub(crate) tag: u32,
    pub(crate) len: usize,
    pub(crate) cancelled: bool,
}

/// A receive's buffer: fixed (errors on truncation) or allocated to the message's size.
pub(crate) enum RecvBuf {
    Fixed(Buf),
    Alloc(Vec<u8>),
}

enum RecvState {
    Posted,
    Streaming {
        src: u32,
        tag: u32,
        len: usize,
        got: usize,
    },
    Done(Result<Done, (Done, usize)>),
}

struct RecvOp {
    ctx: u32,
    buf: RecvBuf,
    state: RecvState,
    /// The request was dropped: remove the operation when it completes.
    orphan: bool,
}

enum SendState {
    WaitCts,
    Streaming { rreq: u64, off: usize },
    Done,
}

struct SendOp {
    dest: u32,
    buf: Buf,
    state: SendState,
    orphan: bool,
}

/// An unexpected message's payload.
enum Early {
    Data(Vec<u8>),
    Rts { len: usize, sreq: u64 },
}

/// A message as it arrives (data still in the transport's buffer).
enum Arrival<'a> {
    Data(&'a [u8]),
    Rts { len: usize, sreq: u64 },
}

/// Control messages the poller owes.
enum Ctrl {
    Cts {
        to: u32,
        sreq: u64,
        rreq: u64,
        discard: bool,
    },
}

/// A message the poller sends on its own behalf (RPC replies and their data).
pub(crate) struct Outgoing {
    pub(crate) to: u32,
    pub(crate) env: Envelope,
    pub(crate) data: Vec<u8>,
}

#[derive(Default)]
pub(crate) struct State {
    matcher: Matcher<Early>,
    recvs: IdMap<u64, RecvOp>,
    sends: IdMap<u64, SendOp>,
    ctrl: VecDeque<Ctrl>,
    streams: VecDeque<u64>,
    out: VecDeque<Outgoing>,
    pool: Vec<Vec<u8>>,
    /// RPC calls whose arguments have arrived, waiting to run: (caller, call id, bytes).
    pub(crate) calls: VecDeque<(u32, u32, Vec<u8>)>,
    /// Receive ids of RPC calls whose arguments still stream in.
    rpc_recvs: IdMap<u64, ()>,
}

#[derive(Clone, Copy)]
struct Handlers {
    short: HandlerId,
    eager: HandlerId,
    rts: HandlerId,
    cts: HandlerId,
    data: HandlerId,
}

/// The engine of one rank (shared by all its communicators).
pub(crate) struct Engine {
    pub(crate) comm: Worker,
    ep: Mutex<Endpoint>,
    st: Mutex<State>,
    /// Items queued for the poller (checked without the lock).
    work: Arc<AtomicUsize>,
    /// Bumped whenever an operation completes, so that waiters look the operation up
    /// only when something may have changed.
    done_gen: AtomicU64,
    h: OnceLock<Handlers>,
    pub(crate) short_limit: usize,
    pub(crate) eager_limit: usize,
    next_id: AtomicU64,
    /// The next free communicator context (even), as this rank knows it.
    pub(crate) next_ctx: AtomicU32,
    /// Host index of every job rank (ranks with the same index share a host).
    pub(crate) hosts: Vec<u32>,
    pub(crate) rpc: RpcTable,
    /// Collectives started per collective context, for every communicator made here.
    collectives: Mutex<Vec<(u32, Arc<AtomicU32>)>>,
}

/// Most communicators whose collective counts are kept (freed ones are forgotten first).
const MAX_TRACKED: usize = spools_proto::boot::MAX_COMMUNICATORS as usize;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn pack(ctx: u32, tag: u32) -> u64 {
    u64::from(ctx) | (u64::from(tag) << 32)
}

fn unpack(a: u64) -> (u32, u32) {
    (a as u32, (a >> 32) as u32)
}

impl Engine {
    /// Builds the engine and registers its handlers; the caller runs `sync_handlers`
    /// (collective) before any message is sent.
    pub(crate) fn new(
        comm: Worker,
        endpoint: Endpoint,
        hosts: Vec<u32>,
    ) -> Result<Arc<Engine>, AmError> {
        let cfg = comm.config();
        let e = Arc::new(Engine {
            short_limit: (cfg.short_limit as usize).min(SHORT_MAX),
            eager_limit: cfg.eager_limit as usize,
            comm: comm.clone(),
            ep: Mutex::new(endpoint),
            st: Mutex::new(State::default()),
            work: Arc::new(AtomicUsize::new(0)),
            done_gen: AtomicU64::new(0),
            h: OnceLock::new(),
            next_id: AtomicU64::new(1),
            next_ctx: AtomicU32::new(2),
            hosts,
            rpc: RpcTable::default(),
            collectives: Mutex::new(Vec::new()),
        });
        type H = fn(&Engine, &ActiveMessage<'_>);
        let handlers: [(&str, H); 5] = [
            ("spools.msg.short", Engine::on_short),
            ("spools.msg.eager", Engine::on_eager),
            ("spools.msg.rts", Engine::on_rts),
            ("spools.msg.cts", Engine::on_cts),
            ("spools.msg.data", Engine::on_data),
        ];
        for (name, f) in handlers {
            let w: Weak<Engine> = Arc::downgrade(&e);
            comm.register(name, move |m| {
                if let Some(e) = w.upgrade() {
                    f(&e, m);
                }
            })?;
        }
        let w = Arc::downgrade(&e);
        let work = e.work.clone();
        comm.add_poller(Arc::new(move || {
            // Checked before upgrading the engine: most rounds have nothing to send.
            if work.load(Ordering::Acquire) == 0 {
                return Ok(0);
            }
            match w.upgrade() {
                Some(e) => e.drive(),
                None => Ok(0),
            }
        }));
        Ok(e)
    }

    /// Looks the handler ids up after `sync_handlers`.
    pub(crate) fn resolve(&self) -> Result<(), AmError> {
        let c = &self.comm;
        let h = Handlers {
            short: c.handler_id("spools.msg.short")?,
            eager: c.handler_id("spools.msg.eager")?,
            rts: c.handler_id("spools.msg.rts")?,
            cts: c.handler_id("spools.msg.cts")?,
            data: c.handler_id("spools.msg.data")?,
        };
        let _ = self.h.set(h);
        Ok(())
    }

    fn handlers(&self) -> Result<Handlers, MsgError> {
        self.h
            .get()
            .copied()
            .ok_or(MsgError::Am(AmError::UnknownHandlerName(
                "spools.msg.short".into(),
            )))
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.st)
    }

    /// A counter of the collectives started in collective context `ctx`, reported by
    /// [`Engine::collectives_started`] even after its communicator is dropped (a freed
    /// communicator's count is final: this rank never starts another collective there).
    pub(crate) fn track_collectives(&self, ctx: u32) -> Arc<AtomicU32> {
        let c = Arc::new(AtomicU32::new(0));
        let mut list = lock(&self.collectives);
        if list.len() >= MAX_TRACKED {
            // Forget the oldest freed communicators first.
            let mut excess = list.len() + 1 - MAX_TRACKED;
            list.retain(|(_, k)| {
                let drop_it = excess > 0 && Arc::strong_count(k) == 1;
                excess -= usize::from(drop_it);
                !drop_it
            });
        }
        list.push((ctx, c.clone()));
        c
    }

    /// (collective context, collectives started) of every communicator this rank made.
    pub(crate) fn collectives_started(&self) -> Vec<(u32, u32)> {
        lock(&self.collectives)
            .iter()
            .map(|(ctx, c)| (*ctx, c.load(Ordering::SeqCst)))
            .collect()
    }

    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn bump(&self) {
        self.work.fetch_add(1, Ordering::Release);
    }

    // --- sending ------------------------------------------------------------------------

    /// Starts a send of `buf` to job rank `dest`: short and eager messages leave now
    /// (the buffer is free again: [`Started::Sent`]); a rendezvous returns the id of the
    /// operation to wait for.
    pub(crate) fn start_send(
        &self,
        dest: u32,
        ctx: u32,
        tag: u32,
        buf: Buf,
    ) -> Result<Started, MsgError> {
        let h = self.handlers()?;
        let len = buf.len;
        if len <= self.short_limit {
            let args = short_args(ctx, tag, buf.read(0, len));
            let ch = Channel::new(len as u16);
            lock(&self.ep).send_short(dest, h.short, args, ch, Delivery::Immediate)?;
            return Ok(Started::Sent(buf));
        }
        if len <= self.eager_limit {
            let args = [pack(ctx, tag), 0, 0, 0];
            lock(&self.ep).send_bulk(dest, h.eager, args, buf.read(0, len), CH)?;
            return Ok(Started::Sent(buf));
        }
        let id = self.new_id();
        self.state().sends.insert(
            id,
            SendOp {
                dest,
                buf,
                state: SendState::WaitCts,
                orphan: false,
            },
        );
        let args = [pack(ctx, tag), len as u64, id, 0];
        let sent = lock(&self.ep).send_short(dest, h.rts, args, CH, Delivery::Immediate);
        if let Err(e) = sent {
            self.state().sends.remove(&id);
            return Err(e.into());
        }
        Ok(Started::Pending(id))
    }

    /// Whether send `id` is complete.
    pub(crate) fn send_done(&self, id: u64) -> bool {
        self.state()
            .sends
            .get(&id)
            .is_none_or(|s| matches!(s.state, SendState::Done))
    }

    /// Removes send `id`, returning its owned buffer.
    pub(crate) fn finish_send(&self, id: u64) -> Vec<u8> {
        let op = self.state().sends.remove(&id);
        op.map(|o| o.buf.take()).unwrap_or_default()
    }

    /// A dropped request: finish it in the background.
    pub(crate) fn orphan_send(&self, id: u64) {
        let mut st = self.state();
        let done = match st.sends.get_mut(&id) {
            Some(o) if matches!(o.state, SendState::Done) => true,
            Some(o) => {
                o.orphan = true;
                false
            }
            None => false,
        };
        if done {
            st.sends.remove(&id);
        }
    }

    // --- receiving ----------------------------------------------------------------------

    /// Posts a receive; it may complete at once from an unexpected message.
    pub(crate) fn post_recv(&self, p: Pattern, buf: RecvBuf) -> u64 {
        let id = self.new_id();
        let mut st = self.state();
        st.recvs.insert(
            id,
            RecvOp {
                ctx: p.ctx,
                buf,
                state: RecvState::Posted,
                orphan: false,
            },
        );
        let mut rendezvous = false;
        if let Some((env, early)) = st.matcher.post(id, p) {
            rendezvous = matches!(early, Early::Rts { .. });
            self.matched(&mut st, id, env, early);
        }
        drop(st);
        if rendezvous {
            // The CTS is queued for the poller: wake a sleeping progress thread.
            self.comm.wake();
        }
        id
    }

    /// The receive `id`'s outcome once complete.
    pub(crate) fn recv_result(&self, id: u64) -> Option<Result<Done, (Done, usize)>> {
        match self.state().recvs.get(&id).map(|r| &r.state) {
            Some(RecvState::Done(r)) => Some(*r),
            Some(_) => None,
            None => Some(Ok(Done {
                src: 0,
                tag: 0,
                len: 0,
                cancelled: true,
            })),
        }
    }

    /// Removes receive `id`, returning its buffer (owned or allocated, else empty).
    pub(crate) fn finish_recv(&self, id: u64) -> Vec<u8> {
        let mut st = self.state();
        let Some(op) = st.recvs.remove(&id) else {
            return Vec::new();
        };
        if matches!(op.state, RecvState::Posted) {
            st.matcher.cancel(id, op.ctx);
        }
        drop(st);
        match op.buf {
            RecvBuf::Fixed(b) => b.take(),
            RecvBuf::Alloc(v) => v,
        }
    }

    /// Cancels a posted receive that has not matched yet.
    pub(crate) fn cancel_recv(&self, id: u64) -> bool {
        let mut st = self.state();
        let ctx = match st.recvs.get(&id) {
            Some(op) if matches!(op.state, RecvState::Posted) => op.ctx,
            _ => return false,
        };
        if !st.matcher.cancel(id, ctx) {
            return false;
        }
        self.completed();
        if let Some(op) = st.recvs.get_mut(&id) {
            op.state = RecvState::Done(Ok(Done {
                src: 0,
                tag: 0,
                len: 0,
                cancelled: true,
            }));
        }
        true
    }

    /// A dropped receive request: cancel it if it has not matched, else let it finish in
    /// the background.
    pub(crate) fn orphan_recv(&self, id: u64) {
        // An RPC reply is coming whatever happens: let it land, then drop it.
        let is_reply = self
            .state()
            .recvs
            .get(&id)
            .is_some_and(|o| o.ctx == RPC_REPLY_CTX);
        if !is_reply && self.cancel_recv(id) {
            self.finish_recv(id);
            return;
        }
        let mut st = self.state();
        let done = match st.recvs.get_mut(&id) {
            Some(o) if matches!(o.state, RecvState::Done(_)) => true,
            Some(o) => {
                o.orphan = true;
                false
            }
            None => false,
        };
        if done {
            st.recvs.remove(&id);
        }
    }

    /// The envelope and length of the first unexpected message `p` matches.
    pub(crate) fn probe(&self, p: &Pattern) -> Option<(Envelope, usize)> {
        self.state().matcher.probe(p).map(|(e, early)| {
            let len = match early {
                Early::Data(d) => d.len(),
                Early::Rts { len, .. } => *len,
            };
            (*e, len)
        })
    }

    /// Receive `id` matched message `env`: deliver the data, or start the rendezvous.
    fn matched(&self, st: &mut State, id: u64, env: Envelope, early: Early) {
        match early {
            Early::Data(d) => {
                self.deliver(st, id, env, &d);
                if st.pool.len() < POOL_KEEP && d.capacity() <= self.eager_limit.max(SHORT_MAX) {
                    let mut d = d;
                    d.clear();
                    st.pool.push(d);
                }
            }
            Early::Rts { len, sreq } => self.start_rendezvous(st, id, env, len, sreq),
        }
    }

    /// The completion generation (see [`Engine::done_gen`]).
    pub(crate) fn generation(&self) -> u64 {
        self.done_gen.load(Ordering::Acquire)
    }

    fn completed(&self) {
        self.done_gen.fetch_add(1, Ordering::Release);
    }

    fn complete(&self, st: &mut State, id: u64, r: Result<Done, (Done, usize)>) {
        self.completed();
        let orphan = match st.recvs.get_mut(&id) {
            Some(op) => {
                op.state = RecvState::Done(r);
                op.orphan
            }
            None => false,
        };
        if st.rpc_recvs.remove(&id).is_some() {
            if let Some(op) = st.recvs.remove(&id) {
                if let (RecvBuf::Alloc(v), Ok(d)) = (op.buf, r) {
                    st.calls.push_back((d.src, d.tag, v));
                    self.bump();
                }
            }
            return;
        }
        if orphan {
            st.recvs.remove(&id);
        }
    }

    fn deliver(&self, st: &mut State, id: u64, env: Envelope, data: &[u8]) {
        let Some(op) = st.recvs.get_mut(&id) else {
            return;
        };
        let d = Done {
            src: env.src,
            tag: env.tag,
            len: data.len(),
            cancelled: false,
        };
        let r = match &mut op.buf {
            RecvBuf::Fixed(b) if data.len() > b.len => Err((d, b.len)),
            RecvBuf::Fixed(b) => {
                b.write(0, data);
                Ok(d)
            }
            RecvBuf::Alloc(v) => {
                v.clear();
                v.extend_from_slice(data);
                Ok(d)
            }
        };
        self.complete(st, id, r);
    }

    fn start_rendezvous(&self, st: &mut State, id: u64, env: Envelope, len: usize, sreq: u64) {
        let Some(op) = st.recvs.get_mut(&id) else {
            return;
        };
        let fits = match &mut op.buf {
            RecvBuf::Fixed(b) => b.len >= len,
            RecvBuf::Alloc(v) if len <= MAX_ALLOC => {
                v.clear();
                v.resize(len, 0);
                true
            }
            RecvBuf::Alloc(_) => false,
        };
        st.ctrl.push_back(Ctrl::Cts {
            to: env.src,
            sreq,
            rreq: id,
            discard: !fits,
        });
        self.bump();
        if fits {
            if let Some(op) = st.recvs.get_mut(&id) {
                op.state = RecvState::Streaming {
                    src: env.src,
                    tag: env.tag,
                    len,
                    got: 0,
                };
            }
        } else {
            let cap = match &op.buf {
                RecvBuf::Fixed(b) => b.len,
                RecvBuf::Alloc(v) => v.len(),
            };
            let d = Done {
                src: env.src,
                tag: env.tag,
                len,
                cancelled: false,
            };
            self.complete(st, id, Err((d, cap)));
        }
    }

    // --- handlers (under the progress lock; they never send) ----------------------------

    fn arrive(&self, env: Envelope, inc: Arrival<'_>) {
        let mut guard = self.state();
        let st = &mut *guard;
        let id = if env.ctx == RPC_CTX {
            // RPC calls are received by the engine itself, into a buffer of their size.
            let id = self.new_id();
            st.recvs.insert(
                id,
                RecvOp {
                    ctx: RPC_CTX,
                    buf: RecvBuf::Alloc(Vec::new()),
                    state: RecvState::Posted,
                    orphan: false,
                },
            );
            st.rpc_recvs.insert(id, ());
            id
        } else if let Some(id) = st.matcher.arrive(&env) {
            id
        } else {
            // Unexpected: copied out of the transport's buffer into a pooled one.
            let early = match inc {
                Arrival::Data(d) => Early::Data(pooled(st, d)),
                Arrival::Rts { len, sreq } => Early::Rts { len, sreq },
            };
            st.matcher.queue(env, early);
            return;
        };
        match inc {
            Arrival::Data(d) => self.deliver(st, id, env, d),
            Arrival::Rts { len, sreq } => self.start_rendezvous(st, id, env, len, sreq),
        }
    }

    fn on_short(&self, m: &ActiveMessage<'_>) {
        let (ctx, tag) = unpack(m.args[0]);
        let len = usize::from(m.channel).min(SHORT_MAX);
        let mut inline = [0u8; SHORT_MAX];
        for (i, a) in m.args[1..].iter().enumerate() {
            inline[i * 8..i * 8 + 8].copy_from_slice(&a.to_le_bytes());
        }
        let env = Envelope {
            ctx,
            src: m.from,
            tag,
        };
        self.arrive(env, Arrival::Data(&inline[..len]));
    }

    fn on_eager(&self, m: &ActiveMessage<'_>) {
        let (ctx, tag) = unpack(m.args[0]);
        let env = Envelope {
            ctx,
            src: m.from,
            tag,
        };
        self.arrive(env, Arrival::Data(m.payload));
    }

    fn on_rts(&self, m: &ActiveMessage<'_>) {
        let (ctx, tag) = unpack(m.args[0]);
        let env = Envelope {
            ctx,
            src: m.from,
            tag,
        };
        let (len, sreq) = (m.args[1] as usize, m.args[2]);
        self.arrive(env, Arrival::Rts { len, sreq });
    }

    fn on_cts(&self, m: &ActiveMessage<'_>) {
        let (sreq, rreq, discard) = (m.args[0], m.args[1], m.args[2] != 0);
        let mut st = self.state();
        let Some(op) = st.sends.get_mut(&sreq) else {
            return;
        };
        if op.dest != m.from || !matches!(op.state, SendState::WaitCts) {
            return;
        }
        if discard {
            op.state = SendState::Done;
            self.completed();
            if op.orphan {
                st.sends.remove(&sreq);
            }
        } else {
            op.state = SendState::Streaming { rreq, off: 0 };
            st.streams.push_back(sreq);
            self.bump();
        }
    }

    fn on_data(&self, m: &ActiveMessage<'_>) {
        let (rreq, off) = (m.args[0], m.args[1] as usize);
        let mut st = self.state();
        let Some(op) = st.recvs.get_mut(&rreq) else {
            return;
        };
        let RecvState::Streaming { src, tag, len, got } = &mut op.state else {
            return;
        };
        if *src != m.from || off.checked_add(m.payload.len()).is_none_or(|e| e > *len) {
            return;
        }
        match &mut op.buf {
            RecvBuf::Fixed(b) => b.write(off, m.payload),
            RecvBuf::Alloc(v) => v[off..off + m.payload.len()].copy_from_slice(m.payload),
        }
        *got += m.payload.len();
        if *got >= *len {
            let d = Done {
                src: *src,
                tag: *tag,
                len: *len,
                cancelled: false,
            };
            self.complete(&mut st, rreq, Ok(d));
        }
    }

    // --- the poller ---------------------------------------------------------------------

    /// Sends what handlers decided: CTS, rendezvous data, RPC work. Never blocks.
    pub(crate) fn drive(&self) -> Result<usize, AmError> {
        if self.work.load(Ordering::Acquire) == 0 {
            return Ok(0);
        }
        let Some(h) = self.h.get().copied() else {
            return Ok(0);
        };
        let mut n = 0;
        let calls = std::mem::take(&mut self.state().calls);
        // Run every call first (outside the state lock: a function may take long), then
        // queue all replies, so that a send error never loses a call.
        let replies: Vec<Outgoing> = calls
            .into_iter()
            .map(|(from, call, args)| Outgoing {
                to: from,
                env: Envelope {
                    ctx: RPC_REPLY_CTX,
                    src: self.comm.rank(),
                    tag: call,
                },
                data: self.rpc.run(&args),
            })
            .collect();
        n += replies.len();
        {
            let mut st = self.state();
            st.out.extend(replies);
            n += self.send_ctrl(&mut st, h)?;
            n += self.send_streams(&mut st, h)?;
            n += self.send_out(&mut st, h)?;
        }
        let st = self.state();
        let left = st.ctrl.len() + st.streams.len() + st.out.len() + st.calls.len();
        self.work.store(left, Ordering::Release);
        Ok(n)
    }

    fn send_ctrl(&self, st: &mut State, h: Handlers) -> Result<usize, AmError> {
        let mut n = 0;
        while let Some(c) = st.ctrl.front() {
            let Ctrl::Cts {
                to,
                sreq,
                rreq,
                discard,
            } = *c;
            if !self
                .comm
                .try_send_short_now(to, h.cts, [sreq, rreq, u64::from(discard), 0], 0)?
            {
                break;
            }
            st.ctrl.pop_front();
            n += 1;
        }
        Ok(n)
    }

    fn send_streams(&self, st: &mut State, h: Handlers) -> Result<usize, AmError> {
        let mut n = 0;
        let mut i = 0;
        while i < st.streams.len() {
            let id = st.streams[i];
            let Some(op) = st.sends.get_mut(&id) else {
                st.streams.remove(i);
                continue;
            };
            let SendState::Streaming { rreq, off } = &mut op.state else {
                st.streams.remove(i);
                continue;
            };
            let chunk_max = self.comm.max_fragment(op.dest);
            let mut stalled = false;
            while *off < op.buf.len {
                let c = (op.buf.len - *off).min(chunk_max);
                let data = op.buf.read(*off, c);
                if !self.comm.try_send_bulk_now(
                    op.dest,
                    h.data,
                    [*rreq, *off as u64, 0, 0],
                    data,
                )? {
                    stalled = true;
                    break;
                }
                *off += c;
                n += 1;
            }
            if stalled {
                i += 1;
                continue;
            }
            op.state = SendState::Done;
            self.completed();
            let orphan = op.orphan;
            st.streams.remove(i);
            if orphan {
                st.sends.remove(&id);
            }
        }
        Ok(n)
    }

    /// Messages the engine sends for itself (RPC replies): short, one-fragment eager, or
    /// a rendezvous whose data the streams then carry.
    fn send_out(&self, st: &mut State, h: Handlers) -> Result<usize, AmError> {
        let mut n = 0;
        while let Some(o) = st.out.front() {
            let len = o.data.len();
            let sent = if len <= SHORT_MAX {
                let args = short_args(o.env.ctx, o.env.tag, &o.data);
                self.comm
                    .try_send_short_now(o.to, h.short, args, len as u16)?
            } else if len <= self.eager_limit.min(self.comm.max_fragment(o.to)) {
                self.comm.try_send_bulk_now(
                    o.to,
                    h.eager,
                    [pack(o.env.ctx, o.env.tag), 0, 0, 0],
                    &o.data,
                )?
            } else {
                let id = self.new_id();
                if !self.comm.try_send_short_now(
                    o.to,
                    h.rts,
                    [pack(o.env.ctx, o.env.tag), len as u64, id, 0],
                    0,
                )? {
                    break;
                }
                if let Some(o) = st.out.pop_front() {
                    st.sends.insert(
                        id,
                        SendOp {
                            dest: o.to,
                            buf: Buf::owned(o.data),
                            state: SendState::WaitCts,
                            orphan: true,
                        },
                    );
                }
                n += 1;
                continue;
            };
            if !sent {
                break;
            }
            st.out.pop_front();
            n += 1;
        }
        Ok(n)
    }
}

/// A copy of `data` in a buffer from the pool.
fn pooled(st: &mut State, data: &[u8]) -> Vec<u8> {
    let mut v = st.pool.pop().unwrap_or_default();
    v.clear();
    v.extend_from_slice(data);
    v
}
