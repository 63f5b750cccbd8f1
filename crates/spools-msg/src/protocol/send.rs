//! The send side of the rendezvous protocol: sends waiting for their clear-to-send, and
//! the streams of data chunks that follow it. Short and eager sends leave at once and
//! never appear here.

use std::collections::VecDeque;

use super::events::{Chunk, ProtocolError};
use crate::buffer::Buf;
use crate::idhash::IdMap;

/// Where a rendezvous send is.
enum SendState {
    /// The request-to-send left; the receiver has not matched it yet.
    AwaitingCts,
    /// Matched: the data streams to receive `recv_id`; `offset` bytes have left.
    Streaming { recv_id: u64, offset: usize },
    /// All data left (or the receiver discarded it): the buffer is free.
    Complete,
}

struct SendOp {
    dest: u32,
    buf: Buf,
    state: SendState,
    /// Nobody waits for it (a dropped request, an RPC reply): remove it on completion.
    detached: bool,
    /// The loan of `buf` to `dest` for one-sided reads, if lent.
    loan: Option<u32>,
}

/// Rendezvous sends by operation id, and the ones streaming, in order of their CTS.
#[derive(Default)]
pub(crate) struct SendSide {
    sends: IdMap<u64, SendOp>,
    streams: VecDeque<u64>,
    /// Operations completed since the last [`SendSide::take_completed`].
    completed: u64,
    /// A stream started since the last [`SendSide::take_new_output`].
    new_output: bool,
    /// Loans of sends completed or removed, to end.
    ended_loans: Vec<u32>,
}

impl SendSide {
    /// Records rendezvous send `id` of `buf` to `dest` (lent to it as `loan`), waiting
    /// for its CTS.
    pub(crate) fn insert(
        &mut self,
        id: u64,
        dest: u32,
        buf: Buf,
        detached: bool,
        loan: Option<u32>,
    ) {
        let op = SendOp {
            dest,
            buf,
            state: SendState::AwaitingCts,
            detached,
            loan,
        };
        self.sends.insert(id, op);
    }

    /// Removes send `id`, ending its loan.
    fn remove(&mut self, id: u64) -> Option<SendOp> {
        let mut op = self.sends.remove(&id)?;
        if let Some(l) = op.loan.take() {
            self.ended_loans.push(l);
        }
        Some(op)
    }

    /// Removes send `id` whose request-to-send could not leave, returning its buffer.
    pub(crate) fn abort(&mut self, id: u64) -> Option<Buf> {
        self.remove(id).map(|o| o.buf)
    }

    /// A loan to end (its send completed or was removed).
    pub(crate) fn pop_ended_loan(&mut self) -> Option<u32> {
        self.ended_loans.pop()
    }

    /// Whether send `id` is complete (an unknown id is: it was released).
    pub(crate) fn is_complete(&self, id: u64) -> bool {
        self.sends
            .get(&id)
            .is_none_or(|s| matches!(s.state, SendState::Complete))
    }

    /// Removes send `id`, returning its owned buffer (empty if borrowed or unknown).
    pub(crate) fn release(&mut self, id: u64) -> Vec<u8> {
        self.remove(id).map(|o| o.buf.take()).unwrap_or_default()
    }

    /// Nobody will wait for send `id`: remove it now if complete, else when it completes.
    pub(crate) fn detach(&mut self, id: u64) {
        match self.sends.get_mut(&id) {
            Some(o) if matches!(o.state, SendState::Complete) => {
                self.sends.remove(&id);
            }
            Some(o) => o.detached = true,
            None => {}
        }
    }

    /// Send `id` is over: its loan ends (nobody reads the buffer any more); a detached
    /// one is removed.
    fn complete(&mut self, id: u64) {
        self.completed += 1;
        if let Some(op) = self.sends.get_mut(&id) {
            op.state = SendState::Complete;
            if let Some(l) = op.loan.take() {
                self.ended_loans.push(l);
            }
            if op.detached {
                self.sends.remove(&id);
            }
        }
    }

    /// A clear-to-send from `from` for send `send_id`, to stream into receive `recv_id`
    /// (or, with `discard`, to complete without sending: the receiver truncated).
    pub(crate) fn on_cts(
        &mut self,
        from: u32,
        send_id: u64,
        recv_id: u64,
        discard: bool,
    ) -> Result<(), ProtocolError> {
        let Some(op) = self.sends.get_mut(&send_id) else {
            return Err(ProtocolError::UnknownSend {
                peer: from,
                send_id,
            });
        };
        if op.dest != from {
            return Err(ProtocolError::CtsFromWrongPeer {
                peer: from,
                send_id,
                dest: op.dest,
            });
        }
        if !matches!(op.state, SendState::AwaitingCts) {
            return Err(ProtocolError::DuplicateCts {
                peer: from,
                send_id,
            });
        }
        if discard {
            self.complete(send_id);
        } else {
            op.state = SendState::Streaming { recv_id, offset: 0 };
            self.streams.push_back(send_id);
            self.new_output = true;
        }
        Ok(())
    }

    /// The next chunk to transmit, from the first stream at or after `slot`, at most
    /// `max_fragment(dest)` bytes. Streams found finished on the way complete.
    pub(crate) fn next_chunk(
        &mut self,
        slot: usize,
        max_fragment: impl Fn(u32) -> usize,
    ) -> Option<Chunk<'_>> {
        let id = loop {
            let id = *self.streams.get(slot)?;
            match self.sends.get(&id) {
                Some(SendOp {
                    state: SendState::Streaming { offset, .. },
                    buf,
                    ..
                }) if *offset < buf.len() => break id,
                Some(SendOp {
                    state: SendState::Streaming { .. },
                    ..
                }) => {
                    self.streams.remove(slot);
                    self.complete(id);
                }
                // Released while streaming (its blocking call failed): drop the stream.
                _ => {
                    self.streams.remove(slot);
                }
            }
        };
        let op = self.sends.get_mut(&id)?;
        let SendState::Streaming { recv_id, offset } = op.state else {
            return None;
        };
        let len = (op.buf.len() - offset).min(max_fragment(op.dest).max(1));
        Some(Chunk {
            slot,
            to: op.dest,
            recv_id,
            offset,
            bytes: op.buf.read(offset, len),
        })
    }

    /// The chunk of `len` bytes from the stream at `slot` left; a stream whose last
    /// chunk left completes.
    pub(crate) fn chunk_sent(&mut self, slot: usize, len: usize) {
        let Some(&id) = self.streams.get(slot) else {
            return;
        };
        let Some(op) = self.sends.get_mut(&id) else {
            return;
        };
        let SendState::Streaming { offset, .. } = &mut op.state else {
            return;
        };
        *offset += len;
        if *offset >= op.buf.len() {
            self.streams.remove(slot);
            self.complete(id);
        }
    }

    /// Streams with data left to send.
    pub(crate) fn streams_len(&self) -> usize {
        self.streams.len()
    }

    /// Operations completed since the last call.
    pub(crate) fn take_completed(&mut self) -> u64 {
        std::mem::take(&mut self.completed)
    }

    /// Whether a stream started since the last call.
    pub(crate) fn take_new_output(&mut self) -> bool {
        std::mem::take(&mut self.new_output)
    }

    /// Number of send operations held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sends.len()
    }
}
