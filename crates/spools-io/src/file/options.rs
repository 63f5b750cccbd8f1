//! What a caller chooses for a parallel file ([`Format`], [`Striping`], [`Reshuffle`],
//! [`WriteOptions`], [`ReadOptions`]) and what an operation reports ([`FileStats`]).

use std::path::PathBuf;

use spools_exchange::ExchangeStats;
use spools_map::Layout;

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
    /// A Zarr v3 array (a directory holding `zarr.json` and one file per shard), as
    /// zarr-python and zarrs open it (`bytes(n)` elements as zarr-python's
    /// `raw_bytes`, which zarr-python and tensorstore open, and never in shards, which
    /// zarr-python cannot read for them). Needs an array layout.
    Zarr {
        /// The chunks' shape (one per dimension).
        chunks: Vec<u64>,
        /// The shards' shape, each a multiple of the chunk's, or `None` for one file per
        /// chunk (no sharding).
        shards: Option<Vec<u64>>,
        /// The chunks' compressor (every chunk also carries a CRC32C).
        compressor: super::zarr::Compressor,
    },
    /// An HDF5 file holding one contiguous dataset, as h5py opens it: created by rank 0
    /// through libhdf5, the data written by every rank at the dataset's offset. Needs an
    /// array layout in C order, and libhdf5 where the program runs (loaded at run time;
    /// [`crate::Hdf5Error::LibraryMissing`] without it).
    Hdf5 {
        /// The dataset's name in the file (`data` by default).
        dataset: String,
    },
    /// A program's own one-file format ([`OneFileFormat`](super::OneFileFormat)): the
    /// canonical stream in one file, behind and before what the format keeps; read back
    /// with [`read_with_formats`](super::read_with_formats).
    OneFile(super::OneFile),
}

/// A format name that [`Format::parse`] does not know, or a striping spec that does not
/// parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "format must be \"npy\", \"canonical\", \"raid0(unit=SIZE,count=K)\", \
     \"raid5(unit=SIZE,count=K)\", \"zarr(chunk=AxB,[shard=CxD,][codec=zstd|gzip|none,][level=N])\" or \"hdf5[(NAME)]\"; got {given:?}{}",
    why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
)]
pub struct FormatNameError {
    /// The name given.
    pub given: String,
    /// Why a striping or Zarr spec did not parse.
    pub why: Option<FormatSpecError>,
}

