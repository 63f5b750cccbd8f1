//! Streams of a distributed dataset out of the job, striped over TCP links to a
//! destination outside it (`spools recv`, `spools view`, or any program speaking the
//! stream format): one stream on a connection of its own (`spools_stream_t`), and what
//! every stream call shares (the destination's address, a failure on every rank). A
//! connection of several streams is `stream_conn.rs`, a stream into the job
//! `stream_reader.rs`, frames' style `frame.rs`.

use std::ffi::{c_char, c_void};
use std::net::{SocketAddr, ToSocketAddrs};

use spools::{Communicator, StreamFormat, StreamWriter};
use spools_map::Layout;

use crate::args::{bytes, handle, handle_mut, out, string, Handle};
use crate::declined::decline;
use crate::framebuffer::{spools_frame_style_t, style_of};
use crate::io::share;
use crate::layout::spools_layout_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::world::spools_world_t;

/// `spools_stream_params_t.field_mask` bit: `links` is set.
pub const SPOOLS_STREAM_FIELD_LINKS: u64 = 1;
/// `spools_stream_params_t.field_mask` bit: `tu` is set.
pub const SPOOLS_STREAM_FIELD_TU: u64 = 2;
/// `spools_stream_params_t.field_mask` bit: `window` is set.
pub const SPOOLS_STREAM_FIELD_WINDOW: u64 = 4;
/// `spools_stream_params_t.field_mask` bit: `priority` is set.
pub const SPOOLS_STREAM_FIELD_PRIORITY: u64 = 8;

/// The format of a stream (the iWarp paper's ADU / TU / SU): only the fields whose bit is
/// set in `field_mask` are read; the others keep their defaults (one link, TUs of 1 MiB,
/// a window of 2 ADUs, priority 0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_stream_params_t {
    /// Which fields are set (`SPOOLS_STREAM_FIELD_*` bits).
    pub field_mask: u64,
    /// TCP links to stripe over; link s is owned by rank s % size.
    pub links: u16,
    /// Bytes of a Transfer Unit: a multiple of `links` (each Striping Unit is tu / links).
    pub tu: u64,
    /// ADUs held on each link before a send waits (2 is double buffering).
    pub window: u32,
    /// Priority over the other streams on the same links (higher first).
    pub priority: u8,
}

/// A stream out of the job: every rank sends its share of each ADU (Application Data
/// Unit); the destination receives whole ADUs.
pub struct spools_stream_t {
    magic: u64,
    writer: Option<StreamWriter>,
    /// The communicator its collective calls agree on (the world's I/O communicator).
    comm: Communicator,
}

impl Handle for spools_stream_t {
    const MAGIC: u64 = 0x5350_4f4f_4c53_5452;
    const NAME: &'static str = "spools_stream_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// This rank's argument error when `len` bytes are not its share of `layout`.
pub(crate) fn share_problem(
    len: usize,
    layout: &Layout,
    rank: u32,
    what: &str,
) -> Result<Option<Failure>, Failure> {
    let want = share(layout, u64::from(rank))?;
    if len as u64 == want {
        return Ok(None);
    }
    Ok(Some(Failure::new(
        spools_status_t::SPOOLS_ERR_LAYOUT,
        format!("{what} is {len} bytes, but this rank's share of {layout} is {want} bytes"),
    )))
}

pub(crate) fn dest_addr(dest: &str) -> Result<SocketAddr, Failure> {
    let a = dest.strip_prefix("tcp:").unwrap_or(dest);
    a.to_socket_addrs()
        .map_err(|e| Failure::arg(format!("dest {dest:?} is not HOST:PORT: {e}")))?
        .next()
        .ok_or_else(|| Failure::arg(format!("dest {dest:?} names no address")))
}

/// Opens a stream to `dest` (`"HOST:PORT"` or `"tcp:HOST:PORT"`: `spools recv`, or any
/// receiver of the stream format), striped over `params->links` links; its links prove
/// the job's secret to a destination that requires it. Collective over the world.
/// `params` may be NULL (the defaults).
///
/// Thread safety: as every collective; a stream is used by one thread at a time.
///
/// ```c
/// spools_stream_params_t p = SPOOLS_STREAM_PARAMS_DEFAULT;
/// p.field_mask |= SPOOLS_STREAM_FIELD_LINKS;
/// p.links = 4;
/// spools_stream_t *s;
/// spools_stream_open(world, "127.0.0.1:7000", &p, &s);
/// spools_stream_send(s, mine, mine_len, frame_layout);   /* one ADU */
/// spools_stream_close(s);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a bad address or format: links 0 or over 1024, a TU
/// that is not a multiple of the links), `SPOOLS_ERR_TRANSPORT` (the destination
/// unreachable or refusing the job's secret); every rank gets the error.
///
/// # Safety
/// `world` is NULL or a live world; `dest` a NUL-terminated string; `params` NULL or
/// valid; `stream` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_open(
    world: *const spools_world_t,
    dest: *const c_char,
    params: *const spools_stream_params_t,
    stream: *mut *mut spools_stream_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let dest = dest_addr(unsafe { string(dest, "dest") }?)?;
        // SAFETY: the caller's contract.
        let stream = unsafe { out(stream, "stream") }?;
        let mut f = StreamFormat::default();
        if !params.is_null() {
            // SAFETY: non-NULL parameters (the caller's contract).
            let p = unsafe { &*params };
            let has = |bit: u64| p.field_mask & bit != 0;
            if has(SPOOLS_STREAM_FIELD_LINKS) {
                f.links = p.links;
            }
            if has(SPOOLS_STREAM_FIELD_TU) {
                f.tu = p.tu;
            }
            if has(SPOOLS_STREAM_FIELD_WINDOW) {
                f.window = p.window;
            }
            if has(SPOOLS_STREAM_FIELD_PRIORITY) {
                f.priority = p.priority;
            }
        }
        let comm = w.world.io_communicator()?.clone();
        let r = &comm;
        // Opening fails on every rank when it fails: every rank returns the faulty rank's
        // status.
        let writer = StreamWriter::open_proving(r, dest, f, w.world.secret())?;
        *stream = Box::into_raw(Box::new(spools_stream_t {
            magic: spools_stream_t::MAGIC,
            writer: Some(writer),
            comm,
        }));
        Ok(())
    })
}

