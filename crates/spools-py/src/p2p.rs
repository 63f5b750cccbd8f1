//! Point-to-point messaging: `Comm.Send/Recv/Isend/Irecv/Sendrecv` on buffers and
//! `Comm.send/recv/isend/sendrecv` on picklable objects (mpi4py's convention: capitalised
//! names take buffers, lower-case ones objects), `probe/iprobe` (also `Probe/Iprobe`),
//! `Request`, `Status`, `wait_all`, `wait_any`. Buffers are used in place: blocking calls
//! read or write the argument's memory directly, non-blocking ones post it to the engine
//! (`isend_pinned`, `irecv_pinned`), which keeps the array alive until it is done with it.
//! The object forms pickle in `spools._p2p` and move the pickle with the buffer calls.

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyModule};
use spools_msg::{PinnedBuf, Source, Tag};

use crate::buffer::{self, Access, View};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

/// What a completed receive (or send) reports: mpi4py's `Status`.
#[pyclass(frozen, module = "spools", name = "Status")]
#[derive(Clone)]
pub(crate) struct PyStatus {
    /// The sender (for a send: this rank).
    #[pyo3(get)]
    source: u32,
    /// The message's tag.
    #[pyo3(get)]
    tag: i32,
    /// Bytes received (for a send: bytes sent).
    #[pyo3(get)]
    count: usize,
    /// Whether the receive was cancelled before a message matched it.
    #[pyo3(get)]
    cancelled: bool,
}

impl From<spools_msg::Status> for PyStatus {
    fn from(s: spools_msg::Status) -> PyStatus {
        PyStatus {
            source: s.source,
            tag: s.tag,
            count: s.len,
            cancelled: s.cancelled,
        }
    }
}

/// `numpy.dtype`, looked up once.
fn np_dtype(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static DTYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    DTYPE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("numpy")?.getattr("dtype")?.unbind())
        })
        .map(|f| f.bind(py))
}

