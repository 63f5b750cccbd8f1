//! Single-process reading of a parallel file, by byte range: what a viewer or a
//! post-processing script needs to read a slice of a dataset without a job (the Python
//! package's `spools.open(path)[10:20, :]`). Canonical and `.npy` files are read with
//! one `pread` per range, and when they have a checksum sidecar (`NAME.spools-sums`) the
//! blocks holding the range are read whole and checked against it first; a striped file
//! reads only the stripe rows that hold the range, verifies their blocks' checksums and
//! rebuilds a lost RAID-5 block from parity, like the collective read.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::detect::inspect;
use super::manifest::Manifest;
use super::npy;
use super::parallel_format::Found;
use super::rows::{Geometry, Raid};
use super::sums::Sums;
use super::sys;
use crate::error::{FileError, FormatDefect};

/// Stream bytes assembled per batch of stripe rows.
const BATCH: u64 = 16 << 20;

/// How a parallel file stores its dataset, and what it records about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// One ordinary file holding the raw byte stream (no element type, no shape).
    Canonical {
        /// Bytes in the stream.
        bytes: u64,
    },
    /// One `.npy` file.
    Npy {
        /// Bytes of data after the header.
        bytes: u64,
        /// The header's dtype string, e.g. `<f8`.
        descr: String,
        /// The header's shape.
        shape: Vec<u64>,
        /// Whether the data is in Fortran (column-major) order.
        fortran: bool,
    },
    /// Unit files striped RAID-0 or RAID-5, with a manifest.
    Striped {
        /// Bytes in the stream.
        bytes: u64,
        /// RAID level.
        raid: Raid,
        /// The striping layout, e.g. `raid5(unit=64KiB,count=3)`.
        layout: String,
        /// The layout the dataset was written from (its element type and shape).
        dataset: String,
        /// The version read.
        version: u64,
    },
}

impl Stored {
    /// Bytes of the dataset's byte stream.
    pub fn bytes(&self) -> u64 {
        match self {
            Stored::Canonical { bytes }
            | Stored::Npy { bytes, .. }
            | Stored::Striped { bytes, .. } => *bytes,
        }
    }
}

enum Source {
    Plain {
        file: File,
        offset: u64,
        /// The checksum sidecar, when there is one.
        sums: Option<Box<Sums>>,
    },
    Striped(Box<Striped>),
}

/// What reading a striped file needs: its rows, unit files and block checksums.
struct Striped {
    geo: Geometry,
    paths: Vec<PathBuf>,
    crcs: Vec<Vec<u32>>,
}

/// A parallel file opened by one process to read byte ranges of its dataset.
///
/// ```
/// use spools_io::file::RangeReader;
/// # let dir = spools_testkit::tempdir("doc-reader");
/// let path = dir.join("a.bin");
/// std::fs::write(&path, (0u8..100).collect::<Vec<u8>>())?;
/// let r = RangeReader::open(&path)?;
/// let mut buf = [0u8; 4];
/// r.read_at(10, &mut buf)?;
/// assert_eq!(buf, [10, 11, 12, 13]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RangeReader {
    path: PathBuf,
    stored: Stored,
    source: Source,
}

impl std::fmt::Debug for RangeReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeReader")
            .field("path", &self.path)
            .field("stored", &self.stored)
            .finish()
    }
}