/// Sends the next ADU: this rank's share (`len` bytes) of a dataset of `layout` (rank r
/// holds unit r); the ranks reshuffle it into the stream's distribution and send their
/// links' Striping Units. Collective over the world.
///
/// Thread safety: as every collective; a stream is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_LAYOUT` (a share of the wrong size on any rank: nothing is sent),
/// `SPOOLS_ERR_TRANSPORT` (a link lost, the receiver gone); every rank gets the error.
///
/// # Safety
/// `stream` is NULL or a live stream no other thread uses; `data` holds `len` bytes;
/// `layout` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_send(
    stream: *mut spools_stream_t,
    data: *const c_void,
    len: usize,
    layout: *const spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { handle_mut(stream) }?;
        let rank = s.comm.rank();
        let Some(wr) = s.writer.as_mut() else {
            return Err(Failure::arg("the stream is closed"));
        };
        // A rank with a bad layout handle or buffer (NULL) or a wrong share declines its
        // part: the send fails on every rank, and every rank reports this rank's status.
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes(data, len, "data") }?;
            match share_problem(len, &l.layout, rank, "data")? {
                Some(p) => Err(p),
                None => Ok((d, &l.layout)),
            }
        })();
        match checked {
            Err(p) => Err(decline(p, |why| wr.decline_send(why))),
            Ok((d, l)) => Ok(wr.send_adu(d, l)?),
        }
    })
}

/// Sends the next frame of the stream (the framebuffer protocol, which `spools view`
/// shows): this rank's share (`len` bytes) of `layout`, a 2-D image or field in C order
/// (`u8[H,W]` grey, `u8[H,W,3]` RGB, `f32[H,W]` or `f64[H,W]` through a colour map),
/// shown as `style` (NULL: the defaults). The library builds the 128-byte header (format
/// and size from the layout, frame number, time, title, colour map and range) and sends it
/// in front of the reshuffled pixels. The stream's SUs must hold the header
/// (`tu / links >= 128`). Collective over the world.
///
/// Thread safety: as every collective; a stream is used by one thread at a time.
///
/// ```c
/// spools_frame_style_t st = SPOOLS_FRAME_STYLE_DEFAULT;
/// st.field_mask = SPOOLS_FRAME_FIELD_TITLE | SPOOLS_FRAME_FIELD_HI;
/// st.title = "temperature";
/// st.hi = 100.0;
/// spools_stream_send_frame(s, &st, mine, mine_len, field_layout);  /* f64[H,W] */
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a layout that is no frame, a bad style: a field
/// without a colour map, `lo >= hi`, a side over 65536, an unknown `colormap`),
/// `SPOOLS_ERR_LAYOUT` (a share of the wrong size), `SPOOLS_ERR_TRANSPORT`; every rank
/// gets the error, and nothing is sent.
///
/// # Safety
/// `stream` is NULL or a live stream no other thread uses; `style` NULL or valid; `data`
/// holds `len` bytes; `layout` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_send_frame(
    stream: *mut spools_stream_t,
    style: *const spools_frame_style_t,
    data: *const c_void,
    len: usize,
    layout: *const spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { handle_mut(stream) }?;
        let rank = s.comm.rank();
        let Some(wr) = s.writer.as_mut() else {
            return Err(Failure::arg("the stream is closed"));
        };
        // A bad layout handle, buffer or style, or a wrong share: this rank declines.
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes(data, len, "data") }?;
            // SAFETY: the caller's contract.
            let st = unsafe { style_of(style) }?;
            match share_problem(len, &l.layout, rank, "data")? {
                Some(p) => Err(p),
                None => Ok((d, st, &l.layout)),
            }
        })();
        match checked {
            // Nothing is sent anywhere.
            Err(p) => Err(decline(p, |why| wr.decline_send(why))),
            Ok((d, st, l)) => Ok(wr.send_frame(&st, d, l)?),
        }
    })
}

/// Ends the stream (the receiver sees its end) and frees it. Collective over the
/// world. NULL does nothing.
///
/// Errors: a failure to end the stream; the handle is freed either way.
///
/// # Safety
/// `stream` is NULL or a live stream no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_close(stream: *mut spools_stream_t) -> spools_status_t {
    guard(|| {
        if stream.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(stream) }?;
        // SAFETY: a live stream made by `Box::into_raw` in `spools_stream_open`.
        let mut b = unsafe { Box::from_raw(stream) };
        b.magic = 0;
        if let Some(w) = b.writer.take() {
            w.close()?;
        }
        Ok(())
    })
}
