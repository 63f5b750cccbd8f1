//! Single-process access to a parallel file, for the `spools cat`, `ls`, `fsck` and
//! `repair` tools: the same row logic as the collective reads, one batch of rows at a
//! time. Every tool takes `FILE:/NAME` for the dataset `NAME` of an HDF5 file (e.g.
//! `field.h5:/group/sub/temperature`), as the collective read does.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::detect::inspect_dataset;
use super::manifest::Manifest;
use super::parallel_format::Found;
use super::rows::{Block, Chunk, Damage, Geometry, Raid};
use super::sums::Sums;
use super::sys;
pub use super::zarr::tools::BadChunk;
use crate::error::FileError;

/// Stream bytes handled per batch of rows (or of a plain file).
const BATCH: u64 = 16 << 20;

/// Largest stripe row (unit size times unit count) the tools read: they hold one batch
/// of rows, at least one row, of every unit at once.
pub const ROW_MAX: u64 = 1 << 30;

/// A parallel file opened by a tool.
#[derive(Debug)]
pub enum Opened {
    /// One ordinary file: the stream starts at `offset` and holds `bytes`.
    Plain {
        /// Byte offset of the stream (the `.npy` header's length, or 0).
        offset: u64,
        /// Bytes in the stream.
        bytes: u64,
    },
    /// A striped file.
    Striped(Box<Manifest>),
    /// A Zarr v3 array (a directory).
    Zarr(Box<super::zarr::ZarrMeta>),
}

/// Opens `path` (a canonical file, a `.npy` file, a manifest, a Zarr array, or an HDF5
/// file's only dataset or, as `FILE:/NAME`, its dataset `NAME`, in any group).
///
/// # Errors
/// [`FileError`] when it cannot be read or its manifest is inconsistent.
pub fn open(path: &Path) -> Result<Opened, FileError> {
    Ok(open_target(path)?.opened)
}

/// A file a tool was given: the file itself (`FILE` of `FILE:/NAME`), the HDF5 dataset
/// named, and what it holds.
struct Target {
    file: PathBuf,
    dataset: Option<String>,
    opened: Opened,
}

fn open_target(path: &Path) -> Result<Target, FileError> {
    let (file, dataset) = super::hdf5::split(path);
    let p = file.as_path();
    let opened = match inspect_dataset(p, dataset.as_deref(), None, &[])? {
        Found::Manifest(t) => Opened::Striped(Box::new(Manifest::parse(p, &t)?)),
        Found::Plain { offset, bytes } => Opened::Plain { offset, bytes },
        Found::Zarr(t) => Opened::Zarr(Box::new(super::zarr::parse(p, &t)?)),
    };
    Ok(Target {
        file,
        dataset,
        opened,
    })
}

/// A damaged block found by [`fsck`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// The unit.
    pub unit: u64,
    /// Its file.
    pub path: PathBuf,
    /// Local offset of the block in the unit file.
    pub offset: u64,
    /// What is wrong.
    pub problem: &'static str,
}

/// What [`fsck`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Blocks checked (data and parity).
    pub blocks: u64,
    /// Damaged blocks.
    pub bad: Vec<BadBlock>,
    /// Rows whose blocks pass their checksums but whose parity does not match.
    pub parity_mismatch: Vec<u64>,
    /// Unit files that are present but not as the manifest records them: a different
    /// length (a file extended past its recorded size still reads, but is not the file
    /// that was written), or not a regular file (a symlink is never followed).
    pub wrong_size: Vec<UnitProblem>,
    /// Damaged (or lost) chunks of a Zarr array, naming the shard and the chunk: the
    /// first 10 000 of them ([`chunks_damaged`](Self::chunks_damaged) counts them all).
    pub chunks: Vec<BadChunk>,
    /// Damaged (or lost) chunks of a Zarr array in all, listed or not.
    pub chunks_damaged: u64,
}

/// A unit file that exists but is not as recorded (see [`FsckReport::wrong_size`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitProblem {
    /// The unit.
    pub unit: u64,
    /// Its file.
    pub path: PathBuf,
    /// What is wrong, e.g. "holds 5200 bytes, the manifest records 5120".
    pub problem: String,
}

/// What [`repair`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Blocks rebuilt from parity and written back, as `(unit, offset)`.
    pub blocks: Vec<(u64, u64)>,
    /// Unit files cut back to their recorded length, as `(unit, length they had)`.
    pub truncated: Vec<(u64, u64)>,
}

