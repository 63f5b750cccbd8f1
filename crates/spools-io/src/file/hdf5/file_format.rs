//! HDF5 as a one-file format ([`OneFileFormat`]): the file libhdf5 makes on rank 0, the
//! canonical stream written by every rank at its contiguous dataset's offset.

use std::path::Path;

use spools_map::Layout;

use super::{check, create, inspect, is_hdf5, signature_at};
use crate::error::FileError;
use crate::file::one_file::{OneFileFormat, Prepared, StreamAt};
/// HDF5 as a one-file format: a file libhdf5 makes, holding one contiguous dataset that
/// the ranks write at its offset. `dataset`: the dataset to read (`None`: the file's only
/// one) or to write.
#[derive(Debug)]
pub(crate) struct Hdf5File {
    dataset: Option<String>,
}

impl Hdf5File {
    /// The format for reading `dataset` (`None`: a file's only dataset).
    pub(crate) fn reading(dataset: Option<&str>) -> Hdf5File {
        Hdf5File {
            dataset: dataset.map(str::to_string),
        }
    }

    /// The format for writing the dataset named `name`.
    pub(crate) fn writing(name: &str) -> Hdf5File {
        Hdf5File {
            dataset: Some(name.to_string()),
        }
    }
}

impl OneFileFormat for Hdf5File {
    fn name(&self) -> &str {
        "hdf5"
    }

    fn inspect(
        &self,
        path: &Path,
        head: &[u8],
        len: u64,
        layout: Option<&Layout>,
    ) -> Result<Option<StreamAt>, FileError> {
        // The signature at 0 or after a user block: within the head, or further on in a
        // file longer than it.
        let hdf5 = is_hdf5(head) || (len > head.len() as u64 && signature_at(path).is_some());
        if !hdf5 {
            return Ok(None);
        }
        let d = inspect(path, self.dataset.as_deref())?;
        if let Some(l) = layout.filter(|l| l.total_bytes() == Some(d.bytes)) {
            check(path, &d, l)?;
        }
        Ok(Some(StreamAt {
            offset: d.offset,
            bytes: d.bytes,
        }))
    }

    /// Rank 0 creates the HDF5 file the ranks write (a new temporary file, always: an HDF5
    /// file is never written in place).
    fn prepare(&self, tmp: &Path, layout: &Layout, in_place: bool) -> Result<Prepared, FileError> {
        if in_place {
            return Err(FileError::Options(
                "an HDF5 file is always written to a new file and renamed over the path; Commit::InPlace does not apply",
            ));
        }
        let name = self.dataset.as_deref().unwrap_or("data");
        let offset = create(tmp, name, layout)?;
        Ok(Prepared::Made { offset })
    }
}
