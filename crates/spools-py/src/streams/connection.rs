//! A connection of several streams out of the job (`spools_io::stream::StreamConnection`):
//! `comm.stream_connect(dest, links)` -> `StreamConnection`, whose streams are opened
//! with `open_stream(...)` (sequenced `after` another, in lock-step `group`s, with a
//! priority and a window) and named by their ids, and which sends ADUs (`send`, `send_var`
//! for a stream of varying size), the ADUs
//! of a lock-step group (`send_group`) and frames of the framebuffer protocol
//! (`send_frame`, `send_frames`: the header is built by `spools_io`).
//!
//! Every call is collective. A rank whose own arguments are wrong (an array of the wrong
//! size or dtype) still takes its part, declining it (`decline_send`): the call then fails
//! on every rank with the argument's class and message (naming this rank on the others)
//! and nothing of it is sent.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use spools::{FrameStyle, StreamId, StreamOptions};
use spools_map::Layout;

use super::common::{socket_addr, stream_error};
use super::frames::style_arg;
use crate::buffer::View;
use crate::comm::Comm;
use crate::errors;
use crate::pipes::args;
use crate::pipes::{io_comm_of, usable};
use crate::runtime;

type Conn = spools_io::stream::StreamConnection;

/// A connection of several streams from the job to one destination
/// (`comm.stream_connect`), striped over `links` TCP links. Streams are opened with
/// `open_stream` and named by the ids it returns (1, 2, ... in the order opened). Every
/// method is collective. A context manager: leaving the `with` block closes every stream
/// and the connection (or abandons it when the block raised).
#[pyclass(frozen, module = "spools")]
pub(crate) struct StreamConnection {
    inner: Mutex<Option<Conn>>,
    rank: u32,
    links: u16,
    dest: SocketAddr,
}

/// One item of `send_group` / `send_frames`: a stream, this rank's share (checked) and
/// its layout, and a frame's style.
struct Item {
    id: StreamId,
    share: PyResult<View>,
    layout: Layout,
    style: FrameStyle,
}

impl StreamConnection {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Conn>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open connection, without the GIL.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Conn) -> R + Send) -> PyResult<R> {
        runtime::blocking(py, || self.lock().as_mut().map(f))
            .ok_or_else(|| errors::value_error("the stream connection is closed"))
    }

    /// Declines this rank's part in a send whose arguments are wrong here (`e`): the send
    /// fails on every rank with `e`'s class and message, and nothing is sent. Returns
    /// `e`, or the interrupt that ended the wait.
    fn decline(&self, py: Python<'_>, e: PyErr) -> PyErr {
        let why = errors::declined(py, &e);
        let _ = self.with(py, |c| c.decline_send(why));
        crate::interrupt::take_interrupt().unwrap_or(e)
    }

    /// The items of `send_group` (`(stream, a, layout)`) or `send_frames` (also
    /// `(stream, a, layout, style)`), each share checked against its layout.
    fn items(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        frames: bool,
        what: &str,
    ) -> PyResult<Vec<Item>> {
        let form = if frames {
            "(stream, a, layout) or (stream, a, layout, style)"
        } else {
            "(stream, a, layout)"
        };
        let bad = |got: String| {
            errors::type_error(format!(
                "{what}: each item must be a tuple {form}, got {got}"
            ))
        };
        let mut out = Vec::new();
        for it in items.try_iter().map_err(|_| {
            errors::type_error(format!(
                "{what}: items must be a sequence of {form}, got {}",
                crate::buffer::type_name(items)
            ))
        })? {
            let it = it?;
            let parts: Vec<Bound<'_, PyAny>> = it
                .try_iter()
                .and_then(|i| i.collect())
                .map_err(|_| bad(crate::buffer::type_name(&it)))?;
            let n = parts.len();
            if !(n == 3 || (frames && n == 4)) {
                return Err(bad(format!("a tuple of {n}")));
            }
            let id: u32 = parts[0].extract().map_err(|_| {
                errors::type_error(format!(
                    "{what}: a stream id is an int from open_stream, got {}",
                    crate::buffer::type_name(&parts[0])
                ))
            })?;
            let layout = args::layout_arg(&parts[2], "layout")?;
            let style = style_arg(parts.get(3))?;
            let share = args::check_share(py, &parts[1], &layout, self.rank, "ADU share", "ADU's");
            out.push(Item {
                id: StreamId::new(id),
                share,
                layout,
                style,
            });
        }
        Ok(out)
    }

    /// The shares of `items`, or the first one's error.
    fn shares(items: &mut [Item]) -> PyResult<Vec<View>> {
        let mut views = Vec::with_capacity(items.len());
        for i in items.iter_mut() {
            views.push(std::mem::replace(
                &mut i.share,
                Err(errors::value_error("")),
            )?);
        }
        Ok(views)
    }
}

