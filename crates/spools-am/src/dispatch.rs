//! One incoming message ([`Core::dispatch`]): run a handler (short, batch, bulk after
//! reassembly), serve a put or get on a registered region, complete this rank's own put or
//! get, or record an error a target reported back.

use std::sync::{Arc, PoisonError};

use spools_fabric::Incoming;
use spools_fabric::RemoteRegion;
use spools_proto::am::{
    AmHeader, Bulk, Get, GetData, Put, RmaAsk, RmaKey, Short, Status, StatusCode, StatusOp,
    FLAG_EXPOSED, FLAG_LAST, SHORT_LEN,
};

use crate::core::Core;
use crate::error::AmError;
use crate::inbox::{Deferred, PollState, MAX_HELD_BYTES};
use crate::message::ActiveMessage;
use crate::region::RegionMem;

impl Core {
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

    /// Handles one incoming message. `completed` is set when it finished one of this
    /// rank's own operations (a waiter may want waking).
    pub(crate) fn dispatch(
        &self,
        ps: &mut PollState,
        inc: Incoming<'_>,
        completed: &mut bool,
    ) -> Result<(), AmError> {
        let from = inc.from;
        let (hdr, payload) = AmHeader::decode(inc.bytes)
            .map_err(|source| AmError::Malformed { peer: from, source })?;
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
                self.run_short(from, &s, ps);
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
                self.run_batch(from, payload, ps)?;
            }
            AmHeader::Bulk(b) => {
                // A peer's announced total is bounded by this rank's own bulk limit, so
                // reassembly never grows past it.
                if u64::from(b.total) > self.cfg.bulk_limit {
                    return Err(AmError::BulkOverLimit {
                        peer: from,
                        total: u64::from(b.total),
                        limit: self.cfg.bulk_limit,
                    });
                }
                if beyond_table(b.handler) && self.hold(ps, &inc) {
                    return Ok(());
                }
                self.on_bulk(ps, &inc, &b, payload)?;
            }
            AmHeader::Put(p) => self.serve_put(ps, from, &p, payload),
            AmHeader::Get(g) => self.serve_get(ps, from, &g),
            AmHeader::GetData(d) => *completed |= self.complete_get_data(&d, payload),
            AmHeader::Status(st) => {
                self.on_status(from, &st);
                *completed = true;
            }
            AmHeader::RmaAsk(a) => self.serve_rma_ask(ps, from, &a),
            AmHeader::RmaKey(k) => {
                self.on_rma_key(&k);
                *completed = true;
            }
            AmHeader::RmaDone(d) => {
                ps.leases.remove(&(from, d.token));
            }
        }
        Ok(())
    }

    /// Runs the records of a batch in order.
    fn run_batch(&self, from: u32, payload: &[u8], ps: &mut PollState) -> Result<(), AmError> {
        for rec in payload.chunks_exact(SHORT_LEN) {
            let Ok(rec) = <&[u8; SHORT_LEN]>::try_from(rec) else {
                continue;
            };
            let s = Short::from_array(rec)
                .map_err(|source| AmError::Malformed { peer: from, source })?;
            self.run_short(from, &s, ps);
        }
        Ok(())
    }

    /// Reassembles a bulk message (fragments of one stream arrive in order) and runs its
    /// handler on the whole payload.
    fn on_bulk(
        &self,
        ps: &mut PollState,
        inc: &Incoming<'_>,
        b: &Bulk,
        payload: &[u8],
    ) -> Result<(), AmError> {
        let from = inc.from;
        let key = (from, inc.lane, inc.priority as u8);
        let whole;
        let body: &[u8] = if b.offset == 0 && payload.len() == b.total as usize {
            payload
        } else {
            let buf = ps.reasm.entry(key).or_default();
            if buf.len() != b.offset as usize {
                let expected = buf.len();
                ps.reasm.remove(&key);
                return Err(AmError::FragmentOutOfSequence {
                    peer: from,
                    offset: b.offset,
                    expected,
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
            Some(h) => h(&ActiveMessage {
                from,
                channel: b.channel,
                args: b.args,
                payload: body,
            }),
            None => self.defer_status(
                ps,
                from,
                Status {
                    op: StatusOp::Message,
                    code: StatusCode::UnknownHandler,
                    token: b.handler,
                },
            ),
        }
        Ok(())
    }

    /// Writes a put's chunk into the region (or refuses it, touching nothing) and owes the
    /// initiator a status after the last chunk.
    fn serve_put(&self, ps: &mut PollState, from: u32, p: &Put, payload: &[u8]) {
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

    /// Queues the data of a get (streamed by the progress round as the peer has room), or
    /// the status that refuses it.
    fn serve_get(&self, ps: &mut PollState, from: u32, g: &Get) {
        match self.region_range(g.key, g.offset, g.len) {
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
        }
    }

    /// Answers a request for region `a.key`'s network address and key (zero, without
    /// [`FLAG_EXPOSED`], when the region is not exposed to the network), and keeps an
    /// exposed region until the asker's [`RmaDone`](spools_proto::am::RmaDone).
    fn serve_rma_ask(&self, ps: &mut PollState, from: u32, a: &RmaAsk) {
        let mem = self
            .regions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&a.key)
            .cloned();
        let found = mem.map(|m| {
            let remote = m.remote();
            if remote.is_some() {
                ps.leases.insert((from, a.token), m);
            }
            remote
        });
        let k = match found {
            None => RmaKey {
                token: a.token,
                code: StatusCode::UnknownRegion,
                flags: 0,
                addr: 0,
                rkey: 0,
                len: 0,
            },
            Some(remote) => {
                let r = remote.unwrap_or(RemoteRegion {
                    addr: 0,
                    key: 0,
                    len: 0,
                });
                RmaKey {
                    token: a.token,
                    code: StatusCode::Ok,
                    flags: if remote.is_some() { FLAG_EXPOSED } else { 0 },
                    addr: r.addr,
                    rkey: r.key,
                    len: r.len,
                }
            }
        };
        ps.deferred
            .push_back(Deferred::Reply(from, AmHeader::RmaKey(k)));
    }

    /// The answer to this rank's request for a region's network key.
    fn on_rma_key(&self, k: &RmaKey) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(op) = ops.get_mut(&k.token).filter(|op| !op.is_get) {
            op.done = true;
            op.code = k.code;
            op.remote = (k.flags & FLAG_EXPOSED != 0).then_some(RemoteRegion {
                addr: k.addr,
                key: k.rkey,
                len: k.len,
            });
        }
    }

    /// Copies a chunk of this rank's own get into the waiting caller's buffer; true when
    /// the get is now complete.
    fn complete_get_data(&self, d: &GetData, payload: &[u8]) -> bool {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        // An unknown token is a get its initiator gave up on: drop the data. Data for a
        // put's token is malformed.
        let Some(op) = ops.get_mut(&d.token).filter(|op| op.is_get) else {
            return false;
        };
        let end = d.chunk.checked_add(payload.len() as u64);
        if end.is_none_or(|e| e > op.len as u64) {
            op.done = true;
            op.code = StatusCode::Malformed;
        } else {
            if !payload.is_empty() {
                // SAFETY: `dest` is the buffer of a get() call that is still waiting (it
                // removes its op before returning), and the non-empty range lies inside it
                // (checked above).
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
        op.done
    }

    /// A status from a target: completes this rank's put or get, or records that the
    /// target had no handler for a message.
    fn on_status(&self, from: u32, st: &Status) {
        match st.op {
            StatusOp::Put | StatusOp::Get => {
                let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
                let want_get = st.op == StatusOp::Get;
                if let Some(op) = ops.get_mut(&st.token).filter(|op| op.is_get == want_get) {
                    op.done = true;
                    op.code = st.code;
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
            }
        }
    }
}
