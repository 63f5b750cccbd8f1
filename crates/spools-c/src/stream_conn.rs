//! A connection of several streams out of the job (`spools_io::stream::StreamConnection`):
//! streams opened with `spools_stream_options_t` (lock-step group, sequencing, priority,
//! window, TU, variable-size ADUs) and named by their ids; ADUs, lock-step groups' ADUs,
//! frames and groups' frames sent on it.
//!
//! Every call is collective. A rank whose own arguments are wrong (a share of the wrong
//! size, a NULL data pointer, a bad style) declines its part (`decline_send`): the call
//! fails on every rank, nothing is sent, and every rank returns this rank's status and
//! message.

use std::ffi::{c_char, c_void};

use spools::{Communicator, FrameStyle, StreamConnection, StreamId, StreamOptions};
use spools_map::Layout;

use crate::args::{bytes, handle, handle_mut, out, string, Handle};
use crate::declined::decline;
use crate::framebuffer::{spools_frame_style_t, style_of};
use crate::layout::spools_layout_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::stream::{dest_addr, share_problem};
use crate::world::spools_world_t;

/// `spools_stream_options_t.field_mask` bit: `tu` is set.
pub const SPOOLS_STREAM_OPTION_TU: u64 = 1;
/// `spools_stream_options_t.field_mask` bit: `group` is set.
pub const SPOOLS_STREAM_OPTION_GROUP: u64 = 2;
/// `spools_stream_options_t.field_mask` bit: `after` is set.
pub const SPOOLS_STREAM_OPTION_AFTER: u64 = 4;
/// `spools_stream_options_t.field_mask` bit: `priority` is set.
pub const SPOOLS_STREAM_OPTION_PRIORITY: u64 = 8;
/// `spools_stream_options_t.field_mask` bit: `window` is set.
pub const SPOOLS_STREAM_OPTION_WINDOW: u64 = 16;
/// `spools_stream_options_t.field_mask` bit: `variable` is set.
pub const SPOOLS_STREAM_OPTION_VARIABLE: u64 = 32;

/// How a stream of a connection is sent: only the fields whose bit is set in
/// `field_mask` are read; the others keep their defaults (TUs of 1 MiB, no group, not
/// sequenced, priority 0, a window of 2 ADUs, ADUs of a fixed size).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_stream_options_t {
    /// Which fields are set (`SPOOLS_STREAM_OPTION_*` bits).
    pub field_mask: u64,
    /// Bytes of a Transfer Unit: a multiple of the connection's links (unless
    /// `variable`); frames need SUs of at least 128 bytes (`tu / links`).
    pub tu: u64,
    /// Its lock-step group (0: none): no stream of a group sends ADU n+1 before every
    /// open stream of the group has sent ADU n, and the receiver hands ADU n of the group
    /// out together (a viewer shows the group's frames together).
    pub group: u32,
    /// The id of the stream it is sequenced after: the receiver hands out none of its
    /// ADUs before that stream has ended.
    pub after: u32,
    /// Priority over the other streams on the same links (higher first).
    pub priority: u8,
    /// ADUs the stream holds on each link before a send waits (2 is double buffering).
    pub window: u32,
    /// Non-zero: ADUs of varying size (`spools_stream_conn_send_var()`), each one TU.
    pub variable: i32,
}

/// One ADU of `spools_stream_conn_send_group()`: this rank's share (`len` bytes at
/// `data`) of `layout`, for stream `stream`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_stream_item_t {
    /// The stream's id.
    pub stream: u32,
    /// This rank's share.
    pub data: *const c_void,
    /// Bytes of the share.
    pub len: usize,
    /// The ADU's layout.
    pub layout: *const spools_layout_t,
}