#[pymethods]
impl PyStatus {
    /// Number of elements of `dtype` received (`count` divided by the item size).
    /// Raises `ValueError` when the message is not a whole number of them.
    fn get_count(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<usize> {
        let d = np_dtype(py)?.call1((dtype,))?;
        let size: usize = d.getattr("itemsize")?.extract()?;
        if size == 0 {
            return Err(errors::value_error(format!(
                "get_count: dtype {d} has no size"
            )));
        }
        if self.count % size != 0 {
            return Err(errors::value_error(format!(
                "get_count: the message has {} bytes, not a whole number of {d} \
                 elements ({size} bytes each)",
                self.count
            )));
        }
        Ok(self.count / size)
    }

    fn __repr__(&self) -> String {
        format!(
            "Status(source={}, tag={}, count={}{})",
            self.source,
            self.tag,
            self.count,
            if self.cancelled {
                ", cancelled=True"
            } else {
                ""
            }
        )
    }
}

/// Arrays the engine let go of while the calling thread may hold the GIL (and the
/// engine's lock): released at the next call that holds the GIL outside the engine.
static RELEASED: Mutex<Vec<Py<PyAny>>> = Mutex::new(Vec::new());

/// Releases the arrays the engine let go of (with the GIL, outside the engine's lock).
pub(crate) fn release_arrays() {
    let dead = std::mem::take(&mut *RELEASED.lock().unwrap_or_else(PoisonError::into_inner));
    drop(dead);
}

/// A numpy array's memory posted to the engine for a non-blocking call. Its drop
/// (on any thread, maybe under the engine's lock, maybe with the GIL held) only parks
/// the array in [`RELEASED`]: dropping the last reference there could run Python code
/// (a buffer exporter's finaliser) inside the engine's lock.
struct Posted {
    view: Option<View>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `View` is Send (see its impl); the pointer is into the view's array.
unsafe impl Send for Posted {}

// SAFETY: the memory is the array's, which the view keeps alive (a numpy array's data
// does not move while it lives); it was checked writable for a receive; the program
// must not touch it while the request is pending (MPI's rule, in the docstrings).
unsafe impl PinnedBuf for Posted {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Posted {
    fn new(view: View) -> Posted {
        Posted {
            ptr: view.as_mut_ptr(),
            len: view.len(),
            view: Some(view),
        }
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        if let Some(v) = self.view.take() {
            let arr = v.array.into_any();
            RELEASED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(arr);
        }
    }
}

/// A non-blocking send or receive in flight (`Isend`, `Irecv`, or `isend` of an object).
/// `wait()` returns its `Status` (`None` for an object's `isend`, as in mpi4py); `test()`
/// says whether it is complete; `cancel()` cancels a receive no message has matched. The
/// buffer belongs to the operation until it completes: do not read (Irecv) or change
/// (Isend) it before. A request dropped unfinished lets the operation finish in the
/// background (an unmatched receive is cancelled); the array stays alive until then.
#[pyclass(frozen, module = "spools", name = "Request")]
pub(crate) struct PyRequest {
    inner: Mutex<Option<spools_msg::Request>>,
    status: Mutex<Option<PyStatus>>,
    /// The operation's error, once a wait raised it (later waits raise it again).
    failed: Mutex<Option<(errors::Kind, String)>>,
    kind: &'static str,
    /// An object's `isend`: `wait()` returns `None` (mpi4py's), not the `Status`.
    object: bool,
}

impl PyRequest {
    fn new(r: spools_msg::Request, kind: &'static str) -> PyRequest {
        PyRequest {
            inner: Mutex::new(Some(r)),
            status: Mutex::new(None),
            failed: Mutex::new(None),
            kind,
            object: false,
        }
    }

    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Option<spools_msg::Request>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn done_status(&self) -> Option<PyStatus> {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits (without the GIL: called inside `runtime::blocking`). The request stays
    /// pending if the wait itself fails (an interrupt); the operation's own error (a
    /// truncation) finishes it.
    fn wait_nogil(&self) -> Result<PyStatus, WaitError> {
        let mut g = self.lock_inner();
        let Some(r) = g.as_mut() else {
            if let Some(f) = self
                .failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
            {
                return Err(WaitError::Failed(f.0, f.1));
            }
            return Ok(self.done_status().unwrap_or(PyStatus {
                source: 0,
                tag: 0,
                count: 0,
                cancelled: true,
            }));
        };
        let res = r.wait_in_place();
        match res {
            Err(e) if is_wait_failure(&e) => Err(WaitError::Msg(e)),
            Err(e) => {
                *g = None;
                *self.failed.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((errors::msg_kind(&e), e.to_string()));
                Err(WaitError::Msg(e))
            }
            Ok(c) => {
                *g = None;
                let st: PyStatus = c.status.into();
                *self.status.lock().unwrap_or_else(PoisonError::into_inner) = Some(st.clone());
                Ok(st)
            }
        }
    }
}

/// Why a wait failed: the operation's error (raised again by later waits), or the wait's.
enum WaitError {
    /// The error of this wait.
    Msg(spools_msg::MsgError),
    /// The operation failed at an earlier wait (its exception's kind and message).
    Failed(errors::Kind, String),
}

impl WaitError {
    /// Whether the wait ended before the operation (an interrupt): it is still pending.
    fn interrupted(&self) -> bool {
        matches!(self, WaitError::Msg(e) if is_wait_failure(e))
    }

