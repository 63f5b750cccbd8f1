//! Format detection, in one place: rank 0 asks the formats, in one order, what a path
//! holds (a Zarr array's directory, one file of a one-file format with a signature:
//! HDF5, `.npy`; a striped file's manifest; a program's own one-file formats; else plain
//! canonical bytes) before a read, `spools ls`/`cat`/`fsck` and a single process's
//! [`RangeReader`](super::RangeReader).

use std::path::Path;

use spools_map::Layout;

use crate::error::{FileError, FormatDefect};
use crate::file::canonical::{OneFileStorage, RawFile};
use crate::file::hdf5::file_format::Hdf5File;
use crate::file::npy::NpyFile;
use crate::file::one_file::OneFileFormat;
use crate::file::parallel_format::{Found, Look, ParallelFormat};
use crate::file::striped::StripedFiles;
use crate::file::sys;
use crate::file::zarr::ZarrArrays;

/// Bytes of a file's head its formats look at.
const HEAD: usize = 64 * 1024;

/// The formats a reader asks, in order: `dataset` names an HDF5 file's dataset (`None`:
/// its only one), `extra` the program's own one-file formats (asked after the built-in
/// ones with a signature and a striped file's manifest, before plain canonical bytes,
/// which claim any file). `f` gets them.
fn with_formats<R>(
    dataset: Option<&str>,
    extra: &[&dyn OneFileFormat],
    f: impl FnOnce(&[&dyn ParallelFormat]) -> R,
) -> R {
    let hdf5 = Hdf5File::reading(dataset);
    let (hdf5, npy, raw) = (
        OneFileStorage(&hdf5),
        OneFileStorage(&NpyFile),
        OneFileStorage(&RawFile),
    );
    let extra: Vec<OneFileStorage<'_>> = extra.iter().map(|&x| OneFileStorage(x)).collect();
    let mut all: Vec<&dyn ParallelFormat> =
        vec![&ZarrArrays(None), &hdf5, &npy, &StripedFiles(None)];
    all.extend(extra.iter().map(|x| x as &dyn ParallelFormat));
    all.push(&raw);
    f(&all)
}

/// What the first of `formats` that claims `path` found, for a reader with `layout` (a
/// format that records its dataset checks it: [`FileError::DatasetMismatch`]).
///
/// # Errors
/// A directory that no format claims (no Zarr array), a file that cannot be read, or what
/// a format that claims the path finds wrong with it.
fn detect(
    path: &Path,
    layout: Option<&Layout>,
    formats: &[&dyn ParallelFormat],
) -> Result<Found, FileError> {
    let (head, len) = if path.is_dir() {
        (None, 0)
    } else {
        let f = sys::open_read(path)?;
        let len = f
            .metadata()
            .map_err(|e| FileError::io("stat", path, e))?
            .len();
        (Some(sys::read_upto(&f, path, HEAD, 0)?), len)
    };
    let look = Look {
        path,
        head: head.as_deref(),
        len,
        layout,
    };
    for fmt in formats {
        if let Some(found) = fmt.inspect(&look)? {
            return Ok(found);
        }
    }
    Err(FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::NotParallelFile,
    })
}

/// Looks at a file with the built-in formats only.
pub(super) fn inspect(path: &Path) -> Result<Found, FileError> {
    inspect_dataset(path, None, None, &[])
}

/// What `path` holds, asking the built-in formats and `extra` ([`with_formats`]), for a
/// reader with `layout`.
///
/// # Errors
/// As [`detect`].
pub(super) fn inspect_dataset(
    path: &Path,
    dataset: Option<&str>,
    layout: Option<&Layout>,
    extra: &[&dyn OneFileFormat],
) -> Result<Found, FileError> {
    with_formats(dataset, extra, |all| detect(path, layout, all))
}
