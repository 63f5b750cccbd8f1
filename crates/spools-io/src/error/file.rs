//! Why a parallel-file operation failed ([`FileError`]), and what is wrong with a
//! manifest or `.npy` header ([`FormatDefect`]).

use std::path::PathBuf;

use spools_map::{LayoutError, PlanError, SpecError};
use spools_msg::MsgError;

use crate::error::ExchangeError;
use crate::error::{ErrorKind, Hdf5Error};

/// Why a parallel-file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Moving the data between ranks failed.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// Messaging failed (agreeing on the file, gathering checksums).
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// A layout is unusable for this file.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The dataset cannot be planned against the file's layout.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A system call on a file failed. The system's error is the [`source`]
    /// (`std::error::Error::source`), not repeated in the message, so that error-chain
    /// printers show it once.
    ///
    /// [`source`]: std::error::Error::source
    #[error("{op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A striped file's manifest names a unit file outside the file's directory (an
    /// absolute path, `..`, or anything but a plain relative path), or the unit directories
    /// given to a write are not inside the manifest's directory. Manifests are input: such
    /// a path is never opened.
    #[error("{path}: unit {unit} path {unit_path:?} is refused: {why}")]
    UnsafePath {
        /// The manifest.
        path: PathBuf,
        /// The unit.
        unit: u64,
        /// The unit path as given.
        unit_path: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// The file records a dataset (element type, shape) other than the one the reader's
    /// layout describes.
    #[error("{path} holds {file} but the layout describes {layout}")]
    DatasetMismatch {
        /// The file.
        path: PathBuf,
        /// The dataset the file records (element type and shape).
        file: String,
        /// The dataset of the reader's layout (element type and shape).
        layout: String,
    },
    /// A striped layout gives a size that is not the dataset's.
    #[error("{layout} gives size={size} bytes but the dataset holds {dataset} bytes (size= is the dataset's size in bytes; leave it out to take the dataset's)")]
    StripeSize {
        /// The striped layout.
        layout: String,
        /// The size it gives.
        size: u64,
        /// Bytes in the dataset.
        dataset: u64,
    },
    /// A manifest or header could not be parsed or is inconsistent.
    #[error("{path}: {defect}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        defect: FormatDefect,
    },
    /// The file holds a different dataset than the layout describes.
    #[error("{path} holds {file} bytes but the layout describes {layout}")]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// Dataset bytes in the file.
        file: u64,
        /// Bytes in the layout.
        layout: u64,
    },
    /// A unit file is missing or short, and there is no parity to rebuild it from.
    #[error("unit {unit} ({path}) is missing or short at offset {offset}")]
    MissingUnit {
        /// The unit.
        unit: u64,
        /// Its file.
        path: PathBuf,
        /// The first local offset that could not be read.
        offset: u64,
    },
    /// A block failed its checksum and there is no parity to rebuild it from.
    #[error("unit {unit} ({path}): block at offset {offset} failed its CRC32C check")]
    Corrupt {
        /// The unit.
        unit: u64,
        /// Its file.
        path: PathBuf,
        /// Local offset of the block.
        offset: u64,
    },
    /// More blocks of one RAID-5 row are lost than parity can rebuild.
    #[error("stripe row {row}: units {units:?} are lost; RAID-5 rebuilds at most one")]
    Unrecoverable {
        /// The row.
        row: u64,
        /// The units lost in it.
        units: Vec<u64>,
    },
    /// Another rank failed its part of the collective operation.
    #[error("rank {rank} failed its part of the operation on {path}: {cause}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// The file.
        path: PathBuf,
        /// Its error's kind and message.
        cause: crate::Cause,
    },
    /// This rank declined its part ([`WriteOptions::declined`](crate::file::WriteOptions),
    /// [`ReadOptions::declined`](crate::file::ReadOptions)): a binding's own argument
    /// check failed; nothing was touched.
    #[error("{0}")]
    Declined(crate::Cause),
    /// A stored chunk or shard of a Zarr array is damaged (or, in an array Spools wrote
    /// whole, missing).
    #[error("{key}: chunk {chunk:?} of the shard: {defect}")]
    ZarrChunk {
        /// The key's file (the shard, or the chunk of an unsharded array).
        key: PathBuf,
        /// The chunk's grid coordinates inside the shard (zeros for an unsharded array).
        chunk: Vec<u64>,
        /// What is wrong.
        defect: crate::error::ChunkDefect,
    },
    /// A write would replace something that is not a parallel file of its format (a Zarr
    /// array replaces only a Zarr array or an empty directory).
    #[error("{path} exists and is not {what}: not replaced")]
    NotReplaced {
        /// The path.
        path: PathBuf,
        /// What it would have to be.
        what: &'static str,
    },
    /// Options that cannot go together.
    #[error("{0}")]
    Options(&'static str),
    /// A read-only open of a striped set found it replaced by commits elsewhere between
    /// its look at the manifest and the opening of its unit files, every time it looked.
    #[error("{path}: the set was replaced by commits elsewhere at each of {looks} looks while it was opened read-only: open it again")]
    KeptChanging {
        /// The set's manifest.
        path: PathBuf,
        /// How many times it looked.
        looks: u32,
    },
    /// A node-local unit is stored on a host other than the one of the rank that must
    /// serve it (`unit % ranks`): the file is read with another placement of ranks on
    /// hosts than it was written with.
    #[error("{path}: unit {unit} is stored on host {host} (node-local), but rank {rank}, which must serve it, runs on host {rank_host}: read with the ranks placed on hosts as when it was written")]
    UnitElsewhere {
        /// The file.
        path: PathBuf,
        /// The unit.
        unit: u64,
        /// The host holding it, as the manifest records.
        host: String,
        /// The rank that would serve it.
        rank: u32,
        /// That rank's host.
        rank_host: String,
    },
}