    /// The exception (with the GIL).
    fn into_py(self) -> PyErr {
        match self {
            WaitError::Msg(e) => errors::from_msg(e),
            WaitError::Failed(k, m) => errors::raise(k, m),
        }
    }
}

impl Drop for PyRequest {
    fn drop(&mut self) {
        // The operation goes on in the background (or is cancelled) and its array is
        // released once the engine is done; arrays already let go of are released now
        // (a request is dropped by Python's deallocation, with the GIL).
        let inner = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        drop(inner.take());
        release_arrays();
    }
}

/// Whether an error ended the wait rather than the operation (the request is still
/// pending): an interrupt.
fn is_wait_failure(e: &spools_msg::MsgError) -> bool {
    matches!(e, spools_msg::MsgError::Am(spools::AmError::Interrupted))
}

#[pymethods]
impl PyRequest {
    /// Waits until the operation completes and returns its `Status` (again the same
    /// one on later calls; `None` for an object's `isend`, whose `status` still has
    /// it). Releases the GIL; Ctrl-C raises `KeyboardInterrupt` (the request stays
    /// pending). Raises `TruncatedError` for a message longer than the receive buffer,
    /// `PeerGoneError` when the peer died.
    fn wait(&self, py: Python<'_>) -> PyResult<Option<PyStatus>> {
        // Inside an RPC function only a request already complete may be waited.
        if self
            .inner
            .try_lock()
            .map_or(true, |g| g.as_ref().is_some_and(|r| !r.is_complete()))
        {
            crate::reentry::refuse_in_rpc("Request.wait")?;
        }
        if self.inner.try_lock().map_or(true, |g| g.is_some()) {
            runtime::check_live()?;
        }
        let r = runtime::blocking(py, || self.wait_nogil());
        release_arrays();
        let st = r.map_err(WaitError::into_py)?;
        Ok((!self.object).then_some(st))
    }

    /// Whether the operation is complete (drives progress once; never waits). After
    /// `True`, `status` is set and `wait()` returns at once.
    fn test(&self, py: Python<'_>) -> PyResult<bool> {
        let complete = {
            runtime::check_live()?;
            // Another thread waiting for this request holds the lock (without the
            // GIL, which its interrupt check may need): not complete yet, as far as
            // this call can tell, rather than block with the GIL held.
            let Ok(mut g) = self.inner.try_lock() else {
                return Ok(false);
            };
            match g.as_mut() {
                None => return Ok(true),
                Some(r) => r.test().map_err(errors::from_msg)?,
            }
        };
        if complete {
            // Complete: the wait returns at once (its error, a truncation, is raised).
            self.wait(py)?;
        }
        Ok(complete)
    }

    /// Cancels a receive no message has matched yet: `True` if it was cancelled (its
    /// status then says `cancelled`). Sends cannot be cancelled (`False`).
    fn cancel(&self) -> bool {
        // As in `test`: never block with the GIL held on a thread that waits.
        self.inner
            .try_lock()
            .is_ok_and(|g| g.as_ref().is_some_and(|r| r.cancel()))
    }

    /// The `Status` once the operation completed (`wait` or a `test` that said
    /// `True`), else `None`.
    #[getter]
    fn status(&self) -> Option<PyStatus> {
        self.done_status()
    }

    fn __repr__(&self) -> String {
        let state = match self.inner.try_lock() {
            Ok(g) if g.is_none() => "complete",
            _ => "pending",
        };
        format!("<spools.Request {} {state}>", self.kind)
    }
}

/// Polls of a blocking receive with the GIL held before it releases the GIL to wait.
const GIL_POLLS: u32 = 32;

/// A tag argument of a send (0 to 2**31 - 1).
fn send_tag(tag: i64) -> PyResult<i32> {
    match i32::try_from(tag) {
        Ok(t) if t >= 0 => Ok(t),
        _ => Err(errors::value_error(format!(
            "tag must be 0 to {} for a send, got {tag}",
            i32::MAX
        ))),
    }
}

/// A tag argument of a receive or probe (ANY_TAG = -1, or 0 to 2**31 - 1).
fn recv_tag(tag: i64) -> PyResult<Tag> {
    if tag == -1 {
        return Ok(Tag::Any);
    }
    match i32::try_from(tag) {
        Ok(t) if t >= 0 => Ok(Tag::Is(t)),
        _ => Err(errors::value_error(format!(
            "tag must be ANY_TAG (-1) or 0 to {}, got {tag}",
            i32::MAX
        ))),
    }
}

impl Comm {
    /// A source argument (ANY_SOURCE = -1, or a rank).
    fn source(&self, source: i64) -> PyResult<Source> {
        if source == -1 {
            return Ok(Source::Any);
        }
        self.check_rank(source, "source").map(Source::Rank)
    }

