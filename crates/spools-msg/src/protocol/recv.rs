//! The receive side: posted receives and unexpected messages (through the
//! [`Matcher`]), delivery into receive buffers, truncation, the receiver's half of the
//! rendezvous (CTS out, data in), cancellation, and RPC calls the engine receives by
//! itself.

use std::collections::VecDeque;

use super::events::{
    Cts, DataAt, Incoming, Limits, MessageInfo, ProtocolError, Pull, RecvOutcome, RpcCall,
};
use super::matching::{Envelope, Matcher, Pattern};
use super::slab::Slab;
use super::wire::{RPC_CTX, RPC_REPLY_CTX, SHORT_MAX};
use crate::buffer::RecvBuf;

/// Largest message a receive that sizes its own buffer accepts (a larger announced
/// length is refused as truncated rather than allocated).
pub(crate) const MAX_ALLOC: usize = 1 << 40;
/// Unexpected-message buffers kept for reuse.
const POOL_KEEP: usize = 64;

/// An unexpected message (one that arrived before a receive matching it was posted).
enum Unexpected {
    /// A short or eager message, copied out of the transport's buffer.
    Data(Vec<u8>),
    /// A request-to-send; the data stays with the sender until a receive matches.
    Rts {
        len: u64,
        send_id: u64,
        at: Option<DataAt>,
    },
}

impl Unexpected {
    fn len(&self) -> usize {
        match self {
            Unexpected::Data(d) => d.len(),
            Unexpected::Rts { len, .. } => usize::try_from(*len).unwrap_or(usize::MAX),
        }
    }
}

/// Where a receive is.
enum RecvState {
    /// Posted, no message matched yet (cancellable).
    Posted,
    /// Matched a request-to-send; `got` bytes of the message have arrived.
    Streaming { msg: MessageInfo, got: usize },
    /// Matched a request-to-send whose data the receiver takes itself: waits for the
    /// engine to copy or read it ([`RecvSide::pulled`]).
    Pulling { msg: MessageInfo },
    /// Over.
    Complete(RecvOutcome),
}

struct RecvOp {
    /// What it accepts (its context; where the matcher keeps it while posted).
    pattern: Pattern,
    buf: RecvBuf,
    state: RecvState,
    /// Nobody waits for it (a dropped request): remove it on completion.
    detached: bool,
    /// An RPC call the engine receives by itself: becomes an [`RpcCall`] on completion.
    rpc_call: bool,
}

/// Receives by operation id, the matcher, and what the receive side owes the engine.
pub(crate) struct RecvSide {
    matcher: Matcher<Unexpected>,
    recvs: Slab<RecvOp>,
    /// Clear-to-send messages to transmit, in order.
    cts: VecDeque<Cts>,
    /// Copies and reads of senders' bytes the engine owes, in order.
    pulls: VecDeque<Pull>,
    /// Buffers for unexpected messages, reused.
    pool: Vec<Vec<u8>>,
    /// Largest buffer worth keeping in the pool.
    pool_capacity: usize,
    /// RPC calls whose arguments have arrived.
    rpc_calls: VecDeque<RpcCall>,
    /// Receives completed since the last [`RecvSide::take_completed`], and messages of a
    /// collective context (odd) queued as unexpected: a waiting schedule looks at those
    /// for a peer that follows another plan (`Schedule::spot_gone`).
    completed: u64,
    /// Messages of a collective context queued as unexpected since the last
    /// [`RecvSide::take_early`].
    early: u64,
    /// A CTS or an RPC call was queued since the last [`RecvSide::take_new_output`].
    new_output: bool,
}

impl RecvSide {
    pub(crate) fn new(limits: Limits) -> RecvSide {
        RecvSide {
            matcher: Matcher::default(),
            recvs: Slab::default(),
            cts: VecDeque::new(),
            pulls: VecDeque::new(),
            pool: Vec::new(),
            pool_capacity: limits.eager_limit.max(SHORT_MAX),
            rpc_calls: VecDeque::new(),
            completed: 0,
            early: 0,
            new_output: false,
        }
    }

    fn insert(&mut self, pattern: Pattern, buf: RecvBuf, rpc_call: bool) -> u64 {
        self.recvs.insert(RecvOp {
            pattern,
            buf,
            state: RecvState::Posted,
            detached: false,
            rpc_call,
        })
    }

