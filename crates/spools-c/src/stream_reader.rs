//! A stream into the job (`spools_io::stream::StreamReader`): rank 0 listens for one
//! logical connection from a sender outside the job (`spools send`, another job's
//! stream, any program speaking the stream format), and each ADU is received, collectively,
//! into every rank's share of a layout.

use std::ffi::{c_char, c_void};

use spools::{AduInfo, Communicator, StreamReader};
use spools_io::stream::Limits;

use crate::args::{bytes_mut, give_string, handle, handle_mut, maybe_out, out, string, Handle};
use crate::declined::decline;
use crate::layout::spools_layout_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::stream::dest_addr;
use crate::world::spools_world_t;

/// What an ADU received into the job is: its stream, its number in the stream, its size.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct spools_adu_info_t {
    /// The stream's id on its connection.
    pub stream: u32,
    /// The ADU's number in its stream (from 0).
    pub adu: u64,
    /// Bytes of the ADU.
    pub size: u64,
}

impl From<AduInfo> for spools_adu_info_t {
    fn from(i: AduInfo) -> Self {
        spools_adu_info_t {
            stream: i.stream,
            adu: i.adu,
            size: i.size,
        }
    }
}

/// A stream into the job: one logical connection from one sender, whose ADUs (of one or
/// more streams, in the order the receiver hands them out) the ranks receive one by one.
pub struct spools_stream_reader_t {
    magic: u64,
    reader: Option<StreamReader>,
    /// Where the sender connects, `HOST:PORT`.
    address: String,
    /// The communicator its collective calls agree on (the world's I/O communicator).
    comm: Communicator,
}

impl Handle for spools_stream_reader_t {
    const MAGIC: u64 = 0x5350_4f4f_4c53_5244;
    const NAME: &'static str = "spools_stream_reader_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

impl spools_stream_reader_t {
    fn open(&mut self) -> Result<(&mut StreamReader, &Communicator), Failure> {
        match self.reader.as_mut() {
            Some(r) => Ok((r, &self.comm)),
            None => Err(Failure::arg("the stream reader is closed")),
        }
    }
}

/// Writes what came: `*got` 1 and `*info` for an ADU, `*got` 0 at the end.
///
/// # Safety
/// `info` is NULL or writable.
unsafe fn tell(i: Option<AduInfo>, info: *mut spools_adu_info_t, got: &mut i32) {
    *got = i32::from(i.is_some());
    if let Some(i) = i {
        // SAFETY: the caller's contract.
        unsafe { maybe_out(info, i.into()) };
    }
}

/// Listens at `address` (`"HOST:PORT"` or `"tcp:HOST:PORT"`; port 0: any free port, see
/// `spools_stream_reader_address()`) on rank 0 for one logical connection into the job.
/// Rank 0 accepts every link, reassembles each ADU and holds it until the job receives
/// it. Collective over the world.
///
/// Thread safety: as every collective; a reader is used by one thread at a time.
///
/// ```c
/// spools_stream_reader_t *r;
/// spools_stream_listen(world, "0.0.0.0:7000", &r);
/// spools_adu_info_t info;
/// int32_t got;
/// while (spools_stream_reader_recv(r, mine, mine_len, layout, &info, &got) == SPOOLS_OK
///        && got) {
///     /* this rank's share of ADU info.adu of stream info.stream is in mine */
/// }
/// spools_stream_reader_close(r);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a bad address), `SPOOLS_ERR_TRANSPORT` (rank 0
/// cannot listen there); every rank gets the error.
///
/// # Safety
/// `world` is NULL or a live world; `address` a NUL-terminated string; `reader` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_listen(
    world: *const spools_world_t,
    address: *const c_char,
    reader: *mut *mut spools_stream_reader_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let addr = dest_addr(unsafe { string(address, "address") }?)?;
        // SAFETY: the caller's contract.
        let reader = unsafe { out(reader, "reader") }?;
        let comm = w.world.io_communicator()?.clone();
        let c = &comm;
        let r = StreamReader::listen(c, addr, Limits::default()).map_err(Failure::from)?;
        *reader = Box::into_raw(Box::new(spools_stream_reader_t {
            magic: spools_stream_reader_t::MAGIC,
            address: r.local_addr().to_string(),
            reader: Some(r),
            comm,
        }));
        Ok(())
    })
}

