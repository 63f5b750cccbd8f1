//! One progress round ([`Core::progress`]): held messages, messages to self, every active
//! transport, owed replies, upper layers' pollers.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use spools_fabric::{Incoming, Priority};
use spools_proto::am::{AmHeader, GetData, Status, FLAG_LAST, GET_DATA_HEADER_LEN};

use crate::core::Core;
use crate::error::AmError;
use crate::inbox::{Deferred, PollState};

impl Core {
    /// Runs handlers for waiting messages and sends owed replies; returns how many
    /// messages were handled. Only one thread progresses at a time; others get `Ok(0)`.
    pub(crate) fn progress(&self) -> Result<usize, AmError> {
        self.progress_round(None)
    }

    /// [`Core::progress`] that reads the transports for the messages of `peer` only (and
    /// messages to self and held ones), without the pollers, owed replies and queued
    /// TCP bytes: what a wait for a message from a known rank runs between whole rounds.
    pub(crate) fn progress_from(&self, peer: u32) -> Result<usize, AmError> {
        self.progress_round(Some(peer))
    }

    fn progress_round(&self, only: Option<u32>) -> Result<usize, AmError> {
        // Another thread progresses (or, owned, a handler up this thread's stack): it
        // handles what arrives. A lock a handler's panic poisoned is taken as it is: the
        // state is still consistent (the message being handled is simply gone).
        let Some(mut ps) = self.poll.try_lock() else {
            return Ok(0);
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
        let mut deliver = |inc: Incoming<'_>| {
            if let Err(e) = self.dispatch(&mut ps, inc, &mut completed) {
                err.get_or_insert(e);
            }
        };
        match only {
            // Itself (its messages come through the queue above) or a bad rank: nothing
            // to read.
            Some(p) => {
                if let Ok(t) = self.transport(p) {
                    n += t.poll_from(p, &mut deliver)?;
                }
            }
            None => {
                for t in self.active.iter() {
                    n += t.poll(&mut deliver)?;
                }
            }
        }
        // Owed replies, the upper layers' pollers and queued TCP bytes: in whole rounds
        // only (a wait for one rank's message makes one poll in `WHOLE_ROUND` whole).
        if only.is_none() {
            if !ps.deferred.is_empty() {
                self.send_deferred(&mut ps)?;
            }
            let added = self.pollers_added.load(Ordering::Acquire);
            if added != ps.pollers_seen {
                // Copied once per poller added: rounds take no lock for them.
                ps.pollers = self
                    .pollers
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                ps.pollers_seen = added;
            }
            for p in ps.pollers.iter() {
                match p() {
                    Ok(k) => n += k,
                    Err(e) => {
                        err.get_or_insert(e);
                    }
                }
            }
            if self.uses_net {
                if let Some(t) = &self.net {
                    t.flush(0)?;
                }
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

    pub(crate) fn defer_status(&self, ps: &mut PollState, peer: u32, st: Status) {
        ps.deferred
            .push_back(Deferred::Reply(peer, AmHeader::Status(st)));
    }

    fn send_deferred(&self, ps: &mut PollState) -> Result<(), AmError> {
        while let Some(d) = ps.deferred.front_mut() {
            let more = match d {
                Deferred::Reply(peer, h) => {
                    let mut b = Vec::with_capacity(h.encoded_len());
                    h.encode(&mut b);
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
}