impl FileError {
    /// The rank this error names as the one at fault (see
    /// [`ExchangeError::remote_rank`](crate::ExchangeError::remote_rank)).
    pub fn remote_rank(&self) -> Option<u32> {
        match self {
            FileError::Remote { rank, .. } => Some(*rank),
            FileError::Exchange(x) => x.remote_rank(),
            _ => None,
        }
    }

    /// What kind of failure this is (see [`ErrorKind`]): the Python and C interfaces
    /// choose their exception class and status by it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            FileError::Exchange(x) => x.kind(),
            FileError::Msg(_) => ErrorKind::Transfer,
            FileError::Layout(_)
            | FileError::Plan(_)
            | FileError::DatasetMismatch { .. }
            | FileError::SizeMismatch { .. }
            | FileError::StripeSize { .. }
            | FileError::UnitElsewhere { .. } => ErrorKind::Mismatch,
            FileError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                _ => ErrorKind::Io,
            },
            // A manifest naming a unit outside its directory (refused input); the
            // interfaces treat a write's (a `dirs` argument outside it) as a bad argument.
            FileError::UnsafePath { .. }
            | FileError::MissingUnit { .. }
            | FileError::Corrupt { .. }
            | FileError::Unrecoverable { .. }
            | FileError::ZarrChunk { .. } => ErrorKind::Damaged,
            FileError::Format { defect, .. } => defect.kind(),
            FileError::NotReplaced { .. } => ErrorKind::Exists,
            // Commits elsewhere kept replacing the set: the file system's state, as an
            // I/O error is (opening again may succeed).
            FileError::KeptChanging { .. } => ErrorKind::Io,
            FileError::Options(_) => ErrorKind::BadArgument,
            FileError::Remote { cause, .. } | FileError::Declined(cause) => cause.kind,
        }
    }

    /// The error of a system call on a file: what was being done (`op`), the file and the
    /// system's error. For a [`OneFileFormat`](crate::file::OneFileFormat) of a program's
    /// own, too.
    ///
    /// ```
    /// let e = spools_io::FileError::io("open", "/x", std::io::ErrorKind::NotFound.into());
    /// assert_eq!(e.kind(), spools_io::ErrorKind::NotFound);
    /// ```
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FileError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// What is wrong with a checksum sidecar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SumsDefect {
    /// Not JSON of a sidecar's shape (a truncated sidecar among others).
    #[error("not a checksum sidecar: {reason}")]
    NotSums {
        /// The JSON parser's words.
        reason: String,
    },
    /// Another format.
    #[error("format {found:?} is not {expected:?}")]
    Format {
        /// The format it names.
        found: String,
        /// The format this reader reads.
        expected: &'static str,
    },
    /// A block size of zero.
    #[error("a block size of 0 bytes")]
    BlockSize,
    /// A checksum list that does not hold 8 hex digits per block.
    #[error("{found} hex digits of checksums where {blocks} blocks need {}", 8 * blocks)]
    Checksums {
        /// Blocks the stream has.
        blocks: u64,
        /// Characters found.
        found: usize,
    },
    /// The sidecar describes another stream than the data file holds.
    #[error("it describes {bytes} bytes at offset {offset}, the file holds {file_bytes} at offset {file_offset}")]
    Describes {
        /// Stream offset it records.
        offset: u64,
        /// Stream bytes it records.
        bytes: u64,
        /// The data file's stream offset.
        file_offset: u64,
        /// The data file's stream bytes.
        file_bytes: u64,
    },
    /// The writers' pieces do not cover the stream (a byte no writer checksummed, or
    /// written twice), so no sidecar is written.
    #[error("the checksummed pieces do not cover stream byte {at} exactly once")]
    Coverage {
        /// The first stream byte not covered exactly once.
        at: u64,
    },
    /// The ranks disagree on whether to compute checksums.
    #[error("the ranks disagree on WriteOptions::checksums")]
    Disagree,
}

