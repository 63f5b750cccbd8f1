//! (area: files) Parallel files: `Comm.write_file` and `Comm.read_file` (collective, over
//! `spools_io::file::{write, read}`), the file errors as exceptions (in `files/common.rs`),
//! and (in `files/open.rs`) the single-process reader behind `spools.open`.

mod common;
mod open;

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use spools_io::file::{self, Commit, FileStats, Format, ReadOptions, WriteOptions};
use spools_io::FileError;

use crate::buffer::Access;
use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::layout::redistribute::{check_part, check_units, destination, io_comm};
use crate::layout::{layout_arg, placeholder};
use crate::runtime;
use common::{file_error, Op};

/// The outcome of a collective file call on this rank: `problem` is this rank's own
/// argument error (it took part only to fail, telling the others: the options'
/// `declined`), raised here; else the call's error, of the same class on every rank.
fn settle<T>(problem: Option<PyErr>, r: Result<T, FileError>, op: Op) -> PyResult<T> {
    match (problem, r) {
        (Some(p), _) => Err(p),
        (None, Err(e)) => Err(file_error(e, op)),
        (None, Ok(s)) => Ok(s),
    }
}

/// A `format=` argument: `"npy"`, `"canonical"`, `"raid5(unit=..,count=K)"`,
/// `"raid0(unit=..,count=K)"` (also spelt `"stripe(...)"`), `"zarr(chunk=..,...)"`.
fn format_arg(format: &str, dirs: Vec<PathBuf>, node_local: bool) -> PyResult<Format> {
    Format::parse(format, dirs, node_local).map_err(|e| errors::value_error(e.to_string()))
}

/// What a file operation did, as a dict.
fn stats_dict<'py>(py: Python<'py>, s: &FileStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes", s.bytes)?;
    d.set_item("reshuffled", s.reshuffled)?;
    d.set_item("aggregators", s.aggregators)?;
    d.set_item("rebuilt", s.rebuilt)?;
    d.set_item("version", s.version)?;
    d.set_item("sent", s.exchange.sent)?;
    d.set_item("received", s.exchange.received)?;
    d.set_item("local", s.exchange.local)?;
    Ok(d)
}