    /// The body of `Isend` (and of an object's `isend`, whose request's `wait()` gives
    /// `None`: `object`).
    fn start_isend(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
        object: bool,
    ) -> PyResult<PyRequest> {
        self.live()?;
        release_arrays();
        let dest = self.check_rank(dest, "dest")?;
        let tag = send_tag(tag)?;
        let v = buffer::view(buf, Access::Read, "send buffer")?;
        let posted = Posted::new(v);
        // An eager isend may wait for ring room like `Send`: without the GIL once
        // Python code may run inside progress (see `Send`).
        let r = if runtime::python_in_progress() {
            runtime::blocking(py, || self.comm.isend_pinned(posted, dest, tag))
        } else {
            self.comm.isend_pinned(posted, dest, tag)
        }
        .map_err(errors::from_msg)?;
        let mut req = PyRequest::new(r, if object { "isend" } else { "Isend" });
        req.object = object;
        Ok(req)
    }
}

#[pymethods]
impl Comm {
    /// Sends the memory of `buf` (any C-contiguous buffer: numpy array, bytearray,
    /// memoryview, bytes) to rank `dest` with `tag`, without a copy through Python;
    /// returns when `buf` may be reused.
    #[pyo3(name = "Send", signature = (buf, dest, tag = 0))]
    fn send(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, dest: i64, tag: i64) -> PyResult<()> {
        self.live()?;
        let dest = self.check_rank(dest, "dest")?;
        let tag = send_tag(tag)?;
        let m = buffer::mem(buf, Access::Read, "send buffer")?;
        let data = m.bytes();
        let r = if data.len() <= self.rt.eager_limit && !runtime::python_in_progress() {
            // No GIL release for a short or eager send while no Python code can run
            // inside progress: it hands the message to the transport and returns. The
            // only wait in it is for room in a full ring to `dest`, during which this
            // thread serves its own incoming traffic when it gets the progress lock
            // (spools-am's send_raw). Another thread holding that lock (the progress
            // thread, a waiting thread) runs no Python code then, so it never waits
            // for the GIL this thread keeps. Once an RPC function or a Python reduction
            // operator exists, that thread may run it and need the GIL: then every send
            // releases it (the `else` branch).
            self.comm.send(data, dest, tag)
        } else {
            runtime::blocking(py, || self.comm.send(data, dest, tag))
        };
        r.map_err(errors::from_msg)
    }

    /// Receives a message from `source` with `tag` (`ANY_SOURCE`, `ANY_TAG` by
    /// default) into `buf` in place (a writable C-contiguous buffer); returns its
    /// `Status` (`count` is in bytes). Raises `TruncatedError` when the message is
    /// longer than `buf` (nothing past its end is written).
    #[pyo3(name = "Recv", signature = (buf, source = -1, tag = -1))]
    fn recv(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i64,
        tag: i64,
    ) -> PyResult<PyStatus> {
        self.live()?;
        let src = self.source(source)?;
        let tag = recv_tag(tag)?;
        let m = buffer::mem(buf, Access::Write, "receive buffer")?;
        // SAFETY: made with Access::Write; this call is its only user.
        let b = unsafe { m.bytes_mut() };
        // SAFETY: `p` is never leaked: every path below waits it or drops it (an
        // early return by `?` drops it, which removes the receive).
        let p = unsafe { self.comm.start_recv(b, src, tag) }.map_err(errors::from_msg)?;
        // A message that is there, or comes within a few polls, is taken with the GIL
        // held: releasing and taking it back costs more than such a wait. The polls
        // wait for no thread of this process (progress is done here), and the GIL is
        // kept a few microseconds at most, far below Python's own switch interval
        // (5 ms). Ranks that outnumber the CPUs do not poll: the sender may need this
        // CPU.
        let polls = if self.rt.worker.oversubscribed() {
            0
        } else {
            GIL_POLLS
        };
        for _ in 0..polls {
            if p.poll().map_err(errors::from_msg)? {
                return p.wait().map(PyStatus::from).map_err(errors::from_msg);
            }
        }
        let r = runtime::blocking(py, move || p.wait());
        r.map(PyStatus::from).map_err(errors::from_msg)
    }

