//! Streams out of and into the job (`spools_io::stream`): `comm.stream_open(dest, ...)`
//! -> `StreamWriter` (one ADU per `send(a, layout)`, one frame per `send_frame`),
//! `comm.stream_connect(dest, links)` -> `StreamConnection` (several streams, lock-step
//! groups, frames: `streams/connection.rs`, with `FrameStyle` in `streams/frames.rs`), and
//! `comm.stream_listen(addr)` -> `StreamReader`, an iterator of ADUs as numpy arrays of
//! the rank's share. The other end is any program speaking the stream protocol: `spools
//! recv`/`spools send`, `spools view` (frames), a `spools_stream` program, or another job.
//!
//! Both ends are collective: a rank whose own arguments are wrong (an array of the wrong
//! size or dtype) still takes its part in the call, declining it (`decline_send`,
//! `decline_recv`), so that every rank fails together, with its class and message, instead
//! of the others waiting for it.
//!
//! Ctrl-C: every wait of the Rust ends (room in a link's window, the links' last sends,
//! rank 0's wait for the next ADU, the collective steps) asks the runtime's interrupt
//! check at least every 50 ms, and the error it ends with is raised as the
//! `KeyboardInterrupt` (`errors::raise`). The end is then unusable: its later calls
//! raise an error saying so (a writer's links are abandoned, a reader stops listening).

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};
use spools_io::stream::{AduInfo, Limits, StreamFormat};
use spools_map::Layout;

use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::pipes::args;
use crate::pipes::{io_comm_of, usable};
use crate::runtime;

mod common;
mod connection;
mod frames;

use common::{recv_error, socket_addr, stream_error};

/// A stream from the job to one destination (`comm.stream_open`): each `send(a,
/// layout)` sends one ADU (Application Data Unit), of which `a` is this rank's share.
/// Collective. A context manager: leaving the `with` block closes the stream.
#[pyclass(frozen, module = "spools")]
pub(crate) struct StreamWriter {
    inner: Mutex<Option<spools_io::stream::StreamWriter>>,
    rank: u32,
    dest: SocketAddr,
}

impl StreamWriter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<spools_io::stream::StreamWriter>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open stream, without the GIL.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut spools_io::stream::StreamWriter) -> R + Send,
    ) -> PyResult<R> {
        runtime::blocking(py, || self.lock().as_mut().map(f))
            .ok_or_else(|| errors::value_error("the stream is closed"))
    }
}

#[pymethods]
impl StreamWriter {
    /// Sends one ADU: `a` is this rank's share of `layout` (a `spools.Layout` or a spec
    /// string; rank `r` holds unit `r`), C-contiguous (F-contiguous for an order=F
    /// layout), read in place; any layout of the stream's ADU size, which may change
    /// from one ADU to the next. The ADU's bytes are the dataset in the layout's order
    /// (column-major for an order=F layout, as a Fortran-order `.npy` file). Collective.
    /// Returns once the ADU is queued on the links (at most `window` ADUs per link in
    /// flight).
    fn send(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        usable("StreamWriter.send")?;
        let checked = args::layout_arg(layout, "layout").and_then(|l| {
            let v = args::check_share(py, a, &l, self.rank, "ADU share", "ADU's")?;
            Ok((l, v))
        });
        match checked {
            Ok((l, v)) => self
                .with(py, |w| w.send_adu(v.bytes(), &l))?
                .map_err(stream_error),
            Err(e) => {
                // Decline this rank's part: every rank fails the call together, with
                // this rank's class and message.
                let why = errors::declined(py, &e);
                let _ = self.with(py, |w| w.decline_send(why));
                // A Ctrl-C that ended that wait wins, as it does in every call.
                Err(crate::interrupt::take_interrupt().unwrap_or(e))
            }
        }
    }

    /// Sends one frame (the framebuffer protocol, which `spools view` shows): `a` is this
    /// rank's share of `layout`, a 2-D image or field in C order (`u8[H,W]` grey,
    /// `u8[H,W,3]` RGB, `f32[H,W]` or `f64[H,W]` through a colour map), shown as `style`
    /// (a `spools.FrameStyle`; default: no title, inferno from 0 to 1); as
    /// `StreamConnection.send_frame`. Collective. The stream's SUs must hold the 128-byte
    /// header (`tu / links >= 128`).
    #[pyo3(signature = (a, layout, style = None))]
    fn send_frame(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        layout: &Bound<'_, PyAny>,
        style: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        usable("StreamWriter.send_frame")?;
        let checked = (|| {
            let l = args::layout_arg(layout, "layout")?;
            let style = frames::style_arg(style)?;
            let v = args::check_share(py, a, &l, self.rank, "frame share", "frame's")?;
            Ok((l, style, v))
        })();
        match checked {
            Ok((l, style, v)) => self
                .with(py, |w| w.send_frame(&style, v.bytes(), &l))?
                .map_err(stream_error),
            Err(e) => {
                // Decline this rank's part: every rank fails the call together and
                // nothing is sent.
                let why = errors::declined(py, &e);
                let _ = self.with(py, |w| w.decline_send(why));
                Err(crate::interrupt::take_interrupt().unwrap_or(e))
            }
        }
    }

