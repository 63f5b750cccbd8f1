//! Single-process access to a Zarr array for `spools ls`, `cat` and `fsck`.

use std::path::Path;

use super::chunks;
use super::grid::Grid;
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

/// Largest slab (one row of shards along the first dimension) `cat` and `fsck` hold.
const SLAB_MAX: u64 = 16 << 30;

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

/// The slab of the array holding the outer chunks whose first coordinate is `s0`, as its
/// own grid (one rank holds it all) and the keys in it.
fn slab(path: &Path, m: &ZarrMeta, s0: u64) -> Result<(Grid, Vec<Vec<u64>>), FileError> {
    let mut shape = m.shape.clone();
    shape[0] = m.grid[0].min(m.shape[0] - s0 * m.grid[0]);
    let bytes = shape
        .iter()
        .try_fold(m.dtype.size(), |t, &n| t.checked_mul(n));
    if bytes.is_none_or(|b| b > SLAB_MAX) {
        return Err(FileError::Format {
            path: path.to_path_buf(),
            defect: FormatDefect::Zarr(ZarrError::Limit(format!(
                "a row of shards of {shape:?} is more than the {SLAB_MAX} bytes the tools hold at once"
            ))),
        });
    }
    let g = Grid::new(m.dtype, &shape, &m.grid, 1).map_err(|e| FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::Zarr(ZarrError::Grid(e.to_string())),
    })?;
    let keys = g.owned(0);
    Ok((g, keys))
}

/// The key file of slab-local outer chunk `s` of slab `s0`, and its global coordinates.
fn global(m: &ZarrMeta, path: &Path, s0: u64, s: &[u64]) -> (std::path::PathBuf, Vec<u64>) {
    let mut at = s.to_vec();
    at[0] = s0;
    (path.join(m.key(&at)), at)
}

/// Writes the array's C-order bytes to `put` one slab of outer chunks at a time; stops
/// early when `put` says so.
///
/// # Errors
/// A key that cannot be read, or damage ([`FileError::ZarrChunk`]).
pub(crate) fn cat(
    path: &Path,
    m: &ZarrMeta,
    put: &mut dyn FnMut(&[u8]) -> Result<bool, FileError>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), FileError> {
    let total = m.shape.iter().product::<u64>() * m.dtype.size();
    let mut done = 0;
    for s0 in 0..m.keys_per_dim()[0] {
        let (g, keys) = slab(path, m, s0)?;
        let shape = g.local_shape(0);
        let mut buf = vec![0u8; (shape.iter().product::<u64>() * m.dtype.size()) as usize];
        for s in keys {
            let (key, _) = global(m, path, s0, &s);
            let stored = read_key(m, &key)?;
            let bad = chunks::decode(m, &g, stored.as_deref(), Some((&mut buf, &shape)), &s);
            if let Some((chunk, defect)) = bad.into_iter().next() {
                return Err(FileError::ZarrChunk { key, chunk, defect });
            }
        }
        if !put(&buf)? {
            return Ok(());
        }
        done += buf.len() as u64;
        progress(done, total);
    }
    Ok(())
}

/// Checks every key: each shard index's CRC32C and every chunk's (decoding each).
/// Returns the chunks checked and the damaged ones.
///
/// # Errors
/// A key that cannot be read.
pub(crate) fn fsck(
    path: &Path,
    m: &ZarrMeta,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, Vec<BadChunk>), FileError> {
    let per_key: u64 = m
        .grid
        .iter()
        .zip(m.chunk_shape())
        .map(|(o, c)| o / c)
        .product();
    let keys = m.keys_per_dim();
    let mut checked = 0;
    let mut bad = Vec::new();
    for s0 in 0..keys[0] {
        let (g, slab_keys) = slab(path, m, s0)?;
        for s in slab_keys {
            let (key, _) = global(m, path, s0, &s);
            let stored = read_key(m, &key)?;
            checked += per_key;
            for (chunk, defect) in chunks::decode(m, &g, stored.as_deref(), None, &s) {
                bad.push(BadChunk {
                    key: key.clone(),
                    chunk,
                    problem: defect.to_string(),
                });
            }
        }
        progress(s0 + 1, keys[0]);
    }
    Ok((checked, bad))
}
