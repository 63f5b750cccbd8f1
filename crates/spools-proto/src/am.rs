//! Active-message headers (GRIM section 5.1, StarT-X section 3).
//!
//! Every message a rank sends to another through a transport starts with one of these
//! headers; the payload, if any, follows it in the same transport message.
//!
//! | kind | header bytes | payload |
//! |---|---|---|
//! | [`Short`] | 40 | none |
//! | [`Bulk`] fragment | 48 | part of the bulk payload |
//! | [`AmHeader::Batch`] | 8 | `count` short messages, 40 bytes each |
//! | [`Put`] chunk | 40 | part of the put data |
//! | [`Get`] request | 32 | none |
//! | [`GetData`] chunk | 16 | part of the requested bytes |
//! | [`Status`] | 8 | none |
//! | [`RmaAsk`] | 12 | none |
//! | [`RmaKey`] | 32 | none |
//! | [`RmaDone`] | 8 | none |
//!
//! [`RmaAsk`], [`RmaKey`] and [`RmaDone`] serve transports with remote memory access
//! (libfabric): for a large put or get the initiator asks for the network address and
//! key of the target's region, which the target then keeps (even if its owner withdraws
//! it meanwhile) until the initiator, having written or read it one-sidedly, says it is
//! done.

use crate::codec::{put_u16, put_u32, put_u64, Reader};
use crate::WireError;

/// Bytes of a short message.
pub const SHORT_LEN: usize = 40;
/// Bytes of a bulk fragment's header.
pub const BULK_HEADER_LEN: usize = 48;
/// Bytes of a batch header (the short messages follow).
pub const BATCH_HEADER_LEN: usize = 8;
/// Bytes of a put chunk's header.
pub const PUT_HEADER_LEN: usize = 40;
/// Bytes of a get request.
pub const GET_LEN: usize = 32;
/// Bytes of a get data chunk's header.
pub const GET_DATA_HEADER_LEN: usize = 16;
/// Bytes of a status message.
pub const STATUS_LEN: usize = 8;
/// Bytes of a request for a region's network key.
pub const RMA_ASK_LEN: usize = 12;
/// Bytes of the answer to it.
pub const RMA_KEY_LEN: usize = 32;
/// Bytes of the end of a one-sided access.
pub const RMA_DONE_LEN: usize = 8;

/// Flag: this chunk is the last of its transfer.
pub const FLAG_LAST: u8 = 1;
/// Flag: the message travels on an unordered channel.
pub const FLAG_UNORDERED: u8 = 2;
/// Flag of an [`RmaKey`]: the region is exposed to the network (else its address and
/// key are zero and the initiator uses [`Put`] and [`Get`] messages).
pub const FLAG_EXPOSED: u8 = 1;

/// A short active message: handler id and four 64-bit arguments, no payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Short {
    /// Global handler id.
    pub handler: u32,
    /// Logical channel.
    pub channel: u16,
    /// Flags ([`FLAG_UNORDERED`]).
    pub flags: u8,
    /// Arguments.
    pub args: [u64; 4],
}

/// One fragment of a bulk active message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bulk {
    /// Global handler id.
    pub handler: u32,
    /// Logical channel.
    pub channel: u16,
    /// Flags ([`FLAG_UNORDERED`]).
    pub flags: u8,
    /// Length of the whole payload.
    pub total: u32,
    /// Offset of this fragment in the payload.
    pub offset: u32,
    /// Arguments.
    pub args: [u64; 4],
}

/// One chunk of a put into a registered region of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put {
    /// Initiator's operation token, echoed in the [`Status`].
    pub token: u32,
    /// Region key at the target.
    pub key: u32,
    /// Offset of the whole put in the region.
    pub offset: u64,
    /// Length of the whole put.
    pub total: u64,
    /// Offset of this chunk within the put.
    pub chunk: u64,
    /// Flags ([`FLAG_LAST`]).
    pub flags: u8,
}

/// A request to read from a registered region of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Get {
    /// Initiator's operation token, echoed in the data chunks or the [`Status`].
    pub token: u32,
    /// Region key at the target.
    pub key: u32,
    /// Offset in the region.
    pub offset: u64,
    /// Bytes to read.
    pub len: u64,
}

/// One chunk of the answer to a [`Get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetData {
    /// The get's token.
    pub token: u32,
    /// Offset of this chunk within the requested bytes.
    pub chunk: u64,
    /// Flags ([`FLAG_LAST`]).
    pub flags: u8,
}

/// Which operation a [`Status`] reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOp {
    /// A put (token = the put's token).
    Put,
    /// A get (token = the get's token).
    Get,
    /// An active message (token = the handler id).
    Message,
}

