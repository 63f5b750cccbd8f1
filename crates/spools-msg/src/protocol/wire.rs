//! What the protocol's messages carry in the four arguments of an active message, and the
//! reserved contexts. Pure encoding and decoding: no transport here.

use spools_am::RemoteRegion;
use spools_heap::HeapRef;

use super::events::DataAt;
use super::matching::Envelope;

/// Context of RPC calls.
pub(crate) const RPC_CTX: u32 = 0xFFFF_FFFE;
/// Context of RPC replies.
pub(crate) const RPC_REPLY_CTX: u32 = 0xFFFF_FFFF;
/// Contexts below this are for communicators (each takes `CTX_STRIDE`).
pub(crate) const MAX_CTX: u32 = 0xFFFF_FF00;
/// How many context ids a communicator takes: `ctx` (point-to-point), `ctx + 1`
/// (blocking collectives, `CommCore::coll_ctx`), `ctx + 2` (partitioned messages,
/// `Communicator::partitioned`) and `ctx + 3` (non-blocking collectives): the last two
/// are the point-to-point and collective contexts of `CommCore::nonblocking`.
pub(crate) const CTX_STRIDE: u32 = 4;
pub(crate) use super::events::SHORT_MAX;

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

/// The first byte of a request-to-send's payload that says the data lies in the
/// sender's shared heap (a [`HeapRef`] follows).
const RTS_AT_HEAP: u8 = 1;
/// The first byte of a request-to-send's payload that says the data is lent through the
/// network (a [`RemoteRegion`] follows: address, key, length, each 8 bytes
/// little-endian).
const RTS_AT_NET: u8 = 2;
/// Bytes of a [`RemoteRegion`] on the wire.
const REGION_BYTES: usize = 24;
/// Largest payload of a request-to-send.
pub(crate) const RTS_PAYLOAD_MAX: usize = 1 + HeapRef::WIRE_BYTES;

/// The payload of a request-to-send whose receiver may take the data itself (`at`):
/// a kind byte, then where. Returns the buffer and the bytes of it used.
pub(crate) fn rts_payload(at: &DataAt) -> ([u8; RTS_PAYLOAD_MAX], usize) {
    let mut b = [0u8; RTS_PAYLOAD_MAX];
    match at {
        DataAt::Heap(r) => {
            b[0] = RTS_AT_HEAP;
            b[1..1 + HeapRef::WIRE_BYTES].copy_from_slice(&r.to_bytes());
            (b, 1 + HeapRef::WIRE_BYTES)
        }
        DataAt::Net(r) => {
            b[0] = RTS_AT_NET;
            for (i, w) in [r.addr, r.key, r.len].into_iter().enumerate() {
                b[1 + i * 8..9 + i * 8].copy_from_slice(&w.to_le_bytes());
            }
            (b, 1 + REGION_BYTES)
        }
    }
}

/// Where the data of a request-to-send from job rank `from` may be taken, if its payload
/// says: a payload that is empty, of an unknown kind, of the wrong length, or naming a
/// shared-heap segment that is not `from`'s, is ignored (the data then streams as for
/// any rendezvous).
pub(crate) fn rts_source(from: u32, payload: &[u8]) -> Option<DataAt> {
    let (&kind, rest) = payload.split_first()?;
    match kind {
        RTS_AT_HEAP => HeapRef::from_bytes(rest)
            .ok()
            .filter(|r| r.name.rank() == from)
            .map(DataAt::Heap),
        RTS_AT_NET if rest.len() == REGION_BYTES => {
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&rest[i * 8..i * 8 + 8]);
                u64::from_le_bytes(w)
            };
            Some(DataAt::Net(RemoteRegion {
                addr: word(0),
                key: word(1),
                len: word(2),
            }))
        }
        _ => None,
    }
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

/// Every decoder above over untrusted bytes: the first 4 bytes as the sender's rank, the
/// next 34 as four argument words and a length field, the rest as a request-to-send's
/// payload (see [`crate::decode_untrusted`]). Returns 1 when the payload names a place to
/// take the data from, else 0.
pub(crate) fn decode_any(data: &[u8]) -> usize {
    let Some((from, rest)) = data.split_first_chunk::<4>() else {
        return 0;
    };
    let from = u32::from_le_bytes(*from);
    let mut ok = 0;
    if let Some((head, payload)) = rest.split_first_chunk::<34>() {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        let args = [word(0), word(1), word(2), word(3)];
        let len_field = u16::from_le_bytes([head[32], head[33]]);
        let env = envelope(from, &args);
        let (_, n) = short_payload(&args, len_field);
        let _ = (rts_fields(&args), cts_fields(&args), data_fields(&args));
        // The argument words decode to something whatever they hold: only the
        // request-to-send's payload can be refused.
        let _ = (env, n);
        ok += usize::from(rts_source(from, payload).is_some());
    }
    ok
}

#[cfg(test)]
mod garbage_tests {
    use super::*;

    /// Every length and a spread of byte patterns: a value or nothing, never a panic; a
    /// payload that names another rank's heap segment is refused.
    #[test]
    fn untrusted_bytes_decode_to_a_value_or_nothing() {
        for len in 0..96usize {
            for seed in 0..16u8 {
                let b: Vec<u8> = (0..len)
                    .map(|i| (i as u8).wrapping_mul(37) ^ seed.wrapping_mul(101))
                    .collect();
                let _ = decode_any(&b);
            }
        }
        let heap = DataAt::Heap(HeapRef {
            name: spools_heap::HeapName::new(9, 3, 1),
            offset: 64,
        });
        let (p, n) = rts_payload(&heap);
        assert_eq!(rts_source(3, &p[..n]), Some(heap));
        assert_eq!(
            rts_source(4, &p[..n]),
            None,
            "rank 4 cannot name rank 3's segment"
        );
        assert_eq!(rts_source(3, &p[..n - 1]), None, "a cut payload is refused");
    }
}
