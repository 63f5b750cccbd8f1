//! Single-process access to a Zarr array for `spools ls`, `cat` and `fsck`.

use std::path::Path;

use super::chunks;
use super::grid::Coords;
use super::{read_key, ZarrMeta};
use crate::error::{FileError, FormatDefect, ZarrError};

/// A stored chunk found damaged by [`fsck`](crate::file::tools::fsck).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadChunk {
    /// The key's file (the shard, or the chunk of an unsharded array).
    pub key: std::path::PathBuf,
    /// The chunk's grid coordinates inside its shard (zeros for an unsharded array).
    pub chunk: Vec<u64>,
    /// What is wrong.
    pub problem: String,
}

/// Output bytes `cat` assembles at once (one piece of the C-order stream; a piece is never
/// less than one element). Besides a piece, `cat` holds one stored key and one decoded
/// chunk (each at most what the key file and [`MAX_CHUNK_BYTES`] allow).
///
/// [`MAX_CHUNK_BYTES`]: super::meta::MAX_CHUNK_BYTES
pub(crate) const CAT_PIECE: u64 = 256 << 20;

/// Keys one piece of `cat`'s output looks at, about (at most twice this): the first bytes
/// come out after that many keys, however many the array has.
const PIECE_KEYS: u64 = 1 << 16;

/// Most keys (outer chunks) `fsck` checks: an array of more is refused up front (walking
/// them would take days; its keys are walked one at a time, never listed in memory).
pub(crate) const FSCK_KEYS_MAX: u64 = 1 << 32;

/// Damaged chunks `fsck` names; more are counted only.
pub(crate) const FSCK_LIST_MAX: usize = 10_000;

/// `spools ls` of a Zarr array.
pub(crate) fn describe(path: &Path, m: &ZarrMeta) -> String {
    let keys: u64 = m.keys_per_dim().iter().product();
    // Counted when there are not too many to look at.
    let what = if m.inner.is_some() { "shard" } else { "chunk" };
    let present = if keys <= 1 << 20 {
        let n = (0..keys)
            .filter(|&k| path.join(m.key(&unflat(k, &m.keys_per_dim()))).is_file())
            .count();
        format!("{n} of {keys} {what} files present")
    } else {
        format!("{keys} {what} files (too many to count here)")
    };
    let mut s = format!(
        "{}: Zarr v3 array, dtype {} ({}), shape {:?}, {} bytes\n  ",
        path.display(),
        m.dtype,
        m.data_type,
        m.shape,
        m.shape.iter().product::<u64>() * m.dtype.size()
    );
    match &m.inner {
        Some(inner) => s.push_str(&format!(
            "shards {:?} of chunks {inner:?}: {present}",
            m.grid
        )),
        None => s.push_str(&format!("chunks {:?}, not sharded: {present}", m.grid)),
    }
    s.push_str(&format!("\n  codecs: {}", m.codec_names.join(", ")));
    if let Some(l) = &m.written_from {
        s.push_str(&format!("\n  written by Spools from: {l}"));
    }
    s
}

/// Grid coordinates of the `k`-th key in C order.
fn unflat(mut k: u64, per: &[u64]) -> Vec<u64> {
    let mut c = vec![0; per.len()];
    for d in (0..per.len()).rev() {
        c[d] = k % per[d];
        k /= per[d];
    }
    c
}

fn limit(path: &Path, why: String) -> FileError {
    FileError::Format {
        path: path.join(super::META),
        defect: FormatDefect::Zarr(ZarrError::Limit(why)),
    }
}

