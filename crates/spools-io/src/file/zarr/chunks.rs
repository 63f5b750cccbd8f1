//! One outer chunk (a shard, or a chunk of an unsharded array) between a rank's local
//! array in the I/O distribution and its stored bytes. Pure: the caller reads and writes
//! the key files.

use super::codec;
use super::grid::{copy_box, fill_box, product, BoxOf, Grid};
use super::meta::swap_unit;
use super::meta::{Chain, ZarrMeta};
use crate::error::ChunkDefect;

/// A chunk's position inside its shard (all zeros for an unsharded array), with what is
/// wrong with it.
pub(crate) type Defect = (Vec<u64>, ChunkDefect);

/// An inner chunk: its coordinates in the shard's chunk grid, its start in the shard,
/// and its extent inside the array (`None`: wholly beyond the edge).
type Inner = (Vec<u64>, Vec<u64>, Option<Vec<u64>>);

/// The inner chunks of outer chunk `s`: each one's grid coordinates inside the outer
/// chunk, its start in the outer chunk, and its extent inside the array (`None` when it
/// lies wholly beyond the array's edge).
fn inner_chunks(m: &ZarrMeta, g: &Grid, s: &[u64]) -> Vec<Inner> {
    let c = m.chunk_shape();
    let per: Vec<Vec<u64>> = g
        .outer
        .iter()
        .zip(c)
        .map(|(&o, &c)| (0..o / c).collect())
        .collect();
    product(&per)
        .into_iter()
        .map(|k| {
            let at: Vec<u64> = k.iter().zip(c).map(|(&k, &c)| k * c).collect();
            let ext = (0..k.len())
                .map(|d| {
                    let start = s[d] * g.outer[d] + at[d];
                    (start < g.shape[d]).then(|| c[d].min(g.shape[d] - start))
                })
                .collect::<Option<Vec<u64>>>();
            (k, at, ext)
        })
        .collect()
}

/// The raw (little-endian, C-order) bytes of one full chunk of shape `m.chunk_shape()`
/// whose part inside the array (`ext`) is at `from` in the local array; the rest is fill.
fn gather(m: &ZarrMeta, local: &[u8], shape: &[u64], from: &[u64], ext: &[u64]) -> Vec<u8> {
    let c = m.chunk_shape();
    let elem = m.fill.len() as u64;
    let n: u64 = c.iter().product::<u64>() * elem;
    let zeros = vec![0; c.len()];
    // Room for a CRC32C after the data, so that the codec does not reallocate.
    let mut raw = Vec::with_capacity(n as usize + 4);
    raw.resize(n as usize, 0u8);
    if ext != c && m.fill.iter().any(|&b| b != 0) {
        fill_box(
            &mut raw,
            BoxOf {
                shape: c,
                at: &zeros,
            },
            c,
            &m.fill,
        );
    }
    copy_box(
        local,
        BoxOf { shape, at: from },
        &mut raw,
        BoxOf {
            shape: c,
            at: &zeros,
        },
        ext,
        elem,
    );
    raw
}

/// Encodes outer chunk `s` from the local array `local` (of shape `shape`) into the bytes
/// stored at its key, as parts stored back to back.
///
/// # Errors
/// A compressor's error.
pub(crate) fn encode(
    m: &ZarrMeta,
    g: &Grid,
    local: &[u8],
    shape: &[u64],
    s: &[u64],
) -> std::io::Result<Vec<Vec<u8>>> {
    let unit = swap_unit(m.dtype);
    let (base, ext) = g.local_box(s);
    match &m.chain {
        Chain::Plain(codecs) => Ok(vec![codec::encode(
            codecs,
            unit,
            gather(m, local, shape, &base, &ext),
        )?]),
        Chain::Sharded { codecs, .. } => {
            let mut parts = Vec::new();
            for (_, at, ext) in inner_chunks(m, g, s) {
                parts.push(match ext {
                    None => None,
                    Some(ext) => {
                        let from: Vec<u64> = base.iter().zip(&at).map(|(b, a)| b + a).collect();
                        Some(codec::encode(
                            codecs,
                            unit,
                            gather(m, local, shape, &from, &ext),
                        )?)
                    }
                });
            }
            Ok(codec::shard(parts))
        }
    }
}