/// Where the sender connects, `"HOST:PORT"` (the same on every rank), copied with a NUL
/// into `buf` of `cap` bytes, with the bytes it takes in `needed`. Not collective.
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_TRUNCATED` when `cap < *needed` (nothing written).
///
/// # Safety
/// `reader` is NULL or a live reader; `buf` NULL or `cap` writable bytes; `needed` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_reader_address(
    reader: *const spools_stream_reader_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { handle(reader) }?;
        // SAFETY: the caller's contract.
        unsafe { give_string(&r.address, buf, cap, needed) }
    })
}

/// Waits for the next whole ADU and says what it is (`*info`: stream, number, size)
/// without receiving it, so that the ranks can make a layout of its size: `*got` is 1,
/// or 0 once the connection ended with every stream complete. Calling it again gives the
/// same ADU until it is received or skipped. Collective over the world.
///
/// Thread safety: as every collective; a reader is used by one thread at a time.
///
/// Errors: `SPOOLS_ERR_PEER_GONE` (the sender died or lost a link in the middle of an
/// ADU, or ADUs never arrived), `SPOOLS_ERR_TRANSPORT` (frames refused: a checksum
/// mismatch, ...); the same on every rank, and again from every later call.
///
/// # Safety
/// `reader` is NULL or a live reader no other thread uses; `info` NULL or writable; `got`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_reader_next(
    reader: *mut spools_stream_reader_t,
    info: *mut spools_adu_info_t,
    got: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(reader) }?;
        let (r, _) = h.open()?;
        // The wait for the next ADU is collective: a rank whose `got` is NULL still takes
        // part (a look at the next ADU changes nothing), then fails alone.
        let i = r.next_adu().map_err(Failure::from);
        // SAFETY: the caller's contract.
        let got = unsafe { out(got, "got") }?;
        // SAFETY: the caller's contract.
        unsafe { tell(i?, info, got) };
        Ok(())
    })
}

/// Receives the next ADU into `buf`, this rank's share (`len` bytes) of `layout` (rank r
/// holds unit r): `*got` is 1 and `*info` says which ADU it was, or `*got` is 0 once the
/// connection ended with every stream complete. Collective over the world.
///
/// Thread safety: as every collective; a reader is used by one thread at a time.
///
/// Errors: those of `spools_stream_reader_next()`; `SPOOLS_ERR_LAYOUT` (a layout whose
/// size is not the ADU's: the ADU stays the next one), `SPOOLS_ERR_INVALID_ARG` (a buffer
/// of the wrong size on any rank); every rank gets the error.
///
/// # Safety
/// `reader` is NULL or a live reader no other thread uses; `buf` holds `len` writable
/// bytes; `layout` NULL or live; `info` NULL or writable; `got` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_reader_recv(
    reader: *mut spools_stream_reader_t,
    buf: *mut c_void,
    len: usize,
    layout: *const spools_layout_t,
    info: *mut spools_adu_info_t,
    got: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(reader) }?;
        let (r, _) = h.open()?;
        // A bad layout handle, buffer or `got` (NULL): this rank declines its part.
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let got = unsafe { out(got, "got") }?;
            // SAFETY: the caller's contract.
            let b = unsafe { bytes_mut(buf, len, "buf") }?;
            Ok((b, &l.layout, got))
        })();
        match checked {
            Ok((b, l, got)) => {
                let i = r.recv_adu(b, l).map_err(Failure::from)?;
                // SAFETY: the caller's contract.
                unsafe { tell(i, info, got) };
                Ok(())
            }
            // This rank declines its part: the receive fails on every rank (the ADU stays
            // the next one), and every rank reports this rank's status.
            Err(p) => Err(decline(p, |why| r.decline_recv(why))),
        }
    })
}

/// Passes over the next ADU without receiving it (an ADU of 0 bytes, which no layout
/// holds, is taken so): `*got` is 1 and `*info` says which it was, or 0 at the end.
/// Collective over the world.
///
/// Thread safety: as every collective; a reader is used by one thread at a time.
///
/// Errors: those of `spools_stream_reader_next()`; `SPOOLS_ERR_INVALID_ARG` (a NULL
/// `got` on any rank: nothing is skipped, the ADU stays the next one); every rank gets the
/// error.
///
/// # Safety
/// `reader` is NULL or a live reader no other thread uses; `info` NULL or writable; `got`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_reader_skip(
    reader: *mut spools_stream_reader_t,
    info: *mut spools_adu_info_t,
    got: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(reader) }?;
        let (r, _) = h.open()?;
        // SAFETY: the caller's contract.
        match unsafe { out(got, "got") } {
            Ok(got) => {
                let i = r.skip_adu().map_err(Failure::from)?;
                // SAFETY: the caller's contract.
                unsafe { tell(i, info, got) };
                Ok(())
            }
            // A NULL `got`: this rank declines its part; every rank's skip fails and the
            // ADU stays the next one.
            Err(p) => Err(decline(p, |why| r.decline_recv(why))),
        }
    })
}

/// Stops listening (a sender still sending then sees its links closed) and frees the
/// reader. Not collective. NULL does nothing.
///
/// Thread safety: a reader is used by one thread at a time.
///
/// # Safety
/// `reader` is NULL or a live reader no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_stream_reader_close(
    reader: *mut spools_stream_reader_t,
) -> spools_status_t {
    guard(|| {
        if reader.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(reader) }?;
        // SAFETY: a live reader made by `Box::into_raw` in `spools_stream_listen`.
        let mut b = unsafe { Box::from_raw(reader) };
        b.magic = 0;
        drop(b.reader.take());
        Ok(())
    })
}