/// The state of a unit file against its recorded length: `None` when it is a regular
/// file of that length or missing (missing blocks are reported per block).
fn unit_problem(p: &Path, bytes: u64) -> Option<String> {
    match std::fs::symlink_metadata(p) {
        Ok(md) if md.file_type().is_symlink() => {
            Some("is a symbolic link (never followed; treated as missing)".into())
        }
        Ok(md) if !md.is_file() => Some("is not a regular file".into()),
        Ok(md) if md.len() != bytes => Some(format!(
            "holds {} bytes, the manifest records {bytes}",
            md.len()
        )),
        _ => None,
    }
}

struct Striped {
    geo: Geometry,
    paths: Vec<PathBuf>,
    crcs: Vec<Vec<u32>>,
}

impl Striped {
    fn new(path: &Path, m: &Manifest) -> Result<Self, FileError> {
        let geo = m.geometry(path)?;
        if geo.unit.saturating_mul(geo.count) > ROW_MAX {
            return Err(FileError::Options(
                "a stripe row of this file (unit times count) is more than the 1 GiB \
                 the tools hold at once",
            ));
        }
        Ok(Striped {
            geo,
            paths: m.unit_paths(path),
            crcs: m.crcs(),
        })
    }

    fn rows_per_batch(&self) -> u64 {
        (BATCH / self.geo.row_bytes()).max(1)
    }

    fn chunks(&self, r0: u64, r1: u64) -> Vec<Chunk> {
        (0..self.geo.count)
            .map(|u| {
                let (lo, hi) = self.geo.chunk_range(u, r0, r1);
                let p = &self.paths[u as usize];
                let f = sys::open_unit_read(p).ok()?;
                // No more than the file holds (a short file is reported per block).
                let len = f.metadata().ok()?.len();
                sys::read_upto(&f, p, hi.min(len).saturating_sub(lo) as usize, lo).ok()
            })
            .collect()
    }

    /// Damaged blocks of rows `[r0, r1)` as (row, unit, damage).
    fn damage(&self, r0: u64, r1: u64, chunks: &[Chunk]) -> Vec<(u64, u64, Damage)> {
        let mut bad = Vec::new();
        for r in r0..r1 {
            let at = ((r - r0) * self.geo.unit) as usize;
            for u in 0..self.geo.count {
                let len = self.geo.block(r, u).len() as usize;
                if len == 0 {
                    continue;
                }
                let b = chunks[u as usize]
                    .as_ref()
                    .and_then(|c| c.get(at..at + len));
                match b {
                    None => bad.push((r, u, Damage::Missing)),
                    Some(b) => {
                        if self.crcs[u as usize].get(r as usize)
                            != Some(&spools_exchange::crc32c(b))
                        {
                            bad.push((r, u, Damage::Corrupt));
                        }
                    }
                }
            }
        }
        bad
    }
}