#[pymethods]
impl StreamConnection {
    /// Opens a stream on the connection and returns its id (1, 2, ... in the order
    /// opened): Transfer Units of `tu` bytes (a multiple of the links, unless
    /// `variable`), lock-step `group` (0: none), sequenced `after` the stream of that id
    /// (the receiver hands out none of its ADUs before that one ended), `priority` over
    /// the other streams (higher first), at most `window` ADUs per link in flight.
    /// Collective, without communication.
    #[pyo3(signature = (tu = 1 << 20, group = 0, after = None, priority = 0, window = 2,
                        variable = false))]
    #[allow(clippy::too_many_arguments)] // the options of `StreamOptions`, as keywords
    fn open_stream(
        &self,
        py: Python<'_>,
        tu: u64,
        group: u32,
        after: Option<u32>,
        priority: u8,
        window: u32,
        variable: bool,
    ) -> PyResult<u32> {
        usable("StreamConnection.open_stream")?;
        let opts = StreamOptions {
            tu,
            group,
            after: after.map(StreamId::new),
            priority,
            window,
            variable,
        };
        self.with(py, |c| c.open_stream(opts))?
            .map(StreamId::get)
            .map_err(stream_error)
    }

    /// Sends the next ADU of `stream`: `a` is this rank's share of `layout` (a
    /// `spools.Layout` or a spec string; C-contiguous, F-contiguous for an order=F
    /// layout), read in place. Collective; returns once the ADU is queued on the links.
    fn send(
        &self,
        py: Python<'_>,
        stream: u32,
        a: &Bound<'_, PyAny>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        usable("StreamConnection.send")?;
        let checked = args::layout_arg(layout, "layout").and_then(|l| {
            let v = args::check_share(py, a, &l, self.rank, "ADU share", "ADU's")?;
            Ok((l, v))
        });
        match checked {
            Ok((l, v)) => self
                .with(py, |c| c.send_adu(StreamId::new(stream), v.bytes(), &l))?
                .map_err(stream_error),
            Err(e) => Err(self.decline(py, e)),
        }
    }

    /// Sends the next ADU of `stream`, opened `variable`: the ADU is every rank's bytes of
    /// `a` (a C-contiguous numpy array or any buffer, possibly empty), in rank order. The
    /// sizes are agreed first; on the wire the ADU is one TU. Collective.
    fn send_var(&self, py: Python<'_>, stream: u32, a: &Bound<'_, PyAny>) -> PyResult<()> {
        usable("StreamConnection.send_var")?;
        match crate::buffer::view(a, crate::buffer::Access::Read, "ADU part") {
            Ok(v) => self
                .with(py, |c| c.send_var(StreamId::new(stream), v.bytes()))?
                .map_err(stream_error),
            Err(e) => Err(self.decline(py, e)),
        }
    }

    /// Sends ADU n of every open stream of lock-step `group`: `items` is a sequence of
    /// `(stream, a, layout)`, naming each open stream of the group once. Collective.
    /// Raises `InvalidArgumentError` when `items` is not exactly the group's open streams.
    fn send_group(&self, py: Python<'_>, group: u32, items: &Bound<'_, PyAny>) -> PyResult<()> {
        usable("StreamConnection.send_group")?;
        // Items that are not tuples of the right form (a bad stream id, layout or style)
        // are declined as a wrong share is.
        let mut items = match self.items(py, items, false, "send_group") {
            Ok(i) => i,
            Err(e) => return Err(self.decline(py, e)),
        };
        let views = match Self::shares(&mut items) {
            Ok(v) => v,
            Err(e) => return Err(self.decline(py, e)),
        };
        let refs: Vec<(StreamId, &[u8], &Layout)> = items
            .iter()
            .zip(&views)
            .map(|(i, v)| (i.id, v.bytes(), &i.layout))
            .collect();
        self.with(py, |c| c.send_group(group, &refs))?
            .map_err(stream_error)
    }

    /// Sends the next frame of `stream` (the framebuffer protocol, which `spools view`
    /// shows): `a` is this rank's share of `layout`, a 2-D image or field in C order
    /// (`u8[H,W]` grey, `u8[H,W,3]` RGB, `f32[H,W]` or `f64[H,W]` through a colour map),
    /// shown as `style` (a `spools.FrameStyle`; default: no title, inferno from 0 to 1).
    /// The header (format, size, frame number, time, group, title, colour map and range)
    /// is built from the layout and the stream. Collective. Raises `ValueError` for a
    /// layout that is no frame or a bad style (`lo >= hi`, ...), on every rank.
    #[pyo3(signature = (stream, a, layout, style = None))]
    fn send_frame(
        &self,
        py: Python<'_>,
        stream: u32,
        a: &Bound<'_, PyAny>,
        layout: &Bound<'_, PyAny>,
        style: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        usable("StreamConnection.send_frame")?;
        let checked = (|| {
            let l = args::layout_arg(layout, "layout")?;
            let style = style_arg(style)?;
            let v = args::check_share(py, a, &l, self.rank, "frame share", "frame's")?;
            Ok((l, style, v))
        })();
        match checked {
            Ok((l, style, v)) => self
                .with(py, |c| {
                    c.send_frame(StreamId::new(stream), &style, v.bytes(), &l)
                })?
                .map_err(stream_error),
            Err(e) => Err(self.decline(py, e)),
        }
    }

    /// Sends frame n of every open stream of lock-step `group`, which a viewer shows
    /// together: `items` is a sequence of `(stream, a, layout)` or `(stream, a, layout,
    /// style)`. Collective. Raises `InvalidArgumentError` when `items` is not exactly the
    /// group's open streams.
    fn send_frames(&self, py: Python<'_>, group: u32, items: &Bound<'_, PyAny>) -> PyResult<()> {
        usable("StreamConnection.send_frames")?;
        // Items that are not tuples of the right form (a bad stream id, layout or style)
        // are declined as a wrong share is.
        let mut items = match self.items(py, items, true, "send_frames") {
            Ok(i) => i,
            Err(e) => return Err(self.decline(py, e)),
        };
        let views = match Self::shares(&mut items) {
            Ok(v) => v,
            Err(e) => return Err(self.decline(py, e)),
        };
        let refs: Vec<(StreamId, &FrameStyle, &[u8], &Layout)> = items
            .iter()
            .zip(&views)
            .map(|(i, v)| (i.id, &i.style, v.bytes(), &i.layout))
            .collect();
        self.with(py, |c| c.send_frames(group, &refs))?
            .map_err(stream_error)
    }

    /// Ends `stream` (the receiver sees its end after its last ADU). Collective.
    fn close_stream(&self, py: Python<'_>, stream: u32) -> PyResult<()> {
        usable("StreamConnection.close_stream")?;
        self.with(py, |c| c.close_stream(StreamId::new(stream)))?
            .map_err(stream_error)
    }

    /// ADUs (frames) `stream` has sent (0 for a stream that is not open).
    fn adus(&self, py: Python<'_>, stream: u32) -> u64 {
        self.with(py, |c| c.adus(StreamId::new(stream)))
            .unwrap_or(0)
    }

    /// Ends every open stream and the connection. Collective; a second call does
    /// nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        usable("StreamConnection.close")?;
        runtime::blocking(py, || self.lock().take().map(|c| c.close()))
            .unwrap_or(Ok(()))
            .map_err(stream_error)
    }

    /// Links of the connection.
    #[getter]
    fn links(&self) -> u16 {
        self.links
    }

    /// The destination, as `"HOST:PORT"`.
    #[getter]
    fn dest(&self) -> String {
        self.dest.to_string()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the connection, or abandons it when the block raised (the receiver then
    /// sees its open streams cut short).
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
        format!(
            "<spools.StreamConnection to {} over {} link(s)>",
            self.dest, self.links
        )
    }
}