/// Outcome codes carried by a [`Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    /// Done.
    Ok,
    /// No handler is registered under that id at the target.
    UnknownHandler,
    /// No region is registered under that key at the target.
    UnknownRegion,
    /// The range lies outside the region; no memory was touched.
    OutOfBounds,
    /// The message was malformed.
    Malformed,
}

impl StatusCode {
    fn code(self) -> u16 {
        match self {
            StatusCode::Ok => 0,
            StatusCode::UnknownHandler => 1,
            StatusCode::UnknownRegion => 2,
            StatusCode::OutOfBounds => 3,
            StatusCode::Malformed => 4,
        }
    }

    fn from_code(c: u16) -> Result<Self, WireError> {
        Ok(match c {
            0 => StatusCode::Ok,
            1 => StatusCode::UnknownHandler,
            2 => StatusCode::UnknownRegion,
            3 => StatusCode::OutOfBounds,
            4 => StatusCode::Malformed,
            other => {
                return Err(WireError::Invalid {
                    what: "status code",
                    value: u64::from(other),
                })
            }
        })
    }
}

/// The completion or failure of an operation, sent back to its initiator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Which operation.
    pub op: StatusOp,
    /// Outcome.
    pub code: StatusCode,
    /// Token of the operation (the handler id for [`StatusOp::Message`]).
    pub token: u32,
}

/// A request for the network address and key of a registered region of the target
/// (for one-sided puts and gets through a transport with remote memory access). The
/// target keeps the region's memory and registration until the [`RmaDone`] of the same
/// token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaAsk {
    /// Initiator's operation token, echoed in the [`RmaKey`].
    pub token: u32,
    /// Region key at the target.
    pub key: u32,
}

/// The answer to an [`RmaAsk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaKey {
    /// The ask's token.
    pub token: u32,
    /// [`StatusCode::Ok`], or [`StatusCode::UnknownRegion`].
    pub code: StatusCode,
    /// Flags ([`FLAG_EXPOSED`]).
    pub flags: u8,
    /// The network address of the region's first byte.
    pub addr: u64,
    /// The network key of the region.
    pub rkey: u64,
    /// The region's length.
    pub len: u64,
}

/// The initiator's one-sided access under `token` is over: the target may let the
/// region go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaDone {
    /// The [`RmaAsk`]'s token.
    pub token: u32,
}

/// Any active-message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmHeader {
    /// See [`Short`].
    Short(Short),
    /// See [`Bulk`].
    Bulk(Bulk),
    /// A batch of `count` short messages (StarT-X's batched queue).
    Batch {
        /// Number of short messages that follow.
        count: u16,
    },
    /// See [`Put`].
    Put(Put),
    /// See [`Get`].
    Get(Get),
    /// See [`GetData`].
    GetData(GetData),
    /// See [`Status`].
    Status(Status),
    /// See [`RmaAsk`].
    RmaAsk(RmaAsk),
    /// See [`RmaKey`].
    RmaKey(RmaKey),
    /// See [`RmaDone`].
    RmaDone(RmaDone),
}

const K_SHORT: u8 = 1;
const K_BULK: u8 = 2;
const K_BATCH: u8 = 3;
const K_PUT: u8 = 4;
const K_GET: u8 = 5;
const K_GET_DATA: u8 = 6;
const K_STATUS: u8 = 7;
const K_RMA_ASK: u8 = 8;
const K_RMA_KEY: u8 = 9;
const K_RMA_DONE: u8 = 10;

impl Short {
    /// Writes the 40 bytes of this message into `out`.
    #[inline]
    pub fn write(&self, out: &mut [u8; SHORT_LEN]) {
        out[0] = K_SHORT;
        out[1] = self.flags;
        out[2..4].copy_from_slice(&self.channel.to_le_bytes());
        out[4..8].copy_from_slice(&self.handler.to_le_bytes());
        for (i, a) in self.args.iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
    }

    /// Reads a short message from exactly [`SHORT_LEN`] bytes (the batch fast path: no
    /// length checks beyond the array type).
    ///
    /// # Errors
    /// [`WireError::UnknownKind`] if the bytes are not a short message.
    #[inline]
    pub fn from_array(b: &[u8; SHORT_LEN]) -> Result<Short, WireError> {
        if b[0] != K_SHORT {
            return Err(WireError::UnknownKind(b[0]));
        }
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Short {
            handler: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            channel: u16::from_le_bytes([b[2], b[3]]),
            flags: b[1],
            args: [u64_at(8), u64_at(16), u64_at(24), u64_at(32)],
        })
    }

    /// Reads a short message from the first [`SHORT_LEN`] bytes of `b`.
    ///
    /// # Errors
    /// [`WireError`] if the bytes are not a short message.
    #[inline]
    pub fn read(b: &[u8]) -> Result<Short, WireError> {
        let mut r = Reader::new(b);
        let kind = r.u8()?;
        if kind != K_SHORT {
            return Err(WireError::UnknownKind(kind));
        }
        let flags = r.u8()?;
        let channel = r.u16()?;
        let handler = r.u32()?;
        let args = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        Ok(Short {
            handler,
            channel,
            flags,
            args,
        })
    }
}