impl RangeReader {
    /// Opens `path`: a canonical file, a `.npy` file or a striped file's manifest (found
    /// by its contents, as the collective read does).
    ///
    /// # Errors
    /// [`FileError::Io`] when it cannot be opened, [`FileError::Format`] for a damaged
    /// `.npy` header or manifest, or a checksum sidecar that cannot be read or does not
    /// describe the file's stream; [`FileError::Options`] for a stripe row of more than
    /// [`ROW_MAX`](super::tools::ROW_MAX) bytes.
    pub fn open(path: &Path) -> Result<RangeReader, FileError> {
        let (stored, source) = match inspect(path)? {
            Found::Plain { offset, bytes } => {
                let file = sys::open_read(path)?;
                let head = sys::read_upto(&file, path, offset.min(64 * 1024) as usize, 0)?;
                // An HDF5 file's dataset is read as its bytes.
                let stored = if offset == 0
                    || super::hdf5::is_hdf5(&head)
                    || super::hdf5::is_hdf5_file(path)
                {
                    Stored::Canonical { bytes }
                } else {
                    let h = npy::parse_full(&head).map_err(|e| FileError::Format {
                        path: path.to_path_buf(),
                        defect: FormatDefect::Npy(e),
                    })?;
                    Stored::Npy {
                        bytes,
                        descr: h.descr,
                        shape: h.shape,
                        fortran: h.fortran,
                    }
                };
                let sums = Sums::read(path)?;
                if let Some(s) = &sums {
                    s.check_covers(path, offset, bytes)?;
                }
                let sums = sums.map(Box::new);
                (stored, Source::Plain { file, offset, sums })
            }
            Found::Zarr(_) => {
                return Err(FileError::Options(
                    "a Zarr array is read collectively (file::read) or whole (spools cat); \
                     RangeReader does not read slices of it",
                ))
            }
            Found::Manifest(text) => {
                let m = Manifest::parse(path, &text)?;
                let geo = m.geometry(path)?;
                if geo.unit.saturating_mul(geo.count) > super::tools::ROW_MAX {
                    return Err(FileError::Options(
                        "a stripe row of this file (unit times count) is more than the 1 GiB \
                         a RangeReader holds at once",
                    ));
                }
                let stored = Stored::Striped {
                    bytes: m.size,
                    raid: geo.raid,
                    layout: m.layout.clone(),
                    dataset: m.dataset.clone(),
                    version: m.version,
                };
                let source = Source::Striped(Box::new(Striped {
                    paths: m.unit_paths(path),
                    crcs: m.crcs(),
                    geo,
                }));
                (stored, source)
            }
        };
        Ok(RangeReader {
            path: path.to_path_buf(),
            stored,
            source,
        })
    }

    /// What the file stores and records.
    pub fn stored(&self) -> &Stored {
        &self.stored
    }