    /// Ends the stream and its connection (the receiver's iteration ends after the last
    /// ADU). Collective; a second call does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        usable("StreamWriter.close")?;
        runtime::blocking(py, || self.lock().take().map(|w| w.close()))
            .unwrap_or(Ok(()))
            .map_err(stream_error)
    }

    /// ADUs sent so far.
    #[getter]
    fn adus(&self, py: Python<'_>) -> u64 {
        self.with(py, |w| w.adus()).unwrap_or(0)
    }

    /// The destination, as `"HOST:PORT"`.
    #[getter]
    fn dest(&self) -> String {
        self.dest.to_string()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the stream, or abandons it when the block raised (the receiver then sees
    /// the stream cut short).
    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            runtime::blocking(py, || {
                drop(self.lock().take());
            });
        } else {
            self.close(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<spools.StreamWriter to {}>", self.dest)
    }
}

/// A stream into the job (`comm.stream_listen`): rank 0 listens at `address` for one
/// logical connection from a sender outside the job; each `recv()` receives the next ADU
/// into every rank's share of a layout (collective). Iterating yields the ADUs as numpy
/// arrays (of the listen's `layout`, else each ADU's bytes in blocks over the ranks)
/// until the sender closes. A context manager.
#[pyclass(frozen, module = "spools")]
pub(crate) struct StreamReader {
    inner: Mutex<Option<spools_io::stream::StreamReader>>,
    rank: u32,
    size: u32,
    address: SocketAddr,
    layout: Option<Layout>,
}

impl StreamReader {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<spools_io::stream::StreamReader>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open reader, without the GIL.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut spools_io::stream::StreamReader) -> R + Send,
    ) -> PyResult<R> {
        runtime::blocking(py, || self.lock().as_mut().map(f))
            .ok_or_else(|| errors::value_error("the stream reader is closed"))
    }

    /// Declines this rank's part in a receive whose arguments are wrong here (`e`): every
    /// rank fails the call together (the ADU stays the next one), with this rank's class
    /// and message. Returns `e`, or the interrupt that ended the wait (a Ctrl-C wins, as
    /// it does in every call).
    fn decline(&self, py: Python<'_>, e: PyErr) -> PyErr {
        let why = errors::declined(py, &e);
        let _ = self.with(py, |r| r.decline_recv(why));
        crate::interrupt::take_interrupt().unwrap_or(e)
    }

    /// The next ADU's description, waiting for it; `None` at the end.
    fn next_info(&self, py: Python<'_>) -> PyResult<Option<AduInfo>> {
        self.with(py, |r| r.next_adu())?.map_err(recv_error)
    }
}

fn info_dict<'py>(py: Python<'py>, i: &AduInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("stream", i.stream)?;
    d.set_item("adu", i.adu)?;
    d.set_item("size", i.size)?;
    Ok(d)
}

#[pymethods]
impl StreamReader {
    /// Where the sender connects, `"HOST:PORT"` (the same on every rank).
    #[getter]
    fn address(&self) -> String {
        self.address.to_string()
    }

