//! HDF5 files as parallel files: rank 0 creates the file and a contiguous dataset through
//! the HDF5 C library (libhdf5, opened at run time: [`ffi`]), allocated at once and never
//! filled, and learns the dataset's offset in the file; every rank then
//! writes its part of the canonical byte stream straight into the file at that offset,
//! as for a canonical file (no MPI, no parallel HDF5). A read finds a contiguous
//! dataset's offset the same way and reads it as a canonical file. The library is only
//! called by rank 0 (or a tool), never on the data path.
//!
//! In every build: the library is loaded the first time an HDF5 file is met (any of the
//! usual names of libhdf5 1.10 to 1.14, or `SPOOLS_HDF5_LIB`); where it is not installed,
//! HDF5 files are refused with [`Hdf5Error::LibraryMissing`] naming what was tried.
//! `create.rs` writes, `inspect.rs` reads a dataset's description.

mod create;
mod ffi;
pub(crate) mod file_format;
mod inspect;

use std::path::{Path, PathBuf};

use spools_map::{DType, Layout};

use crate::error::{FileError, FormatDefect, Hdf5Error};

/// The signature an HDF5 file starts with (at offset 0, or after a user block).
pub(crate) const MAGIC: &[u8] = b"\x89HDF\r\n\x1a\n";

/// The dataset Spools writes when none is named.
pub(crate) const DEFAULT_DATASET: &str = "data";

/// What a contiguous dataset of an HDF5 file holds, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hdf5Dataset {
    /// The dataset's path in the file, e.g. `/data`.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The shape.
    pub shape: Vec<u64>,
    /// Byte offset of the data in the file.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
    /// The layout Spools wrote it from (its `spools_layout` attribute), if any.
    pub written_from: Option<String>,
}

/// Where an HDF5 file's signature may be: at 0, or after a user block of 512, 1024,
/// 2048, ... bytes (a power of two, at least 512, as the HDF5 format allows; the
/// superblock and every address of the file follow it).
fn signature_places() -> impl Iterator<Item = u64> {
    std::iter::once(0).chain((9..63).map(|k| 1u64 << k))
}

/// Whether `head` (a file's first bytes) is an HDF5 file: its signature at one of its
/// places within `head` (a user block of up to half of `head`'s length is seen).
pub(crate) fn is_hdf5(head: &[u8]) -> bool {
    signature_places()
        .map_while(|at| {
            let at = usize::try_from(at).ok()?;
            head.get(at..at.checked_add(MAGIC.len())?)
        })
        .any(|s| s == MAGIC)
}

/// Where the signature of the HDF5 file `path` is (the size of its user block), looking
/// at every place the format allows up to the file's end; `None`: not an HDF5 file (or
/// not readable).
pub(crate) fn signature_at(path: &Path) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut s = [0u8; MAGIC.len()];
    signature_places()
        .take_while(|&at| at.saturating_add(MAGIC.len() as u64) <= len)
        .find(|&at| f.read_exact_at(&mut s, at).is_ok() && s == MAGIC)
}

/// Whether `path` is an HDF5 file (by its signature, after a user block of any size).
pub(crate) fn is_hdf5_file(path: &Path) -> bool {
    signature_at(path).is_some()
}

/// Splits `FILE:/NAME` (`NAME` a dataset's path, e.g. `/group/sub/name`) into the file
/// and the dataset, when `path` itself does not exist and `FILE` is an HDF5 file;
/// otherwise `path` names the file, whole.
pub(crate) fn split(path: &Path) -> (PathBuf, Option<String>) {
    use std::os::unix::ffi::OsStrExt;
    let whole = (path.to_path_buf(), None);
    if path.symlink_metadata().is_ok() {
        return whole;
    }
    let bytes = path.as_os_str().as_bytes();
    let Some(at) = bytes.windows(2).rposition(|w| w == b":/") else {
        return whole;
    };
    let (file, name) = (&bytes[..at], &bytes[at + 1..]);
    let file = PathBuf::from(std::ffi::OsStr::from_bytes(file));
    let hdf5 = at > 0 && is_hdf5_file(&file);
    match std::str::from_utf8(name) {
        Ok(name) if hdf5 && name.len() > 1 => (file, Some(name.to_string())),
        _ => whole,
    }
}

/// Parses the arguments of `hdf5(NAME)` or `hdf5(dataset=NAME)`.
///
/// # Errors
/// [`Hdf5Error::Spec`].
pub(crate) fn parse_spec(args: &str) -> Result<String, Hdf5Error> {
    let name = args.trim();
    let name = name.strip_prefix("dataset=").unwrap_or(name).trim();
    if name.is_empty() || name.contains(['(', ')', ',']) {
        return Err(Hdf5Error::Spec(args.to_string()));
    }
    Ok(name.to_string())
}