/// Writes the logical byte stream of `path` to `out`, verifying every block and rebuilding
/// damaged RAID-5 blocks from parity: a striped file's blocks against its manifest, a
/// Zarr array's chunks against their CRC32C, a canonical, `.npy` or HDF5 file's blocks
/// against its checksum sidecar when it has one (`NAME.spools-sums`; without one there is
/// nothing to check). No byte of a block that fails is written. `progress` is called with
/// the bytes written so far. Returns the number of blocks rebuilt.
///
/// Memory: a batch of 16 MiB of stream (a plain file: plus up to two sidecar blocks; a
/// striped file: at least one stripe row, at most [`ROW_MAX`]); a Zarr array: one piece of
/// at most 256 MiB of output, one stored key and one decoded chunk.
///
/// # Errors
/// [`FileError`] for damage parity cannot repair (naming the unit and offset; a plain
/// file's bad block as [`FileError::Corrupt`] of unit 0 at its byte offset in the file),
/// a sidecar that does not cover the stream, a stripe row over [`ROW_MAX`], or when `out`
/// fails (a closed pipe ends the output early without an error).
pub fn cat(
    path: &Path,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, FileError> {
    let stdout = PathBuf::from("<output>");
    let put = |out: &mut dyn Write, b: &[u8]| -> Result<bool, FileError> {
        match out.write_all(b) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(FileError::io("write", &stdout, e)),
        }
    };
    let t = open_target(path)?;
    let path = t.file.as_path();
    match t.opened {
        Opened::Zarr(m) => {
            super::zarr::tools::cat(path, &m, &mut |b| put(out, b), progress)?;
            Ok(0)
        }
        Opened::Plain { offset, bytes } => {
            let f = sys::open_read(path)?;
            // With a sidecar, every block is checked before any byte of it is written.
            let sums = Sums::read(path)?;
            if let Some(s) = &sums {
                s.check_covers(path, offset, bytes)?;
            }
            let mut at = 0;
            while at < bytes {
                let n = (bytes - at).min(BATCH);
                let buf = match &sums {
                    Some(s) => s.read_verified(&f, path, offset + at, offset + at + n)?,
                    None => {
                        let mut buf = vec![0u8; n as usize];
                        sys::read_at(&f, path, &mut buf, offset + at)?;
                        buf
                    }
                };
                if !put(out, &buf)? {
                    return Ok(0);
                }
                at += n;
                progress(at, bytes);
            }
            Ok(0)
        }
        Opened::Striped(m) => {
            let s = Striped::new(path, &m)?;
            let rows = s.geo.rows();
            let step = s.rows_per_batch();
            let mut rebuilt = 0;
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + step).min(rows);
                let chunks = s.chunks(r0, r1);
                let (a, b) = s.geo.stream_range(r0, r1);
                let mut buf = vec![0u8; (b - a) as usize];
                rebuilt += s
                    .geo
                    .assemble((r0, r1), &chunks, &s.crcs, &s.paths, &mut buf, false)?
                    .len() as u64;
                if !put(out, &buf)? {
                    return Ok(rebuilt);
                }
                progress(b, s.geo.size);
                r0 = r1;
            }
            Ok(rebuilt)
        }
    }
}

/// Whether `path` is an HDF5 file (by its signature).
fn is_hdf5_file(path: &Path) -> bool {
    // The signature may follow a user block of 512, 1024, ... bytes.
    super::hdf5::is_hdf5_file(path)
}

/// A description of `path` for `spools ls`.
///
/// # Errors
/// As [`open`].
pub fn describe(path: &Path) -> Result<String, FileError> {
    let t = open_target(path)?;
    let path = t.file.as_path();
    Ok(match t.opened {
        Opened::Plain { offset: 0, bytes } => {
            format!("{}: canonical file, {bytes} bytes", path.display())
        }
        Opened::Plain { offset, bytes } if is_hdf5_file(path) => {
            let d = super::hdf5::inspect(path, t.dataset.as_deref())?;
            format!(
                "{}: HDF5 file, dataset {}, dtype {}, shape {:?}, contiguous at offset {offset}, {bytes} bytes{}",
                path.display(),
                d.name,
                d.dtype,
                d.shape,
                d.written_from
                    .map(|l| format!("\n  written by Spools from: {l}"))
                    .unwrap_or_default()
            )
        }
        Opened::Plain { offset, bytes } => {
            let head = sys::read_upto(&sys::open_read(path)?, path, offset as usize, 0)?;
            let h = super::npy::parse_full(&head).map_err(|e| FileError::Format {
                path: path.to_path_buf(),
                defect: crate::error::FormatDefect::Npy(e),
            })?;
            format!(
                "{}: .npy file, dtype {} ({}), shape {:?}{}, {offset}-byte header, {bytes} bytes of data",
                path.display(),
                h.descr,
                super::npy::dtype_of(&h.descr).map_or_else(|| "no Spools element type".to_string(), |d| d.to_string()),
                h.shape,
                if h.fortran { " in Fortran order" } else { "" }
            )
        }
        Opened::Zarr(m) => super::zarr::tools::describe(path, &m),
        Opened::Striped(m) => {
            let mut s = format!(
                "{}: striped file, version {}, {} bytes, layout {}{}\n  written from: {}\n",
                path.display(),
                m.version,
                m.size,
                m.layout,
                if m.node_local {
                    ", node-local units"
                } else {
                    ""
                },
                m.dataset
            );
            for (u, (e, p)) in m.units.iter().zip(m.unit_paths(path)).enumerate() {
                let state = match std::fs::symlink_metadata(&p) {
                    Ok(md) if md.file_type().is_symlink() => "SYMLINK (refused)".to_string(),
                    Ok(md) if md.is_file() && md.len() == e.bytes => "present".to_string(),
                    Ok(md) if md.is_file() => format!("WRONG SIZE ({} bytes)", md.len()),
                    Ok(_) => "NOT A REGULAR FILE".to_string(),
                    Err(_) => "MISSING".to_string(),
                };
                s.push_str(&format!(
                    "  unit {u}: {} ({} bytes, {} blocks) {state}\n",
                    p.display(),
                    e.bytes,
                    e.crc32c.len() / 8
                ));
            }
            s.pop();
            s
        }
    })
}

