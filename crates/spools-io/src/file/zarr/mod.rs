//! Zarr v3 arrays, written and read by the ranks themselves.
//!
//! The I/O distribution is the array's grid of outer chunks (shards, or the chunks of an
//! unsharded array) dealt block-cyclically over the ranks (`cyclic(shard)` in every
//! dimension, [`grid`]), so every shard lies whole in one rank's local array and no two
//! ranks write one shard. A write is `redistribute` from the caller's layout into that
//! distribution (the plan M1⁻¹∘M2 like every transfer), then each rank encodes and writes
//! its shards ([`chunks`], [`codec`]) into a new directory beside the path, then rank 0
//! writes `zarr.json` ([`meta`]) and renames the directory over the path: a failed write
//! leaves the previous array, or none. A read is the reverse, with any number of ranks
//! and any distribution, and reads arrays other tools wrote (sharded or not, compressed
//! with zstd or gzip or not, missing chunks as the fill value).
//!
//! Every chunk Spools writes carries a CRC32C (the `crc32c` codec after the compressor)
//! and so does every shard index, so damage is found by `spools fsck` and by a read,
//! naming the shard and the chunk. The array's attributes record that Spools wrote every
//! chunk (`spools.complete`): a missing shard of such an array is lost data, reported;
//! in an array without that attribute it is fill value, as Zarr says.

mod chunks;
mod codec;
mod grid;
mod meta;
pub(crate) mod tools;

use std::path::{Path, PathBuf};

use spools_map::{DType, Layout};
use spools_msg::Communicator;

use crate::error::{FileError, FormatDefect, ZarrError};
use crate::file::options::{FileStats, ReadOptions, WriteOptions};
use crate::file::parallel_format::{not_mine, Found, Look, ParallelFormat};
use crate::file::steps::{
    agree_on_args, agree_on_outcome, check_share, integrity, read_args, write_args,
};
use crate::file::sys;
use crate::Side;

pub(crate) use meta::parse_spec;
pub use meta::{Compressor, ZarrMeta};

use grid::Grid;

/// The metadata document's name inside the array's directory.
pub(crate) const META: &str = "zarr.json";

/// Largest `zarr.json` read.
const META_MAX: u64 = 16 << 20;

/// Arrays whose stored bytes [`decode_any`] feeds to the chunk and shard decoders: sharded
/// with zstd and CRC32C, unsharded big-endian gzip, sharded with the index first.
const FUZZ_ARRAYS: [&str; 3] = [
    r#"{"zarr_format":3,"node_type":"array","shape":[6,5],"data_type":"uint16","fill_value":3,
        "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[6,6]}},
        "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[3,3],
          "codecs":[{"name":"bytes"},{"name":"zstd"},{"name":"crc32c"}]}}]}"#,
    r#"{"zarr_format":3,"node_type":"array","shape":[7],"data_type":"float64","fill_value":"NaN",
        "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
        "codecs":[{"name":"bytes","configuration":{"endian":"big"}},{"name":"gzip"}]}"#,
    r#"{"zarr_format":3,"node_type":"array","shape":[4,4],"data_type":"r24","fill_value":[1,2,3],
        "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,4]}},
        "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,4],
          "codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"}],"index_location":"start"}}]}"#,
];

/// Feeds untrusted bytes to the Zarr decoders: as `zarr.json`, and as the stored bytes
/// of a shard or chunk of each of [`FUZZ_ARRAYS`]. Returns how many accepted them.
pub(crate) fn decode_any(data: &[u8]) -> usize {
    let mut ok = usize::from(ZarrMeta::parse(data).is_ok());
    for text in FUZZ_ARRAYS {
        let Ok(m) = ZarrMeta::parse(text.as_bytes()) else {
            continue;
        };
        let Ok(g) = Grid::new(m.dtype, &m.shape, &m.grid, 1) else {
            continue;
        };
        let shape = g.local_shape(0);
        let mut local = vec![0u8; (shape.iter().product::<u64>() * m.dtype.size()) as usize];
        if let Some(s) = g.owned(0).first() {
            let bad = chunks::decode(&m, &g, Some(data), Some((&mut local, &shape)), s);
            ok += usize::from(bad.is_empty());
        }
    }
    ok
}