fn defect(path: &Path, e: Hdf5Error) -> FileError {
    FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::Hdf5(e),
    }
}

/// Checks that the dataset holds the dataset `layout` describes (element type and shape;
/// the order does not matter for a one-dimensional array).
///
/// # Errors
/// [`FileError::DatasetMismatch`].
pub(crate) fn check(path: &Path, d: &Hdf5Dataset, layout: &Layout) -> Result<(), FileError> {
    match layout {
        Layout::Array(a) => {
            let ordered = a.shape().iter().filter(|&&n| n > 1).count() > 1;
            let f = a.order() == spools_map::Order::F && ordered;
            if a.dtype() != d.dtype || a.shape() != d.shape.as_slice() || f {
                return Err(FileError::DatasetMismatch {
                    path: path.to_path_buf(),
                    file: format!("dataset {} {}{:?} in C order", d.name, d.dtype, d.shape),
                    layout: format!(
                        "{}{:?}{}",
                        a.dtype(),
                        a.shape(),
                        if f { " in Fortran order" } else { "" }
                    ),
                });
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub(crate) use create::create;
pub(crate) use inspect::inspect;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_colon_name_splits_only_for_an_hdf5_file_that_exists() {
        let dir = std::env::temp_dir().join(format!("spools-hdf5-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let h5 = dir.join("a.h5");
        std::fs::write(&h5, [MAGIC, &[0u8; 56][..]].concat()).unwrap();
        let other = dir.join("b.bin");
        std::fs::write(&other, b"not hdf5 at all").unwrap();
        let named = PathBuf::from(format!("{}:/group/sub/name", h5.display()));
        assert_eq!(split(&named), (h5.clone(), Some("/group/sub/name".into())));
        assert_eq!(split(&h5), (h5.clone(), None));
        // Not an HDF5 file, no file, or no name: the path is the file, whole.
        let p = PathBuf::from(format!("{}:/x", other.display()));
        assert_eq!(split(&p), (p.clone(), None));
        let p = PathBuf::from(format!("{}:/x", dir.join("none.h5").display()));
        assert_eq!(split(&p), (p.clone(), None));
        let p = PathBuf::from(format!("{}:/", h5.display()));
        assert_eq!(split(&p), (p.clone(), None));
        // A file whose own name holds ":/" is itself.
        let odd = dir.join("c:");
        std::fs::create_dir_all(&odd).unwrap();
        let inner = odd.join("d.h5");
        std::fs::write(&inner, [MAGIC, &[0u8; 56][..]].concat()).unwrap();
        assert_eq!(split(&inner), (inner.clone(), None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_signature_is_found_at_0_or_after_a_user_block_of_a_power_of_two() {
        let at = |o: usize, len: usize| {
            let mut h = vec![0u8; len];
            h[o..o + MAGIC.len()].copy_from_slice(MAGIC);
            h
        };
        assert!(is_hdf5(&at(0, 8)));
        for o in [512, 1024, 2048, 32768] {
            assert!(is_hdf5(&at(o, 65536)), "{o}");
            // Not within the head given.
            assert!(!is_hdf5(&at(o, 65536)[..o + 7]), "{o}");
        }
        // Not a place the format allows.
        for o in [1, 8, 256, 513, 1000, 3072] {
            assert!(!is_hdf5(&at(o, 65536)), "{o}");
        }
        assert!(!is_hdf5(b""));
        // In a file: beyond any head, too.
        let dir = std::env::temp_dir().join(format!("spools-hdf5-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (o, want) in [(0, Some(0)), (131072, Some(131072)), (100000, None)] {
            let p = dir.join(format!("f{o}"));
            std::fs::write(&p, at(o, o + 64)).unwrap();
            assert_eq!(signature_at(&p), want, "{o}");
            assert_eq!(is_hdf5_file(&p), want.is_some(), "{o}");
        }
        assert_eq!(signature_at(&dir.join("none")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_library_says_what_was_tried_and_how_to_install_it() {
        let e = Hdf5Error::LibraryMissing {
            tried: vec!["/nowhere/libhdf5.so".into()],
            why: "cannot open shared object file".into(),
        }
        .to_string();
        for want in [
            "/nowhere/libhdf5.so",
            "apt-get install libhdf5-103-1",
            "SPOOLS_HDF5_LIB",
        ] {
            assert!(e.contains(want), "{e}");
        }
    }
}
