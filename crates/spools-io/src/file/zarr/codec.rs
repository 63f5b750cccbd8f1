//! Encoding and decoding a Zarr chunk through its codec chain, and a shard through the
//! `sharding_indexed` codec. Pure: no I/O. Every stored byte is input: a decoder never
//! trusts a length, an offset or a compressed size it reads.

use std::io::Read;

use super::meta::{BytesCodec, Codecs};
use crate::error::ChunkDefect;

/// The index entry of a chunk a shard does not hold (it is fill value).
pub(crate) const ABSENT: u64 = u64::MAX;

fn swap(bytes: &mut [u8], unit: usize) {
    if unit > 1 {
        for e in bytes.chunks_exact_mut(unit) {
            e.reverse();
        }
    }
}

/// Encodes one chunk's little-endian element bytes through `codecs`.
///
/// # Errors
/// The compressor's error (an invalid level or parameter).
pub(crate) fn encode(codecs: &Codecs, unit: usize, raw: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut b = raw;
    if codecs.big_endian {
        swap(&mut b, unit);
    }
    for c in &codecs.after {
        b = match *c {
            BytesCodec::Zstd(level, checksum) => {
                let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(b.len()));
                let mut e = zstd::stream::Encoder::new(&mut out, level)?;
                e.include_checksum(checksum)?;
                std::io::Write::write_all(&mut e, &b)?;
                e.finish()?;
                out
            }
            BytesCodec::Gzip(level) => {
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(b.len() / 2 + 64),
                    flate2::Compression::new(level),
                );
                std::io::Write::write_all(&mut e, &b)?;
                e.finish()?
            }
            BytesCodec::Crc32c => {
                let crc = crc32c::crc32c(&b);
                b.extend_from_slice(&crc.to_le_bytes());
                b
            }
        };
    }
    Ok(b)
}

/// Reads at most `limit + 1` bytes from a decoder (so that a decompression bomb is
/// stopped, and a chunk that decodes to too much is reported by its size).
fn bounded(r: impl Read, limit: u64, codec: &'static str) -> Result<Vec<u8>, ChunkDefect> {
    let mut out = Vec::new();
    r.take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| ChunkDefect::Decode {
            codec,
            why: e.to_string(),
        })?;
    Ok(out)
}

/// Decodes one stored chunk into `expected` little-endian element bytes: borrowed from
/// `stored` when no codec has to make new bytes (raw little-endian data, with or without
/// a CRC32C), owned otherwise.
///
/// # Errors
/// [`ChunkDefect`]: a failed CRC32C, a stream that does not decompress, or a chunk of
/// another size.
pub(crate) fn decode<'a>(
    codecs: &Codecs,
    unit: usize,
    stored: &'a [u8],
    expected: u64,
) -> Result<std::borrow::Cow<'a, [u8]>, ChunkDefect> {
    use std::borrow::Cow;
    // No codec after `bytes` grows data by more than a CRC and framing: every stage's
    // output is bounded by this.
    let limit = expected + 4 * codecs.after.len() as u64 + 64;
    let mut b: Cow<'a, [u8]> = Cow::Borrowed(stored);
    for c in codecs.after.iter().rev() {
        b = match *c {
            BytesCodec::Crc32c => {
                let n = b.len().checked_sub(4).ok_or(ChunkDefect::Checksum)?;
                let want = u32::from_le_bytes([b[n], b[n + 1], b[n + 2], b[n + 3]]);
                if crc32c::crc32c(&b[..n]) != want {
                    return Err(ChunkDefect::Checksum);
                }
                match b {
                    Cow::Borrowed(s) => Cow::Borrowed(&s[..n]),
                    Cow::Owned(mut v) => {
                        v.truncate(n);
                        Cow::Owned(v)
                    }
                }
            }
            BytesCodec::Zstd(..) => {
                let d = zstd::stream::Decoder::new(&b[..]).map_err(|e| ChunkDefect::Decode {
                    codec: "zstd",
                    why: e.to_string(),
                })?;
                Cow::Owned(bounded(d, limit, "zstd")?)
            }
            BytesCodec::Gzip(_) => Cow::Owned(bounded(
                flate2::read::GzDecoder::new(&b[..]),
                limit,
                "gzip",
            )?),
        };
    }
    if b.len() as u64 != expected {
        return Err(ChunkDefect::Size {
            expected,
            found: b.len() as u64,
        });
    }
    if codecs.big_endian {
        swap(b.to_mut(), unit);
    }
    Ok(b)
}

/// A shard from its encoded inner chunks (`None`: absent, fill value), in C order over
/// the shard's chunk grid, as the parts to store back to back (no copy of the chunks):
/// the present chunks, then the index (little-endian, CRC32C).
pub(crate) fn shard(chunks: Vec<Option<Vec<u8>>>) -> Vec<Vec<u8>> {
    let mut index = Vec::with_capacity(chunks.len() * 16 + 4);
    let mut parts = Vec::with_capacity(chunks.len() + 1);
    let mut at = 0u64;
    for c in chunks {
        let (off, len) = match c {
            Some(c) => {
                let len = c.len() as u64;
                parts.push(c);
                at += len;
                (at - len, len)
            }
            None => (ABSENT, ABSENT),
        };
        index.extend_from_slice(&off.to_le_bytes());
        index.extend_from_slice(&len.to_le_bytes());
    }
    let crc = crc32c::crc32c(&index);
    index.extend_from_slice(&crc.to_le_bytes());
    parts.push(index);
    parts
}