/// One frame of `spools_stream_conn_send_frames()`: this rank's share (`len` bytes at
/// `data`) of `layout` (a 2-D image or field), shown as `style` (NULL: the defaults),
/// for stream `stream`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_frame_item_t {
    /// The stream's id.
    pub stream: u32,
    /// How the frame is shown; NULL for the defaults.
    pub style: *const spools_frame_style_t,
    /// This rank's share.
    pub data: *const c_void,
    /// Bytes of the share.
    pub len: usize,
    /// The frame's layout.
    pub layout: *const spools_layout_t,
}

/// A connection of several streams from the job to one destination: K links (link s owned
/// by rank s % size), any number of streams on them, told apart by their ids.
pub struct spools_stream_conn_t {
    magic: u64,
    conn: Option<StreamConnection>,
    /// The communicator its collective calls agree on (the world's I/O communicator).
    comm: Communicator,
}

impl Handle for spools_stream_conn_t {
    const MAGIC: u64 = 0x5350_4f4f_4c53_434e;
    const NAME: &'static str = "spools_stream_conn_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

impl spools_stream_conn_t {
    /// The open connection and its communicator.
    fn open(&mut self) -> Result<(&mut StreamConnection, &Communicator), Failure> {
        match self.conn.as_mut() {
            Some(c) => Ok((c, &self.comm)),
            None => Err(Failure::arg("the stream connection is closed")),
        }
    }
}

/// Opens a connection to `dest` (`"HOST:PORT"` or `"tcp:HOST:PORT"`: `spools view`,
/// `spools recv`, or any receiver of the stream format) of `links` TCP links, for several
/// streams (`spools_stream_conn_open_stream()`); its links prove the job's secret to a
/// destination that requires it. Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// ```c
/// spools_stream_conn_t *c;
/// spools_stream_connect(world, "127.0.0.1:7000", 2, &c);
/// spools_stream_options_t o = SPOOLS_STREAM_OPTIONS_DEFAULT;
/// o.field_mask = SPOOLS_STREAM_OPTION_GROUP;
/// o.group = 1;                                   /* a stereo pair in lock step */
/// uint32_t left, right;
/// spools_stream_conn_open_stream(c, &o, &left);
/// spools_stream_conn_open_stream(c, &o, &right);
/// spools_frame_item_t pair[2] = {
///     { left, NULL, l_mine, l_len, eye_layout },
///     { right, NULL, r_mine, r_len, eye_layout },
/// };
/// spools_stream_conn_send_frames(c, 1, pair, 2);   /* frame n of both */
/// spools_stream_conn_close(c);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a bad address, 0 or over 1024 links),
/// `SPOOLS_ERR_TRANSPORT` (the destination unreachable or refusing the job's secret);
/// every rank gets the error.
///
/// # Safety
/// `world` is NULL or a live world; `dest` a NUL-terminated string; `conn` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_connect(
    world: *const spools_world_t,
    dest: *const c_char,
    links: u16,
    conn: *mut *mut spools_stream_conn_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let dest = dest_addr(unsafe { string(dest, "dest") }?)?;
        // SAFETY: the caller's contract.
        let conn = unsafe { out(conn, "conn") }?;
        let comm = w.world.io_communicator()?.clone();
        let r = &comm;
        let c = StreamConnection::open_proving(r, dest, links, w.world.secret())
            .map_err(Failure::from)?;
        *conn = Box::into_raw(Box::new(spools_stream_conn_t {
            magic: spools_stream_conn_t::MAGIC,
            conn: Some(c),
            comm,
        }));
        Ok(())
    })
}

