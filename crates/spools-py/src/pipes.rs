//! Parallel pipes between two separately launched programs (`spools_io::pipe`):
//! `PipeWriter`/`PipeReader` (also `comm.pipe_writer`/`comm.pipe_reader`), context
//! managers, the reader an iterator of records (numpy arrays of the rank's share).
//!
//! Names are the Rust API's: `pipe:NAME` (meeting files in `SPOOLS_PIPE_DIR`),
//! `tcp:HOST:PORT`, `stdout`/`stdin` (the canonical byte stream, for a consumer that is
//! not a Spools program); no name takes the one the launcher chose (`SPOOLS_PIPE_OUT`,
//! `SPOOLS_PIPE_IN`, as `PipeName::output_from_env`/`input_from_env`).
//!
//! Ctrl-C: the waits of the Rust ends (records, connections, room in the sockets,
//! standard input and output, the collective steps; not yet rank 0's meeting with the
//! other program, bounded by `SPOOLS_PIPE_TIMEOUT`) ask the runtime's interrupt check at
//! least every 50 ms, and the error one ends with is raised as the `KeyboardInterrupt`
//! (`errors::raise`). A read or write interrupted so leaves its end stopped (its
//! connections closed, the other program sees it gone): later calls raise
//! `TransportError` saying so.

pub(crate) mod args;

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyModule;
use spools::Communicator;
use spools_io::pipe::PipeName;
use spools_io::PipeError;
use spools_map::Layout;

use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::runtime;
use crate::world::World;

/// A pipe error as its exception, by its kind (`PipeError::kind`).
fn pipe_error(e: PipeError) -> PyErr {
    let wrapped = match &e {
        PipeError::Msg(m) => Some(m),
        PipeError::Exchange(x) => errors::exchange_msg(x),
        _ => None,
    };
    let msg = match std::error::Error::source(&e) {
        Some(s) if matches!(e, PipeError::Io { .. }) => format!("{e}: {s}"),
        _ => e.to_string(),
    };
    errors::from_io(e.kind(), wrapped, msg)
}

/// The communicator a pipe or stream runs on: the communicator's I/O duplicate (made by
/// its first collective I/O call), so that its collectives never meet the program's
/// messages; the world's by default.
pub(crate) fn io_comm_of(py: Python<'_>, comm: Option<&Bound<'_, Comm>>) -> PyResult<Communicator> {
    match comm {
        Some(c) => c.get().io_comm(py, c.is_instance_of::<World>()),
        None => runtime::get()?.io_comm(py),
    }
}

/// The check every pipe and stream call makes first: the runtime is live (else
/// `FinalizedError`) and the call is not made from an RPC function.
///
/// # Errors
/// `FinalizedError` after `finalize()`/`abort()`, `InitError` before `init()`, and
/// `refuse_in_rpc`'s `RuntimeError`.
pub(crate) fn usable(what: &str) -> PyResult<()> {
    runtime::check_live()?;
    crate::reentry::refuse_in_rpc(what)
}

/// A pipe name argument; `None` takes the launcher's choice from the environment.
fn pipe_name(name: Option<&str>, output: bool) -> PyResult<PipeName> {
    let n = match name {
        Some(s) => s.parse(),
        None if output => PipeName::output_from_env(),
        None => PipeName::input_from_env(),
    };
    n.map_err(pipe_error)
}

/// A layout for a pipe: sized.
fn pipe_layout(layout: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let l = args::layout_arg(layout, "layout")?;
    if l.total_bytes().is_none() {
        return Err(errors::raise(
            Kind::Layout,
            format!("a pipe's records need a sized layout (size=SIZE), got {l}"),
        ));
    }
    Ok(l)
}

/// Takes this rank's part in the opening of a pipe end (a writer's when `output`) that the
/// other ranks make, only to fail it, because this rank's own arguments are wrong (`e`);
/// returns `e` (or the interrupt that ended the wait). The opening's first agreement then
/// fails on every rank before any meeting: here with `e`, on the others with `e`'s class
/// and message, naming this rank. Nothing waits for this rank.
fn decline_open(py: Python<'_>, comm: &Communicator, e: PyErr, output: bool) -> PyErr {
    let why = errors::declined(py, &e);
    runtime::blocking(py, || {
        if output {
            spools_io::pipe::PipeWriter::open_declined(comm, why)
        } else {
            spools_io::pipe::PipeReader::open_declined(comm, why)
        }
    });
    crate::interrupt::take_interrupt().unwrap_or(e)
}