/// Reads `path/zarr.json`, or `None` when `path` is not a directory holding one.
///
/// # Errors
/// [`FileError::Io`] when it exists but cannot be read, or is too large.
pub(crate) fn read_meta(path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    let at = path.join(META);
    match std::fs::metadata(&at) {
        Ok(md) if md.is_file() && md.len() <= META_MAX => std::fs::read(&at)
            .map(Some)
            .map_err(|e| FileError::io("read", &at, e)),
        Ok(_) => Err(FileError::io(
            "read",
            &at,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a file of at most 16 MiB",
            ),
        )),
        Err(_) => Ok(None),
    }
}

/// Parses `zarr.json` text for `path`.
///
/// # Errors
/// [`FileError::Format`] naming what is wrong.
pub(crate) fn parse(path: &Path, text: &[u8]) -> Result<ZarrMeta, FileError> {
    ZarrMeta::parse(text).map_err(|e| FileError::Format {
        path: path.join(META),
        defect: FormatDefect::Zarr(e),
    })
}

/// Checks that the array holds the dataset `layout` describes: the same element type and
/// shape for an array layout (its order does not matter: Zarr stores the logical array),
/// the same number of bytes for a byte stream (read as the array's C-order bytes).
///
/// # Errors
/// [`FileError::DatasetMismatch`] or [`FileError::SizeMismatch`].
pub(crate) fn check(path: &Path, m: &ZarrMeta, layout: &Layout) -> Result<(), FileError> {
    let bytes = m.shape.iter().product::<u64>() * m.dtype.size();
    match layout {
        Layout::Array(a) if a.dtype() != m.dtype || a.shape() != m.shape.as_slice() => {
            Err(FileError::DatasetMismatch {
                path: path.to_path_buf(),
                file: format!("{} ({})", m.dataset(), m.data_type),
                layout: format!("{}{:?}", a.dtype(), a.shape()),
            })
        }
        l if l.total_bytes().is_some_and(|t| t != bytes) => Err(FileError::SizeMismatch {
            path: path.to_path_buf(),
            file: bytes,
            layout: l.total_bytes().unwrap_or(0),
        }),
        _ => Ok(()),
    }
}

/// A write's refusal of the metadata Spools made from its `zarr(...)` spec: the spec's
/// fault (a bad argument), unless Spools cannot store what it asks for (unsupported).
fn spec_error(path: &Path, e: ZarrError) -> FileError {
    let defect = match e.kind() {
        crate::error::ErrorKind::Unsupported => e,
        _ => ZarrError::Spec(e.to_string()),
    };
    FileError::Format {
        path: path.join(META),
        defect: FormatDefect::Zarr(defect),
    }
}

fn grid_of(path: &Path, m: &ZarrMeta, ranks: u32) -> Result<Grid, FileError> {
    Grid::new(m.dtype, &m.shape, &m.grid, ranks).map_err(|e| FileError::Format {
        path: path.join(META),
        defect: FormatDefect::Zarr(ZarrError::Grid(e.to_string())),
    })
}

fn local_buffer(g: &Grid, me: u32) -> Result<Vec<u8>, FileError> {
    let n = if u64::from(me) < g.units() {
        g.layout.local_bytes(u64::from(me))?
    } else {
        0
    };
    Ok(vec![0u8; n as usize])
}

/// Zarr v3 arrays as a [`ParallelFormat`]: written with `spec` (the chunks' shape, the
/// shards' and the compressor), and read (`None`: `zarr.json` says how they are stored).
#[derive(Debug)]
pub(crate) struct ZarrArrays<'a>(pub(crate) Option<ZarrSpec<'a>>);

/// A Zarr array's storage as a write asks for it: the chunks' shape, the shards' (`None`:
/// no sharding) and the compressor.
pub(crate) type ZarrSpec<'a> = (&'a [u64], Option<&'a [u64]>, Compressor);

impl ParallelFormat for ZarrArrays<'_> {
    fn inspect(&self, look: &Look<'_>) -> Result<Option<Found>, FileError> {
        if look.head.is_some() {
            return Ok(None);
        }
        let Some(text) = read_meta(look.path)? else {
            return Ok(None);
        };
        if let Some(layout) = look.layout {
            check(look.path, &parse(look.path, &text)?, layout)?;
        }
        Ok(Some(Found::Zarr(text)))
    }

    fn write(
        &self,
        comm: &Communicator,
        path: &Path,
        data: &[u8],
        layout: &Layout,
        opts: &WriteOptions,
    ) -> Result<FileStats, FileError> {
        match self.0 {
            Some(spec) => write(comm, path, data, layout, opts, spec),
            None => Err(FileError::Options(
                "a Zarr array is written with its chunk shape",
            )),
        }
    }

    fn read(
        &self,
        comm: &Communicator,
        path: &Path,
        found: &Found,
        data: &mut [u8],
        layout: &Layout,
        opts: &ReadOptions,
    ) -> Result<FileStats, FileError> {
        match found {
            Found::Zarr(text) => read(comm, path, text, data, layout, opts),
            _ => Err(not_mine(path)),
        }
    }
}

