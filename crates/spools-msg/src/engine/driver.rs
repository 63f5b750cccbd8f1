//! The poller: sends what the protocol queued (CTS, rendezvous data) and runs RPC calls,
//! sending their replies. It never blocks: a full transport leaves the rest for the next
//! round.

use std::sync::atomic::Ordering;

use spools_am::AmError;

use super::state::{Engine, HandlerIds, Locked, Reply};
use crate::buffer::Buf;
use crate::protocol::wire::{self, RPC_REPLY_CTX, SHORT_MAX};
use crate::protocol::Protocol;

impl Engine {
    /// Sends what the protocol decided: CTS, rendezvous data, RPC replies (running the
    /// calls first). Returns the number of messages sent. Never blocks.
    pub(crate) fn flush_outgoing(&self) -> Result<usize, AmError> {
        if self.pending_output.load(Ordering::Acquire) == 0 {
            return Ok(0);
        }
        let Some(h) = self.handler_ids.get().copied() else {
            return Ok(0);
        };
        let calls = self.lock_state().protocol.take_rpc_calls();
        // Run every call first (outside the lock: a function may take long), then queue
        // all replies, so that a send error never loses a call.
        let replies: Vec<Reply> = calls
            .into_iter()
            .map(|c| Reply {
                to: c.caller,
                call: c.call,
                data: self.rpc.run(&c.body),
            })
            .collect();
        let ran = replies.len();
        let mut guard = self.lock_state();
        let st = &mut *guard;
        st.replies.extend(replies);
        let sent = self.send_queued(st, h);
        self.publish(&mut st.protocol);
        let n = sent?;
        let left = st.protocol.pending_output() + st.replies.len();
        self.pending_output.store(left, Ordering::Release);
        Ok(ran + n)
    }

    fn send_queued(&self, st: &mut Locked, h: HandlerIds) -> Result<usize, AmError> {
        let pulled = self.run_pulls(&mut st.protocol);
        Ok(pulled
            + self.send_cts(&mut st.protocol, h)?
            + self.send_streams(&mut st.protocol, h)?
            + self.send_replies(st, h)?)
    }

    fn send_cts(&self, p: &mut Protocol, h: HandlerIds) -> Result<usize, AmError> {
        let mut n = 0;
        while let Some(c) = p.front_cts() {
            if !self.worker.try_send_short_now(
                c.to,
                h.cts,
                wire::cts_args(c.send_id, c.recv_id, c.discard),
                0,
            )? {
                break;
            }
            p.pop_cts();
            n += 1;
        }
        Ok(n)
    }

    /// Streams data chunks; a stream whose peer's transport is full is skipped for the
    /// others.
    fn send_streams(&self, p: &mut Protocol, h: HandlerIds) -> Result<usize, AmError> {
        let mut n = 0;
        let mut slot = 0;
        while let Some(c) = p.next_chunk(slot, |dest| self.worker.max_fragment(dest)) {
            let (at, len) = (c.slot, c.bytes.len());
            let args = wire::data_args(c.recv_id, c.offset);
            if self.worker.try_send_bulk_now(c.to, h.data, args, c.bytes)? {
                p.chunk_sent(at, len);
                n += 1;
            } else {
                slot = at + 1;
            }
        }
        Ok(n)
    }

    /// RPC replies: short, one-fragment eager, or a rendezvous whose data the streams
    /// then carry.
    fn send_replies(&self, st: &mut Locked, h: HandlerIds) -> Result<usize, AmError> {
        let mut n = 0;
        while let Some(r) = st.replies.front() {
            let len = r.data.len();
            let sent = if len <= SHORT_MAX {
                let args = wire::short_args(RPC_REPLY_CTX, r.call, &r.data);
                self.worker
                    .try_send_short_now(r.to, h.short, args, len as u16)?
            } else if len <= self.limits.eager_limit.min(self.worker.max_fragment(r.to)) {
                let args = [wire::pack_ctx_tag(RPC_REPLY_CTX, r.call), 0, 0, 0];
                self.worker
                    .try_send_bulk_now(r.to, h.eager, args, &r.data)?
            } else {
                let Some(Reply { to, call, data }) = st.replies.pop_front() else {
                    break;
                };
                let id = st.protocol.post_send(to, Buf::owned(data), true, None);
                let args = wire::rts_args(RPC_REPLY_CTX, call, len, id);
                let sent = self.worker.try_send_short_now(to, h.rts, args, 0);
                if !matches!(sent, Ok(true)) {
                    // Not sent: the reply goes back to the head of the queue.
                    let data = st.protocol.abort_send(id).map(Buf::take);
                    let data = data.unwrap_or_default();
                    st.replies.push_front(Reply { to, call, data });
                    sent?;
                    break;
                }
                n += 1;
                continue;
            };
            if !sent {
                break;
            }
            st.replies.pop_front();
            n += 1;
        }
        Ok(n)
    }
}