/// How `cat` cuts the array's C-order stream into pieces of at most [`CAT_PIECE`] bytes
/// (or one element) touching at most about [`PIECE_KEYS`] keys: each piece fixes the
/// indices of the first `depth` dimensions and takes `band` indices of the next one
/// (whole outer chunks of it where they fit), all of the others.
fn pieces(m: &ZarrMeta, (piece, piece_keys): (u64, u64)) -> (usize, u64) {
    let n = m.shape.len();
    let elem = m.dtype.size();
    let keys = m.keys_per_dim();
    // Bytes of one index of dimension d (everything after it), and keys after it. Both
    // fit: parse checked that the shape's bytes do, and keys never outnumber indices.
    let row = |d: usize| m.shape[d + 1..].iter().product::<u64>() * elem;
    let keys_after = |d: usize| keys[d + 1..].iter().product::<u64>();
    let depth = (0..n)
        .find(|&d| row(d) <= piece && keys_after(d) <= piece_keys)
        .unwrap_or(n - 1);
    let g = m.grid[depth];
    let by_bytes = (piece / row(depth).max(1)).max(1);
    let by_keys = (piece_keys / keys_after(depth).max(1))
        .max(1)
        .saturating_mul(g);
    let band = by_bytes.min(by_keys);
    // Whole outer chunks where a piece holds one: each key is decoded once.
    let band = if band >= g { band / g * g } else { band };
    (depth, band)
}

/// Writes the array's C-order bytes to `put` a piece at a time (see [`pieces`]), walking
/// the keys each piece meets lazily; stops early when `put` says so. Memory: one piece
/// (at most [`CAT_PIECE`] bytes), one stored key and one decoded chunk, whatever the
/// array's shape; an array of 10^18 chunk keys streams as any other.
///
/// # Errors
/// A key that cannot be read, damage ([`FileError::ZarrChunk`]), or a piece that cannot
/// be allocated ([`ZarrError::Limit`]).
pub(crate) fn cat(
    path: &Path,
    m: &ZarrMeta,
    put: &mut dyn FnMut(&[u8]) -> Result<bool, FileError>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), FileError> {
    cat_in(path, m, (CAT_PIECE, PIECE_KEYS), put, progress)
}

