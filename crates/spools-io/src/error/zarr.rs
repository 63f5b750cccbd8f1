//! What is wrong with a Zarr array's metadata ([`ZarrError`]) or with one of its stored
//! chunks ([`ChunkDefect`]).

use crate::error::ErrorKind;

/// What is wrong with, or unsupported in, a Zarr v3 array's `zarr.json` or a Zarr format
/// spec (`zarr(chunk=..,shard=..)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZarrError {
    /// `zarr.json` is not JSON, or a field has the wrong JSON type.
    #[error("zarr.json: {0}")]
    Json(String),
    /// A required field is missing.
    #[error("zarr.json has no {0:?}")]
    Lacks(&'static str),
    /// Not a Zarr v3 array (another `zarr_format` or `node_type`).
    #[error("not a Zarr v3 array ({0})")]
    NotArray(String),
    /// A data type Spools has no element type for.
    #[error("data type {0} is not supported (supported: bool, int8..int64, uint8..uint64, float32, float64, complex64, complex128, raw_bytes, r<bits>)")]
    DataType(String),
    /// A fill value that does not fit the data type.
    #[error("fill value {value} does not fit data type {dtype}")]
    FillValue {
        /// The fill value as written.
        value: String,
        /// The data type.
        dtype: String,
    },
    /// A chunk shape that does not fit the array (another number of dimensions, a zero
    /// extent, inner chunks that do not divide the shards).
    #[error("chunk grid: {0}")]
    Grid(String),
    /// A chunk grid other than `regular`.
    #[error("chunk grid {0:?} is not supported (supported: regular)")]
    GridName(String),
    /// Sizes beyond what Spools reads or writes (a shape whose size overflows, chunks
    /// larger than 4 GiB, shards of more than 2^24 chunks).
    #[error("{0}: beyond what Spools reads or writes")]
    Limit(String),
    /// A chunk key encoding other than `default` or `v2` with `/` or `.`.
    #[error("chunk key encoding {0} is not supported (supported: default and v2 with separator \"/\" or \".\")")]
    KeyEncoding(String),
    /// A codec Spools does not implement, or one in a place the chain does not allow.
    #[error("codec {name:?} is not supported here: {why}")]
    Codec {
        /// The codec's name.
        name: String,
        /// Why (what is supported).
        why: String,
    },
    /// An array of zero dimensions (Spools' layouts have at least one).
    #[error("a 0-dimensional array has no layout in Spools")]
    Scalar,
    /// A format spec that does not parse.
    #[error("zarr format spec: {0}")]
    Spec(String),
    /// A sharded array of `bytes(n)` elements, which Spools does not write: zarr-python
    /// (3.1) cannot read `raw_bytes` arrays in shards (its sharding codec fails on their
    /// fill value, zarr-python issue #3054), and no other data type for raw bytes opens
    /// in both zarr-python and tensorstore.
    #[error("a Zarr array of bytes({0}) elements is not written in shards: zarr-python cannot read raw_bytes arrays in shards (zarr-python issue #3054: its sharding codec fails on their fill value) and no other Zarr data type for raw bytes opens in both zarr-python and tensorstore; leave out shard= (every chunk its own file)")]
    ShardedBytes(u64),
}

impl ZarrError {
    /// What kind of failure this is: malformed metadata is damage, a well-formed feature
    /// Spools does not implement is unsupported, a bad `zarr(...)` spec is a bad
    /// argument.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ZarrError::Json(_)
            | ZarrError::Lacks(_)
            | ZarrError::FillValue { .. }
            | ZarrError::Grid(_) => ErrorKind::Damaged,
            ZarrError::NotArray(_)
            | ZarrError::DataType(_)
            | ZarrError::GridName(_)
            | ZarrError::Limit(_)
            | ZarrError::KeyEncoding(_)
            | ZarrError::Codec { .. }
            | ZarrError::Scalar
            | ZarrError::ShardedBytes(_) => ErrorKind::Unsupported,
            ZarrError::Spec(_) => ErrorKind::BadArgument,
        }
    }
}

/// What is wrong with one stored chunk or shard of a Zarr array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkDefect {
    /// The shard index failed its CRC32C check.
    #[error("shard index fails its CRC32C check")]
    IndexChecksum,
    /// The shard is shorter than its index.
    #[error("shard of {0} bytes is shorter than its index")]
    ShortShard(u64),
    /// An index entry points outside the shard.
    #[error("index entry (offset {offset}, {bytes} bytes) lies outside the shard of {len} bytes")]
    IndexEntry {
        /// Offset recorded.
        offset: u64,
        /// Length recorded.
        bytes: u64,
        /// The shard's length.
        len: u64,
    },
    /// A chunk failed its CRC32C codec check.
    #[error("chunk fails its CRC32C check")]
    Checksum,
    /// A compressed chunk does not decompress.
    #[error("{codec} decoding failed: {why}")]
    Decode {
        /// The codec.
        codec: &'static str,
        /// The decoder's words.
        why: String,
    },
    /// A decoded chunk of the wrong size.
    #[error("decodes to {found} bytes, expected {expected}")]
    Size {
        /// Bytes expected (the chunk shape times the element size).
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// A chunk or shard is missing from an array Spools wrote whole (its metadata says
    /// every chunk was written, so a missing one is lost, not fill value).
    #[error("missing, but the array's metadata says every chunk was written")]
    Missing,
}