/// Why the arguments of a format name did not parse.
#[derive(Debug, thiserror::Error)]
pub enum FormatSpecError {
    /// A striping spec (`raid0(...)`, `raid5(...)`).
    #[error(transparent)]
    Striping(#[from] spools_map::SpecError),
    /// A Zarr spec (`zarr(...)`).
    #[error(transparent)]
    Zarr(#[from] crate::error::ZarrError),
    /// An HDF5 spec (`hdf5(...)`).
    #[error(transparent)]
    Hdf5(#[from] crate::error::Hdf5Error),
}

impl Format {
    /// The format named `name` as the Python and C interfaces spell it: `"npy"`,
    /// `"canonical"`, `"raid0(unit=SIZE,count=K)"` (also `"stripe(...)"`),
    /// `"raid5(unit=SIZE,count=K)"` or `"zarr(chunk=64x64,shard=512x512,codec=zstd)"`
    /// (`shard=` and `codec=` optional, `level=N` with a codec) or `"hdf5"` /
    /// `"hdf5(NAME)"` (the dataset's name, `data` by default); a striped one with `dirs`
    /// and `node_local` as [`Striping`] has them.
    ///
    /// ```
    /// use spools_io::file::Format;
    /// assert_eq!(Format::parse("npy", Vec::new(), false).unwrap(), Format::Npy);
    /// assert!(matches!(Format::parse("raid5(unit=4KiB,count=3)", Vec::new(), false), Ok(Format::Striped(_))));
    /// assert!(matches!(Format::parse("zarr(chunk=8x8,shard=64x64)", Vec::new(), false), Ok(Format::Zarr { .. })));
    /// assert_eq!(Format::parse("hdf5(temperature)", Vec::new(), false).unwrap(), Format::Hdf5 { dataset: "temperature".into() });
    /// assert!(Format::parse("zip", Vec::new(), false).is_err());
    /// ```
    ///
    /// # Errors
    /// [`FormatNameError`] for another name or a striping spec that does not parse.
    pub fn parse(
        name: &str,
        dirs: Vec<PathBuf>,
        node_local: bool,
    ) -> Result<Format, FormatNameError> {
        match name {
            "npy" => return Ok(Format::Npy),
            "canonical" => return Ok(Format::Canonical),
            _ => {}
        }
        let spec = match name.strip_prefix("raid0(") {
            Some(rest) => format!("stripe({rest}"),
            None => name.to_string(),
        };
        let bad = |why| FormatNameError {
            given: name.to_string(),
            why,
        };
        if name == "hdf5" {
            return Ok(Format::Hdf5 {
                dataset: super::hdf5::DEFAULT_DATASET.to_string(),
            });
        }
        if let Some(args) = name.strip_prefix("hdf5(").and_then(|a| a.strip_suffix(')')) {
            let dataset = super::hdf5::parse_spec(args).map_err(|e| bad(Some(e.into())))?;
            return Ok(Format::Hdf5 { dataset });
        }
        if let Some(args) = name.strip_prefix("zarr(").and_then(|a| a.strip_suffix(')')) {
            let (chunks, shards, compressor) =
                super::zarr::parse_spec(args).map_err(|e| bad(Some(e.into())))?;
            return Ok(Format::Zarr {
                chunks,
                shards,
                compressor,
            });
        }
        if !(spec.starts_with("stripe(") || spec.starts_with("raid5(")) {
            return Err(bad(None));
        }
        let layout: Layout = spec
            .parse()
            .map_err(|e: spools_map::SpecError| bad(Some(e.into())))?;
        Ok(Format::Striped(Striping {
            layout,
            dirs,
            node_local,
        }))
    }
}

/// Where and how a striped file's units live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Striping {
    /// A `stripe(unit=..,count=K)` or `raid5(unit=..,count=K)` layout (unsized).
    pub layout: Layout,
    /// Directories for the unit files: unit `u` goes to `dirs[u % dirs.len()]`; empty
    /// means the manifest's directory. A relative directory is relative to the manifest's
    /// directory; an absolute one must lie inside it
    /// ([`FileError::UnsafePath`](crate::FileError::UnsafePath) otherwise), since a
    /// manifest names its units by relative paths only. To spread
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

/// Mean run length (bytes) from which [`Reshuffle::Auto`] lets ranks access a canonical
/// file directly.
pub const DIRECT_MIN_RUN: u64 = 1024;

/// How a write of a canonical (or `.npy`) file reaches the file's path. Striped files
/// always commit a new version atomically (their manifest is replaced last), whatever
/// this says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Commit {
    /// Atomic commit: the ranks write a temporary file next to the path, and rank 0
    /// renames it over the path once every rank has written (and, with
    /// [`WriteOptions::sync`], synced) its part. A failed or interrupted write leaves the
    /// previous file (or none), never a partial or mixed one. The price of replacing an
    /// existing file: room for both on the file system until the rename, fresh page-cache
    /// pages for every byte, and the old file's pages freed at the rename.
    #[default]
    Replace,
    /// Write into the file where it is, as MPI-IO does: an existing file is resized to the
    /// dataset and overwritten in place (one is created when missing), so overwriting a
    /// file costs what a first write costs. A failed or interrupted write leaves a file
    /// that may hold old and new bytes mixed; the checksum sidecar is removed before the
    /// first byte is written and written after the last, so a reader that verifies
    /// ([`ReadOptions::checksums`]) reports such a file instead of returning it. Writes
    /// through a symlink at the path (to the file it names).
    InPlace,
}

/// Options of [`write()`](crate::file::write()).
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
    /// Canonical and `.npy` files: also write the CRC32C of every [`SUMS_BLOCK`]-byte
    /// block of the stream to a sidecar `NAME.spools-sums`, committed just before the
    /// data (default off; a write without it removes an old sidecar). Striped files
    /// always carry block checksums in their manifest.
    ///
    /// [`SUMS_BLOCK`]: crate::file::SUMS_BLOCK
    pub checksums: bool,
    /// Collective buffer per aggregator (bytes): the file is written in rounds of at most
    /// this much per aggregator. `None`: the configuration's `coll_buffer` (16 MiB by
    /// default). The smallest value over the ranks is used, and never less than 4 KiB.
    pub coll_buffer: Option<usize>,
    /// Canonical and `.npy` files: atomic replacement (default) or in place.
    pub commit: Commit,
    /// A binding declining this rank's part (default `None`): its own argument check
    /// failed, so this rank takes part only to fail. The call fails on every rank before
    /// anything is touched: here with `Declined`, elsewhere with `Remote` carrying this
    /// cause. The rank's buffer is not read.
    pub declined: Option<crate::Cause>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            format: Format::Canonical,
            sync: false,
            integrity: true,
            reshuffle: Reshuffle::Auto,
            checksums: false,
            coll_buffer: None,
            commit: Commit::Replace,
            declined: None,
        }
    }
}

/// Options of [`read()`](crate::file::read()).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Checksum the transfer units of the reshuffle (default on). Striped files' block
    /// checksums are always checked.
    pub integrity: bool,
    /// Whether to reshuffle.
    pub reshuffle: Reshuffle,
    /// Canonical and `.npy` files: verify the blocks read against the checksum sidecar
    /// written with [`WriteOptions::checksums`] (default off). A block that fails is
    /// [`FileError::Corrupt`](crate::FileError::Corrupt) naming its byte offset in the
    /// file; a missing or unreadable sidecar is an error too.
    pub checksums: bool,
    /// Collective buffer per aggregator (bytes), as in [`WriteOptions::coll_buffer`].
    pub coll_buffer: Option<usize>,
    /// A binding declining this rank's part (default `None`): its own argument check
    /// failed, so this rank takes part only to fail. The call fails on every rank before
    /// anything is touched: here with `Declined`, elsewhere with `Remote` carrying this
    /// cause. The rank's buffer is not read.
    pub declined: Option<crate::Cause>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            integrity: true,
            reshuffle: Reshuffle::Auto,
            checksums: false,
            coll_buffer: None,
            declined: None,
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
    /// Rounds of the collective buffer the data went through (0 without a reshuffle; for
    /// a sieved read, the windows of the file).
    pub rounds: u64,
    /// Whether the read was sieved: every rank read the windows of the file that hold its
    /// runs and copied them out, with no exchange (one-file formats, short runs, every
    /// rank on one host).
    pub sieved: bool,
    /// Whether a sieved read shared the windows: each was read once on the host into
    /// shared memory, and every rank copied its runs out of it (groups of two ranks or
    /// more, datasets of 1 MiB or more).
    pub sieve_shared: bool,
}
