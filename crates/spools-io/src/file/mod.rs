//! Parallel files: a dataset written and read collectively by the ranks themselves, with no
//! server process.
//!
//! * **Canonical** (default): ONE ordinary file holding the dataset's canonical byte stream
//!   (row-major bytes for `order=C`), optionally behind a `.npy` header, so `cat`, `cmp`,
//!   `numpy.fromfile` and `numpy.load` read it. It is written to a temporary name in the
//!   same directory and renamed over the path when every rank has written its part, so a
//!   failed write (a full disk, a dead rank) leaves the previous file, or none, never a
//!   partial one; an existing file is replaced, not written in place (not versioned).
//! * **Striped**: the same stream over K unit files in K directories as RAID-0
//!   (`stripe(...)`) or RAID-5 (`raid5(...)`), with a JSON manifest at the file's path
//!   naming the units and carrying each block's CRC32C. Every write is a new version that
//!   commits atomically: the data goes to the unit files of the slot the current version
//!   does not use, is synced, and then the manifest is replaced by a rename. A crash
//!   before the rename leaves the previous version intact and readable.
//!
//! Writes follow two-phase collective I/O: the data is reshuffled into an *I/O
//! distribution* of long contiguous domains owned by aggregator ranks (stripe rows for a
//! striped file, so RAID-5 parity is computed on whole rows without reading anything
//! back), and each aggregator writes its domain with large `pwrite`s. A canonical file
//! written from a distribution whose runs are long enough skips the reshuffle and each
//! rank writes its own runs ([`Reshuffle`]). Reads are the same in reverse, with any
//! number of ranks and any distribution.
//!
//! **Durability.** With [`WriteOptions::sync`], the data is durable on every rank's
//! storage when `write` returns (each writer syncs its files before the final agreement).
//! Without it, the data is in the operating system's cache: visible to every later read,
//! durable once the system flushes it. A striped file's commit always syncs, so the
//! manifest never names data that is not durable.
//!
//! **Hostile input.** Files and manifests are input: a manifest may only name unit files
//! by plain relative paths inside its directory (no absolute path, no `..`), unit files
//! are never opened through a symlink and are created exclusively, and a reader checks
//! the element type and shape a `.npy` header or a manifest records against its layout.
//!
//! **Node-local mode** (SCI-MPICH's server-less I/O): with [`Striping::node_local`], unit
//! `u` is touched only by rank `u % N`, which stores and serves it for the others.

mod canonical;
mod manifest;
mod npy;
mod rows;
mod store;
mod striped;
mod sys;
pub mod tools;

use std::path::{Path, PathBuf};

use spools_map::Layout;
use spools_msg::{Communicator, Op};

use crate::error::{ExchangeError, FileError};
use crate::exchange::ExchangeStats;

pub use manifest::{Manifest, UnitEntry, MANIFEST_FORMAT};
pub use rows::Raid;

/// How a parallel file is stored.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// One ordinary file holding the canonical byte stream.
    #[default]
    Canonical,
    /// One ordinary file: a `.npy` header, then the canonical byte stream.
    Npy,
    /// Unit files striped RAID-0 or RAID-5, with a manifest.
    Striped(Striping),
}

/// Where and how a striped file's units live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Striping {
    /// A `stripe(unit=..,count=K)` or `raid5(unit=..,count=K)` layout (unsized).
    pub layout: Layout,
    /// Directories for the unit files: unit `u` goes to `dirs[u % dirs.len()]`; empty
    /// means the manifest's directory. A relative directory is relative to the manifest's
    /// directory; an absolute one must lie inside it ([`FileError::UnsafePath`]
    /// otherwise), since a manifest names its units by relative paths only. To spread
    /// units over other disks, link the disks' directories into the manifest's
    /// directory (`ln -s /disk1 set/d1`, then `dirs: ["d1", ...]`).
    pub dirs: Vec<PathBuf>,
    /// Unit `u` is only touched by rank `u % N` (node-local storage, server-less mode).
    pub node_local: bool,
}

/// Whether to reshuffle into an I/O distribution first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reshuffle {
    /// Reshuffle when the distribution's runs are shorter than [`DIRECT_MIN_RUN`] on
    /// average (always for striped files).
    #[default]
    Auto,
    /// Always reshuffle (two-phase I/O).
    Always,
    /// Never: each rank reads or writes its own runs (canonical files only).
    Never,
}