/// Writes `layout`'s dataset as a Zarr v3 array at `path` (a directory). Collective.
fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    spec: ZarrSpec<'_>,
) -> Result<FileStats, FileError> {
    let (chunks, shards, compressor) = spec;
    let checked = check_share(comm, layout, data.len(), Side::Source, opts.declined.as_ref()).and_then(|()| {
        let Layout::Array(a) = layout else {
            return Err(FileError::Options(
                "a Zarr array is written from an array layout (dtype[shape] ...), not a byte stream",
            ));
        };
        if chunks.len() != a.shape().len() {
            return Err(FileError::Format {
                path: path.to_path_buf(),
                defect: FormatDefect::Zarr(ZarrError::Spec(format!(
                    "chunk shape {chunks:?} for an array of {} dimensions",
                    a.shape().len()
                ))),
            });
        }
        if let (DType::Bytes(n), Some(_)) = (a.dtype(), shards) {
            return Err(FileError::Format {
                path: path.to_path_buf(),
                defect: FormatDefect::Zarr(ZarrError::ShardedBytes(n)),
            });
        }
        let text = meta::to_json(a, &layout.to_string(), chunks, shards, compressor);
        let m = ZarrMeta::parse(&text).map_err(|e| spec_error(path, e))?;
        Ok((m, text))
    });
    // Every rank passed the same layout and chunks, or none goes on.
    let (m, text) = agree_on_args(comm, path, checked, layout, write_args(layout, opts))?;
    let g = grid_of(path, &m, comm.size()).map_err(|e| match e {
        FileError::Format {
            defect: FormatDefect::Zarr(z),
            ..
        } => spec_error(path, z),
        e => e,
    })?;
    let me = comm.rank();
    let mut local = local_buffer(&g, me)?;
    let exchange = spools_exchange::redistribute(
        comm,
        data,
        layout,
        &mut local,
        &g.layout,
        &integrity(opts.integrity),
    )?;
    let stats = FileStats {
        bytes: layout.total_bytes().unwrap_or(0),
        reshuffled: true,
        aggregators: g.units() as u32,
        exchange,
        rounds: 1,
        ..FileStats::default()
    };
    // Rank 0 makes the new directory beside the path.
    let (made, ready) = match me {
        0 => match prepare(path) {
            Ok(tmp) => (tmp, Ok(())),
            Err(e) => (PathBuf::new(), Err(e)),
        },
        _ => (PathBuf::new(), Ok(())),
    };
    let tmp = super::steps::announce(comm, path, &made, ready)?;
    let wrote = write_keys(&m, &g, &local, me, &tmp, opts.sync);
    let wrote = agree_on_outcome(comm, path, wrote);
    let committed = match (&wrote, me) {
        (Ok(()), 0) => sys::replace(&tmp.join(META), &text).and_then(|()| commit(&tmp, path)),
        (Err(_), 0) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        _ => Ok(()),
    };
    wrote?;
    agree_on_outcome(comm, path, committed)?;
    Ok(stats)
}

/// Rank 0: checks that `path` may be replaced (absent, an empty directory or a Zarr
/// array) and makes the new array's directory beside it.
fn prepare(path: &Path) -> Result<PathBuf, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() => {
            let empty = std::fs::read_dir(path)
                .map_err(|e| FileError::io("list", path, e))?
                .next()
                .is_none();
            if !empty && !path.join(META).is_file() {
                return Err(FileError::NotReplaced {
                    path: path.to_path_buf(),
                    what: "a Zarr array or an empty directory",
                });
            }
        }
        Ok(_) => {
            return Err(FileError::NotReplaced {
                path: path.to_path_buf(),
                what: "a Zarr array or an empty directory",
            })
        }
        Err(_) => {}
    }
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let tmp = sys::temp_name(path, nonce);
    std::fs::create_dir(&tmp).map_err(|e| FileError::io("create directory", &tmp, e))?;
    Ok(tmp)
}