    /// Posts a receive and returns its id; it matches the first unexpected message it
    /// fits, if any. Also returns whether that was a request-to-send (a CTS is now
    /// queued).
    pub(crate) fn post(&mut self, p: Pattern, buf: RecvBuf) -> (u64, bool) {
        let id = self.insert(p, buf, false);
        let cts = self.post_id(id, p);
        (id, cts)
    }

    fn post_id(&mut self, id: u64, p: Pattern) -> bool {
        match self.matcher.post(id, p) {
            None => false,
            Some((env, Unexpected::Data(d))) => {
                self.deliver(id, env, &d);
                self.recycle(d);
                false
            }
            Some((env, Unexpected::Rts { len, send_id, at })) => {
                self.start_rendezvous(id, env, len, send_id, at);
                true
            }
        }
    }

    /// Receives an RPC call, into a buffer of the call's size.
    pub(crate) fn accept_rpc_call(&mut self, env: Envelope, inc: Incoming<'_>) {
        let p = Pattern {
            ctx: RPC_CTX,
            src: Some(env.src),
            tag: Some(env.tag),
        };
        let id = self.insert(p, RecvBuf::Alloc(Vec::new()), true);
        self.accept(id, env, inc);
    }

    /// A message arrives: it completes (or starts the rendezvous of) the first posted
    /// receive it matches, or is queued as unexpected.
    pub(crate) fn arrive(&mut self, env: Envelope, inc: Incoming<'_>) {
        match self.matcher.arrive(&env) {
            Some(id) => self.accept(id, env, inc),
            None if self.matcher.is_drained(&env) => {
                if let Incoming::Rts { send_id, .. } = inc {
                    self.refuse(env, send_id);
                }
            }
            None => {
                let u = match inc {
                    Incoming::Data(d) => Unexpected::Data(self.pooled(d)),
                    Incoming::Rts { len, send_id, at } => Unexpected::Rts { len, send_id, at },
                };
                self.matcher.queue(env, u);
                if env.ctx % 2 == 1 {
                    self.completed += 1;
                    self.early += 1;
                }
            }
        }
    }

    /// Nobody will receive context `ctx`'s messages with a tag in `tags` (those of a
    /// collective this rank left after the ranks disagreed about it) unless a receive is
    /// posted for them already: the ones queued and the ones that arrive later are
    /// dropped, and a sender that waits in a rendezvous for one is told to discard it
    /// (so that it does not wait forever). Returns whether a clear-to-send is queued.
    pub(crate) fn drain(&mut self, ctx: u32, tags: std::ops::Range<u32>) -> bool {
        let mut cts = false;
        for (env, u) in self.matcher.drain(ctx, tags) {
            match u {
                Unexpected::Data(d) => self.recycle(d),
                Unexpected::Rts { send_id, .. } => {
                    self.refuse(env, send_id);
                    cts = true;
                }
            }
        }
        cts
    }

    /// Tells the sender of a request-to-send that nobody takes its data.
    fn refuse(&mut self, env: Envelope, send_id: u64) {
        self.cts.push_back(Cts {
            to: env.src,
            send_id,
            recv_id: 0,
            discard: true,
        });
        self.new_output = true;
    }

    fn accept(&mut self, id: u64, env: Envelope, inc: Incoming<'_>) {
        match inc {
            Incoming::Data(d) => self.deliver(id, env, d),
            Incoming::Rts { len, send_id, at } => {
                self.start_rendezvous(id, env, len, send_id, at);
            }
        }
    }

    /// A copy of `data` in a buffer from the pool.
    fn pooled(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(data);
        v
    }

    fn recycle(&mut self, mut d: Vec<u8>) {
        if self.pool.len() < POOL_KEEP && d.capacity() <= self.pool_capacity {
            d.clear();
            self.pool.push(d);
        }
    }