/// Verifies every block checksum and, for RAID-5, every row's parity; for a canonical or
/// `.npy` file, every block against its checksum sidecar (`NAME.spools-sums`, written with
/// `WriteOptions::checksums`), reporting bad blocks as unit 0 at their byte offsets in
/// the file.
///
/// A Zarr array's keys are walked one at a time (never listed in memory), and an array of
/// more than 2^32 keys is refused up front; the damaged chunks are counted, the first
/// 10 000 listed.
///
/// # Errors
/// [`FileError`] when the file, its manifest or its sidecar cannot be read or parsed
/// (a truncated sidecar: [`FileError::Format`]); damage is reported in the
/// [`FsckReport`], not as an error. A canonical or `.npy` file without a sidecar has no
/// checksums: [`FileError::Options`]. A stripe row over [`ROW_MAX`]:
/// [`FileError::Options`]; a Zarr array of too many keys: [`FileError::Format`] with
/// [`ZarrError::Limit`](crate::error::ZarrError::Limit).
pub fn fsck(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<FsckReport, FileError> {
    let t = open_target(path)?;
    let path = t.file.as_path();
    let m = match t.opened {
        Opened::Striped(m) => m,
        Opened::Plain { offset, bytes } => return fsck_plain(path, offset, bytes, progress),
        Opened::Zarr(m) => {
            let (blocks, chunks, chunks_damaged) = super::zarr::tools::fsck(path, &m, progress)?;
            return Ok(FsckReport {
                blocks,
                chunks,
                chunks_damaged,
                ..FsckReport::default()
            });
        }
    };
    let s = Striped::new(path, &m)?;
    let mut rep = FsckReport::default();
    for (u, (e, p)) in m.units.iter().zip(&s.paths).enumerate() {
        if let Some(problem) = unit_problem(p, e.bytes) {
            rep.wrong_size.push(UnitProblem {
                unit: u as u64,
                path: p.clone(),
                problem,
            });
        }
    }
    let rows = s.geo.rows();
    let step = s.rows_per_batch();
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + step).min(rows);
        let chunks = s.chunks(r0, r1);
        let bad = s.damage(r0, r1, &chunks);
        for r in r0..r1 {
            rep.blocks += (0..s.geo.count)
                .filter(|&u| s.geo.block(r, u).len() > 0)
                .count() as u64;
            if s.geo.raid == Raid::Raid5 && !bad.iter().any(|b| b.0 == r) {
                let at = ((r - r0) * s.geo.unit) as usize;
                let mut p = vec![0u8; s.geo.unit as usize];
                for u in 0..s.geo.count {
                    let len = s.geo.block(r, u).len() as usize;
                    if let Some(b) = chunks[u as usize]
                        .as_ref()
                        .and_then(|c| c.get(at..at + len))
                    {
                        spools_exchange::crc::xor_into(&mut p[..len], b);
                    }
                }
                if p.iter().any(|&x| x != 0) {
                    rep.parity_mismatch.push(r);
                }
            }
        }
        rep.bad.extend(bad.into_iter().map(|(r, u, d)| BadBlock {
            unit: u,
            path: s.paths[u as usize].clone(),
            offset: r * s.geo.unit,
            problem: match d {
                Damage::Missing => "missing",
                Damage::Corrupt => "checksum mismatch",
            },
        }));
        progress(s.geo.stream_range(0, r1).1, s.geo.size);
        r0 = r1;
    }
    rep.bad.sort_by_key(|b| (b.unit, b.offset));
    Ok(rep)
}