/// Rank 0: renames the finished directory `tmp` over `path` (an old array is moved aside
/// first and removed after; if the rename fails, it is put back).
fn commit(tmp: &Path, path: &Path) -> Result<(), FileError> {
    let old = std::fs::symlink_metadata(path)
        .is_ok()
        .then(|| sys::temp_name(path, u64::MAX));
    if let Some(old) = &old {
        std::fs::rename(path, old).map_err(|e| FileError::io("move aside", path, e))?;
    }
    if let Err(e) = std::fs::rename(tmp, path) {
        if let Some(old) = &old {
            let _ = std::fs::rename(old, path);
        }
        let _ = std::fs::remove_dir_all(tmp);
        return Err(FileError::io("rename over", path, e));
    }
    if let Some(old) = &old {
        let _ = std::fs::remove_dir_all(old);
    }
    sys::sync_dir(path)
}

/// Encodes and writes this rank's outer chunks into `dir`.
fn write_keys(
    m: &ZarrMeta,
    g: &Grid,
    local: &[u8],
    me: u32,
    dir: &Path,
    sync: bool,
) -> Result<(), FileError> {
    let shape = g.local_shape(u64::from(me));
    for s in g.owned(u64::from(me)) {
        let at = dir.join(m.key(&s));
        let parts =
            chunks::encode(m, g, local, &shape, &s).map_err(|e| FileError::io("encode", &at, e))?;
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| FileError::io("create directory", parent, e))?;
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&at)
            .map_err(|e| FileError::io("create", &at, e))?;
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        sys::write_vectored_at(&f, &at, &slices, 0)?;
        if sync {
            sys::sync(&f, &at)?;
        }
    }
    Ok(())
}

/// Reads the stored bytes of key `at` (`None` when absent).
///
/// # Errors
/// [`FileError::Io`] when it cannot be read or is larger than any encoding of the chunk.
pub(crate) fn read_key(m: &ZarrMeta, at: &Path) -> Result<Option<Vec<u8>>, FileError> {
    match std::fs::metadata(at) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::io("stat", at, e)),
        Ok(md) if md.len() > chunks::max_stored(m) => Err(FileError::io(
            "read",
            at,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} bytes is more than any encoding of this chunk", md.len()),
            ),
        )),
        Ok(_) => std::fs::read(at)
            .map(Some)
            .map_err(|e| FileError::io("read", at, e)),
    }
}

/// Reads the Zarr array at `path` (whose `zarr.json` rank 0 read as `text` and checked)
/// into the distribution `layout`. Collective.
fn read(
    comm: &Communicator,
    path: &Path,
    text: &[u8],
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
) -> Result<FileStats, FileError> {
    let checked = check_share(
        comm,
        layout,
        data.len(),
        Side::Destination,
        opts.declined.as_ref(),
    )
    .and_then(|()| parse(path, text));
    let m = agree_on_args(comm, path, checked, layout, read_args(layout))?;
    let g = grid_of(path, &m, comm.size())?;
    let me = comm.rank();
    let mut local = local_buffer(&g, me)?;
    let shape = g.local_shape(u64::from(me));
    let mut res = Ok(());
    for s in g.owned(u64::from(me)) {
        let at = path.join(m.key(&s));
        let bad = read_key(&m, &at).map(|stored| {
            chunks::decode(&m, &g, stored.as_deref(), Some((&mut local, &shape)), &s)
        });
        match bad {
            Err(e) => res = Err(e),
            Ok(bad) => {
                if let Some((chunk, defect)) = bad.into_iter().next() {
                    res = Err(FileError::ZarrChunk {
                        key: at,
                        chunk,
                        defect,
                    });
                }
            }
        }
        if res.is_err() {
            break;
        }
    }
    agree_on_outcome(comm, path, res)?;
    let exchange = spools_exchange::redistribute(
        comm,
        &local,
        &g.layout,
        data,
        layout,
        &integrity(opts.integrity),
    )?;
    Ok(FileStats {
        bytes: m.shape.iter().product::<u64>() * m.dtype.size(),
        reshuffled: true,
        aggregators: g.units() as u32,
        exchange,
        rounds: 1,
        ..FileStats::default()
    })
}
