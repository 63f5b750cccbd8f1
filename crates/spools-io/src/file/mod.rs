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
//! back), and each aggregator writes its domain with large `pwrite`s. The domains are
//! covered in *rounds* of at most one collective buffer per aggregator (`coll_buffer`,
//! 16 MiB by default, or [`WriteOptions::coll_buffer`]): each round is one exchange between
//! the caller's layout restricted to the round's window of the byte stream and the
//! aggregators' parts of that window, then the aggregators' writes, so memory stays
//! O(buffer + runs) whatever the file size (a striped file's rounds cover whole stripe
//! rows). A canonical file written from a distribution whose runs are long enough skips the
//! reshuffle and each rank writes its own runs ([`Reshuffle`]), with `pwritev` where runs
//! lie back to back in the file. Reads are the same in reverse, with any number of ranks
//! and any distribution.
//!
//! **Durability.** With [`WriteOptions::sync`], the data is durable on every rank's
//! storage when `write` returns (each writer syncs its files before the final agreement).
//! Without it, the data is in the operating system's cache: visible to every later read,
//! durable once the system flushes it. A striped file's commit always syncs, so the
//! manifest never names data that is not durable.
//!
//! **Hostile input.** Files and manifests are input: a manifest may only name unit files
//! by plain relative paths inside its directory (no absolute path, no `..`), unit files
//! are never opened through a symlink (an older version's plain unit file is reused in
//! place, anything else is unlinked and the file created exclusively), and a reader checks
//! the element type and shape a `.npy` header or a manifest records against its layout.
//!
//! **Node-local mode** (SCI-MPICH's server-less I/O): with [`Striping::node_local`], unit
//! `u` is touched only by rank `u % N`, which stores and serves it for the others.

mod canonical;
mod detect;
mod draft;
mod hdf5;
mod manifest;
mod npy;
mod one_file;
mod options;
mod parallel_format;
mod range_reader;
mod region;
mod rounds;
mod rows;
mod sieve;
mod steps;
mod store;
mod striped;
mod sums;
mod sys;
pub mod tools;
mod zarr;

use crate::error::Told;
use std::path::Path;

use spools_map::Layout;
use spools_msg::Communicator;

use crate::error::FileError;

use crate::error::NpyError;
use canonical::{OneFileStorage, RawFile};
pub use draft::{Draft, CRASH_AT};
use hdf5::file_format::Hdf5File;
pub use hdf5::Hdf5Dataset;
pub use manifest::{Manifest, UnitEntry, MANIFEST_FORMAT};
use npy::NpyFile;
pub use one_file::{OneFile, OneFileFormat, Prepared, StreamAt};
pub use options::{
    Commit, FileStats, Format, FormatNameError, FormatSpecError, ReadOptions, Reshuffle, Striping,
    WriteOptions, DIRECT_MIN_RUN,
};
use parallel_format::{Found, ParallelFormat};
pub use range_reader::{RangeReader, Stored};
pub use region::{read_from, write_into};
pub use rows::Raid;
pub use sieve::release_shared_windows;
use striped::StripedFiles;
use zarr::ZarrArrays;
pub use zarr::{Compressor, ZarrMeta};

/// Feeds untrusted bytes to the Zarr decoders (metadata, shards, chunks); see
/// [`decode_untrusted`](crate::decode_untrusted).
pub(crate) fn decode_zarr(data: &[u8]) -> usize {
    zarr::decode_any(data)
}

/// Parses a `.npy` header at the start of `head`: (data offset, dataset bytes).
///
/// # Errors
/// [`NpyError`]: what is not a supported `.npy` header.
pub fn parse_npy_header(head: &[u8]) -> Result<(u64, u64), NpyError> {
    npy::parse(head)
}

/// Writes the dataset distributed as `layout` (this rank holds unit `rank`, its local
/// storage in `data`) to the parallel file `path`. Collective over `comm`.
///
/// ```
/// use spools_io::file::{self, WriteOptions, ReadOptions};
/// let world = spools::init()?;
/// # let dir = spools_testkit::tempdir("doc-file"); // removed when dropped
/// let path = dir.join("a.bin");
/// let layout: spools_map::Layout = "u16[3,4] block,* on 1x1".parse()?;
/// let data: Vec<u8> = (0..24).collect();
/// file::write(world.communicator(), &path, &data, &layout, &WriteOptions::default())?;
/// assert_eq!(std::fs::read(&path)?, data);
/// let mut back = vec![0u8; 24];
/// file::read(world.communicator(), &path, &mut back, &layout, &ReadOptions::default())?;
/// assert_eq!(back, data);
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
    let (raw, npy) = (OneFileStorage(&RawFile), OneFileStorage(&NpyFile));
    let hdf5;
    let one;
    let striped;
    let zarr;
    let fmt: &dyn ParallelFormat = match &opts.format {
        Format::Canonical => &raw,
        Format::Npy => &npy,
        Format::Hdf5 { dataset } => {
            hdf5 = Hdf5File::writing(dataset);
            one = OneFileStorage(&hdf5);
            &one
        }
        Format::OneFile(f) => {
            one = OneFileStorage(&*f.0);
            &one
        }
        Format::Striped(s) => {
            striped = StripedFiles(Some(s));
            &striped
        }
        Format::Zarr {
            chunks,
            shards,
            compressor,
        } => {
            zarr = ZarrArrays(Some((chunks, shards.as_deref(), *compressor)));
            &zarr
        }
    };
    fmt.write(comm, path, data, layout, opts)
}