/// [`cat`] in pieces of at most `limits.0` bytes meeting about `limits.1` keys.
fn cat_in(
    path: &Path,
    m: &ZarrMeta,
    limits: (u64, u64),
    put: &mut dyn FnMut(&[u8]) -> Result<bool, FileError>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), FileError> {
    let elem = m.dtype.size();
    let total = m.shape.iter().product::<u64>() * elem;
    if total == 0 {
        return Ok(());
    }
    let n = m.shape.len();
    let (depth, band) = pieces(m, limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut done = 0;
    // Every index of the first `depth` dimensions, then bands of dimension `depth`.
    let fixed = Coords::new(vec![0; depth], m.shape[..depth].to_vec());
    for prefix in fixed {
        let mut a = 0;
        while a < m.shape[depth] {
            let b = a.saturating_add(band).min(m.shape[depth]);
            let mut at = prefix.clone();
            at.push(a);
            at.resize(n, 0);
            let mut ext = vec![1; depth];
            ext.push(b - a);
            ext.extend_from_slice(&m.shape[depth + 1..]);
            let bytes = ext.iter().product::<u64>() * elem;
            buf.clear();
            let len = usize::try_from(bytes).map_err(|_| {
                limit(
                    path,
                    format!("a piece of {bytes} bytes does not fit this machine's memory"),
                )
            })?;
            buf.try_reserve_exact(len).map_err(|_| {
                limit(
                    path,
                    format!("cannot allocate a piece of {bytes} bytes for the output"),
                )
            })?;
            buf.resize(len, 0);
            // The keys this piece meets.
            let first: Vec<u64> = (0..n).map(|d| at[d] / m.grid[d]).collect();
            let last: Vec<u64> = (0..n)
                .map(|d| (at[d] + ext[d] - 1) / m.grid[d] + 1)
                .collect();
            for s in Coords::new(first, last) {
                let key = path.join(m.key(&s));
                let stored = read_key(m, &key)?;
                let bad =
                    chunks::decode_region(m, &s, stored.as_deref(), (&at, &ext), Some(&mut buf));
                if let Some((chunk, defect)) = bad.into_iter().next() {
                    return Err(FileError::ZarrChunk { key, chunk, defect });
                }
            }
            if !put(&buf)? {
                return Ok(());
            }
            done += bytes;
            progress(done, total);
            a = b;
        }
    }
    Ok(())
}

/// Checks every key, walking them one at a time in C order: each shard index's CRC32C and
/// every chunk's (decoding each, one at a time). Returns the chunks checked, the first
/// [`FSCK_LIST_MAX`] damaged ones and how many are damaged in all.
///
/// # Errors
/// A key that cannot be read; an array of more than [`FSCK_KEYS_MAX`] keys
/// ([`ZarrError::Limit`], before any is looked at).
pub(crate) fn fsck(
    path: &Path,
    m: &ZarrMeta,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, Vec<BadChunk>, u64), FileError> {
    let per_key: u64 = m
        .grid
        .iter()
        .zip(m.chunk_shape())
        .map(|(o, c)| o / c)
        .product();
    let per = m.keys_per_dim();
    let keys = per.iter().try_fold(1u64, |t, &k| t.checked_mul(k));
    let keys = match keys {
        Some(k) if k <= FSCK_KEYS_MAX => k,
        _ => {
            return Err(limit(
                path,
                format!(
                    "{per:?} chunk keys ({}) are more than the {FSCK_KEYS_MAX} fsck checks",
                    keys.map_or_else(|| "more than 2^64".to_string(), |k| k.to_string())
                ),
            ))
        }
    };
    let mut checked = 0u64;
    let mut damaged = 0u64;
    let mut bad = Vec::new();
    for (i, s) in Coords::new(vec![0; per.len()], per.clone()).enumerate() {
        let key = path.join(m.key(&s));
        let stored = read_key(m, &key)?;
        checked = checked.saturating_add(per_key);
        let (at, ext) = chunks::key_box(m, &s);
        for (chunk, defect) in chunks::decode_region(m, &s, stored.as_deref(), (&at, &ext), None) {
            damaged += 1;
            if bad.len() < FSCK_LIST_MAX {
                bad.push(BadChunk {
                    key: key.clone(),
                    chunk,
                    problem: defect.to_string(),
                });
            }
        }
        let i = i as u64 + 1;
        if i % 1024 == 0 || i == keys {
            progress(i, keys);
        }
    }
    Ok((checked, bad, damaged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::zarr::grid::Grid;

    /// Writes the array `json` describes (element `i` holding bytes of `i`) into `dir`,
    /// every key but those `skip` names; returns its C-order bytes.
    fn write_array(dir: &Path, json: &str, skip: &[Vec<u64>]) -> (ZarrMeta, Vec<u8>) {
        let m = ZarrMeta::parse(json.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        let g = Grid::new(m.dtype, &m.shape, &m.grid, 1).unwrap_or_else(|e| unreachable!("{e}"));
        let elem = m.dtype.size() as usize;
        let n = m.shape.iter().product::<u64>() as usize;
        let data: Vec<u8> = (0..n * elem)
            .map(|i| (i / elem * 7 + i % elem) as u8)
            .collect();
        let shape = g.local_shape(0);
        assert_eq!(shape, m.shape);
        for s in g.owned(0) {
            if skip.contains(&s) {
                continue;
            }
            let at = dir.join(m.key(&s));
            let parts = chunks::encode(&m, &g, &data, &shape, &s).unwrap_or_default();
            std::fs::create_dir_all(at.parent().unwrap_or(dir)).unwrap_or_default();
            std::fs::write(&at, parts.concat()).unwrap_or_default();
        }
        (m, data)
    }

    fn cat_with(dir: &Path, m: &ZarrMeta, limits: (u64, u64)) -> Result<Vec<u8>, FileError> {
        let mut out = Vec::new();
        cat_in(
            dir,
            m,
            limits,
            &mut |b| {
                out.extend_from_slice(b);
                Ok(true)
            },
            &mut |_, _| {},
        )?;
        Ok(out)
    }

    /// Pieces of any size, from whole slabs down to one element, give the same C-order
    /// bytes: sharded or not, cut at the array's edges, with absent keys as fill value.
    #[test]
    fn cat_in_pieces_of_any_size_gives_the_array() {
        let sharded = r#"{"zarr_format":3,"node_type":"array","shape":[7,9,5],"data_type":"uint16",
            "fill_value":3,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,6,4]}},
            "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,3,2],
              "codecs":[{"name":"bytes"},{"name":"zstd"},{"name":"crc32c"}]}}]}"#;
        let plain = r#"{"zarr_format":3,"node_type":"array","shape":[5,11],"data_type":"float64",
            "fill_value":0,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,3]}},
            "codecs":[{"name":"bytes","configuration":{"endian":"big"}},{"name":"crc32c"}]}"#;
        for (json, skip) in [(sharded, vec![1u64, 1, 0]), (plain, vec![2, 3])] {
            let dir = spools_testkit::tempdir("zarr-cat-pieces");
            let (m, mut want) = write_array(dir.path(), json, std::slice::from_ref(&skip));
            // The absent key's elements are fill value.
            let elem = m.dtype.size();
            let (at, ext) = chunks::key_box(&m, &skip);
            for p in Coords::new(
                at.clone(),
                at.iter().zip(&ext).map(|(a, e)| a + e).collect(),
            ) {
                let lin = p.iter().zip(&m.shape).fold(0, |o, (&i, &n)| o * n + i);
                for b in 0..elem {
                    want[(lin * elem + b) as usize] = m.fill[b as usize];
                }
            }
            for limits in [(1 << 30, 1 << 16), (64, 4), (16, 1), (1, 1), (40, 2)] {
                let got = cat_with(dir.path(), &m, limits).unwrap_or_else(|e| unreachable!("{e}"));
                assert_eq!(got, want, "{json} {limits:?}");
            }
            assert_eq!(
                fsck(dir.path(), &m, &mut |_, _| {}).map(|r| r.2).ok(),
                Some(0)
            );
        }
    }

    /// A damaged chunk stops `cat` naming it, in whichever piece meets it; `fsck` lists it.
    #[test]
    fn damage_stops_cat_in_any_piece() {
        let json = r#"{"zarr_format":3,"node_type":"array","shape":[6,6],"data_type":"uint8",
            "fill_value":0,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3,3]}},
            "codecs":[{"name":"bytes"},{"name":"crc32c"}],
            "attributes":{"spools":{"complete":true}}}"#;
        let dir = spools_testkit::tempdir("zarr-cat-damage");
        let (m, _) = write_array(dir.path(), json, &[vec![0, 1]]);
        let key = dir.path().join(m.key(&[1, 0]));
        let mut b = std::fs::read(&key).unwrap_or_default();
        b[2] ^= 1;
        std::fs::write(&key, b).unwrap_or_default();
        for limits in [(1 << 30, 1 << 16), (1, 1)] {
            let e = cat_with(dir.path(), &m, limits);
            // The lost key [0, 1] comes first in C order.
            assert!(
                matches!(&e, Err(FileError::ZarrChunk { key, .. }) if key.ends_with("c/0/1")),
                "{e:?}"
            );
        }
        let (checked, bad, damaged) =
            fsck(dir.path(), &m, &mut |_, _| {}).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((checked, damaged, bad.len()), (4, 2, 2));
    }

    /// A 300-byte `zarr.json` of 10^18 one-element chunks: `cat` cuts it into small pieces
    /// (its first bytes come at once), `fsck` refuses it up front.
    #[test]
    fn an_array_of_absurdly_many_keys_is_streamed_or_refused() {
        let json = r#"{"zarr_format":3,"node_type":"array","shape":[1000000000,1000000000],
            "data_type":"uint8","fill_value":7,
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1,1]}},
            "codecs":[{"name":"bytes"}]}"#;
        let m = ZarrMeta::parse(json.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(pieces(&m, (CAT_PIECE, PIECE_KEYS)), (1, PIECE_KEYS));
        let dir = spools_testkit::tempdir("zarr-huge");
        let mut first = Vec::new();
        let r = cat(
            dir.path(),
            &m,
            &mut |b| {
                first.extend_from_slice(b);
                Ok(false)
            },
            &mut |_, _| {},
        );
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(first, vec![7u8; PIECE_KEYS as usize]);
        let e = fsck(dir.path(), &m, &mut |_, _| {});
        assert!(
            matches!(
                &e,
                Err(FileError::Format {
                    defect: FormatDefect::Zarr(ZarrError::Limit(_)),
                    ..
                })
            ),
            "{e:?}"
        );
    }
}