    /// Starts sending `buf` to `dest` with `tag` and returns a `Request`. The memory
    /// is read in place (no copy) and must not change until the request completes; the
    /// array is kept alive until then.
    #[pyo3(name = "Isend", signature = (buf, dest, tag = 0))]
    fn isend(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<PyRequest> {
        self.start_isend(py, buf, dest, tag, false)
    }

    /// Starts receiving into `buf` (a writable C-contiguous buffer) from `source` with
    /// `tag` and returns a `Request` whose `wait()` gives the `Status`. The message is
    /// written into `buf` in place; do not read it before the request completes.
    #[pyo3(name = "Irecv", signature = (buf, source = -1, tag = -1))]
    fn irecv(&self, buf: &Bound<'_, PyAny>, source: i64, tag: i64) -> PyResult<PyRequest> {
        self.live()?;
        release_arrays();
        let src = self.source(source)?;
        let tag = recv_tag(tag)?;
        let v = buffer::view(buf, Access::Write, "receive buffer")?;
        let r = self
            .comm
            .irecv_pinned(Posted::new(v), src, tag)
            .map_err(errors::from_msg)?;
        Ok(PyRequest::new(r, "Irecv"))
    }

    /// Sends `sendbuf` to `dest` and receives into `recvbuf` from `source` at the same
    /// time (no deadlock when two ranks exchange); returns the receive's `Status`.
    #[pyo3(name = "Sendrecv", signature = (sendbuf, dest, recvbuf, source = -1, sendtag = 0, recvtag = -1))]
    #[allow(clippy::too_many_arguments)]
    fn sendrecv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        dest: i64,
        recvbuf: &Bound<'_, PyAny>,
        source: i64,
        sendtag: i64,
        recvtag: i64,
    ) -> PyResult<PyStatus> {
        self.live()?;
        let dest = self.check_rank(dest, "dest")?;
        let st = send_tag(sendtag)?;
        let src = self.source(source)?;
        let rt = recv_tag(recvtag)?;
        let s = buffer::mem(sendbuf, Access::Read, "send buffer")?;
        let r = buffer::mem(recvbuf, Access::Write, "receive buffer")?;
        let (sb, rb) = (s.bytes().as_ptr_range(), r.bytes().as_ptr_range());
        if !s.bytes().is_empty() && !r.bytes().is_empty() && sb.start < rb.end && rb.start < sb.end
        {
            return Err(errors::value_error(
                "Sendrecv: the send and receive buffers overlap; give two distinct buffers",
            ));
        }
        let out = runtime::blocking(py, || {
            // SAFETY: made with Access::Write; this call is its only user. The send
            // buffer may be the same memory only if the program breaks MPI's rule.
            let b = unsafe { r.bytes_mut() };
            self.comm.sendrecv(s.bytes(), dest, st, b, src, rt)
        });
        out.map(PyStatus::from).map_err(errors::from_msg)
    }

    /// Waits until a message from `source` with `tag` can be received and returns its
    /// `Status` (the message stays queued: a `Recv` then takes it).
    #[pyo3(signature = (source = -1, tag = -1))]
    fn probe(&self, py: Python<'_>, source: i64, tag: i64) -> PyResult<PyStatus> {
        self.live()?;
        let src = self.source(source)?;
        let tag = recv_tag(tag)?;
        let r = runtime::blocking(py, || self.comm.probe(src, tag));
        r.map(PyStatus::from).map_err(errors::from_msg)
    }

    /// As `probe`, without waiting: the `Status` of a matching message that arrived,
    /// else `None`.
    #[pyo3(signature = (source = -1, tag = -1))]
    fn iprobe(&self, source: i64, tag: i64) -> PyResult<Option<PyStatus>> {
        self.live()?;
        let src = self.source(source)?;
        let tag = recv_tag(tag)?;
        let r = self.comm.iprobe(src, tag);
        r.map(|s| s.map(PyStatus::from)).map_err(errors::from_msg)
    }

    /// `probe` (mpi4py has both spellings).
    #[pyo3(name = "Probe", signature = (source = -1, tag = -1))]
    fn probe_cap(&self, py: Python<'_>, source: i64, tag: i64) -> PyResult<PyStatus> {
        self.probe(py, source, tag)
    }

