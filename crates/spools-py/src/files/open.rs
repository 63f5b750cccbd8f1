//! The single-process reader behind `spools.open(path)` (h5py-like slicing is in
//! `python/spools/_io.py`): a parallel file opened without a job, read by byte ranges
//! into numpy arrays in place (`spools_io::file::RangeReader`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use spools_io::file::{Raid, RangeReader, Stored};

use crate::buffer::{self, Access};
use crate::errors;

use super::common::{file_error, Op};

/// A parallel file opened by this process alone (no job, no `init`): what `spools.open`
/// wraps. Reads byte ranges of the dataset's canonical byte stream.
#[pyclass(frozen, module = "spools", name = "_FileReader")]
pub(crate) struct FileReader {
    path: PathBuf,
    stored: Stored,
    /// The open file; `None` once closed (a read in progress keeps its own reference).
    reader: Mutex<Option<Arc<RangeReader>>>,
}

impl FileReader {
    fn closed(&self) -> PyErr {
        errors::value_error(format!("{} is closed", self.path.display()))
    }
}

#[pymethods]
impl FileReader {
    /// Opens `path` (canonical, `.npy` or a striped file's manifest).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<FileReader> {
        let r = py
            .detach(|| RangeReader::open(&path))
            .map_err(|e| file_error(e, Op::Read))?;
        Ok(FileReader {
            stored: r.stored().clone(),
            reader: Mutex::new(Some(Arc::new(r))),
            path,
        })
    }

    /// `"canonical"`, `"npy"`, `"raid0"` or `"raid5"`.
    #[getter]
    fn format(&self) -> &'static str {
        match &self.stored {
            Stored::Canonical { .. } => "canonical",
            Stored::Npy { .. } => "npy",
            Stored::Striped {
                raid: Raid::Raid0, ..
            } => "raid0",
            Stored::Striped { .. } => "raid5",
        }
    }

    /// Bytes of the dataset.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.stored.bytes()
    }

    /// The `.npy` header's dtype string (e.g. `<f8`), else `None`.
    #[getter]
    fn descr(&self) -> Option<String> {
        match &self.stored {
            Stored::Npy { descr, .. } => Some(descr.clone()),
            _ => None,
        }
    }

    /// The `.npy` header's shape, else `None`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match &self.stored {
            Stored::Npy { shape, .. } => Some(PyTuple::new(py, shape)).transpose(),
            _ => Ok(None),
        }
    }

    /// Whether a `.npy` file's data is in Fortran order.
    #[getter]
    fn fortran(&self) -> bool {
        matches!(&self.stored, Stored::Npy { fortran: true, .. })
    }

    /// The layout spec a striped file was written from (its dtype and shape), else
    /// `None`.
    #[getter]
    fn dataset(&self) -> Option<String> {
        match &self.stored {
            Stored::Striped { dataset, .. } => Some(dataset.clone()),
            _ => None,
        }
    }

    /// The striping layout of a striped file, else `None`.
    #[getter]
    fn striping(&self) -> Option<String> {
        match &self.stored {
            Stored::Striped { layout, .. } => Some(layout.clone()),
            _ => None,
        }
    }

    /// Reads `len(out)` bytes of the stream from byte `offset` into `out` (a writable
    /// C-contiguous buffer), with the GIL released. Returns the blocks rebuilt from
    /// RAID-5 parity. Raises `FileDamageError` for damage parity cannot repair.
    fn read_into(&self, py: Python<'_>, offset: u64, out: &Bound<'_, PyAny>) -> PyResult<u64> {
        let v = buffer::view(out, Access::Write, "out")?;
        // The lock is held only to take a reference, never while the GIL is released
        // (another thread waiting for it with the GIL would deadlock the read).
        let r = self
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| self.closed())?;
        // SAFETY: `out` is writable (checked by `view`) and this is its only borrow
        // during the call.
        let dst = unsafe { v.bytes_mut() };
        py.detach(|| r.read_at(offset, dst)).map_err(|e| match e {
            spools_io::FileError::SizeMismatch { file, layout, .. } => errors::value_error(
                format!("bytes {offset}..{layout} are past the end of the {file}-byte dataset"),
            ),
            e => file_error(e, Op::Read),
        })
    }

    /// Closes the file (later reads raise `ValueError`).
    fn close(&self) {
        self.reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Whether `close` ran.
    #[getter(closed)]
    fn is_closed(&self) -> bool {
        self.reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FileReader>()?;
    Ok(())
}