    /// Bytes of the dataset's byte stream.
    pub fn len(&self) -> u64 {
        self.stored.bytes()
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads `out.len()` bytes of the stream from byte `offset` into `out`. Returns the
    /// blocks rebuilt from RAID-5 parity on the way (0 for other files).
    ///
    /// # Errors
    /// [`FileError::SizeMismatch`] for a range past the end of the stream (`file` is the
    /// stream's length, `layout` the range's end); [`FileError::Io`];
    /// [`FileError::MissingUnit`], [`FileError::Corrupt`] or [`FileError::Unrecoverable`]
    /// for damage parity cannot repair, or a block of a canonical or `.npy` file that
    /// fails its sidecar's checksum ([`FileError::Corrupt`] of unit 0 at the block's byte
    /// offset in the file).
    pub fn read_at(&self, offset: u64, out: &mut [u8]) -> Result<u64, FileError> {
        let end = offset
            .checked_add(out.len() as u64)
            .filter(|&e| e <= self.len())
            .ok_or_else(|| FileError::SizeMismatch {
                path: self.path.clone(),
                file: self.len(),
                layout: offset.saturating_add(out.len() as u64),
            })?;
        if out.is_empty() {
            return Ok(0);
        }
        match &self.source {
            Source::Plain {
                file,
                offset: at,
                sums: None,
            } => {
                sys::read_at(file, &self.path, out, at + offset)?;
                Ok(0)
            }
            Source::Plain {
                file,
                offset: at,
                sums: Some(s),
            } => {
                // A batch at a time: no more than a batch and two blocks are held.
                let mut done = 0;
                for piece in out.chunks_mut(BATCH as usize) {
                    let from = at + offset + done;
                    let got = s.read_verified(file, &self.path, from, from + piece.len() as u64)?;
                    piece.copy_from_slice(&got);
                    done += piece.len() as u64;
                }
                Ok(0)
            }
            Source::Striped(s) => read_striped(&s.geo, &s.paths, &s.crcs, offset, end, out),
        }
    }
}

/// Reads stream bytes `[offset, end)` of a striped file into `out`, a batch of rows at a
/// time.
fn read_striped(
    geo: &Geometry,
    paths: &[PathBuf],
    crcs: &[Vec<u32>],
    offset: u64,
    end: u64,
    out: &mut [u8],
) -> Result<u64, FileError> {
    let rb = geo.row_bytes();
    let (first, last) = (offset / rb, end.div_ceil(rb));
    let step = (BATCH / rb).max(1);
    let mut rebuilt = 0;
    let mut r0 = first;
    while r0 < last {
        let r1 = (r0 + step).min(last);
        let chunks: Vec<Option<Vec<u8>>> = (0..geo.count)
            .map(|u| {
                let (lo, hi) = geo.chunk_range(u, r0, r1);
                let p = paths.get(u as usize)?;
                let f = sys::open_unit_read(p).ok()?;
                // No more than the file holds (a short file is reported per block).
                let len = f.metadata().ok()?.len();
                sys::read_upto(&f, p, hi.min(len).saturating_sub(lo) as usize, lo).ok()
            })
            .collect();
        let (a, b) = geo.stream_range(r0, r1);
        let mut buf = vec![0u8; (b - a) as usize];
        rebuilt += geo
            .assemble((r0, r1), &chunks, crcs, paths, &mut buf, false)?
            .len() as u64;
        // The part of these rows inside the range.
        let (lo, hi) = (a.max(offset), b.min(end));
        out[(lo - offset) as usize..(hi - offset) as usize]
            .copy_from_slice(&buf[(lo - a) as usize..(hi - a) as usize]);
        r0 = r1;
    }
    debug_assert!(geo.raid == Raid::Raid5 || rebuilt == 0);
    Ok(rebuilt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::sums::{sidecar_path, SUMS_BLOCK, SUMS_FORMAT};

    /// Writes `data` to `path` with a sidecar of blocks of `block` bytes.
    fn with_sidecar(path: &Path, data: &[u8], block: u64) {
        std::fs::write(path, data).unwrap_or_default();
        let crc32c: String = data
            .chunks(block as usize)
            .map(|b| format!("{:08x}", spools_exchange::crc32c(b)))
            .collect();
        let s = Sums {
            format: SUMS_FORMAT.into(),
            block,
            offset: 0,
            bytes: data.len() as u64,
            crc32c,
        };
        let text = serde_json::to_vec(&s).unwrap_or_default();
        std::fs::write(sidecar_path(path), text).unwrap_or_default();
    }

    /// A canonical file with a sidecar is read verified: a range meeting a flipped block
    /// fails naming it, ranges elsewhere still read; a sidecar of another stream is
    /// refused at open.
    #[test]
    fn ranges_of_a_checksummed_file_are_verified() {
        let dir = spools_testkit::tempdir("reader-sums");
        let path = dir.path().join("c.bin");
        let n = 2 * SUMS_BLOCK as usize + 5000;
        let data: Vec<u8> = (0..n).map(|i| (i * 31 + i / 7) as u8).collect();
        with_sidecar(&path, &data, SUMS_BLOCK);
        let r = RangeReader::open(&path).unwrap_or_else(|e| unreachable!("{e}"));
        let mut buf = vec![0u8; 3000];
        for at in [0, SUMS_BLOCK - 1000, n as u64 - 3000] {
            assert!(r.read_at(at, &mut buf).is_ok());
            assert_eq!(buf, data[at as usize..at as usize + 3000]);
        }
        let mut bad = data.clone();
        bad[SUMS_BLOCK as usize + 77] ^= 4;
        std::fs::write(&path, &bad).unwrap_or_default();
        let e = r.read_at(SUMS_BLOCK - 1000, &mut buf);
        assert!(
            matches!(e, Err(FileError::Corrupt { unit: 0, offset, .. }) if offset == SUMS_BLOCK),
            "{e:?}"
        );
        assert!(r.read_at(0, &mut buf).is_ok());
        assert_eq!(buf, data[..3000]);
        // Cut short: the last block is missing.
        std::fs::write(&path, &data[..n - 10]).unwrap_or_default();
        let e = r.read_at(n as u64 - 3000, &mut buf);
        assert!(matches!(e, Err(FileError::MissingUnit { .. })), "{e:?}");
        // A sidecar of another stream, or of blocks too large to hold, is refused.
        with_sidecar(&path, &data[..n - 10], SUMS_BLOCK);
        std::fs::write(&path, &data).unwrap_or_default();
        assert!(RangeReader::open(&path).is_err());
        with_sidecar(&path, &data, 1 << 40);
        assert!(matches!(
            RangeReader::open(&path),
            Err(FileError::Format { .. })
        ));
    }
}