    /// Waits for the next ADU and describes it without receiving it: `{"stream", "adu",
    /// "size"}` (size in bytes), or `None` once the sender closed every stream.
    /// Collective.
    fn peek<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        usable("StreamReader.peek")?;
        self.next_info(py)?.map(|i| info_dict(py, &i)).transpose()
    }

    /// Receives the next ADU: this rank's share of `layout` (default: the listen's
    /// layout, else the ADU's bytes as `u8[SIZE] block` over the ranks) as a new numpy
    /// array, or into `out` in place (returned); `None` once the sender closed every
    /// stream (for an order=F layout both are F-contiguous). Collective. Raises
    /// `LayoutError` when the layout's size is not the ADU's (the ADU stays the next
    /// one), `PeerGoneError` when the sender went away mid-stream.
    #[pyo3(signature = (layout = None, out = None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        layout: Option<&Bound<'py, PyAny>>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        usable("StreamReader.recv")?;
        let l = match (layout, &self.layout) {
            (Some(l), _) => match args::layout_arg(l, "layout") {
                Ok(l) => l,
                // Declined as a wrong `out` is (below).
                Err(e) => return Err(self.decline(py, e)),
            },
            (None, Some(l)) => l.clone(),
            (None, None) => {
                let Some(info) = self.next_info(py)? else {
                    return Ok(None);
                };
                if info.size == 0 {
                    // No layout holds 0 bytes: taken by skipping it.
                    self.with(py, |r| r.skip_adu())?.map_err(recv_error)?;
                    let (a, _) = args::share_array(py, out, &zero_layout()?, self.rank, "ADU's")?;
                    return Ok(Some(a));
                }
                format!("u8[{}] block on {}", info.size, self.size)
                    .parse::<Layout>()
                    .map_err(|e| errors::raise(Kind::Layout, e.to_string()))?
            }
        };
        match args::share_array(py, out, &l, self.rank, "ADU's") {
            Ok((a, v)) => {
                let got = self
                    .with(py, |r| {
                        // SAFETY: `v` is this call's only view of the array.
                        r.recv_adu(unsafe { v.bytes_mut() }, &l)
                    })?
                    .map_err(recv_error)?;
                Ok(got.map(|_| a))
            }
            Err(e) => Err(self.decline(py, e)),
        }
    }

    /// Passes over the next ADU without receiving it (an ADU of 0 bytes, which no
    /// layout holds, is taken so); its description, or `None` at the end. Collective.
    fn skip<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        usable("StreamReader.skip")?;
        let i = self.with(py, |r| r.skip_adu())?.map_err(recv_error)?;
        i.map(|i| info_dict(py, &i)).transpose()
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.recv(py, None, None)
    }

    /// Stops listening (a sender still sending then sees its links closed). A second
    /// call does nothing.
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

    /// The default layout of `recv` and of the iteration (its spec), if one was given.
    #[getter]
    fn layout(&self) -> Option<String> {
        self.layout.as_ref().map(|l| l.to_string())
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
        format!("<spools.StreamReader at {}>", self.address)
    }
}

/// A layout of no bytes, for an empty ADU's array.
fn zero_layout() -> PyResult<Layout> {
    "u8[0] block on 1"
        .parse::<Layout>()
        .map_err(|e| errors::raise(Kind::Layout, e.to_string()))
}

#[pymethods]
impl Comm {
    /// Opens a stream from this communicator's ranks to `dest` (`"tcp:HOST:PORT"` or
    /// `"HOST:PORT"`: `spools recv`, another job's `stream_listen`, any receiver of the
    /// stream protocol), striped over `links` TCP links (link `s` owned by rank `s %
    /// size`), cut into Transfer Units of `tu` bytes (a multiple of `links`), with at
    /// most `window` ADUs in flight per link, and `priority` over other streams.
    /// Collective. Returns a `StreamWriter`: `with world.stream_open("tcp:host:5000",
    /// links=2) as s: s.send(a, layout)`.
    #[pyo3(signature = (dest, links = 1, tu = 1 << 20, window = 2, priority = 0))]
    fn stream_open(
        slf: &Bound<'_, Self>,
        dest: &str,
        links: u16,
        tu: u64,
        window: u32,
        priority: u8,
    ) -> PyResult<StreamWriter> {
        usable("stream_open")?;
        let py = slf.py();
        let addr = socket_addr(dest, "dest")?;
        let comm = io_comm_of(py, Some(slf))?;
        let rank = comm.rank();
        let format = StreamFormat {
            links,
            tu,
            window,
            priority,
        };
        let secret = runtime::get()?.secret.clone();
        let t = runtime::blocking(py, || {
            spools_io::stream::StreamWriter::open_proving(&comm, addr, format, &secret).map(Some)
        })
        .map_err(stream_error)?;
        Ok(StreamWriter {
            inner: Mutex::new(t),
            rank,
            dest: addr,
        })
    }

    /// Listens at `address` (`"HOST:PORT"` or `"tcp:HOST:PORT"`; port 0: any free port,
    /// see the reader's `address`) on rank 0 for one stream connection into the job
    /// (from `spools send`, another job's `stream_open`, ...). `layout` is the default
    /// layout ADUs are received into. Collective. Returns a `StreamReader`: `for a in
    /// world.stream_listen("127.0.0.1:0", layout): ...`.
    #[pyo3(signature = (address = "127.0.0.1:0", layout = None))]
    fn stream_listen(
        slf: &Bound<'_, Self>,
        address: &str,
        layout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StreamReader> {
        usable("stream_listen")?;
        let py = slf.py();
        let addr = socket_addr(address, "address")?;
        let layout = layout.map(|l| args::layout_arg(l, "layout")).transpose()?;
        let comm = io_comm_of(py, Some(slf))?;
        let (rank, size) = (comm.rank(), comm.size());
        let mut t = runtime::blocking(py, || {
            spools_io::stream::StreamReader::listen(&comm, addr, Limits::default()).map(Some)
        })
        .map_err(recv_error)?;
        let address = t.as_mut().map_or(addr, |r| r.local_addr());
        Ok(StreamReader {
            inner: Mutex::new(t),
            rank,
            size,
            address,
            layout,
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StreamWriter>()?;
    m.add_class::<StreamReader>()?;
    m.add_class::<connection::StreamConnection>()?;
    frames::register(m)
}