/// The producer's end of a parallel pipe: each `write(a)` sends one record, of which
/// `a` is this rank's share of `layout` (rank `r` holds unit `r`). Opening is collective
/// over the communicator (the world by default) and waits (up to `SPOOLS_PIPE_TIMEOUT`,
/// 60 s) for the consumer program. A context manager: leaving the `with` block closes
/// the pipe (the consumer's iteration then ends); leaving it by an exception abandons
/// the pipe (the consumer gets `PeerGoneError`).
///
/// `name`: `"pipe:NAME"`, `"tcp:HOST:PORT"`, `"stdout"`, or `None` for the launcher's
/// choice (`SPOOLS_PIPE_OUT`, else `stdout`).
#[pyclass(frozen, module = "spools")]
pub(crate) struct PipeWriter {
    inner: Mutex<Option<spools_io::pipe::PipeWriter>>,
    layout: Layout,
    name: String,
    rank: u32,
}

impl PipeWriter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<spools_io::pipe::PipeWriter>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn open(
        py: Python<'_>,
        comm: Communicator,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<PipeWriter> {
        let (l, n) = match pipe_layout(layout).and_then(|l| Ok((l, pipe_name(name, true)?))) {
            Ok(v) => v,
            Err(e) => return Err(decline_open(py, &comm, e, true)),
        };
        let rank = comm.rank();
        let t = runtime::blocking(py, || {
            spools_io::pipe::PipeWriter::open(&comm, &n, &l).map(Some)
        })
        .map_err(pipe_error)?;
        Ok(PipeWriter {
            inner: Mutex::new(t),
            layout: l,
            name: n.to_string(),
            rank,
        })
    }

    fn closed() -> PyErr {
        errors::value_error("the pipe is closed")
    }
}

#[pymethods]
impl PipeWriter {
    #[new]
    #[pyo3(signature = (name, layout, comm = None))]
    fn py_new(
        py: Python<'_>,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
        comm: Option<&Bound<'_, Comm>>,
    ) -> PyResult<PipeWriter> {
        usable("PipeWriter()")?;
        let c = io_comm_of(py, comm)?;
        PipeWriter::open(py, c, name, layout)
    }

    /// Sends one record: `a` is this rank's share of the layout (its local shape, or any
    /// shape of that many elements, of the layout's dtype; C-contiguous, F-contiguous
    /// for an order=F layout; read in place). Returns when the consumer ranks have taken it into their socket buffers.
    fn write(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<()> {
        usable("PipeWriter.write")?;
        // A wrong share on this rank fails the record on every rank (nothing is sent).
        let checked = args::check_share(py, a, &self.layout, self.rank, "record", "pipe's");
        let why = checked.as_ref().err().map(|e| errors::declined(py, e));
        let r = runtime::blocking(py, || {
            let mut g = self.lock();
            match (g.as_mut(), &checked, why) {
                (Some(w), _, Some(why)) => Ok(Err(w.decline_write(why))),
                (Some(w), Ok(v), None) => Ok(w.write(v.bytes())),
                _ => Err(()),
            }
        });
        // This rank's own argument error wins.
        checked?;
        r.map_err(|()| Self::closed())?.map_err(pipe_error)
    }

    /// Ends the stream of records: the consumer's iteration ends after the last one.
    /// Waits until the consumer has closed its end. Collective; a second call does
    /// nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        usable("PipeWriter.close")?;
        runtime::blocking(py, || self.lock().take().map(|w| w.close()))
            .unwrap_or(Ok(()))
            .map_err(pipe_error)
    }

    /// Records written so far.
    #[getter]
    fn records(&self, py: Python<'_>) -> u64 {
        runtime::blocking(py, || self.lock().as_mut().map_or(0, |w| w.records()))
    }

    /// The layout (its spec string).
    #[getter]
    fn layout(&self) -> String {
        self.layout.to_string()
    }

    /// The pipe's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the pipe, or abandons it when the block raised.
    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            // Dropping the connections without the end mark: the consumer sees the
            // producer gone instead of a clean end.
            runtime::blocking(py, || {
                drop(self.lock().take());
            });
        } else {
            self.close(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<spools.PipeWriter {} {}>", self.name, self.layout)
    }
}

/// The consumer's end of a parallel pipe: each `read()` returns the next record's share
/// of this rank (a new numpy array of its local shape and the layout's dtype, or `out`
/// filled in place), `None` once the producer closed the pipe. Iterating over it yields
/// the records. Opening is collective over the communicator (the world by default) and
/// waits (up to `SPOOLS_PIPE_TIMEOUT`, 60 s) for the producer. A context manager.
///
/// `name`: `"pipe:NAME"`, `"tcp:HOST:PORT"`, `"stdin"`, or `None` for the launcher's
/// choice (`SPOOLS_PIPE_IN`, else `stdin`).
#[pyclass(frozen, module = "spools")]
pub(crate) struct PipeReader {
    inner: Mutex<Option<spools_io::pipe::PipeReader>>,
    layout: Layout,
    name: String,
    rank: u32,
}