#[pymethods]
impl Comm {
    /// Writes a distributed array to the parallel file `path` and returns what the write
    /// did as a dict (`bytes`, `reshuffled`, `aggregators`, `rebuilt`, `version`, and
    /// this rank's `sent`/`received`/`local` bytes). Collective: every rank calls it with
    /// its part `a` of the dataset laid out as `layout` (rank `r` holds unit `r`; `a` a
    /// C-contiguous array of the layout's dtype with exactly `layout.local_shape(rank)`'s
    /// number of elements).
    ///
    /// `format`:
    ///   - `"npy"` (default): one `.npy` file (`numpy.load` reads it);
    ///   - `"canonical"`: one file of the raw bytes in the dataset's order;
    ///   - `"raid0(unit=64KiB,count=4)"` / `"raid5(unit=64KiB,count=4)"`: `count` unit
    ///     files striped RAID-0 or RAID-5 (with rotating parity), each block checksummed,
    ///     and a JSON manifest at `path`; unit `u` goes to `dirs[u % len(dirs)]`
    ///     (directories relative to the manifest's, or inside it; default: next to it);
    ///     `node_local=True` makes unit `u` touched only by rank `u % size`;
    ///   - `"zarr(chunk=64x64,shard=512x512,codec=zstd)"`: a Zarr v3 array (a directory;
    ///     `shard=` optional, `codec=` none (default), zstd or gzip, `level=N`) that
    ///     zarr-python opens; every chunk and shard index carries a CRC32C.
    ///
    /// A write replaces the file atomically (a failed write leaves the previous file);
    /// with `in_place=True`, a `"npy"` or `"canonical"` file is written where it is, as
    /// MPI-IO does (faster when overwriting, but a failed write leaves a mix of old and
    /// new bytes). With `sync=True` (default) the data is durable when the call returns. The GIL is
    /// released. Raises `LayoutError` for a layout with more units than ranks,
    /// `TypeError`/`ValueError` for a part of the wrong dtype or size (the other ranks
    /// raise the same class, naming that rank), `TransportError` when the file cannot be
    /// written. Every rank raises one class: the failing rank's.
    #[pyo3(signature = (path, a, layout, format = "npy", dirs = None, sync = true, node_local = false, in_place = false))]
    #[allow(clippy::too_many_arguments)]
    fn write_file<'py>(
        slf: &Bound<'py, Self>,
        path: PathBuf,
        a: &Bound<'py, PyAny>,
        layout: &Bound<'py, PyAny>,
        format: &str,
        dirs: Option<Vec<PathBuf>>,
        sync: bool,
        node_local: bool,
        in_place: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        slf.get().live_group()?;
        let me = u64::from(slf.get().comm.rank());
        let size = slf.get().comm.size();
        // A rank whose own arguments are wrong (the layout, the format, `a`) still takes
        // part, declining it, so that every rank raises its error instead of the others
        // waiting for it.
        let l = layout_arg(layout, "layout");
        let checked = l.as_ref().map_err(|e| e.clone_ref(py)).and_then(|l| {
            let fmt = format_arg(format, dirs.unwrap_or_default(), node_local)?;
            check_units(l, size, "file")?;
            let part = check_part(py, a, Access::Read, "a", l, me, "file")?;
            Ok((fmt, part))
        });
        let (fmt, part, problem) = match checked {
            Ok((fmt, part)) => (fmt, Some(part), None),
            // (A declining rank knows no format but the default one.)
            Err(e) => (Format::default(), None, Some(e)),
        };
        // A declining rank passes its own layout when it has one (what the call checks
        // before it looks at the declined part then finds nothing else wrong).
        let l = l.or_else(|_| placeholder())?;
        let comm = io_comm(py, slf)?;
        let data: &[u8] = part.as_ref().map_or(&[], |v| v.bytes());
        let opts = WriteOptions {
            format: fmt,
            sync,
            commit: if in_place {
                Commit::InPlace
            } else {
                Commit::Replace
            },
            declined: problem.as_ref().map(|p| errors::declined(py, p)),
            ..WriteOptions::default()
        };
        let r = runtime::blocking(py, || file::write(&comm, &path, data, &l, &opts));
        let s = settle(problem, r, Op::Write)?;
        stats_dict(py, &s)
    }

    /// Reads the parallel file `path` (`.npy`, canonical or striped: found by its
    /// contents) into the distribution `layout` and returns this rank's part: a new numpy
    /// array of `layout.local_shape(rank)` and the layout's dtype, or `out`, filled in
    /// place. Collective; any number of ranks and any layout of the same dataset may read
    /// a file, whatever wrote it.
    ///
    /// A RAID-5 file with one lost or damaged block per stripe row is rebuilt from parity
    /// on the fly. Raises `FileDamageError` for damage beyond repair (a failed checksum, a
    /// missing unit of a RAID-0 file, two losses in one RAID-5 row, a damaged manifest or
    /// header), `LayoutError` when the file holds another dataset (dtype, shape or size)
    /// than `layout` describes, `FileNotFoundError` for a missing file (rank 0
    /// looks first; the others raise it too, naming rank 0).
    #[pyo3(signature = (path, layout, out = None))]
    fn read_file<'py>(
        slf: &Bound<'py, Self>,
        path: PathBuf,
        layout: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        slf.get().live_group()?;
        let me = u64::from(slf.get().comm.rank());
        let size = slf.get().comm.size();
        // A rank whose own arguments are wrong (the layout, `out`) still takes part,
        // declining it.
        let l = layout_arg(layout, "layout");
        let checked = l.as_ref().map_err(|e| e.clone_ref(py)).and_then(|l| {
            check_units(l, size, "file")?;
            destination(py, out, l, me, "file")
        });
        let (dest, problem) = match checked {
            Ok(dest) => (Some(dest), None),
            Err(e) => (None, Some(e)),
        };
        // Its own layout when it has one (a read checks the file's size against it before
        // it looks at the declined part).
        let l = l.or_else(|_| placeholder())?;
        let comm = io_comm(py, slf)?;
        let data: &mut [u8] = match &dest {
            // SAFETY: a writable array (checked by `destination`) used by nothing else
            // during the call (the GIL is released but the program passed it to this
            // call); this is its only borrow.
            Some((_, v)) => unsafe { v.bytes_mut() },
            None => &mut [],
        };
        let opts = ReadOptions {
            declined: problem.as_ref().map(|p| errors::declined(py, p)),
            ..ReadOptions::default()
        };
        let r = runtime::blocking(py, || file::read(&comm, &path, data, &l, &opts));
        settle(problem, r, Op::Read)?;
        match dest {
            Some((arr, _)) => Ok(arr),
            None => Err(errors::raise(Kind::Spools, "read_file: no destination")),
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    open::register(m)
}