    /// `iprobe` (mpi4py has both spellings).
    #[pyo3(name = "Iprobe", signature = (source = -1, tag = -1))]
    fn iprobe_cap(&self, source: i64, tag: i64) -> PyResult<Option<PyStatus>> {
        self.iprobe(source, tag)
    }

    /// Sends a picklable object to `dest` with `tag` (pickle protocol 5: numpy arrays
    /// and other buffers inside it travel out of band, without a copy). Receive it
    /// with `recv`. Like `Send`, it returns once the data left: a large object
    /// (an out-of-band buffer above the eager limit, 32 KiB by default) waits for the
    /// receiver, so a rank cannot send one to itself (`isend` can).
    #[pyo3(name = "send", signature = (obj, dest, tag = 0))]
    fn send_obj(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<()> {
        let py = slf.py();
        py.import("spools._p2p")?
            .getattr("_send_obj")?
            .call1((slf, obj, dest, tag))?;
        Ok(())
    }

    /// Receives an object sent with `send`, `isend` or `sendrecv` from `source` with
    /// `tag` (any by default) and returns it.
    #[pyo3(name = "recv", signature = (source = -1, tag = -1))]
    fn recv_obj(slf: &Bound<'_, Self>, source: i64, tag: i64) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        Ok(py
            .import("spools._p2p")?
            .getattr("_recv_obj")?
            .call1((slf, source, tag))?
            .unbind())
    }