#[pymethods]
impl Comm {
    /// Opens a connection from this communicator's ranks to `dest` (`"tcp:HOST:PORT"` or
    /// `"HOST:PORT"`: `spools view`, `spools recv`, another job's `stream_listen`), for
    /// several streams, striped over `links` TCP links (link `s` owned by rank `s %
    /// size`); its links prove the job's secret to a destination that requires it.
    /// Collective. Returns a `StreamConnection`: `with world.stream_connect(dest, links=2)
    /// as c: s = c.open_stream(); c.send_frame(s, a, layout)`.
    #[pyo3(signature = (dest, links = 1))]
    fn stream_connect(slf: &Bound<'_, Self>, dest: &str, links: u16) -> PyResult<StreamConnection> {
        usable("stream_connect")?;
        let py = slf.py();
        let addr = socket_addr(dest, "dest")?;
        let comm = io_comm_of(py, Some(slf))?;
        let rank = comm.rank();
        let secret = runtime::get()?.secret.clone();
        let t = runtime::blocking(py, || {
            spools_io::stream::StreamConnection::open_proving(&comm, addr, links, &secret).map(Some)
        })
        .map_err(stream_error)?;
        Ok(StreamConnection {
            inner: Mutex::new(t),
            rank,
            links,
            dest: addr,
        })
    }
}
