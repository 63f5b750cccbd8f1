//! Wire messages in: the active-message layer's handlers decode them and feed the protocol. They
//! run under the active-message layer's progress lock and never send.

use spools_am::ActiveMessage;

use super::state::Engine;
use crate::protocol::wire;
use crate::protocol::Incoming;

impl Engine {
    pub(super) fn on_short(&self, m: &ActiveMessage<'_>) {
        let env = wire::envelope(m.from, &m.args);
        let (inline, len) = wire::short_payload(&m.args, m.channel);
        self.with_protocol(|p| p.on_message(env, Incoming::Data(&inline[..len])));
        self.count_arrived(m.from, env.ctx);
    }

    pub(super) fn on_eager(&self, m: &ActiveMessage<'_>) {
        let env = wire::envelope(m.from, &m.args);
        self.with_protocol(|p| p.on_message(env, Incoming::Data(m.payload)));
        self.count_arrived(m.from, env.ctx);
    }

    pub(super) fn on_rts(&self, m: &ActiveMessage<'_>) {
        let env = wire::envelope(m.from, &m.args);
        let (len, send_id) = wire::rts_fields(&m.args);
        let at = wire::rts_source(m.from, m.payload);
        self.with_protocol(|p| p.on_message(env, Incoming::Rts { len, send_id, at }));
        self.count_arrived(m.from, env.ctx);
    }

    pub(super) fn on_cts(&self, m: &ActiveMessage<'_>) {
        let (send_id, recv_id, discard) = wire::cts_fields(&m.args);
        // A CTS the protocol refuses (for a send released early, or malformed) is
        // dropped: nobody waits for it.
        let _refused = self.with_protocol(|p| p.on_cts(m.from, send_id, recv_id, discard));
    }

    pub(super) fn on_data(&self, m: &ActiveMessage<'_>) {
        let (recv_id, offset) = wire::data_fields(&m.args);
        // Data the protocol refuses (for a receive released early, or malformed) is
        // dropped.
        let _refused = self.with_protocol(|p| p.on_data(m.from, recv_id, offset, m.payload));
    }
}