/// Opens a stream on the connection with `opts` (NULL: the defaults) and gives its id
/// (1, 2, ... in the order opened). Its `open` frame goes on the links with its first
/// ADU. Collective over the world, without communication.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a TU of 0, not a multiple of the links unless
/// `variable`, or of SUs over 64 MiB; a window of 0; `after` naming no stream opened on
/// this connection); the same on every rank.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `opts` NULL or valid; `id`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_open_stream(
    conn: *mut spools_stream_conn_t,
    opts: *const spools_stream_options_t,
    id: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle_mut(conn) }?;
        // SAFETY: the caller's contract.
        let id = unsafe { out(id, "id") }?;
        let mut o = StreamOptions::default();
        if !opts.is_null() {
            // SAFETY: non-NULL options (the caller's contract).
            let p = unsafe { &*opts };
            let has = |bit: u64| p.field_mask & bit != 0;
            if has(SPOOLS_STREAM_OPTION_TU) {
                o.tu = p.tu;
            }
            if has(SPOOLS_STREAM_OPTION_GROUP) {
                o.group = p.group;
            }
            if has(SPOOLS_STREAM_OPTION_AFTER) {
                o.after = Some(StreamId::new(p.after));
            }
            if has(SPOOLS_STREAM_OPTION_PRIORITY) {
                o.priority = p.priority;
            }
            if has(SPOOLS_STREAM_OPTION_WINDOW) {
                o.window = p.window;
            }
            if has(SPOOLS_STREAM_OPTION_VARIABLE) {
                o.variable = p.variable != 0;
            }
        }
        let (c, _) = c.open()?;
        *id = c.open_stream(o)?.get();
        Ok(())
    })
}

/// Sends the next ADU of stream `stream`: this rank's share (`len` bytes) of `layout`.
/// Returns once the ADU is reshuffled and queued on the links. Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_LAYOUT` (a share of the wrong size, a layout of another size than
/// the stream's ADUs), `SPOOLS_ERR_INVALID_ARG` (no such stream open; a stream of a
/// lock-step group running ahead of it), `SPOOLS_ERR_TRANSPORT` (a link lost, the
/// receiver gone); every rank gets the error.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `data` holds `len` bytes;
/// `layout` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_send(
    conn: *mut spools_stream_conn_t,
    stream: u32,
    data: *const c_void,
    len: usize,
    layout: *const spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        let (c, comm) = h.open()?;
        let rank = comm.rank();
        // A bad layout handle or buffer (NULL), or a wrong share: this rank declines.
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes(data, len, "data") }?;
            match share_problem(len, &l.layout, rank, "data")? {
                None => Ok((d, &l.layout)),
                Some(p) => Err(p),
            }
        })();
        match checked {
            Ok((d, l)) => c
                .send_adu(StreamId::new(stream), d, l)
                .map_err(Failure::from),
            Err(p) => Err(decline(p, |why| c.decline_send(why))),
        }
    })
}

/// Sends the next ADU of stream `stream`, opened `variable`: the ADU is every rank's
/// `len` bytes at `data`, in rank order (any rank may give 0 bytes). The sizes are agreed
/// first; on the wire the ADU is one TU. Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a stream not opened `variable`, no such stream, an
/// ADU whose SUs would exceed 64 MiB), `SPOOLS_ERR_TRANSPORT`; every rank gets the error.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `data` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_send_var(
    conn: *mut spools_stream_conn_t,
    stream: u32,
    data: *const c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        // SAFETY: the caller's contract.
        let d = unsafe { bytes(data, len, "data") };
        let (c, _) = h.open()?;
        match d {
            Ok(d) => c.send_var(StreamId::new(stream), d).map_err(Failure::from),
            Err(p) => Err(decline(p, |why| c.decline_send(why))),
        }
    })
}

/// An ADU of a group send: stream, this rank's share, layout.
type GroupItem<'a> = (StreamId, &'a [u8], &'a Layout);

/// A frame of a group send: stream, style, this rank's share, layout.
type FrameItem<'a> = (StreamId, FrameStyle, &'a [u8], &'a Layout);

