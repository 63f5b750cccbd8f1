//! The application's operations: sends, receives, their outcomes, cancel and release.

use spools_am::{Channel, Delivery};

use super::state::{Engine, ORDERED};
use crate::buffer::{Buf, RecvBuf};
use crate::error::MsgError;
use crate::protocol::wire;
use crate::protocol::{Envelope, Pattern, RecvOutcome, SendProtocol};

/// What [`Engine::start_send`] did.
pub(crate) enum SendStart {
    /// The message left (short or eager); here is the buffer back.
    Complete(Buf),
    /// A rendezvous: wait for send operation `id`.
    Rendezvous(u64),
}

impl Engine {
    /// Starts a send of `buf` to job rank `dest`: short and eager messages leave now
    /// (the buffer is free again: [`SendStart::Complete`]); a rendezvous returns the id
    /// of the operation to wait for.
    pub(crate) fn start_send(
        &self,
        dest: u32,
        ctx: u32,
        tag: u32,
        buf: Buf,
    ) -> Result<SendStart, MsgError> {
        self.start_send_mode(dest, ctx, tag, buf, false)
    }

    /// [`Engine::start_send`]; `synchronous` takes the rendezvous protocol whatever the
    /// length, so that the send completes only once a receive matched it (MPI's
    /// synchronous mode).
    pub(crate) fn start_send_mode(
        &self,
        dest: u32,
        ctx: u32,
        tag: u32,
        mut buf: Buf,
        synchronous: bool,
    ) -> Result<SendStart, MsgError> {
        let h = self.handler_ids()?;
        let len = buf.len();
        self.count_cross_host(dest, len);
        self.count_sent(dest);
        let protocol = if synchronous {
            SendProtocol::Rendezvous
        } else {
            self.limits.protocol_for(len)
        };
        match protocol {
            SendProtocol::Short => {
                let args = wire::short_args(ctx, tag, buf.read(0, len));
                let ch = Channel::new(len as u16);
                self.endpoint
                    .lock()
                    .send_short(dest, h.short, args, ch, Delivery::Immediate)?;
                Ok(SendStart::Complete(buf))
            }
            SendProtocol::Eager => {
                let args = [wire::pack_ctx_tag(ctx, tag), 0, 0, 0];
                self.endpoint
                    .lock()
                    .send_bulk(dest, h.eager, args, buf.read(0, len), ORDERED)?;
                Ok(SendStart::Complete(buf))
            }
            SendProtocol::Rendezvous => {
                // A gathered buffer streams: it is packed as its chunks leave.
                let src = if buf.is_gathered() {
                    None
                } else {
                    // SAFETY: `buf` becomes this send operation's (below), which ends the
                    // loan when the protocol completes or removes it.
                    unsafe { self.pull_source(dest, ctx, buf.read(0, len)) }
                };
                let (at, loan) = src.map_or((None, None), |s| (Some(s.at), s.loan));
                let id = self.with_protocol(|p| p.post_send(dest, buf, false, loan));
                let args = wire::rts_args(ctx, tag, len, id);
                let mut ep = self.endpoint.lock();
                let sent = match at {
                    Some(at) => {
                        let (payload, n) = wire::rts_payload(&at);
                        ep.send_bulk(dest, h.rts, args, &payload[..n], ORDERED)
                    }
                    None => ep.send_short(dest, h.rts, args, ORDERED, Delivery::Immediate),
                };
                drop(ep);
                if let Err(e) = sent {
                    self.with_protocol(|p| p.abort_send(id));
                    return Err(e.into());
                }
                Ok(SendStart::Rendezvous(id))
            }
        }
    }

    /// Whether send `id` is complete.
    pub(crate) fn send_complete(&self, id: u64) -> bool {
        self.read_protocol(|p| p.send_complete(id))
    }

    /// Removes send `id`, returning its owned buffer.
    pub(crate) fn release_send(&self, id: u64) -> Vec<u8> {
        self.with_protocol(|p| p.release_send(id))
    }

    /// A dropped request: finish it in the background.
    pub(crate) fn detach_send(&self, id: u64) {
        self.with_protocol(|p| p.detach_send(id));
    }

    /// Posts a receive; it may complete at once from an unexpected message.
    pub(crate) fn post_recv(&self, p: Pattern, buf: RecvBuf) -> u64 {
        let (id, cts_queued) = self.with_protocol(|proto| proto.post_recv(p, buf));
        if cts_queued {
            // The CTS is queued for the poller: wake a sleeping progress thread.
            self.worker.wake();
        }
        id
    }

    /// The receive `id`'s outcome once complete.
    pub(crate) fn recv_outcome(&self, id: u64) -> Option<RecvOutcome> {
        self.read_protocol(|p| p.recv_outcome(id))
    }

    /// Receive `id`'s outcome and buffer once complete, removing it; `None` (nothing
    /// changes) while pending. One lock where `recv_outcome` then `release_recv` take two.
    pub(crate) fn finish_recv(&self, id: u64) -> Option<(RecvOutcome, Vec<u8>)> {
        self.lock_state().protocol.finish_recv(id)
    }

    /// Removes receive `id`, returning its buffer (owned or allocated, else empty).
    pub(crate) fn release_recv(&self, id: u64) -> Vec<u8> {
        self.with_protocol(|p| p.release_recv(id))
    }

    /// Drops context `ctx`'s messages with a tag in `tags` that no posted receive takes,
    /// now and later: those of a collective this rank left after the ranks disagreed, so
    /// that a rank still sending to it does not wait forever in a rendezvous.
    pub(crate) fn drain(&self, ctx: u32, tags: std::ops::Range<u32>) {
        if self.with_protocol(|proto| proto.drain(ctx, tags)) {
            // The CTS is queued for the poller: wake a sleeping progress thread.
            self.worker.wake();
        }
    }

    /// Cancels a posted receive that has not matched yet.
    pub(crate) fn cancel_recv(&self, id: u64) -> bool {
        self.with_protocol(|p| p.cancel_recv(id))
    }

    /// A dropped receive request: cancel it if it has not matched, else let it finish in
    /// the background.
    pub(crate) fn detach_recv(&self, id: u64) {
        self.with_protocol(|p| p.detach_recv(id));
    }

    /// The envelope and length of the first unexpected message `p` matches.
    pub(crate) fn probe(&self, p: &Pattern) -> Option<(Envelope, usize)> {
        self.read_protocol(|proto| proto.probe(p))
    }

    /// For each job rank of `srcs`, the envelope and length of the first unexpected
    /// message of context `ctx` from it with a tag in `tags` (under one lock).
    pub(crate) fn probe_tags(
        &self,
        ctx: u32,
        srcs: &[u32],
        tags: std::ops::Range<u32>,
    ) -> Vec<Option<(Envelope, usize)>> {
        self.read_protocol(|proto| {
            srcs.iter()
                .map(|&src| proto.probe_tags(ctx, src, tags.clone()))
                .collect()
        })
    }
}
