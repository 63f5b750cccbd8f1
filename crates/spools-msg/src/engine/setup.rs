//! Building the engine: registering its handlers and its poller, and looking the handler
//! ids up once every rank registered them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use spools_am::{ActiveMessage, AmError, Endpoint, Worker};

use super::state::{
    Engine, HandlerIds, Locked, CTS_HANDLER, DATA_HANDLER, EAGER_HANDLER, RTS_HANDLER,
    SHORT_HANDLER,
};
use crate::protocol::{Limits, Protocol};
use crate::rpc::table::RpcTable;
use spools_am::RankLock;

impl Engine {
    /// Builds the engine and registers its handlers; the caller runs `sync_handlers`
    /// (collective), then [`Engine::lookup_handler_ids`], before any message is sent.
    pub(crate) fn new(
        worker: Worker,
        endpoint: Endpoint,
        hosts: Vec<u32>,
    ) -> Result<Arc<Engine>, AmError> {
        let cfg = worker.config();
        // The thread building the engine (the one that initialised) owns its state when
        // one thread drives the rank.
        let level = cfg.thread_level_in_effect();
        let limits = Limits::new(cfg.short_limit as usize, cfg.eager_limit as usize);
        let size = hosts.len();
        let e = Arc::new(Engine {
            worker: worker.clone(),
            endpoint: RankLock::new(endpoint, level),
            locked: RankLock::new(
                Locked {
                    protocol: Protocol::new(limits),
                    replies: VecDeque::new(),
                },
                level,
            ),
            pending_output: Arc::new(AtomicUsize::new(0)),
            completions: AtomicU64::new(0),
            early: AtomicU64::new(0),
            handler_ids: OnceLock::new(),
            limits,
            next_rpc_call: AtomicU32::new(1),
            next_ctx: AtomicU32::new(crate::protocol::wire::CTX_STRIDE),
            led_dups: AtomicU32::new(0),
            live_comms: Default::default(),
            hosts,
            rpc: RpcTable::default(),
            coll_poller: Default::default(),
            collectives: Mutex::new(Vec::new()),
            cross_host: [AtomicU64::new(0), AtomicU64::new(0)],
            sent: (0..size).map(|_| AtomicU64::new(0)).collect(),
            arrived: (0..size).map(|_| AtomicU64::new(0)).collect(),
        });
        type H = fn(&Engine, &ActiveMessage<'_>);
        let handlers: [(&str, H); 5] = [
            (SHORT_HANDLER, Engine::on_short),
            (EAGER_HANDLER, Engine::on_eager),
            (RTS_HANDLER, Engine::on_rts),
            (CTS_HANDLER, Engine::on_cts),
            (DATA_HANDLER, Engine::on_data),
        ];
        for (name, f) in handlers {
            let w: Weak<Engine> = Arc::downgrade(&e);
            worker.register(name, move |m| {
                if let Some(e) = w.upgrade() {
                    f(&e, m);
                }
            })?;
        }
        let w = Arc::downgrade(&e);
        let pending = e.pending_output.clone();
        worker.add_poller(Arc::new(move || {
            // Checked before upgrading the engine: most rounds have nothing to send.
            if pending.load(Ordering::Acquire) == 0 {
                return Ok(0);
            }
            match w.upgrade() {
                Some(e) => e.flush_outgoing(),
                None => Ok(0),
            }
        }));
        Ok(e)
    }

    /// Looks the handler ids up after `sync_handlers`.
    pub(crate) fn lookup_handler_ids(&self) -> Result<(), AmError> {
        let w = &self.worker;
        let ids = HandlerIds {
            short: w.handler_id(SHORT_HANDLER)?,
            eager: w.handler_id(EAGER_HANDLER)?,
            rts: w.handler_id(RTS_HANDLER)?,
            cts: w.handler_id(CTS_HANDLER)?,
            data: w.handler_id(DATA_HANDLER)?,
        };
        let _ = self.handler_ids.set(ids);
        Ok(())
    }
}