/// Parses a `.npy` header at the start of `head`: (data offset, dataset bytes).
///
/// # Errors
/// A description of what is not a supported `.npy` header.
pub fn parse_npy_header(head: &[u8]) -> Result<(u64, u64), String> {
    npy::parse(head)
}

/// Mean run length (bytes) from which [`Reshuffle::Auto`] lets ranks access a canonical
/// file directly.
pub const DIRECT_MIN_RUN: u64 = 1024;

/// Options of [`write()`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// How the file is stored.
    pub format: Format,
    /// Make the data durable before returning.
    pub sync: bool,
    /// Checksum the transfer units of the reshuffle (default on).
    pub integrity: bool,
    /// Whether to reshuffle first.
    pub reshuffle: Reshuffle,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            format: Format::Canonical,
            sync: false,
            integrity: true,
            reshuffle: Reshuffle::Auto,
        }
    }
}

/// Options of [`read()`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Checksum the transfer units of the reshuffle (default on). Striped files' block
    /// checksums are always checked.
    pub integrity: bool,
    /// Whether to reshuffle.
    pub reshuffle: Reshuffle,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            integrity: true,
            reshuffle: Reshuffle::Auto,
        }
    }
}

/// What a collective file operation did (this rank's view, plus job-wide counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Dataset bytes.
    pub bytes: u64,
    /// Whether the data went through an I/O distribution.
    pub reshuffled: bool,
    /// Ranks that accessed the storage.
    pub aggregators: u32,
    /// This rank's part of the reshuffle.
    pub exchange: ExchangeStats,
    /// Blocks rebuilt from parity, over all ranks.
    pub rebuilt: u64,
    /// The version written or read (striped files; 0 for canonical ones).
    pub version: u64,
}

/// Writes the dataset distributed as `layout` (this rank holds unit `rank`, its local
/// storage in `data`) to the parallel file `path`. Collective over `comm`.
///
/// ```
/// use spools_io::file::{self, WriteOptions, ReadOptions};
/// let world = spools::init()?;
/// let dir = std::env::temp_dir().join(format!("spools-doc-file-{}", std::process::id()));
/// let path = dir.join("a.bin");
/// let layout: spools_map::Layout = "u16[3,4] block,* on 1x1".parse()?;
/// let data: Vec<u8> = (0..24).collect();
/// file::write(world.communicator(), &path, &data, &layout, &WriteOptions::default())?;
/// assert_eq!(std::fs::read(&path)?, data);
/// let mut back = vec![0u8; 24];
/// file::read(world.communicator(), &path, &mut back, &layout, &ReadOptions::default())?;
/// assert_eq!(back, data);
/// # std::fs::remove_dir_all(dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`FileError`]: the file cannot be created or written, a layout with more units than
/// ranks, a dead peer; an error on any rank fails the call on every rank.
pub fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
) -> Result<FileStats, FileError> {
    match &opts.format {
        Format::Canonical => canonical::write(comm, path, data, layout, opts, false),
        Format::Npy => canonical::write(comm, path, data, layout, opts, true),
        Format::Striped(s) => striped::write(comm, path, data, layout, opts, s),
    }
}

/// Reads the parallel file `path` (canonical, `.npy` or a striped file's manifest, found
/// by its contents) into the distribution `layout`, with any number of ranks. Collective
/// over `comm`.
///
/// # Errors
/// [`FileError`]: a missing file or unit, a file holding a different number of bytes, a
/// block failing its checksum where parity cannot rebuild it (naming the unit and offset),
/// a dead peer; an error on any rank fails the call on every rank.
pub fn read(
    comm: &Communicator,
    path: &Path,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
) -> Result<FileStats, FileError> {
    // Rank 0 looks at the file and checks that it records the reader's dataset.
    let info = agree_bcast(comm, path, || {
        let kind = canonical::inspect_for(path, Some(layout))?;
        if let canonical::Kind::Manifest(text) = &kind {
            check_dataset(path, &Manifest::parse(path, text)?, layout)?;
        }
        Ok(kind)
    })?;
    match info {
        canonical::Kind::Manifest(text) => {
            let m = Manifest::parse(path, &text)?;
            striped::read(comm, path, data, layout, opts, &m)
        }
        canonical::Kind::Plain { offset, bytes } => {
            canonical::read(comm, path, data, layout, opts, offset, bytes)
        }
    }
}