impl PipeReader {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<spools_io::pipe::PipeReader>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn open(
        py: Python<'_>,
        comm: Communicator,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<PipeReader> {
        let (l, n) = match pipe_layout(layout).and_then(|l| Ok((l, pipe_name(name, false)?))) {
            Ok(v) => v,
            Err(e) => return Err(decline_open(py, &comm, e, false)),
        };
        let rank = comm.rank();
        let t = runtime::blocking(py, || {
            spools_io::pipe::PipeReader::open(&comm, &n, &l).map(Some)
        })
        .map_err(pipe_error)?;
        Ok(PipeReader {
            inner: Mutex::new(t),
            layout: l,
            name: n.to_string(),
            rank,
        })
    }
}

#[pymethods]
impl PipeReader {
    #[new]
    #[pyo3(signature = (name, layout, comm = None))]
    fn py_new(
        py: Python<'_>,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
        comm: Option<&Bound<'_, Comm>>,
    ) -> PyResult<PipeReader> {
        usable("PipeReader()")?;
        let c = io_comm_of(py, comm)?;
        PipeReader::open(py, c, name, layout)
    }

    /// The next record: this rank's share as a new numpy array (or `out`, filled in
    /// place and returned); `None` at the end of the stream (the producer closed the
    /// pipe). For an order=F layout both are F-contiguous. Raises `PeerGoneError` when
    /// a producer rank went away before closing it.
    #[pyo3(signature = (out = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        usable("PipeReader.read")?;
        // A wrong buffer on this rank fails the read on every rank (nothing is taken).
        let (a, v, why) = match args::share_array(py, out, &self.layout, self.rank, "pipe's") {
            Ok((a, v)) => (Some(a), Some(v), None),
            Err(e) => (None, None, Some(e)),
        };
        let cause = why.as_ref().map(|e| errors::declined(py, e));
        let more = runtime::blocking(py, || {
            let mut g = self.lock();
            match (g.as_mut(), &v, cause) {
                (Some(r), _, Some(why)) => Err(r.decline_read(why)),
                // SAFETY: `v` is this call's only view of the array, written only here.
                (Some(r), Some(v), None) => r.read(unsafe { v.bytes_mut() }),
                _ => Ok(false),
            }
        });
        if let Some(e) = why {
            return Err(e);
        }
        let more = more.map_err(pipe_error)?;
        Ok(if more { a } else { None })
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.read(py, None)
    }

    /// Closes this end (after the last record, or early: the producer then gets
    /// `PeerGoneError`). A second call does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        runtime::check_live()?;
        if crate::reentry::in_rpc() {
            return Ok(());
        }
        runtime::blocking(py, || {
            drop(self.lock().take());
        });
        Ok(())
    }

    /// Records read so far.
    #[getter]
    fn records(&self, py: Python<'_>) -> u64 {
        runtime::blocking(py, || self.lock().as_mut().map_or(0, |r| r.records()))
    }

    /// The layout (its spec string).
    #[getter]
    fn layout(&self) -> String {
        self.layout.to_string()
    }

    /// The pipe's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<spools.PipeReader {} {}>", self.name, self.layout)
    }
}

#[pymethods]
impl Comm {
    /// Opens the producer's end of a parallel pipe on this communicator (collective):
    /// `with world.pipe_writer("pipe:frames", "f64[512,512] block,* on 4x1") as w:
    /// w.write(a)`. See `PipeWriter`.
    #[pyo3(signature = (name, layout))]
    fn pipe_writer(
        slf: &Bound<'_, Self>,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<PipeWriter> {
        usable("pipe_writer")?;
        let py = slf.py();
        let c = io_comm_of(py, Some(slf))?;
        PipeWriter::open(py, c, name, layout)
    }

    /// Opens the consumer's end of a parallel pipe on this communicator (collective):
    /// `for rec in world.pipe_reader("pipe:frames", "f64[512,512] *,cyclic on 1x3"): ...`.
    /// See `PipeReader`.
    #[pyo3(signature = (name, layout))]
    fn pipe_reader(
        slf: &Bound<'_, Self>,
        name: Option<&str>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<PipeReader> {
        usable("pipe_reader")?;
        let py = slf.py();
        let c = io_comm_of(py, Some(slf))?;
        PipeReader::open(py, c, name, layout)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PipeWriter>()?;
    m.add_class::<PipeReader>()?;
    Ok(())
}
