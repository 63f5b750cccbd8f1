//! The pipe's wire format (sans-IO): a hello on every connection, then frames.
//!
//! ```text
//! hello := "SPPH" token[16] rank:u32 ranks:u32                      (28 bytes)
//! frame := "SPPF" kind:u8 0 0 0 record:u64 len:u32 crc32c:u32 payload[len]   (24 + len)
//! ```
//! Integers are little-endian. `kind` is 0 for data and 1 for the end of the stream
//! (then `len` is 0). Every (producer, consumer) pair carries at least one data frame per
//! record, so a consumer learns of each record from every producer.

/// Bytes of a hello.
use crate::error::FrameError;

pub(crate) const HELLO_LEN: usize = 28;
/// Bytes of a frame header.
pub(crate) const HEADER_LEN: usize = 24;
/// Largest payload of one frame.
pub(crate) const MAX_PAYLOAD: u32 = 1 << 20;

/// A frame's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Part of a record.
    Data,
    /// The producer closed the pipe.
    End,
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    pub(crate) record: u64,
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(b"SPPF");
        b[4] = match self.kind {
            Kind::Data => 0,
            Kind::End => 1,
        };
        b[8..16].copy_from_slice(&self.record.to_le_bytes());
        b[16..20].copy_from_slice(&self.len.to_le_bytes());
        b[20..24].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Decodes a header, refusing lengths beyond [`MAX_PAYLOAD`].
    pub(crate) fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, FrameError> {
        if &b[..4] != b"SPPF" {
            return Err(FrameError::FrameMagic([b[0], b[1], b[2], b[3]]));
        }
        let kind = match b[4] {
            0 => Kind::Data,
            1 => Kind::End,
            k => return Err(FrameError::Kind(k)),
        };
        if b[5..8] != [0, 0, 0] {
            return Err(FrameError::Reserved);
        }
        let u64_at = |i: usize| {
            u64::from_le_bytes([
                b[i],
                b[i + 1],
                b[i + 2],
                b[i + 3],
                b[i + 4],
                b[i + 5],
                b[i + 6],
                b[i + 7],
            ])
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let h = Header {
            kind,
            record: u64_at(8),
            len: u32_at(16),
            crc: u32_at(20),
        };
        if h.len > MAX_PAYLOAD {
            return Err(FrameError::TooLong {
                len: h.len,
                max: MAX_PAYLOAD,
            });
        }
        if kind == Kind::End && h.len != 0 {
            return Err(FrameError::EndWithPayload);
        }
        Ok(h)
    }
}

/// The first bytes on every connection: the consumer's token and the producer's rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) token: [u8; 16],
    pub(crate) rank: u32,
    pub(crate) ranks: u32,
}

impl Hello {
    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(b"SPPH");
        b[4..20].copy_from_slice(&self.token);
        b[20..24].copy_from_slice(&self.rank.to_le_bytes());
        b[24..28].copy_from_slice(&self.ranks.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, FrameError> {
        if &b[..4] != b"SPPH" {
            return Err(FrameError::HelloMagic);
        }
        let mut token = [0u8; 16];
        token.copy_from_slice(&b[4..20]);
        let h = Hello {
            token,
            rank: u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
            ranks: u32::from_le_bytes([b[24], b[25], b[26], b[27]]),
        };
        if h.ranks == 0 || h.rank >= h.ranks {
            return Err(FrameError::HelloRank {
                rank: h.rank,
                ranks: h.ranks,
            });
        }
        Ok(h)
    }
}

/// Decodes any byte string as a hello followed by frame headers (for fuzzing and tests):
/// never panics, and stops at the first error.
pub fn decode_any(bytes: &[u8]) -> Result<usize, FrameError> {
    let (h, mut rest) = bytes.split_at_checked(HELLO_LEN).ok_or(FrameError::Short)?;
    let h: &[u8; HELLO_LEN] = h.try_into().map_err(|_| FrameError::Short)?;
    Hello::decode(h)?;
    let mut frames = 0;
    while let Some((hd, r)) = rest.split_at_checked(HEADER_LEN) {
        let hd: &[u8; HEADER_LEN] = hd.try_into().map_err(|_| FrameError::Short)?;
        let f = Header::decode(hd)?;
        rest = r.get(f.len as usize..).ok_or(FrameError::Short)?;
        frames += 1;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_hellos_round_trip_and_garbage_is_refused() {
        for h in [
            Header {
                kind: Kind::Data,
                record: 7,
                len: 4096,
                crc: 0xdead_beef,
            },
            Header {
                kind: Kind::End,
                record: u64::MAX,
                len: 0,
                crc: 0,
            },
        ] {
            assert_eq!(Header::decode(&h.encode()), Ok(h));
        }
        let mut big = Header {
            kind: Kind::Data,
            record: 0,
            len: 0,
            crc: 0,
        }
        .encode();
        big[16..20].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
        assert!(Header::decode(&big).is_err());
        let hello = Hello {
            token: [3; 16],
            rank: 2,
            ranks: 4,
        };
        assert_eq!(Hello::decode(&hello.encode()), Ok(hello));
        assert!(Hello::decode(&Hello { rank: 4, ..hello }.encode()).is_err());
        let mut all = hello.encode().to_vec();
        all.extend_from_slice(
            &Header {
                kind: Kind::Data,
                record: 0,
                len: 3,
                crc: 0,
            }
            .encode(),
        );
        all.extend_from_slice(b"abc");
        assert_eq!(decode_any(&all), Ok(1));
        for cut in 0..all.len() {
            let _ = decode_any(&all[..cut]);
        }
        for i in 0..all.len() {
            let mut b = all.clone();
            b[i] ^= 0xff;
            let _ = decode_any(&b);
        }
    }
}