/// What is wrong with a parallel file's manifest or `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatDefect {
    /// A directory that is not a Zarr array (it holds no `zarr.json`).
    #[error("a directory without zarr.json is not a parallel file")]
    NotParallelFile,
    /// An HDF5 file cannot be written or read (or this build has no HDF5 support).
    #[error(transparent)]
    Hdf5(#[from] crate::error::Hdf5Error),
    /// A Zarr array's metadata is malformed or uses what Spools does not support.
    #[error(transparent)]
    Zarr(#[from] crate::error::ZarrError),
    /// Not JSON of a manifest's shape.
    #[error("not a manifest: {reason}")]
    NotManifest {
        /// The JSON parser's words.
        reason: String,
    },
    /// Another manifest format.
    #[error("format is {found:?}, not {expected:?}")]
    ManifestFormat {
        /// The format it names.
        found: String,
        /// The format this reader reads.
        expected: &'static str,
    },
    /// A unit list of the wrong length.
    #[error("{files} unit files for {units} units")]
    UnitCount {
        /// Files listed.
        files: usize,
        /// Units of the layout.
        units: u64,
    },
    /// A unit of the wrong size.
    #[error("unit {unit} should hold {expected} bytes, says {found}")]
    UnitSize {
        /// The unit.
        unit: usize,
        /// Bytes it must hold.
        expected: u64,
        /// Bytes the manifest says.
        found: u64,
    },
    /// A checksum list that does not hold one CRC per block.
    #[error("unit {unit}: checksum list does not have one per block")]
    Checksums {
        /// The unit.
        unit: usize,
    },
    /// A dataset spec that does not parse.
    #[error("dataset {spec:?}: {source}")]
    Dataset {
        /// The spec.
        spec: String,
        /// Why.
        source: SpecError,
    },
    /// A dataset of another size than the file.
    #[error("dataset {spec} does not hold the file's {size} bytes")]
    DatasetSize {
        /// The spec.
        spec: String,
        /// The file's bytes.
        size: u64,
    },
    /// A slot that does not match the version's parity.
    #[error("slot {slot} does not match version {version}")]
    Slot {
        /// The slot.
        slot: u64,
        /// The version.
        version: u64,
    },
    /// A striping layout spec that does not parse.
    #[error("layout {spec:?}: {source}")]
    Layout {
        /// The spec.
        spec: String,
        /// Why.
        source: SpecError,
    },
    /// A striping layout that cannot hold the file's size.
    #[error("layout of {size} bytes: {source}")]
    LayoutSize {
        /// The file's bytes.
        size: u64,
        /// Why.
        source: LayoutError,
    },
    /// A layout that is not `stripe(...)` or `raid5(...)`.
    #[error("{spec} is not a stripe or raid5 layout")]
    NotStriped {
        /// The spec.
        spec: String,
    },
    /// A bad `.npy` header.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// A `.npy` header whose dataset is not what follows it.
    #[error(".npy header describes {header} bytes but {follow} follow it")]
    NpyLength {
        /// Bytes the header describes.
        header: u64,
        /// Bytes after the header.
        follow: u64,
    },
    /// A manifest that cannot be encoded.
    #[error("manifest: {reason}")]
    Encode {
        /// The encoder's words.
        reason: String,
    },
    /// A checksum sidecar (`NAME.spools-sums`) that is not one, or not this file's.
    #[error(transparent)]
    Sums(#[from] SumsDefect),
}

impl FormatDefect {
    /// What kind of failure this is: a malformed or inconsistent manifest, header or
    /// sidecar is damage; a format or feature Spools does not read is unsupported.
    pub fn kind(&self) -> ErrorKind {
        match self {
            FormatDefect::NotParallelFile => ErrorKind::BadArgument,
            FormatDefect::Hdf5(e) => hdf5_kind(e),
            FormatDefect::Zarr(e) => e.kind(),
            FormatDefect::Npy(e) => e.kind(),
            FormatDefect::ManifestFormat { .. } => ErrorKind::Unsupported,
            FormatDefect::NotManifest { .. }
            | FormatDefect::UnitCount { .. }
            | FormatDefect::UnitSize { .. }
            | FormatDefect::Checksums { .. }
            | FormatDefect::Dataset { .. }
            | FormatDefect::DatasetSize { .. }
            | FormatDefect::Slot { .. }
            | FormatDefect::Layout { .. }
            | FormatDefect::LayoutSize { .. }
            | FormatDefect::NotStriped { .. }
            | FormatDefect::NpyLength { .. }
            | FormatDefect::Sums(_) => ErrorKind::Damaged,
            // A manifest that cannot be encoded (its JSON encoder failed): no reader's
            // damage, a failure to write the file.
            FormatDefect::Encode { .. } => ErrorKind::Io,
        }
    }
}

/// What kind of failure an HDF5 error is.
fn hdf5_kind(e: &Hdf5Error) -> ErrorKind {
    match e {
        // The library refused an operation on the file (creating, opening or reading
        // it): its message says why, which may be damage or the file system; not
        // claimed to be damage.
        Hdf5Error::Library { .. } => ErrorKind::Io,
        Hdf5Error::WhichDataset(_) | Hdf5Error::Spec(_) => ErrorKind::BadArgument,
        Hdf5Error::NotContiguous { .. }
        | Hdf5Error::Unallocated(_)
        | Hdf5Error::DataType { .. }
        | Hdf5Error::Unwritable(_) => ErrorKind::Unsupported,
        // libhdf5, loaded at run time, could not be loaded: a missing piece of the
        // installation.
        Hdf5Error::LibraryMissing { .. } => ErrorKind::Unavailable,
    }
}

/// What is wrong with a `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    /// It does not start with the `.npy` magic.
    #[error("not a .npy file")]
    Magic,
    /// A format version other than 1, 2 or 3.
    #[error(".npy version {0} is not supported")]
    Version(u8),
    /// The header is shorter than it says.
    #[error(".npy header of {hlen} bytes is cut short")]
    Cut {
        /// The length it announces.
        hlen: usize,
    },
    /// The header is not UTF-8 text.
    #[error(".npy header is not text")]
    NotText,
    /// A required key is missing.
    #[error(".npy header lacks {0}")]
    Lacks(&'static str),
    /// `descr` is not a simple quoted string (a structured dtype is a list).
    #[error(".npy descr is not a simple string (structured dtypes are not supported)")]
    Descr,
    /// The header is not the Python dictionary literal NumPy writes.
    #[error(".npy header is not a dictionary literal: {what} at byte {at}")]
    Syntax {
        /// What was expected or found.
        what: &'static str,
        /// Byte offset in the dictionary text.
        at: usize,
    },
    /// A key other than `descr`, `fortran_order` and `shape`, or one given twice.
    #[error(".npy header key {0:?} is unexpected or repeated")]
    Key(String),
    /// `fortran_order` is not `True` or `False`.
    #[error(".npy fortran_order is not True or False")]
    FortranOrder,
    /// An element type this reader does not understand.
    #[error(".npy dtype {0} is not understood")]
    Dtype(String),
    /// `shape` is not a tuple.
    #[error(".npy shape is not a tuple")]
    ShapeNotTuple,
    /// A shape entry that is not a number.
    #[error(".npy shape entry {0} is not a number")]
    ShapeEntry(String),
    /// The shape's product overflows.
    #[error(".npy shape overflows")]
    ShapeOverflow,
}

impl NpyError {
    /// What kind of failure this is: a header Spools does not parse is damage, a
    /// well-formed one asking for what Spools does not read is unsupported.
    pub fn kind(&self) -> ErrorKind {
        match self {
            NpyError::Version(_) | NpyError::Descr | NpyError::Dtype(_) => ErrorKind::Unsupported,
            NpyError::Magic
            | NpyError::Cut { .. }
            | NpyError::NotText
            | NpyError::Lacks(_)
            | NpyError::Syntax { .. }
            | NpyError::Key(_)
            | NpyError::FortranOrder
            | NpyError::ShapeNotTuple
            | NpyError::ShapeEntry(_)
            | NpyError::ShapeOverflow => ErrorKind::Damaged,
        }
    }
}

impl crate::error::Told for FileError {
    fn kind(&self) -> ErrorKind {
        FileError::kind(self)
    }
}
