//! What the protocol's messages carry in the four arguments of an active message, and the
//! reserved contexts. Pure encoding and decoding: no transport here.

use spools_fabric::heap::HeapRef;

use super::matching::Envelope;

/// Context of RPC calls.
pub(crate) const RPC_CTX: u32 = 0xFFFF_FFFE;
/// Context of RPC replies.
pub(crate) const RPC_REPLY_CTX: u32 = 0xFFFF_FFFF;
/// Contexts below this are for communicators (each takes two: point-to-point and
/// collective).
pub(crate) const MAX_CTX: u32 = 0xFFFF_FF00;
/// Inline bytes of a short message.
pub(crate) const SHORT_MAX: usize = 24;

/// A context and a tag in one argument.
pub(crate) fn pack_ctx_tag(ctx: u32, tag: u32) -> u64 {
    u64::from(ctx) | (u64::from(tag) << 32)
}

/// The inverse of [`pack_ctx_tag`].
pub(crate) fn unpack_ctx_tag(a: u64) -> (u32, u32) {
    (a as u32, (a >> 32) as u32)
}

/// The envelope of a short, eager or RTS message from `from` (first argument).
pub(crate) fn envelope(from: u32, args: &[u64; 4]) -> Envelope {
    let (ctx, tag) = unpack_ctx_tag(args[0]);
    Envelope {
        ctx,
        src: from,
        tag,
    }
}

/// The arguments of a short message carrying `data` (at most [`SHORT_MAX`] bytes)
/// inline; its length travels as the channel id.
pub(crate) fn short_args(ctx: u32, tag: u32, data: &[u8]) -> [u64; 4] {
    let mut inline = [0u8; SHORT_MAX];
    inline[..data.len()].copy_from_slice(data);
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&inline[i..i + 8]);
        u64::from_le_bytes(b)
    };
    [pack_ctx_tag(ctx, tag), word(0), word(8), word(16)]
}

/// The inline bytes of a short message and their count (a length field over
/// [`SHORT_MAX`] is read as [`SHORT_MAX`]).
pub(crate) fn short_payload(args: &[u64; 4], len_field: u16) -> ([u8; SHORT_MAX], usize) {
    let mut inline = [0u8; SHORT_MAX];
    for (i, a) in args[1..].iter().enumerate() {
        inline[i * 8..i * 8 + 8].copy_from_slice(&a.to_le_bytes());
    }
    (inline, usize::from(len_field).min(SHORT_MAX))
}

/// The arguments of a request-to-send for `len` bytes of send operation `send_id`.
pub(crate) fn rts_args(ctx: u32, tag: u32, len: usize, send_id: u64) -> [u64; 4] {
    [pack_ctx_tag(ctx, tag), len as u64, send_id, 0]
}

/// The payload of a request-to-send whose data lies in the sender's shared heap: where
/// (the receiver of the same host copies it from there itself).
pub(crate) fn rts_heap_payload(r: &HeapRef) -> [u8; HeapRef::WIRE_BYTES] {
    r.to_bytes()
}

/// The shared-heap reference a request-to-send from job rank `from` carries, if any: a
/// payload that is not a well-formed reference to one of `from`'s segments is ignored
/// (the data then streams as for any rendezvous).
pub(crate) fn rts_heap(from: u32, payload: &[u8]) -> Option<HeapRef> {
    if payload.is_empty() {
        return None;
    }
    HeapRef::from_bytes(payload)
        .ok()
        .filter(|r| r.name.rank() == from)
}

/// A request-to-send's (length, send id).
pub(crate) fn rts_fields(args: &[u64; 4]) -> (u64, u64) {
    (args[1], args[2])
}

/// The arguments of a clear-to-send for send `send_id` into receive `recv_id`
/// (`discard`: the sender completes without sending, because the receive truncated or
/// because the receiver took the data from the sender's shared heap itself).
pub(crate) fn cts_args(send_id: u64, recv_id: u64, discard: bool) -> [u64; 4] {
    [send_id, recv_id, u64::from(discard), 0]
}

/// A clear-to-send's (send id, receive id, discard).
pub(crate) fn cts_fields(args: &[u64; 4]) -> (u64, u64, bool) {
    (args[0], args[1], args[2] != 0)
}

/// The arguments of a rendezvous data chunk.
pub(crate) fn data_args(recv_id: u64, offset: usize) -> [u64; 4] {
    [recv_id, offset as u64, 0, 0]
}

/// A data chunk's (receive id, offset).
pub(crate) fn data_fields(args: &[u64; 4]) -> (u64, u64) {
    (args[0], args[1])
}