/// The ADUs of `count` items as Rust sees them, or this rank's first argument error.
///
/// # Safety
/// `items` is NULL or points to `count` valid items, whose pointers are valid (or NULL).
unsafe fn group_items<'a>(
    items: *const spools_stream_item_t,
    count: usize,
    rank: u32,
) -> Result<Vec<GroupItem<'a>>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if items.is_null() {
        return Err(Failure::arg(format!(
            "items is NULL with a count of {count}"
        )));
    }
    // SAFETY: `count` valid items (the caller's contract).
    let items = unsafe { std::slice::from_raw_parts(items, count) };
    let mut v = Vec::with_capacity(count);
    for (k, i) in items.iter().enumerate() {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(i.layout) }?;
        // SAFETY: the caller's contract.
        let d = unsafe { bytes(i.data, i.len, "items[].data") }?;
        if let Some(p) = share_problem(i.len, &l.layout, rank, &format!("items[{k}].data"))? {
            return Err(p);
        }
        v.push((StreamId::new(i.stream), d, &l.layout));
    }
    Ok(v)
}

/// Sends ADU n of every open stream of lock-step group `group`: `count` items, each a
/// stream of the group, once, with this rank's share of its ADU. The group stays in step
/// by construction. Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (the items are not exactly the open streams of the
/// group, group 0), then as `spools_stream_conn_send()`; every rank gets the error.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `items` NULL or `count`
/// valid items, each `data` holding `len` bytes and `layout` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_send_group(
    conn: *mut spools_stream_conn_t,
    group: u32,
    items: *const spools_stream_item_t,
    count: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        let (c, comm) = h.open()?;
        // SAFETY: the caller's contract.
        match unsafe { group_items(items, count, comm.rank()) } {
            Ok(v) => c.send_group(group, &v).map_err(Failure::from),
            Err(p) => Err(decline(p, |why| c.decline_send(why))),
        }
    })
}

/// Sends the next frame of stream `stream` (the framebuffer protocol, which `spools
/// view` shows): this rank's share (`len` bytes) of `layout`, a 2-D image or field in C
/// order (`u8[H,W]` grey, `u8[H,W,3]` RGB, `f32[H,W]` or `f64[H,W]` through a colour
/// map), shown as `style` (NULL: the defaults). The library builds the 128-byte header
/// (format and size from the layout, the frame's number in its stream, time, the
/// stream's group and its members, title, colour map and range). The stream's SUs must
/// hold the header (`tu / links >= 128`). Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a layout that is no frame, a bad style: a field
/// without a colour map, `lo >= hi`, a side over 65536, an unknown `colormap`; no such
/// stream; a stream running ahead of its group), `SPOOLS_ERR_LAYOUT` (a share of the
/// wrong size), `SPOOLS_ERR_TRANSPORT`; every rank gets the error, and nothing is sent.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `style` NULL or valid;
/// `data` holds `len` bytes; `layout` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_send_frame(
    conn: *mut spools_stream_conn_t,
    stream: u32,
    style: *const spools_frame_style_t,
    data: *const c_void,
    len: usize,
    layout: *const spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        let (c, comm) = h.open()?;
        let rank = comm.rank();
        // A bad layout handle, buffer or style, or a wrong share: this rank declines.
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes(data, len, "data") }?;
            // SAFETY: the caller's contract.
            let st = unsafe { style_of(style) }?;
            match share_problem(len, &l.layout, rank, "data")? {
                None => Ok((d, st, &l.layout)),
                Some(p) => Err(p),
            }
        })();
        match checked {
            Ok((d, st, l)) => c
                .send_frame(StreamId::new(stream), &st, d, l)
                .map_err(Failure::from),
            Err(p) => Err(decline(p, |why| c.decline_send(why))),
        }
    })
}