/// Rebuilds every lost or corrupt block of a RAID-5 file from the other blocks of its row
/// and writes it back (recreating a missing unit file, exclusively), and cuts unit files
/// extended past their recorded length back to it. Unit files are never opened through a
/// symlink (a symlink in place of a unit file is an error to resolve by hand).
///
/// # Errors
/// [`FileError::Unrecoverable`] when a row lost more than one block (nothing of that row
/// is written), [`FileError::Options`] for a file without parity, I/O errors.
pub fn repair(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<RepairReport, FileError> {
    let t = open_target(path)?;
    let path = t.file.as_path();
    let m = match t.opened {
        Opened::Striped(m) => m,
        Opened::Zarr(_) => {
            return Err(FileError::Options(
                "only RAID-5 files can be repaired; a Zarr array has no parity",
            ))
        }
        Opened::Plain { offset, .. } => {
            return Err(FileError::Options(if offset == 0 {
                "only RAID-5 files can be repaired; this is a canonical file"
            } else if is_hdf5_file(path) {
                "only RAID-5 files can be repaired; this is an HDF5 file"
            } else {
                "only RAID-5 files can be repaired; this is a .npy file"
            }))
        }
    };
    let s = Striped::new(path, &m)?;
    if s.geo.raid != Raid::Raid5 {
        return Err(FileError::Options(
            "only RAID-5 files can be repaired; a RAID-0 file has no parity",
        ));
    }
    let rows = s.geo.rows();
    let step = s.rows_per_batch();
    let mut fixed = Vec::new();
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + step).min(rows);
        let chunks = s.chunks(r0, r1);
        let bad = s.damage(r0, r1, &chunks);
        for r in r0..r1 {
            let lost: Vec<u64> = bad.iter().filter(|b| b.0 == r).map(|b| b.1).collect();
            if lost.len() > 1 {
                return Err(FileError::Unrecoverable {
                    row: r,
                    units: lost,
                });
            }
        }
        for &(r, u, _) in &bad {
            let at = ((r - r0) * s.geo.unit) as usize;
            let block = s.geo.rebuild_block(r, u, &chunks, at);
            let p = &s.paths[u as usize];
            let f = sys::repair_unit(p, s.geo.unit_len(u))?;
            sys::write_at(&f, p, &block, r * s.geo.unit)?;
            sys::sync(&f, p)?;
            fixed.push((u, r * s.geo.unit));
        }
        progress(s.geo.stream_range(0, r1).1, s.geo.size);
        r0 = r1;
    }
    debug_assert!(fixed.iter().all(|&(u, o)| matches!(
        s.geo.block(o / s.geo.unit, u),
        Block::Data { .. } | Block::Parity { .. }
    )));
    let mut truncated = Vec::new();
    for (u, p) in s.paths.iter().enumerate() {
        let want = s.geo.unit_len(u as u64);
        let f = match sys::open_unit_write(p) {
            Ok(f) => f,
            Err(FileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                continue
            }
            Err(e) => return Err(e),
        };
        let len = f.metadata().map_err(|e| FileError::io("stat", p, e))?.len();
        if len > want {
            f.set_len(want)
                .map_err(|e| FileError::io("truncate", p, e))?;
            sys::sync(&f, p)?;
            truncated.push((u as u64, len));
        }
    }
    Ok(RepairReport {
        blocks: fixed,
        truncated,
    })
}

/// [`fsck`] of a canonical or `.npy` file against its checksum sidecar.
fn fsck_plain(
    path: &Path,
    offset: u64,
    bytes: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<FsckReport, FileError> {
    let Some(sums) = Sums::read(path)? else {
        return Err(FileError::Options(if offset == 0 {
            "a canonical file has no checksums unless written with checksums on \
             (then a NAME.spools-sums sidecar holds them); this one has none"
        } else if is_hdf5_file(path) {
            "an HDF5 file has no checksums unless written with checksums on \
             (then a NAME.spools-sums sidecar holds them); this one has none"
        } else {
            "a .npy file has no checksums unless written with checksums on \
             (then a NAME.spools-sums sidecar holds them); this one has none"
        }));
    };
    let mut rep = FsckReport::default();
    if (sums.offset, sums.bytes) != (offset, bytes) {
        rep.wrong_size.push(UnitProblem {
            unit: 0,
            path: path.to_path_buf(),
            problem: format!(
                "holds {bytes} bytes from offset {offset}, its checksums record {} from offset {}",
                sums.bytes, sums.offset
            ),
        });
    }
    let f = sys::open_read(path)?;
    let step = (BATCH / sums.block).max(1);
    let blocks = sums.blocks();
    let mut b0 = 0;
    while b0 < blocks {
        let b1 = (b0 + step).min(blocks);
        for (at, problem) in sums.bad_blocks(&f, path, (b0, b1))? {
            rep.bad.push(BadBlock {
                unit: 0,
                path: path.to_path_buf(),
                offset: at,
                problem,
            });
        }
        rep.blocks += b1 - b0;
        progress(sums.block_range(b1 - 1).1, sums.bytes);
        b0 = b1;
    }
    Ok(rep)
}
