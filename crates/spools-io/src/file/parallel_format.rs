//! The seam between the file engine and a format: [`ParallelFormat`], which every way of
//! storing a parallel file implements (canonical and `.npy` files, HDF5 and a program's
//! own one-file formats through the one-file engine, striped RAID-0 / RAID-5 files, Zarr
//! arrays), and what rank 0 finds at a path before a read ([`Found`], [`Look`]).
//!
//! `file::write` hands the write to the format its options name; `file::read` asks the
//! formats in one order (`detect.rs`) which one holds the path, on rank 0, and every rank
//! hands the read, with what was found, to the storage found (a striped file, a Zarr
//! array, or one file with the canonical stream somewhere in it). Each format's write goes
//! through the same three steps: it checks and *prepares* the new version's storage (a
//! temporary file, the unit files of the unused slot, a new directory), every rank puts
//! its part there (through the exchange engine), and rank 0 *commits* it (a rename over
//! the path; a Zarr array moves the old one aside first) once every rank agreed that its
//! part is written. A one-file write in place ([`Commit::InPlace`](super::Commit)) has no
//! new version: it writes the file where it is.

use std::path::Path;

use spools_map::Layout;
use spools_msg::Communicator;

use crate::error::FileError;
use crate::file::options::{FileStats, ReadOptions, WriteOptions};

/// What rank 0 found at a path that a format claims: what every rank needs to read it
/// (sent to every rank as bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// A striped file's manifest, with its text.
    Manifest(Vec<u8>),
    /// One file holding the canonical stream: it starts at `offset` and holds `bytes`.
    Plain {
        /// Offset of the stream's first byte.
        offset: u64,
        /// Bytes of the stream.
        bytes: u64,
    },
    /// A Zarr array's directory, with its `zarr.json` text.
    Zarr(Vec<u8>),
}

impl Found {
    /// Its bytes, for every rank.
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Found::Manifest(t) => [b"M".as_slice(), t].concat(),
            Found::Zarr(t) => [b"Z".as_slice(), t].concat(),
            Found::Plain { offset, bytes } => {
                let mut v = vec![b'P'];
                v.extend_from_slice(&offset.to_le_bytes());
                v.extend_from_slice(&bytes.to_le_bytes());
                v
            }
        }
    }

    /// What `b` describes (`None`: not [`Found::encode`]'s bytes).
    pub(crate) fn decode(b: &[u8]) -> Option<Found> {
        match b.split_first()? {
            (b'M', t) => Some(Found::Manifest(t.to_vec())),
            (b'Z', t) => Some(Found::Zarr(t.to_vec())),
            (b'P', t) if t.len() == 16 => Some(Found::Plain {
                offset: u64::from_le_bytes(t[..8].try_into().ok()?),
                bytes: u64::from_le_bytes(t[8..].try_into().ok()?),
            }),
            _ => None,
        }
    }
}

/// What a format looks at on rank 0 to say whether a path is its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Look<'a> {
    /// The path.
    pub(crate) path: &'a Path,
    /// The file's first bytes (up to 64 KiB), or `None` for a directory.
    pub(crate) head: Option<&'a [u8]>,
    /// The file's length (0 for a directory).
    pub(crate) len: u64,
    /// The reader's layout: a format that records its dataset checks it
    /// ([`FileError::DatasetMismatch`]); `None` for a look without a reader (`spools ls`).
    pub(crate) layout: Option<&'a Layout>,
}

/// A way of storing a parallel file. The engine asks it three things: is this path
/// yours (`inspect`, rank 0), write this dataset (`write`, collective), read it (`read`,
/// collective, with what `inspect` found). A format whose file is the canonical stream in
/// one file implements [`OneFileFormat`](super::OneFileFormat) instead (the way a program
/// adds its own), and the one-file engine makes it a `ParallelFormat`
/// (`canonical::OneFileStorage`).
pub(crate) trait ParallelFormat: Send + Sync + std::fmt::Debug {
    /// Rank 0, before a read: whether `look.path` holds a file of this format, and if so
    /// what every rank needs to read it.
    ///
    /// # Errors
    /// A file this format claims but finds damaged or of another dataset than the reader's.
    fn inspect(&self, look: &Look<'_>) -> Result<Option<Found>, FileError>;

    /// Writes the dataset distributed as `layout` (this rank's part in `data`) to `path`
    /// as a new version, which replaces the previous one when committed (in place when the
    /// options ask so). Collective.
    ///
    /// # Errors
    /// As [`write`](super::write()); the same failure on every rank, the previous version
    /// left whole.
    fn write(
        &self,
        comm: &Communicator,
        path: &Path,
        data: &[u8],
        layout: &Layout,
        opts: &WriteOptions,
    ) -> Result<FileStats, FileError>;

    /// Reads the file at `path`, of which rank 0 found `found`, into this rank's part of
    /// `layout`. Collective.
    ///
    /// # Errors
    /// As [`read`](super::read()).
    fn read(
        &self,
        comm: &Communicator,
        path: &Path,
        found: &Found,
        data: &mut [u8],
        layout: &Layout,
        opts: &ReadOptions,
    ) -> Result<FileStats, FileError>;
}

/// The error of a format handed what another format found (a broken invariant of the
/// engine, reported rather than trusted).
pub(crate) fn not_mine(_path: &Path) -> FileError {
    FileError::Options("a format was handed what another format found (an engine defect)")
}