/// Sends frame n of every open stream of lock-step group `group`, which a viewer shows
/// together: `count` items, each a stream of the group, once, with this rank's share of
/// its frame and its style. Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (the items are not exactly the open streams of the
/// group, group 0), then as `spools_stream_conn_send_frame()`; every rank gets the error.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses; `items` NULL or `count`
/// valid items, each `style` NULL or valid, `data` holding `len` bytes and `layout` NULL
/// or live.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_send_frames(
    conn: *mut spools_stream_conn_t,
    group: u32,
    items: *const spools_frame_item_t,
    count: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        let (c, comm) = h.open()?;
        // SAFETY: the caller's contract.
        match unsafe { frame_items(items, count, comm.rank()) } {
            Ok(v) => {
                let refs: Vec<(StreamId, &FrameStyle, &[u8], &Layout)> =
                    v.iter().map(|(id, st, d, l)| (*id, st, *d, *l)).collect();
                c.send_frames(group, &refs).map_err(Failure::from)
            }
            Err(p) => Err(decline(p, |why| c.decline_send(why))),
        }
    })
}

/// The frames of `count` items as Rust sees them, or this rank's first argument error.
///
/// # Safety
/// `items` is NULL or points to `count` valid items, whose pointers are valid (or NULL).
unsafe fn frame_items<'a>(
    items: *const spools_frame_item_t,
    count: usize,
    rank: u32,
) -> Result<Vec<FrameItem<'a>>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if items.is_null() {
        return Err(Failure::arg(format!(
            "items is NULL with a count of {count}"
        )));
    }
    // SAFETY: `count` valid items (the caller's contract).
    let items = unsafe { std::slice::from_raw_parts(items, count) };
    let mut v = Vec::with_capacity(count);
    for (k, i) in items.iter().enumerate() {
        // SAFETY: the caller's contract.
        let l = unsafe { handle(i.layout) }?;
        // SAFETY: the caller's contract.
        let d = unsafe { bytes(i.data, i.len, "items[].data") }?;
        // SAFETY: the caller's contract.
        let st = unsafe { style_of(i.style) }?;
        if let Some(p) = share_problem(i.len, &l.layout, rank, &format!("items[{k}].data"))? {
            return Err(p);
        }
        v.push((StreamId::new(i.stream), st, d, &l.layout));
    }
    Ok(v)
}

/// The ADUs (frames) stream `stream` has sent (0 for a stream that is not open). Not
/// collective.
///
/// Thread safety: a connection is used by one thread at a time.
///
/// # Safety
/// `conn` is NULL or a live connection; `adus` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_adus(
    conn: *const spools_stream_conn_t,
    stream: u32,
    adus: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle(conn) }?;
        // SAFETY: the caller's contract.
        let adus = unsafe { out(adus, "adus") }?;
        *adus = h.conn.as_ref().map_or(0, |c| c.adus(StreamId::new(stream)));
        Ok(())
    })
}

/// Ends stream `stream` (its close frame, with its ADU count, goes on every link after
/// its last ADU). Collective over the world.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (no such stream open), `SPOOLS_ERR_TRANSPORT`; every
/// rank gets the error.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_close_stream(
    conn: *mut spools_stream_conn_t,
    stream: u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(conn) }?;
        let (c, _) = h.open()?;
        c.close_stream(StreamId::new(stream)).map_err(Failure::from)
    })
}

/// Ends the streams still open and the connection (every link sends what it holds and
/// ends), and frees it. Collective over the world. NULL does nothing.
///
/// Thread safety: as every collective; a connection is used by one thread at a time.
///
/// Errors: a link that failed (`SPOOLS_ERR_TRANSPORT`, `SPOOLS_ERR_PEER_GONE`), on every
/// rank; the handle is freed either way.
///
/// # Safety
/// `conn` is NULL or a live connection no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_conn_close(
    conn: *mut spools_stream_conn_t,
) -> spools_status_t {
    guard(|| {
        if conn.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(conn) }?;
        // SAFETY: a live connection made by `Box::into_raw` in `spools_stream_connect`.
        let mut b = unsafe { Box::from_raw(conn) };
        b.magic = 0;
        match b.conn.take() {
            Some(c) => c.close().map_err(Failure::from),
            None => Ok(()),
        }
    })
}