/// Reads the parallel file `path` (canonical, `.npy`, a striped file's manifest, a Zarr
/// array or an HDF5 file, found by its contents; `FILE:/NAME` names an HDF5 file's
/// dataset when the file holds several) into the distribution `layout`, with any number of ranks. Collective
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
    read_with_formats(comm, path, data, layout, opts, &[])
}

/// [`read()`] that also knows the program's own one-file `formats` (asked, in order,
/// after the built-in formats with a signature and a striped file's manifest, before a
/// file is taken for plain canonical bytes). A format of its own is one
/// [`OneFileFormat`]; nothing else of the engine changes (see
/// `crates/spools-io/tests/toy_format.rs`).
///
/// # Errors
/// As [`read()`], and what a format that claims the file finds wrong with it.
pub fn read_with_formats(
    comm: &Communicator,
    path: &Path,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
    formats: &[&dyn OneFileFormat],
) -> Result<FileStats, FileError> {
    // `FILE:/NAME` names a dataset of an HDF5 file.
    let (file, dataset) = hdf5::split(path);
    let path = file.as_path();
    // Rank 0 asks the formats which one holds the file (and checks that it records the
    // reader's dataset); every rank hands the read to the storage it found.
    // (A rank 0 whose binding declined its part has no path or layout to inspect: its
    // cause is what every rank hears.)
    let found = decided_by_rank0(comm, path, || match &opts.declined {
        Some(cause) => Err(FileError::Declined(cause.clone())),
        None => detect::inspect_dataset(path, dataset.as_deref(), Some(layout), formats),
    })?;
    let (striped, zarr, one_file) = (
        StripedFiles(None),
        ZarrArrays(None),
        OneFileStorage(&RawFile),
    );
    // A one-file format's read needs only where the stream lies: one engine reads them all.
    let fmt: &dyn ParallelFormat = match &found {
        Found::Manifest(_) => &striped,
        Found::Zarr(_) => &zarr,
        Found::Plain { .. } => &one_file,
    };
    fmt.read(comm, path, &found, data, layout, opts)
}

/// Runs `f` on rank 0 and gives what it found to every rank, errors included: the others
/// get [`FileError::Remote`] with rank 0's cause.
fn decided_by_rank0(
    comm: &Communicator,
    path: &Path,
    f: impl FnOnce() -> Result<Found, FileError>,
) -> Result<Found, FileError> {
    let mine = if comm.rank() == 0 { Some(f()) } else { None };
    // Tagged: `+` and what was found, or `-` and rank 0's cause.
    let enc = match &mine {
        Some(Ok(found)) => [b"+".as_slice(), &found.encode()].concat(),
        Some(Err(e)) => [b"-".as_slice(), &Told::cause(e).encode()].concat(),
        None => Vec::new(),
    };
    let got = comm.bcast_bytes(0, &enc);
    match mine {
        // Rank 0's own outcome wins, even when the broadcast fails too.
        Some(r) => r,
        None => {
            let got = got?;
            match got.split_first() {
                Some((b'+', rest)) => Found::decode(rest).ok_or_else(|| not_told(path)),
                Some((b'-', cause)) => Err(FileError::Remote {
                    rank: 0,
                    path: path.to_path_buf(),
                    cause: crate::Cause::decode(cause),
                }),
                _ => Err(not_told(path)),
            }
        }
    }
}

/// Rank 0's decision arrived garbled.
fn not_told(path: &Path) -> FileError {
    FileError::Remote {
        rank: 0,
        path: path.to_path_buf(),
        cause: crate::Cause::decode(&[]),
    }
}

pub use crate::error::SumsDefect;
pub use rows::{stripe_chunks, UnitChunks};
pub use sums::{sidecar_path, write_sidecar, Sums, SIDECAR_MAX, SUMS_BLOCK, SUMS_FORMAT};