    fn complete(&mut self, id: u64, outcome: RecvOutcome) {
        self.completed += 1;
        let Some(op) = self.recvs.get_mut(id) else {
            return;
        };
        if op.rpc_call {
            if let Some(op) = self.recvs.remove(id) {
                if let (RecvBuf::Alloc(body), RecvOutcome::Received(m)) = (op.buf, outcome) {
                    self.rpc_calls.push_back(RpcCall {
                        caller: m.src,
                        call: m.tag,
                        body,
                    });
                    self.new_output = true;
                }
            }
            return;
        }
        op.state = RecvState::Complete(outcome);
        if op.detached {
            self.recvs.remove(id);
        }
    }

    /// Copies a whole message into receive `id`, or truncates.
    fn deliver(&mut self, id: u64, env: Envelope, data: &[u8]) {
        let Some(op) = self.recvs.get_mut(id) else {
            return;
        };
        let msg = MessageInfo {
            src: env.src,
            tag: env.tag,
            len: data.len(),
        };
        let outcome = match &mut op.buf {
            RecvBuf::Fixed(b) if data.len() > b.len() => RecvOutcome::Truncated {
                msg,
                capacity: b.len(),
            },
            RecvBuf::Fixed(b) => {
                b.write(0, data);
                RecvOutcome::Received(msg)
            }
            RecvBuf::Alloc(v) => {
                v.clear();
                v.extend_from_slice(data);
                RecvOutcome::Received(msg)
            }
            RecvBuf::Scatter(s) if data.len() > s.capacity() => RecvOutcome::Truncated {
                msg,
                capacity: s.capacity(),
            },
            RecvBuf::Scatter(s) => {
                if !data.is_empty() {
                    s.write_at(0, data);
                }
                RecvOutcome::Received(msg)
            }
        };
        self.complete(id, outcome);
    }