/// A shard's index: (offset, length) of each of its `n` inner chunks in C order, absent
/// ones as `None`, each checked to lie inside the shard.
///
/// # Errors
/// [`ChunkDefect`]: a shard shorter than its index, a failed index CRC32C, an entry
/// outside the shard.
pub(crate) fn index(
    shard: &[u8],
    n: u64,
    big_endian: bool,
    crc: bool,
    at_end: bool,
) -> Result<Vec<Option<(u64, u64)>>, ChunkDefect> {
    let len = shard.len() as u64;
    let size = n
        .checked_mul(16)
        .and_then(|s| s.checked_add(if crc { 4 } else { 0 }))
        .filter(|&s| s <= len)
        .ok_or(ChunkDefect::ShortShard(len))?;
    let raw = if at_end {
        &shard[(len - size) as usize..]
    } else {
        &shard[..size as usize]
    };
    let entries = if crc {
        let (e, c) = raw.split_at(raw.len() - 4);
        if crc32c::crc32c(e).to_le_bytes() != c {
            return Err(ChunkDefect::IndexChecksum);
        }
        e
    } else {
        raw
    };
    let word = |b: &[u8]| {
        let a: [u8; 8] = b.try_into().unwrap_or_default();
        if big_endian {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    };
    entries
        .chunks_exact(16)
        .map(|e| {
            let (offset, bytes) = (word(&e[..8]), word(&e[8..]));
            if offset == ABSENT && bytes == ABSENT {
                return Ok(None);
            }
            match offset.checked_add(bytes) {
                Some(end) if end <= len => Ok(Some((offset, bytes))),
                _ => Err(ChunkDefect::IndexEntry { offset, bytes, len }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codecs(big: bool, after: Vec<BytesCodec>) -> Codecs {
        Codecs {
            big_endian: big,
            after,
        }
    }

    #[test]
    fn chunks_round_trip_and_damage_is_named() {
        let raw: Vec<u8> = (0..4000u32).flat_map(|i| (i / 3).to_le_bytes()).collect();
        for c in [
            codecs(false, vec![]),
            codecs(false, vec![BytesCodec::Crc32c]),
            codecs(true, vec![BytesCodec::Zstd(3, true), BytesCodec::Crc32c]),
            codecs(false, vec![BytesCodec::Gzip(1)]),
            codecs(false, vec![BytesCodec::Crc32c, BytesCodec::Zstd(1, false)]),
        ] {
            let enc = encode(&c, 4, raw.clone()).unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(
                decode(&c, 4, &enc, raw.len() as u64).map(|d| d.into_owned()),
                Ok(raw.clone()),
                "{c:?}"
            );
            // Another expected size is reported, never returned.
            assert!(decode(&c, 4, &enc, raw.len() as u64 - 4).is_err(), "{c:?}");
            if !c.after.is_empty() {
                // A flipped bit is caught by the CRC or the decompressor.
                let mut bad = enc.clone();
                let at = bad.len() / 2;
                bad[at] ^= 0x10;
                assert!(decode(&c, 4, &bad, raw.len() as u64).is_err(), "{c:?}");
                assert!(decode(&c, 4, &enc[..enc.len() / 2], raw.len() as u64).is_err());
            }
        }
        // Big-endian storage swaps each element.
        let big = encode(&codecs(true, vec![]), 2, vec![1, 2, 3, 4]).unwrap_or_default();
        assert_eq!(big, [2, 1, 4, 3]);
        // A zstd bomb is cut at the expected size.
        let bomb = encode(
            &codecs(false, vec![BytesCodec::Zstd(1, false)]),
            1,
            vec![0; 1 << 20],
        )
        .unwrap_or_default();
        assert_eq!(
            decode(
                &codecs(false, vec![BytesCodec::Zstd(1, false)]),
                1,
                &bomb,
                16
            ),
            Err(ChunkDefect::Size {
                expected: 16,
                found: 16 + 4 + 64 + 1
            })
        );
    }

    #[test]
    fn shards_index_their_chunks_and_refuse_a_bad_index() {
        let s = shard(vec![Some(vec![1, 2, 3]), None, Some(vec![9])]).concat();
        let idx = index(&s, 3, false, true, true).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(idx, vec![Some((0, 3)), None, Some((3, 1))]);
        let mut bad = s.clone();
        let n = bad.len();
        bad[n - 10] ^= 1;
        assert_eq!(
            index(&bad, 3, false, true, true),
            Err(ChunkDefect::IndexChecksum)
        );
        assert!(matches!(
            index(&s[..20], 3, false, true, true),
            Err(ChunkDefect::ShortShard(20))
        ));
        // An entry outside the shard, with a valid CRC.
        let mut e = Vec::new();
        e.extend_from_slice(&100u64.to_le_bytes());
        e.extend_from_slice(&5u64.to_le_bytes());
        let crc = crc32c::crc32c(&e);
        e.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            index(&e, 1, false, true, true),
            Err(ChunkDefect::IndexEntry { .. })
        ));
        assert!(index(&e, u64::MAX / 8, false, true, true).is_err());
    }
}
