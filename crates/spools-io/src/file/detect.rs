//! Format detection, in one place: rank 0 looks at what a path holds (a Zarr array's
//! directory, a striped file's manifest, or one file of a one-file format: HDF5, `.npy`, a
//! program's own, or plain canonical bytes) before a read, `spools ls`/`cat`/`fsck` and a
//! single process's [`RangeReader`](super::RangeReader).

use std::path::Path;

use spools_map::Layout;

use crate::error::{FileError, FormatDefect};
use crate::file::hdf5::file_format::Hdf5File;
use crate::file::manifest::looks_like_manifest;
use crate::file::npy::NpyFile;
use crate::file::one_file::{OneFileFormat, StreamAt};
use crate::file::sys;

/// Bytes of a file's head its formats look at.
const HEAD: usize = 64 * 1024;

/// What a parallel file's path holds, as found by rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A striped file's manifest, with its text.
    Manifest(Vec<u8>),
    /// A plain file: the stream starts at `offset` and holds `bytes`.
    Plain { offset: u64, bytes: u64 },
    /// A Zarr array's directory, with its `zarr.json` text.
    Zarr(Vec<u8>),
}

impl Kind {
    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            Kind::Manifest(t) => {
                let mut v = vec![b'M'];
                v.extend_from_slice(t);
                v
            }
            Kind::Zarr(t) => [b"Z".as_slice(), t].concat(),
            Kind::Plain { offset, bytes } => {
                let mut v = vec![b'P'];
                v.extend_from_slice(&offset.to_le_bytes());
                v.extend_from_slice(&bytes.to_le_bytes());
                v
            }
        }
    }

    pub(super) fn decode(b: &[u8]) -> Option<Kind> {
        match b.split_first()? {
            (b'M', t) => Some(Kind::Manifest(t.to_vec())),
            (b'Z', t) => Some(Kind::Zarr(t.to_vec())),
            (b'P', t) if t.len() == 16 => Some(Kind::Plain {
                offset: u64::from_le_bytes(t[..8].try_into().ok()?),
                bytes: u64::from_le_bytes(t[8..].try_into().ok()?),
            }),
            _ => None,
        }
    }
}

/// Looks at a file with the built-in formats only.
pub(super) fn inspect(path: &Path) -> Result<Kind, FileError> {
    inspect_dataset(path, None, None, &[])
}

/// What `path` holds, for a reader with `layout` (a format that records its dataset
/// checks it: [`FileError::DatasetMismatch`]), `dataset` naming the dataset of an HDF5 file
/// (`None`: its only one), `extra` the program's own one-file formats. The built-in
/// formats with a signature (HDF5, `.npy`) are asked first, then a striped file's
/// manifest, then the program's formats; a file none of them claims is plain canonical
/// bytes.
///
/// # Errors
/// A directory that is no Zarr array, a file that cannot be read, or what a format that
/// claims the file finds wrong with it.
pub(super) fn inspect_dataset(
    path: &Path,
    dataset: Option<&str>,
    layout: Option<&Layout>,
    extra: &[&dyn OneFileFormat],
) -> Result<Kind, FileError> {
    if path.is_dir() {
        return match super::zarr::read_meta(path)? {
            Some(text) => Ok(Kind::Zarr(text)),
            None => Err(FileError::Format {
                path: path.to_path_buf(),
                defect: FormatDefect::NotParallelFile,
            }),
        };
    }
    let f = sys::open_read(path)?;
    let len = f
        .metadata()
        .map_err(|e| FileError::io("stat", path, e))?
        .len();
    let head = sys::read_upto(&f, path, HEAD, 0)?;
    let plain = |at: StreamAt| Kind::Plain {
        offset: at.offset,
        bytes: at.bytes,
    };
    let hdf5 = Hdf5File::reading(dataset);
    for fmt in [&hdf5 as &dyn OneFileFormat, &NpyFile] {
        if let Some(at) = fmt.inspect(path, &head, len, layout)? {
            return Ok(plain(at));
        }
    }
    if looks_like_manifest(&head) && len < 256 << 20 {
        let text = std::fs::read(path).map_err(|e| FileError::io("read", path, e))?;
        return Ok(Kind::Manifest(text));
    }
    for fmt in extra {
        if let Some(at) = fmt.inspect(path, &head, len, layout)? {
            return Ok(plain(at));
        }
    }
    Ok(Kind::Plain {
        offset: 0,
        bytes: len,
    })
}
