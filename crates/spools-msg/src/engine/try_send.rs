//! A send that never blocks, for state machines advanced by pollers (non-blocking
//! collectives' schedules): it goes out on the progress engine's lane, or not at all.

use super::ops::SendStart;
use super::state::Engine;
use crate::buffer::Buf;
use crate::error::MsgError;
use crate::protocol::wire;
use crate::protocol::SendProtocol;

impl Engine {
    /// [`Engine::start_send`] that never waits: `Ok(None)` when the transport to `dest`
    /// has no room now (nothing was sent; try again after a progress round). Messages go
    /// on the progress engine's lane, so all sends made through this function to one peer
    /// arrive in order. Safe to call inside a poller.
    ///
    /// # Errors
    /// Transport failures; the engine not set up yet.
    pub(crate) fn try_start_send(
        &self,
        dest: u32,
        ctx: u32,
        tag: u32,
        mut buf: Buf,
    ) -> Result<Option<SendStart>, MsgError> {
        let h = self.handler_ids()?;
        let len = buf.len();
        let w = &self.worker;
        let proto = match self.limits.protocol_for(len) {
            SendProtocol::Eager if len > w.max_fragment(dest) => SendProtocol::Rendezvous,
            p => p,
        };
        let sent = match proto {
            SendProtocol::Short => {
                let args = wire::short_args(ctx, tag, buf.read(0, len));
                w.try_send_short_now(dest, h.short, args, len as u16)?
            }
            SendProtocol::Eager => {
                let args = [wire::pack_ctx_tag(ctx, tag), 0, 0, 0];
                w.try_send_bulk_now(dest, h.eager, args, buf.read(0, len))?
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
                let sent = match at {
                    Some(at) => {
                        let (payload, n) = wire::rts_payload(&at);
                        w.try_send_bulk_now(dest, h.rts, args, &payload[..n])
                    }
                    None => w.try_send_short_now(dest, h.rts, args, 0),
                };
                if !matches!(sent, Ok(true)) {
                    self.with_protocol(|p| p.abort_send(id));
                    sent?;
                    return Ok(None);
                }
                self.count_cross_host(dest, len);
                self.count_sent(dest);
                return Ok(Some(SendStart::Rendezvous(id)));
            }
        };
        if !sent {
            return Ok(None);
        }
        self.count_cross_host(dest, len);
        self.count_sent(dest);
        Ok(Some(SendStart::Complete(buf)))
    }
}