impl AmHeader {
    /// Bytes the header takes on the wire (what [`AmHeader::encode`] appends).
    pub fn encoded_len(&self) -> usize {
        match self {
            AmHeader::Short(_) => SHORT_LEN,
            AmHeader::Bulk(_) => BULK_HEADER_LEN,
            AmHeader::Batch { .. } => BATCH_HEADER_LEN,
            AmHeader::Put(_) => PUT_HEADER_LEN,
            AmHeader::Get(_) => GET_LEN,
            AmHeader::GetData(_) => GET_DATA_HEADER_LEN,
            AmHeader::Status(_) => STATUS_LEN,
            AmHeader::RmaAsk(_) => RMA_ASK_LEN,
            AmHeader::RmaKey(_) => RMA_KEY_LEN,
            AmHeader::RmaDone(_) => RMA_DONE_LEN,
        }
    }

    /// Appends the header's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            AmHeader::Short(s) => {
                let mut b = [0u8; SHORT_LEN];
                s.write(&mut b);
                out.extend_from_slice(&b);
            }
            AmHeader::Bulk(b) => {
                out.push(K_BULK);
                out.push(b.flags);
                put_u16(out, b.channel);
                put_u32(out, b.handler);
                put_u32(out, b.total);
                put_u32(out, b.offset);
                for a in b.args {
                    put_u64(out, a);
                }
            }
            AmHeader::Batch { count } => {
                out.push(K_BATCH);
                out.push(0);
                put_u16(out, *count);
                put_u32(out, 0);
            }
            AmHeader::Put(p) => {
                out.push(K_PUT);
                out.push(p.flags);
                put_u16(out, 0);
                put_u32(out, p.token);
                put_u32(out, p.key);
                put_u32(out, 0);
                put_u64(out, p.offset);
                put_u64(out, p.total);
                put_u64(out, p.chunk);
            }
            AmHeader::Get(g) => {
                out.push(K_GET);
                out.push(0);
                put_u16(out, 0);
                put_u32(out, g.token);
                put_u32(out, g.key);
                put_u32(out, 0);
                put_u64(out, g.offset);
                put_u64(out, g.len);
            }
            AmHeader::GetData(d) => {
                out.push(K_GET_DATA);
                out.push(d.flags);
                put_u16(out, 0);
                put_u32(out, d.token);
                put_u64(out, d.chunk);
            }
            AmHeader::Status(s) => {
                out.push(K_STATUS);
                out.push(match s.op {
                    StatusOp::Put => 1,
                    StatusOp::Get => 2,
                    StatusOp::Message => 3,
                });
                put_u16(out, s.code.code());
                put_u32(out, s.token);
            }
            AmHeader::RmaAsk(a) => {
                out.push(K_RMA_ASK);
                out.push(0);
                put_u16(out, 0);
                put_u32(out, a.token);
                put_u32(out, a.key);
            }
            AmHeader::RmaKey(k) => {
                out.push(K_RMA_KEY);
                out.push(k.flags);
                put_u16(out, k.code.code());
                put_u32(out, k.token);
                put_u64(out, k.addr);
                put_u64(out, k.rkey);
                put_u64(out, k.len);
            }
            AmHeader::RmaDone(d) => {
                out.push(K_RMA_DONE);
                out.push(0);
                put_u16(out, 0);
                put_u32(out, d.token);
            }
        }
    }

    /// Decodes a message: its header and the payload that follows it.
    ///
    /// Structural checks are done here (lengths, kinds, a batch's size, a fragment lying
    /// inside its message); semantic checks (handler ids, region bounds) are the
    /// receiver's.
    ///
    /// # Errors
    /// [`WireError`] if the bytes are not a valid message.
    pub fn decode(b: &[u8]) -> Result<(AmHeader, &[u8]), WireError> {
        let kind = *b.first().ok_or(WireError::Truncated { need: 1, have: 0 })?;
        match kind {
            K_SHORT => {
                let s = Short::read(b.get(..SHORT_LEN).ok_or(WireError::Truncated {
                    need: SHORT_LEN,
                    have: b.len(),
                })?)?;
                if b.len() != SHORT_LEN {
                    return Err(WireError::Trailing(b.len() - SHORT_LEN));
                }
                Ok((AmHeader::Short(s), &[]))
            }
            K_BULK => {
                let mut r = Reader::new(b);
                r.u8()?;
                let flags = r.u8()?;
                let channel = r.u16()?;
                let handler = r.u32()?;
                let total = r.u32()?;
                let offset = r.u32()?;
                let args = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
                let payload = r.rest();
                let end = u64::from(offset) + payload.len() as u64;
                if end > u64::from(total) {
                    return Err(WireError::Invalid {
                        what: "bulk fragment end",
                        value: end,
                    });
                }
                Ok((
                    AmHeader::Bulk(Bulk {
                        handler,
                        channel,
                        flags,
                        total,
                        offset,
                        args,
                    }),
                    payload,
                ))
            }
            K_BATCH => {
                let mut r = Reader::new(b);
                r.take(2)?;
                let count = r.u16()?;
                r.u32()?;
                let payload = r.rest();
                if payload.len() != usize::from(count) * SHORT_LEN {
                    return Err(WireError::Invalid {
                        what: "batch length",
                        value: payload.len() as u64,
                    });
                }
                Ok((AmHeader::Batch { count }, payload))
            }
            K_PUT => {
                let mut r = Reader::new(b);
                r.u8()?;
                let flags = r.u8()?;
                r.u16()?;
                let token = r.u32()?;
                let key = r.u32()?;
                r.u32()?;
                let offset = r.u64()?;
                let total = r.u64()?;
                let chunk = r.u64()?;
                let payload = r.rest();
                let end = chunk.checked_add(payload.len() as u64);
                if end.is_none_or(|e| e > total) {
                    return Err(WireError::Invalid {
                        what: "put chunk offset",
                        value: chunk,
                    });
                }
                Ok((
                    AmHeader::Put(Put {
                        token,
                        key,
                        offset,
                        total,
                        chunk,
                        flags,
                    }),
                    payload,
                ))
            }
            K_GET => {
                let mut r = Reader::new(b);
                r.take(4)?;
                let token = r.u32()?;
                let key = r.u32()?;
                r.u32()?;
                let offset = r.u64()?;
                let len = r.u64()?;
                r.finish()?;
                Ok((
                    AmHeader::Get(Get {
                        token,
                        key,
                        offset,
                        len,
                    }),
                    &[],
                ))
            }
            K_GET_DATA => {
                let mut r = Reader::new(b);
                r.u8()?;
                let flags = r.u8()?;
                r.u16()?;
                let token = r.u32()?;
                let chunk = r.u64()?;
                Ok((
                    AmHeader::GetData(GetData {
                        token,
                        chunk,
                        flags,
                    }),
                    r.rest(),
                ))
            }
            K_STATUS => {
                let mut r = Reader::new(b);
                r.u8()?;
                let op = match r.u8()? {
                    1 => StatusOp::Put,
                    2 => StatusOp::Get,
                    3 => StatusOp::Message,
                    other => {
                        return Err(WireError::Invalid {
                            what: "status operation",
                            value: u64::from(other),
                        })
                    }
                };
                let code = StatusCode::from_code(r.u16()?)?;
                let token = r.u32()?;
                r.finish()?;
                Ok((AmHeader::Status(Status { op, code, token }), &[]))
            }
            K_RMA_ASK => {
                let mut r = Reader::new(b);
                r.take(4)?;
                let token = r.u32()?;
                let key = r.u32()?;
                r.finish()?;
                Ok((AmHeader::RmaAsk(RmaAsk { token, key }), &[]))
            }
            K_RMA_DONE => {
                let mut r = Reader::new(b);
                r.take(4)?;
                let token = r.u32()?;
                r.finish()?;
                Ok((AmHeader::RmaDone(RmaDone { token }), &[]))
            }
            K_RMA_KEY => {
                let mut r = Reader::new(b);
                r.u8()?;
                let flags = r.u8()?;
                let code = StatusCode::from_code(r.u16()?)?;
                let token = r.u32()?;
                let (addr, rkey, len) = (r.u64()?, r.u64()?, r.u64()?);
                r.finish()?;
                Ok((
                    AmHeader::RmaKey(RmaKey {
                        token,
                        code,
                        flags,
                        addr,
                        rkey,
                        len,
                    }),
                    &[],
                ))
            }
            other => Err(WireError::UnknownKind(other)),
        }
    }
}