/// The element type and shape of an array layout (`None` for a byte stream, which
/// carries no element type).
fn dataset_of(l: &Layout) -> Option<(spools_map::DType, &[u64])> {
    match l {
        Layout::Array(a) => Some((a.dtype(), a.shape())),
        _ => None,
    }
}

/// Checks that a striped file's recorded dataset (the layout it was written from) has the
/// element type and shape of the reader's `layout`, when both are arrays.
///
/// # Errors
/// [`FileError::DatasetMismatch`].
fn check_dataset(path: &Path, m: &Manifest, layout: &Layout) -> Result<(), FileError> {
    let written: Layout = m.dataset.parse().map_err(|e| FileError::Format {
        path: path.to_path_buf(),
        what: format!("dataset {:?}: {e}", m.dataset),
    })?;
    // A dataset of another size is reported as such by the read itself.
    if layout.total_bytes() != Some(m.size) {
        return Ok(());
    }
    match (dataset_of(&written), dataset_of(layout)) {
        (Some(w), Some(r)) if w != r => Err(FileError::DatasetMismatch {
            path: path.to_path_buf(),
            file: format!("{}{:?}", w.0, w.1),
            layout: format!("{}{:?}", r.0, r.1),
        }),
        _ => Ok(()),
    }
}

/// Runs `f` on rank 0 and gives its result to every rank (errors included).
fn agree_bcast(
    comm: &Communicator,
    path: &Path,
    f: impl FnOnce() -> Result<canonical::Kind, FileError>,
) -> Result<canonical::Kind, FileError> {
    let mine = if comm.rank() == 0 { Some(f()) } else { None };
    let enc = match &mine {
        Some(Ok(k)) => k.encode(),
        _ => vec![b'E'],
    };
    let got = comm.bcast_bytes(0, &enc);
    match mine {
        // Rank 0's own outcome wins, even when the broadcast fails too.
        Some(r) => r,
        None => canonical::Kind::decode(&got?).ok_or(FileError::Remote {
            rank: 0,
            path: path.to_path_buf(),
        }),
    }
}

/// The collective end of an operation: every rank learns whether any failed. This rank's
/// own error wins; otherwise the first failing rank is named.
fn agree<T>(comm: &Communicator, path: &Path, local: Result<T, FileError>) -> Result<T, FileError> {
    crate::agree_with(comm, local, |rank| FileError::Remote {
        rank,
        path: path.to_path_buf(),
    })
}

/// Exchange options with or without checksums.
fn integrity(on: bool) -> crate::ExchangeOptions {
    crate::ExchangeOptions {
        integrity: on,
        ..crate::ExchangeOptions::default()
    }
}

/// Sums a count over all ranks.
fn sum(comm: &Communicator, x: u64) -> Result<u64, FileError> {
    let mut out = [0u64];
    comm.allreduce(&[x], &mut out, &Op::Sum)?;
    Ok(out[0])
}

/// Whether to reshuffle, decided identically on every rank from the mean run length of
/// `layout` (over the ranks that hold a unit).
fn decide(comm: &Communicator, layout: &Layout, choice: Reshuffle) -> Result<bool, FileError> {
    Ok(match choice {
        Reshuffle::Always => true,
        Reshuffle::Never => false,
        Reshuffle::Auto => {
            let me = u64::from(comm.rank());
            let (mut runs, mut bytes) = (0u64, 0u64);
            if me < layout.units() {
                for e in layout.extents(me)? {
                    runs += 1;
                    bytes += e.len;
                }
            }
            let mut out = [0u64; 2];
            comm.allreduce(&[runs, bytes], &mut out, &Op::Sum)?;
            out[0] > 0 && out[1] / out[0] < DIRECT_MIN_RUN
        }
    })
}

/// Checks that `data` holds this rank's share of `layout`, which must fit the ranks
/// (`side`: the source for a write, the destination for a read).
fn check_share(
    comm: &Communicator,
    layout: &Layout,
    len: usize,
    side: crate::Side,
) -> Result<(), FileError> {
    crate::fit_ranks(layout, comm.size(), side)?;
    let units = layout.units();
    let me = u64::from(comm.rank());
    let need = if me < units {
        layout.local_bytes(me)?
    } else {
        0
    };
    if (len as u64) < need {
        return Err(ExchangeError::BufferSize {
            side,
            unit: me,
            need,
            got: len as u64,
        }
        .into());
    }
    Ok(())
}
