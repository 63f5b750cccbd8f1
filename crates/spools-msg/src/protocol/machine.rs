//! [`Protocol`]: the whole state machine of one rank, which routes inputs to the send
//! and receive sides and hands out what they produce.

use std::collections::VecDeque;

use super::events::{Chunk, Cts, Incoming, Limits, ProtocolError, Pull, RecvOutcome, RpcCall};
use super::matching::{Envelope, Pattern};
use super::recv::RecvSide;
use super::send::SendSide;
use super::wire::RPC_CTX;
use crate::buffer::{Buf, RecvBuf};

/// The messaging protocol of one rank, sans-IO: no locks, no transport, no clock, no
/// threads. Inputs are the application's operations (`post_*`, `cancel_recv`,
/// `detach_*`, `release_*`) and arriving wire messages (`on_message`, `on_cts`,
/// `on_data`); outputs are drained by the engine: clear-to-send messages
/// ([`Protocol::front_cts`]), rendezvous data ([`Protocol::next_chunk`]), RPC calls to run
/// ([`Protocol::take_rpc_calls`]) and the count of operations completed
/// ([`Protocol::take_completed`]), whose outcomes [`Protocol::recv_outcome`] and
/// [`Protocol::send_complete`] tell.
pub(crate) struct Protocol {
    next_id: u64,
    send: SendSide,
    recv: RecvSide,
}

impl Protocol {
    /// A protocol with no operations.
    pub(crate) fn new(limits: Limits) -> Protocol {
        Protocol {
            next_id: 1,
            send: SendSide::default(),
            recv: RecvSide::new(limits),
        }
    }

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // --- inputs: the application ---------------------------------------------------------

    /// Starts a rendezvous send of `buf` to `dest` and returns its id; the caller
    /// transmits the request-to-send ([`super::wire::rts_args`]) naming it, and calls
    /// [`Protocol::abort_send`] if that fails. A `detached` send is removed when it
    /// completes (nobody waits for it). `loan` names the loan of `buf` to `dest` for
    /// one-sided reads, if the engine lent it: it ends when the send completes or is
    /// removed ([`Protocol::pop_ended_loan`]).
    pub(crate) fn post_send(
        &mut self,
        dest: u32,
        buf: Buf,
        detached: bool,
        loan: Option<u32>,
    ) -> u64 {
        let id = self.new_id();
        self.send.insert(id, dest, buf, detached, loan);
        id
    }

    /// A loan of a send buffer that may end (its send completed or was removed: nobody
    /// will read the buffer through it any more).
    pub(crate) fn pop_ended_loan(&mut self) -> Option<u32> {
        self.send.pop_ended_loan()
    }

    /// Removes send `id` whose request-to-send did not leave; its buffer back.
    pub(crate) fn abort_send(&mut self, id: u64) -> Option<Buf> {
        self.send.abort(id)
    }

    /// Posts a receive and returns its id, and whether it matched an unexpected
    /// request-to-send (then a CTS is queued). It may complete at once from an
    /// unexpected message.
    pub(crate) fn post_recv(&mut self, p: Pattern, buf: RecvBuf) -> (u64, bool) {
        self.recv.post(p, buf)
    }

    /// Drops context `ctx`'s messages with a tag in `tags` that no posted receive takes,
    /// now and later (see `RecvSide::drain`); whether a clear-to-send is queued.
    pub(crate) fn drain(&mut self, ctx: u32, tags: std::ops::Range<u32>) -> bool {
        self.recv.drain(ctx, tags)
    }

    /// Cancels receive `id` if no message has matched it yet.
    pub(crate) fn cancel_recv(&mut self, id: u64) -> bool {
        self.recv.cancel(id)
    }

    /// Nobody will wait for receive `id` (its request was dropped).
    pub(crate) fn detach_recv(&mut self, id: u64) {
        self.recv.detach(id);
    }

    /// Nobody will wait for send `id` (its request was dropped).
    pub(crate) fn detach_send(&mut self, id: u64) {
        self.send.detach(id);
    }

    /// Removes receive `id`, returning its buffer (owned or allocated, else empty).
    pub(crate) fn release_recv(&mut self, id: u64) -> Vec<u8> {
        self.recv.release(id)
    }

    /// Removes send `id`, returning its owned buffer (else empty).
    pub(crate) fn release_send(&mut self, id: u64) -> Vec<u8> {
        self.send.release(id)
    }

    /// Receive `id`'s outcome once complete (`None` while pending).
    pub(crate) fn recv_outcome(&self, id: u64) -> Option<RecvOutcome> {
        self.recv.outcome(id)
    }

    /// Receive `id`'s outcome and buffer once complete, removing it (`None`, and nothing
    /// changes, while pending): [`Protocol::recv_outcome`] and [`Protocol::release_recv`]
    /// in one step.
    pub(crate) fn finish_recv(&mut self, id: u64) -> Option<(RecvOutcome, Vec<u8>)> {
        self.recv.finish(id)
    }

    /// The job rank receive `id` waits for, if it names one (not any source) and is
    /// still posted.
    pub(crate) fn recv_source(&self, id: u64) -> Option<u32> {
        self.recv.source(id)
    }

    /// Whether receive `id` is posted and no message has matched it yet.
    pub(crate) fn recv_unmatched(&self, id: u64) -> bool {
        self.recv.is_unmatched(id)
    }