/// Largest stored key this outer chunk may have: its raw size twice over plus room for
/// framing and the index (a larger file is damage, not read into memory).
pub(crate) fn max_stored(m: &ZarrMeta) -> u64 {
    let raw: u64 = m.grid.iter().product::<u64>() * m.fill.len() as u64;
    let chunks: u64 = m
        .grid
        .iter()
        .zip(m.chunk_shape())
        .map(|(o, c)| o / c)
        .product();
    raw.saturating_mul(2)
        .saturating_add(chunks.saturating_mul(16 + 128))
        .saturating_add(1 << 20)
}

/// Decodes outer chunk `s` from its stored bytes (`None`: the key is absent, fill value)
/// into the local array `local` (of shape `shape`). With `local` `None`, only checks.
/// Returns every defective chunk (their place in `local` is left as fill value).
pub(crate) fn decode(
    m: &ZarrMeta,
    g: &Grid,
    stored: Option<&[u8]>,
    mut local: Option<(&mut [u8], &[u64])>,
    s: &[u64],
) -> Vec<Defect> {
    let unit = swap_unit(m.dtype);
    let elem = m.fill.len() as u64;
    let c = m.chunk_shape().to_vec();
    let zeros = vec![0; c.len()];
    let (base, ext) = g.local_box(s);
    let fill = |local: &mut Option<(&mut [u8], &[u64])>, at: &[u64], ext: &[u64]| {
        if let Some((buf, shape)) = local {
            fill_box(buf, BoxOf { shape, at }, ext, &m.fill);
        }
    };
    let Some(stored) = stored else {
        fill(&mut local, &base, &ext);
        return if m.complete {
            vec![(zeros, ChunkDefect::Missing)]
        } else {
            Vec::new()
        };
    };
    let raw_len = c.iter().product::<u64>() * elem;
    let put = |local: &mut Option<(&mut [u8], &[u64])>, raw: &[u8], at: &[u64], ext: &[u64]| {
        if let Some((buf, shape)) = local {
            copy_box(
                raw,
                BoxOf {
                    shape: &c,
                    at: &zeros,
                },
                buf,
                BoxOf { shape, at },
                ext,
                elem,
            );
        }
    };
    let mut bad = Vec::new();
    match &m.chain {
        Chain::Plain(codecs) => match codec::decode(codecs, unit, stored, raw_len) {
            Ok(raw) => put(&mut local, &raw, &base, &ext),
            Err(e) => {
                fill(&mut local, &base, &ext);
                bad.push((zeros.clone(), e));
            }
        },
        Chain::Sharded {
            codecs,
            index_big_endian,
            index_crc,
            index_at_end,
            ..
        } => {
            let inner = inner_chunks(m, g, s);
            let idx = codec::index(
                stored,
                inner.len() as u64,
                *index_big_endian,
                *index_crc,
                *index_at_end,
            );
            let idx = match idx {
                Ok(i) => i,
                Err(e) => {
                    fill(&mut local, &base, &ext);
                    return vec![(zeros, e)];
                }
            };
            for ((k, at, ext), entry) in inner.into_iter().zip(idx) {
                let Some(ext) = ext else { continue };
                let to: Vec<u64> = base.iter().zip(&at).map(|(b, a)| b + a).collect();
                let Some((off, len)) = entry else {
                    fill(&mut local, &to, &ext);
                    if m.complete {
                        bad.push((k, ChunkDefect::Missing));
                    }
                    continue;
                };
                let bytes = &stored[off as usize..(off + len) as usize];
                match codec::decode(codecs, unit, bytes, raw_len) {
                    Ok(raw) => put(&mut local, &raw, &to, &ext),
                    Err(e) => {
                        fill(&mut local, &to, &ext);
                        bad.push((k, e));
                    }
                }
            }
        }
    }
    bad
}
