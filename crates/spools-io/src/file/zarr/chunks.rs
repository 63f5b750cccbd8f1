//! One outer chunk (a shard, or a chunk of an unsharded array) between a rank's local
//! array in the I/O distribution and its stored bytes. Pure: the caller reads and writes
//! the key files.

use super::codec;
use super::grid::{copy_box, fill_box, product, BoxOf, Coords, Grid};
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

/// The part of the box at `at` of extent `ext` inside the region `(start, extent)`: its
/// start and extent, `None` when they do not meet.
fn meet(at: &[u64], ext: &[u64], (rat, rext): (&[u64], &[u64])) -> Option<(Vec<u64>, Vec<u64>)> {
    let mut lo = Vec::with_capacity(at.len());
    let mut ex = Vec::with_capacity(at.len());
    for d in 0..at.len() {
        let l = at[d].max(rat[d]);
        let h = (at[d] + ext[d]).min(rat[d] + rext[d]);
        if l >= h {
            return None;
        }
        lo.push(l);
        ex.push(h - l);
    }
    Some((lo, ex))
}

/// The box of outer chunk `s` in the array: its start and its extent (cut at the edge).
pub(crate) fn key_box(m: &ZarrMeta, s: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let at: Vec<u64> = s.iter().zip(&m.grid).map(|(&s, &g)| s * g).collect();
    let ext = (0..s.len())
        .map(|d| m.grid[d].min(m.shape[d].saturating_sub(at[d])))
        .collect();
    (at, ext)
}

/// Decodes the part of outer chunk `s` that lies inside `region` (a box of the array: its
/// start and extent) from the key's stored bytes (`None`: absent, fill value) into `out`,
/// the C-order bytes of the region (`None`: only checks). Only the chunks of a shard that
/// meet the region are decoded, one at a time: besides `out` and `stored`, this holds one
/// decoded chunk and the shard's index. Returns every defective chunk met (its part of
/// `out` is left as fill value), as [`decode`] does.
pub(crate) fn decode_region(
    m: &ZarrMeta,
    s: &[u64],
    stored: Option<&[u8]>,
    region: (&[u64], &[u64]),
    mut out: Option<&mut [u8]>,
) -> Vec<Defect> {
    let unit = swap_unit(m.dtype);
    let elem = m.fill.len() as u64;
    let (rat, rext) = region;
    let zeros = vec![0; s.len()];
    let (kat, kext) = key_box(m, s);
    let Some((klo, kex)) = meet(&kat, &kext, region) else {
        return Vec::new();
    };
    let rel = |lo: &[u64], base: &[u64]| -> Vec<u64> {
        lo.iter().zip(base).map(|(l, b)| l - b).collect()
    };
    let fill = |out: &mut Option<&mut [u8]>, lo: &[u64], ex: &[u64]| {
        if let Some(buf) = out {
            let at = rel(lo, rat);
            fill_box(
                buf,
                BoxOf {
                    shape: rext,
                    at: &at,
                },
                ex,
                &m.fill,
            );
        }
    };
    let c = m.chunk_shape();
    // The chunk at `cat` (its raw bytes `raw`, of the full chunk shape), its part `lo, ex`.
    let put = |out: &mut Option<&mut [u8]>, raw: &[u8], cat: &[u64], lo: &[u64], ex: &[u64]| {
        if let Some(buf) = out {
            let (from, to) = (rel(lo, cat), rel(lo, rat));
            copy_box(
                raw,
                BoxOf {
                    shape: c,
                    at: &from,
                },
                buf,
                BoxOf {
                    shape: rext,
                    at: &to,
                },
                ex,
                elem,
            );
        }
    };
    let Some(stored) = stored else {
        fill(&mut out, &klo, &kex);
        return if m.complete {
            vec![(zeros, ChunkDefect::Missing)]
        } else {
            Vec::new()
        };
    };
    let raw_len = c.iter().product::<u64>() * elem;
    let mut bad = Vec::new();
    match &m.chain {
        Chain::Plain(codecs) => match codec::decode(codecs, unit, stored, raw_len) {
            Ok(raw) => put(&mut out, &raw, &kat, &klo, &kex),
            Err(e) => {
                fill(&mut out, &klo, &kex);
                bad.push((zeros, e));
            }
        },
        Chain::Sharded {
            codecs,
            index_big_endian,
            index_crc,
            index_at_end,
            ..
        } => {
            let per: Vec<u64> = m.grid.iter().zip(c).map(|(&o, &c)| o / c).collect();
            let n = per.iter().product::<u64>();
            let idx = match codec::index(stored, n, *index_big_endian, *index_crc, *index_at_end) {
                Ok(i) => i,
                Err(e) => {
                    fill(&mut out, &klo, &kex);
                    return vec![(zeros, e)];
                }
            };
            // The inner chunks that meet the key's part of the region.
            let first: Vec<u64> = (0..s.len()).map(|d| (klo[d] - kat[d]) / c[d]).collect();
            let last: Vec<u64> = (0..s.len())
                .map(|d| (klo[d] + kex[d] - 1 - kat[d]) / c[d] + 1)
                .collect();
            for k in Coords::new(first, last) {
                let cat: Vec<u64> = (0..k.len()).map(|d| kat[d] + k[d] * c[d]).collect();
                let cext: Vec<u64> = (0..k.len())
                    .map(|d| c[d].min(m.shape[d].saturating_sub(cat[d])))
                    .collect();
                let Some((lo, ex)) = meet(&cat, &cext, region) else {
                    continue;
                };
                let i = k.iter().zip(&per).fold(0u64, |t, (&k, &p)| t * p + k);
                match idx.get(i as usize).copied().flatten() {
                    None => {
                        fill(&mut out, &lo, &ex);
                        if m.complete {
                            bad.push((k, ChunkDefect::Missing));
                        }
                    }
                    Some((off, len)) => {
                        // `index` checked every entry to lie inside the shard.
                        let bytes = stored
                            .get(off as usize..(off + len) as usize)
                            .unwrap_or_default();
                        match codec::decode(codecs, unit, bytes, raw_len) {
                            Ok(raw) => put(&mut out, &raw, &cat, &lo, &ex),
                            Err(e) => {
                                fill(&mut out, &lo, &ex);
                                bad.push((k, e));
                            }
                        }
                    }
                }
            }
        }
    }
    bad
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