    /// Receive `id` matched a request-to-send: queue the CTS (telling the sender to
    /// discard when the message does not fit) and wait for the data; or, when the
    /// receiver may take the data itself, queue the copy or read.
    fn start_rendezvous(
        &mut self,
        id: u64,
        env: Envelope,
        len: u64,
        send_id: u64,
        at: Option<DataAt>,
    ) {
        let Some(op) = self.recvs.get_mut(id) else {
            return;
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let fits = match &mut op.buf {
            RecvBuf::Fixed(b) => b.len() >= len,
            RecvBuf::Alloc(v) if len <= MAX_ALLOC => {
                v.clear();
                v.resize(len, 0);
                true
            }
            RecvBuf::Alloc(_) => false,
            RecvBuf::Scatter(s) => s.capacity() >= len,
        };
        let capacity = match &op.buf {
            RecvBuf::Fixed(b) => b.len(),
            RecvBuf::Alloc(v) => v.len(),
            RecvBuf::Scatter(s) => s.capacity(),
        };
        // Scattered memory takes the data as it streams, piece by piece.
        let whole = !matches!(op.buf, RecvBuf::Scatter(_));
        let msg = MessageInfo {
            src: env.src,
            tag: env.tag,
            len,
        };
        if let Some(at) = at.filter(|_| fits && len > 0 && whole) {
            op.state = RecvState::Pulling { msg };
            self.pulls.push_back(Pull {
                recv_id: id,
                from: env.src,
                send_id,
                at,
                len,
            });
            self.new_output = true;
            return;
        }
        self.cts.push_back(Cts {
            to: env.src,
            send_id,
            recv_id: id,
            discard: !fits,
        });
        self.new_output = true;
        if !fits {
            self.complete(id, RecvOutcome::Truncated { msg, capacity });
        } else if len == 0 {
            // No data will follow.
            self.complete(id, RecvOutcome::Received(msg));
        } else if let Some(op) = self.recvs.get_mut(id) {
            op.state = RecvState::Streaming { msg, got: 0 };
        }
    }

    /// The first copy or read of a sender's bytes the engine owes.
    pub(crate) fn pop_pull(&mut self) -> Option<Pull> {
        self.pulls.pop_front()
    }

    /// Copies and reads of senders' bytes waiting.
    pub(crate) fn pulls_len(&self) -> usize {
        self.pulls.len()
    }

    /// Takes the sender's bytes of `pull`: `fill` copies or reads them into the receive's
    /// first `pull.len` bytes and says whether it could. Then queues the CTS that
    /// completes the send without data, or (`fill` could not) falls back to streaming
    /// them. A receive released meanwhile still gets the sender's send completed, and
    /// `fill` is not called.
    pub(crate) fn pulled(&mut self, pull: Pull, fill: impl FnOnce(&mut [u8]) -> bool) {
        let cts = |discard| Cts {
            to: pull.from,
            send_id: pull.send_id,
            recv_id: pull.recv_id,
            discard,
        };
        self.new_output = true;
        let Some(op) = self.recvs.get_mut(pull.recv_id) else {
            self.cts.push_back(cts(true));
            return;
        };
        let RecvState::Pulling { msg } = op.state else {
            self.cts.push_back(cts(true));
            return;
        };
        let len = pull.len;
        let copied = match &mut op.buf {
            RecvBuf::Fixed(b) => fill(b.slice_mut(0, len)),
            RecvBuf::Alloc(v) => fill(&mut v[..len]),
            // Never queued for a pull (`start_rendezvous`): it streams.
            RecvBuf::Scatter(_) => false,
        };
        if copied {
            self.cts.push_back(cts(true));
            self.complete(pull.recv_id, RecvOutcome::Received(msg));
        } else {
            op.state = RecvState::Streaming { msg, got: 0 };
            self.cts.push_back(cts(false));
        }
    }

    /// A chunk of rendezvous data from `from` for receive `recv_id` at `offset`.
    pub(crate) fn on_data(
        &mut self,
        from: u32,
        recv_id: u64,
        offset: u64,
        payload: &[u8],
    ) -> Result<(), ProtocolError> {
        let Some(op) = self.recvs.get_mut(recv_id) else {
            return Err(ProtocolError::UnknownRecv {
                peer: from,
                recv_id,
            });
        };
        let RecvState::Streaming { msg, got } = &mut op.state else {
            return Err(ProtocolError::NotStreaming {
                peer: from,
                recv_id,
            });
        };
        if msg.src != from {
            return Err(ProtocolError::NotStreaming {
                peer: from,
                recv_id,
            });
        }
        let off = usize::try_from(offset)
            .ok()
            .filter(|o| o.checked_add(payload.len()).is_some_and(|e| e <= msg.len));
        let Some(off) = off else {
            return Err(ProtocolError::OutOfBounds {
                peer: from,
                recv_id,
                offset,
                len: payload.len(),
                total: msg.len,
            });
        };
        match &mut op.buf {
            RecvBuf::Fixed(b) => b.write(off, payload),
            RecvBuf::Alloc(v) => v[off..off + payload.len()].copy_from_slice(payload),
            RecvBuf::Scatter(s) => s.write_at(off, payload),
        }
        *got += payload.len();
        if *got >= msg.len {
            let msg = *msg;
            self.complete(recv_id, RecvOutcome::Received(msg));
        }
        Ok(())
    }

    /// Receive `id`'s outcome once complete (`None` while pending); an id that is not
    /// held (released) reads as cancelled.
    pub(crate) fn outcome(&self, id: u64) -> Option<RecvOutcome> {
        match self.recvs.get(id).map(|r| &r.state) {
            Some(RecvState::Complete(r)) => Some(*r),
            Some(_) => None,
            None => Some(RecvOutcome::Cancelled),
        }
    }

    /// Receive `id`'s outcome and buffer if it is complete, removing it (one look-up
    /// where [`RecvSide::outcome`] then [`RecvSide::release`] take two); `None`, and
    /// nothing changes, while it is pending. An id that is not held reads as cancelled.
    pub(crate) fn finish(&mut self, id: u64) -> Option<(RecvOutcome, Vec<u8>)> {
        match self.recvs.get(id).map(|r| &r.state) {
            Some(RecvState::Complete(o)) => {
                let o = *o;
                let buf = self.recvs.remove(id).map(|op| op.buf.take());
                Some((o, buf.unwrap_or_default()))
            }
            Some(_) => None,
            None => Some((RecvOutcome::Cancelled, Vec::new())),
        }
    }

    /// Removes receive `id` (unposting it if no message matched), returning its buffer.
    /// A message that matched it and still streams is dropped when its data arrives.
    pub(crate) fn release(&mut self, id: u64) -> Vec<u8> {
        let Some(op) = self.recvs.remove(id) else {
            return Vec::new();
        };
        if matches!(op.state, RecvState::Posted) {
            self.matcher.cancel(id, &op.pattern);
        }
        op.buf.take()
    }

    /// The job rank receive `id` waits for, if it names one and is not an RPC reply's
    /// (which a finalising rank still sends: it serves calls until the job ends).
    pub(crate) fn source(&self, id: u64) -> Option<u32> {
        self.recvs
            .get(id)
            .filter(|op| op.pattern.ctx != RPC_REPLY_CTX)
            .and_then(|op| op.pattern.src)
    }

    /// Whether receive `id` is posted and no message has matched it yet.
    pub(crate) fn is_unmatched(&self, id: u64) -> bool {
        self.recvs
            .get(id)
            .is_some_and(|op| matches!(op.state, RecvState::Posted))
    }

    /// Cancels receive `id` if no message has matched it; false otherwise (matched,
    /// streaming, complete or unknown).
    pub(crate) fn cancel(&mut self, id: u64) -> bool {
        let pattern = match self.recvs.get(id) {
            Some(op) if matches!(op.state, RecvState::Posted) => op.pattern,
            _ => return false,
        };
        if !self.matcher.cancel(id, &pattern) {
            return false;
        }
        self.completed += 1;
        if let Some(op) = self.recvs.get_mut(id) {
            op.state = RecvState::Complete(RecvOutcome::Cancelled);
        }
        true
    }

    /// Nobody will wait for receive `id`: cancel it if it has not matched (except an RPC
    /// reply, which comes whatever happens: it lands, then is dropped), else remove it
    /// when it completes.
    pub(crate) fn detach(&mut self, id: u64) {
        let is_reply = self
            .recvs
            .get(id)
            .is_some_and(|o| o.pattern.ctx == RPC_REPLY_CTX);
        if !is_reply && self.cancel(id) {
            self.release(id);
            return;
        }
        match self.recvs.get_mut(id) {
            Some(o) if matches!(o.state, RecvState::Complete(_)) => {
                self.recvs.remove(id);
            }
            Some(o) => o.detached = true,
            None => {}
        }
    }

    /// The envelope and length of the first unexpected message `p` matches.
    pub(crate) fn probe(&self, p: &Pattern) -> Option<(Envelope, usize)> {
        self.matcher.probe(p).map(|(e, u)| (*e, u.len()))
    }

    /// The envelope and length of the first unexpected message of context `ctx` from
    /// `src` with a tag in `tags`.
    pub(crate) fn probe_tags(
        &self,
        ctx: u32,
        src: u32,
        tags: std::ops::Range<u32>,
    ) -> Option<(Envelope, usize)> {
        self.matcher
            .probe_tags(ctx, src, tags)
            .map(|(e, u)| (*e, u.len()))
    }

    /// The first clear-to-send to transmit.
    pub(crate) fn front_cts(&self) -> Option<Cts> {
        self.cts.front().copied()
    }

    /// The first clear-to-send left.
    pub(crate) fn pop_cts(&mut self) {
        self.cts.pop_front();
    }

    /// Clear-to-send messages waiting.
    pub(crate) fn cts_len(&self) -> usize {
        self.cts.len()
    }

    /// The RPC calls that arrived, to run.
    pub(crate) fn take_rpc_calls(&mut self) -> VecDeque<RpcCall> {
        std::mem::take(&mut self.rpc_calls)
    }

    /// RPC calls waiting to run.
    pub(crate) fn rpc_calls_len(&self) -> usize {
        self.rpc_calls.len()
    }

    /// Receives completed since the last call.
    pub(crate) fn take_completed(&mut self) -> u64 {
        std::mem::take(&mut self.completed)
    }

    /// Messages of a collective context queued as unexpected since the last call.
    pub(crate) fn take_early(&mut self) -> u64 {
        std::mem::take(&mut self.early)
    }

    /// Whether a CTS or an RPC call was queued since the last call.
    pub(crate) fn take_new_output(&mut self) -> bool {
        std::mem::take(&mut self.new_output)
    }

    /// Number of receive operations held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.recvs.len()
    }

    /// Number of buffers kept for unexpected messages.
    #[cfg(test)]
    pub(crate) fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// Number of unexpected messages queued.
    #[cfg(test)]
    pub(crate) fn unexpected_len(&self) -> usize {
        self.matcher.unexpected_len()
    }
}