    /// Starts sending a picklable object to `dest` with `tag` and returns a `Request`
    /// whose `wait()` returns `None` (as mpi4py's). The object is pickled when the call
    /// starts, in band (one message: arrays inside it are copied into the pickle), so it
    /// may change at once; receive it with `recv`.
    #[pyo3(name = "isend", signature = (obj, dest, tag = 0))]
    fn isend_obj(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<PyRequest> {
        let py = slf.py();
        let data = py
            .import("spools._p2p")?
            .getattr("_pickle_in_band")?
            .call1((obj,))?;
        slf.get().start_isend(py, &data, dest, tag, true)
    }

    /// Sends a picklable object to `dest` with `sendtag` and receives one from `source`
    /// with `recvtag` (any by default), which it returns. The send is an `isend`, so two
    /// ranks exchanging objects of any size cannot deadlock.
    #[pyo3(name = "sendrecv", signature = (obj, dest, sendtag = 0, source = -1, recvtag = -1))]
    fn sendrecv_obj(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        sendtag: i64,
        source: i64,
        recvtag: i64,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        Ok(py
            .import("spools._p2p")?
            .getattr("_sendrecv_obj")?
            .call1((slf, obj, dest, sendtag, source, recvtag))?
            .unbind())
    }
}

/// The requests of a list argument.
fn requests<'py>(reqs: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyRequest>>> {
    let mut out = Vec::new();
    for r in reqs.try_iter()? {
        let r = r?;
        let req = r.cast_into::<PyRequest>().map_err(|e| {
            errors::type_error(format!(
                "wait_all/wait_any take spools.Request objects, got {}",
                buffer::type_name(&e.into_inner())
            ))
        })?;
        out.push(req);
    }
    Ok(out)
}

/// Waits for every request of `requests` (the GIL released) and returns their
/// `Status` objects in the same order. The first error is raised once every request
/// that could complete has (Ctrl-C stops at once, leaving the rest pending).
#[pyfunction]
fn wait_all(py: Python<'_>, requests: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
    crate::reentry::refuse_in_rpc("wait_all")?;
    runtime::check_live()?;
    let reqs = self::requests(requests)?;
    let refs: Vec<Py<PyRequest>> = reqs.iter().map(|r| r.clone().unbind()).collect();
    let out = runtime::blocking(py, || {
        let mut sts = Vec::with_capacity(refs.len());
        let mut first = None;
        for r in &refs {
            match r.get().wait_nogil() {
                Ok(s) => sts.push(Some(s)),
                Err(e) if e.interrupted() => return Err(e),
                Err(e) => {
                    sts.push(None);
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(sts),
        }
    });
    release_arrays();
    let sts = out.map_err(WaitError::into_py)?;
    let items = sts
        .into_iter()
        .map(|s| {
            Py::new(
                py,
                s.unwrap_or(PyStatus {
                    source: 0,
                    tag: 0,
                    count: 0,
                    cancelled: true,
                }),
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

/// Whether a request is still pending, as far as a look that never blocks can tell: a
/// request another thread is waiting for (its lock taken) counts as pending.
fn looks_pending(r: &PyRequest) -> bool {
    r.inner.try_lock().map_or(true, |g| g.is_some())
}

/// Whether a request that was pending is now done: complete, or finished (by another
/// thread's wait). Never blocks: a request another thread waits for is not done until
/// that wait returns.
fn looks_done(r: &PyRequest) -> bool {
    r.inner
        .try_lock()
        .is_ok_and(|g| g.as_ref().is_none_or(spools_msg::Request::is_complete))
}

/// Waits until one of the pending requests of `requests` completes (the GIL released)
/// and returns `(index, Status)`. Requests already complete when it is called are
/// skipped; one that another thread's `wait()` finishes meanwhile counts (its status,
/// or its error raised). `ValueError` when none is pending.
#[pyfunction]
fn wait_any(py: Python<'_>, requests: &Bound<'_, PyAny>) -> PyResult<(usize, PyStatus)> {
    crate::reentry::refuse_in_rpc("wait_any")?;
    let reqs = self::requests(requests)?;
    let refs: Vec<Py<PyRequest>> = reqs.iter().map(|r| r.clone().unbind()).collect();
    // Never a blocking lock with the GIL held: another thread's wait holds a request's
    // lock without the GIL, and its interrupt check needs the GIL.
    let pending: Vec<bool> = refs.iter().map(|r| looks_pending(r.get())).collect();
    if !pending.contains(&true) {
        return Err(errors::value_error(
            "wait_any needs at least one pending request; got none",
        ));
    }
    runtime::check_live()?;
    let rt = runtime::get()?;
    // Requests of jobs joined after MPI_Init (a spawn's) complete by their own job's
    // progress, which the runtime's worker does not drive.
    let mut others: Vec<spools::Worker> = Vec::new();
    for r in refs
        .iter()
        .zip(&pending)
        .filter(|(_, &p)| p)
        .map(|(r, _)| r)
    {
        if let Ok(g) = r.get().inner.try_lock() {
            if let Some(w) = g.as_ref().map(|q| q.worker().clone()) {
                if !w.same(&rt.worker) && !others.iter().any(|o| o.same(&w)) {
                    others.push(w);
                }
            }
        }
    }
    let res = runtime::blocking(py, || {
        let mut hit = None;
        let mut found = || {
            hit = refs
                .iter()
                .zip(&pending)
                .position(|(r, &p)| p && looks_done(r.get()));
            hit.is_some()
        };
        if others.is_empty() {
            rt.worker
                .wait_for(found)
                .map_err(|e| WaitError::Msg(e.into()))?;
        } else {
            // Every job's progress in turn, until one request is done; a failed job
            // (a dead rank) or Ctrl-C ends the wait as a single job's would.
            let mut idle = 0u32;
            while !found() {
                let mut moved = rt.worker.progress().map_err(|e| WaitError::Msg(e.into()))?;
                for w in &others {
                    moved += w.progress().map_err(|e| WaitError::Msg(e.into()))?;
                }
                if moved > 0 {
                    idle = 0;
                } else {
                    idle = idle.saturating_add(1);
                    if idle > 1000 {
                        if crate::interrupt::interrupt_check() {
                            return Err(WaitError::Msg(spools::AmError::Interrupted.into()));
                        }
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
        let i = hit.unwrap_or(0);
        // A finished request gives its stored status or error at once.
        let st = refs.get(i).map(|r| r.get().wait_nogil()).transpose()?;
        Ok::<_, WaitError>((i, st))
    });
    release_arrays();
    match res.map_err(WaitError::into_py)? {
        (i, Some(st)) => Ok((i, st)),
        (_, None) => Err(errors::value_error("wait_any: no request completed")),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStatus>()?;
    m.add_class::<PyRequest>()?;
    m.add_function(wrap_pyfunction!(wait_all, m)?)?;
    m.add_function(wrap_pyfunction!(wait_any, m)?)?;
    Ok(())
}