    /// Whether send `id` is complete (released ids are).
    pub(crate) fn send_complete(&self, id: u64) -> bool {
        self.send.is_complete(id)
    }

    /// The envelope and length of the first unexpected message `p` matches (it stays
    /// queued).
    pub(crate) fn probe(&self, p: &Pattern) -> Option<(Envelope, usize)> {
        self.recv.probe(p)
    }

    /// The envelope and length of the first unexpected message of context `ctx` from job
    /// rank `src` with a tag in `tags` (it stays queued).
    pub(crate) fn probe_tags(
        &self,
        ctx: u32,
        src: u32,
        tags: std::ops::Range<u32>,
    ) -> Option<(Envelope, usize)> {
        self.recv.probe_tags(ctx, src, tags)
    }

    // --- inputs: the wire ------------------------------------------------------------------

    /// A short, eager or request-to-send message arrived. Calls (context
    /// [`RPC_CTX`]) are received by the protocol itself.
    pub(crate) fn on_message(&mut self, env: Envelope, inc: Incoming<'_>) {
        if env.ctx == RPC_CTX {
            self.recv.accept_rpc_call(env, inc);
        } else {
            self.recv.arrive(env, inc);
        }
    }

    /// A clear-to-send arrived from `from`.
    ///
    /// # Errors
    /// The send is unknown (released), not for `from`, or not waiting for a CTS.
    pub(crate) fn on_cts(
        &mut self,
        from: u32,
        send_id: u64,
        recv_id: u64,
        discard: bool,
    ) -> Result<(), ProtocolError> {
        self.send.on_cts(from, send_id, recv_id, discard)
    }

    /// A chunk of rendezvous data arrived from `from`.
    ///
    /// # Errors
    /// The receive is unknown (released), does not stream from `from`, or the chunk
    /// lies past the message's end.
    pub(crate) fn on_data(
        &mut self,
        from: u32,
        recv_id: u64,
        offset: u64,
        payload: &[u8],
    ) -> Result<(), ProtocolError> {
        self.recv.on_data(from, recv_id, offset, payload)
    }

    // --- outputs ---------------------------------------------------------------------------

    /// The first clear-to-send to transmit; [`Protocol::pop_cts`] once it left.
    pub(crate) fn front_cts(&self) -> Option<Cts> {
        self.recv.front_cts()
    }

    /// The first clear-to-send left.
    pub(crate) fn pop_cts(&mut self) {
        self.recv.pop_cts();
    }

    /// The next chunk of rendezvous data, from the first stream at or after `slot`, of
    /// at most `max_fragment(dest)` bytes. After transmitting it call
    /// [`Protocol::chunk_sent`]; when the transport is full, ask again from `slot + 1`.
    pub(crate) fn next_chunk(
        &mut self,
        slot: usize,
        max_fragment: impl Fn(u32) -> usize,
    ) -> Option<Chunk<'_>> {
        self.send.next_chunk(slot, max_fragment)
    }

    /// The chunk of `len` bytes at `slot` left.
    pub(crate) fn chunk_sent(&mut self, slot: usize, len: usize) {
        self.send.chunk_sent(slot, len);
    }

    /// The first copy or read of a sender's bytes to make: pass a filler to
    /// [`Protocol::pulled`].
    pub(crate) fn pop_pull(&mut self) -> Option<Pull> {
        self.recv.pop_pull()
    }

    /// Takes the sender's bytes of `pull` into its receive: `fill` copies or reads them
    /// and says whether it could (if not, the data streams instead).
    pub(crate) fn pulled(&mut self, pull: Pull, fill: impl FnOnce(&mut [u8]) -> bool) {
        self.recv.pulled(pull, fill);
    }

    /// The RPC calls that arrived, to run.
    pub(crate) fn take_rpc_calls(&mut self) -> VecDeque<RpcCall> {
        self.recv.take_rpc_calls()
    }

    /// Operations (sends and receives) completed since the last call.
    pub(crate) fn take_completed(&mut self) -> u64 {
        self.send.take_completed() + self.recv.take_completed()
    }

    /// Messages of a collective context (odd) queued as unexpected since the last call.
    pub(crate) fn take_early(&mut self) -> u64 {
        self.recv.take_early()
    }

    /// Whether output (a CTS, a stream, an RPC call) was queued since the last call.
    pub(crate) fn take_new_output(&mut self) -> bool {
        // Both taken: `|` does not short-circuit.
        self.send.take_new_output() | self.recv.take_new_output()
    }

    /// Outputs waiting: CTS messages, streams, RPC calls, copies from shared heaps.
    pub(crate) fn pending_output(&self) -> usize {
        self.recv.cts_len()
            + self.send.streams_len()
            + self.recv.rpc_calls_len()
            + self.recv.pulls_len()
    }

    /// Operations held (sends, receives), for tests.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.send.len(), self.recv.len())
    }

    /// Buffers kept for unexpected messages, for tests.
    #[cfg(test)]
    pub(crate) fn pool_len(&self) -> usize {
        self.recv.pool_len()
    }

    /// Unexpected messages queued, for tests.
    #[cfg(test)]
    pub(crate) fn unexpected_len(&self) -> usize {
        self.recv.unexpected_len()
    }
}
