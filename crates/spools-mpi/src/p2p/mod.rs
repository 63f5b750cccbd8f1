//! Point-to-point messages: blocking and non-blocking sends in every mode, receives,
//! `MPI_Sendrecv(_replace)` and probes, over Spools' tagged messages (short, eager and
//! rendezvous protocols). Contiguous buffers go straight from and to the program's
//! memory; other datatypes are packed.

pub(crate) mod buffer;
pub(crate) mod grequest;
pub(crate) mod part;
pub(crate) mod persist;
pub(crate) mod request;

use std::borrow::Cow;
use std::ffi::{c_int, c_void};

use spools::{Source, Tag};

use crate::abi::*;
use crate::comm::{comm, comm_ref, CommObj};
use crate::datatype::runs::Way;
use crate::datatype::{
    buffer, committed_for, committed_for_ref, count as ccount, pack, Packer, TypeObj, TypeRef,
    Unpacker,
};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::{
    empty_status, give, proc_null_status, put_status, status_of, truncated_status, Op,
};

/// The packed length up to which a non-contiguous message is packed on the stack and
/// sent as a contiguous one, or received there and unpacked (a short or eager message:
/// no operation object per piece, as [`Packer`] and [`Unpacker`] make).
const SMALL: usize = 2048;

/// A short message's bytes on the stack (at most [`SMALL`]).
type Short = [u8; SMALL];

/// Packs the `len` bytes of data (at most [`SMALL`]) of `t` elements at `buf` into
/// `stack`, and gives them.
///
/// # Safety
/// `buf` holds elements of `t` with `len` bytes of data.
unsafe fn pack_short<'s>(
    stack: &'s mut Short,
    buf: *const c_void,
    t: &TypeObj,
    len: usize,
) -> &'s [u8] {
    // SAFETY: the caller's contract; `stack` holds `len` bytes of its own.
    unsafe { t.copy_at(Way::Pack, buf.cast_mut().cast(), 0, stack.as_mut_ptr(), len) };
    &stack[..len]
}

/// Unpacks a short message received into `stack` into `t` elements at `buf`, where it
/// arrived (nothing is written for a truncated or failed receive), and gives its outcome.
///
/// # Safety
/// `buf` holds elements of `t` with room for as many bytes of data as `stack` was
/// offered to the receive.
unsafe fn unpack_short(
    got: Result<spools::Status, spools::MsgError>,
    stack: &mut Short,
    buf: *mut c_void,
    t: &TypeObj,
) -> Result<spools::Status, spools::MsgError> {
    if let Ok(st) = &got {
        // SAFETY: the caller's contract; the message's bytes are at most the room.
        unsafe { t.copy_at(Way::Unpack, buf.cast(), 0, stack.as_mut_ptr(), st.len) };
    }
    got
}

/// A destination rank; `None` for `MPI_PROC_NULL`.
pub(crate) fn dest(c: &CommObj, d: c_int, call: &'static str) -> Result<Option<u32>, MpiError> {
    if d == MPI_PROC_NULL {
        return Ok(None);
    }
    match u32::try_from(d) {
        Ok(r) if r < c.peers() => Ok(Some(r)),
        _ => Err(MpiError::invalid(
            MPI_ERR_RANK,
            format!(
                "{call}: rank {d} is not in this communicator of {} ranks{}",
                c.peers(),
                if c.inter.is_some() {
                    " (the remote group)"
                } else {
                    ""
                }
            ),
        )),
    }
}

/// A source selector; `None` for `MPI_PROC_NULL`.
pub(crate) fn source(
    c: &CommObj,
    s: c_int,
    call: &'static str,
) -> Result<Option<Source>, MpiError> {
    if s == MPI_ANY_SOURCE {
        return Ok(Some(Source::Any));
    }
    Ok(dest(c, s, call)?.map(Source::Rank))
}

pub(crate) fn send_tag(t: c_int, call: &'static str) -> Result<i32, MpiError> {
    if t < 0 {
        return Err(MpiError::invalid(
            MPI_ERR_TAG,
            format!("{call}: tag {t} is negative (0 to MPI_TAG_UB)"),
        ));
    }
    Ok(t)
}

pub(crate) fn recv_tag(t: c_int, call: &'static str) -> Result<Tag, MpiError> {
    match t {
        MPI_ANY_TAG => Ok(Tag::Any),
        t if t >= 0 => Ok(Tag::Is(t)),
        t => Err(MpiError::invalid(
            MPI_ERR_TAG,
            format!("{call}: tag {t} is negative (0 to MPI_TAG_UB, or MPI_ANY_TAG)"),
        )),
    }
}

/// The bytes of `n` elements of `t` at `buf`: borrowed when contiguous, else packed.
///
/// # Safety
/// `buf` holds `n` elements of `t`.
pub(crate) unsafe fn data<'a>(buf: *const c_void, n: usize, t: &TypeObj) -> Cow<'a, [u8]> {
    let len = n * t.size;
    if len == 0 {
        return Cow::Borrowed(&[]);
    }
    if t.contiguous() {
        // SAFETY: `len` readable bytes (the caller's contract).
        Cow::Borrowed(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) })
    } else {
        // SAFETY: the caller's contract.
        Cow::Owned(unsafe { pack(buf.cast(), n, t) })
    }
}

/// The parts of a send call.
pub(crate) struct Send {
    c: std::sync::Arc<CommObj>,
    to: Option<u32>,
    tag: i32,
    /// The datatype.
    pub(crate) t: std::sync::Arc<TypeObj>,
    /// The count of elements.
    pub(crate) n: usize,
}

/// Checks the arguments of a send of `n` elements of `dt` at `buf`.
pub(crate) fn send_args(
    buf: usize,
    n: i64,
    dt: MPI_Datatype,
    d: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<Send, MpiError> {
    let c = comm(comm_h, call)?;
    let n = ccount(n, call)?;
    let t = committed_for(dt, n, call)?;
    crate::datatype::bytes_of(n, &t, call)?;
    buffer(buf, n, &t, call, "buf")?;
    Ok(Send {
        n,
        t,
        to: dest(&c, d, call)?,
        tag: send_tag(tag, call)?,
        c,
    })
}

/// A blocking send of any mode.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
unsafe fn send(
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    d: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
    buffered: bool,
) -> c_int {
    let r = (|| {
        // The communicator and datatype borrowed for the call (no reference count moves
        // on the path of a small message).
        let c = comm_ref(comm_h, call)?;
        let n = ccount(count, call)?;
        let t = committed_for_ref(datatype, n, call)?;
        crate::datatype::bytes_of(n, &t, call)?;
        buffer(buf as usize, n, &t, call, "buf")?;
        let Some(to) = dest(&c, d, call)? else {
            send_tag(tag, call)?;
            return Ok(());
        };
        let tag = send_tag(tag, call)?;
        let len = n * t.size;
        if !buffered && !synchronous(call) && !t.contiguous() && len > 0 && len <= SMALL {
            // Packed on the stack, then sent as a contiguous message.
            let mut stack = [0u8; SMALL];
            // SAFETY: `buf` holds `n` elements of `t`, `len` bytes of data (the caller's
            // contract).
            let bytes = unsafe { pack_short(&mut stack, buf, &t, len) };
            c.comm.send(bytes, to, tag)?;
            return Ok(());
        }
        if !buffered && !t.contiguous() && len > 0 {
            // Packed piece by piece as it leaves.
            let from = Packer {
                addr: buf as usize,
                t: t.arc(),
                len,
            };
            c.comm.send_gather(from, to, tag, synchronous(call))?;
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let bytes = unsafe { data(buf, n, &t) };
        if buffered {
            crate::p2p::buffer::reserve(bytes.len())?;
            let len = bytes.len();
            let r = c.comm.isend(bytes.into_owned(), to, tag)?;
            crate::p2p::buffer::track(r, len);
            return Ok(());
        }
        if synchronous(call) {
            c.comm.issend(bytes.into_owned(), to, tag)?.wait()?;
        } else {
            c.comm.send(&bytes, to, tag)?;
        }
        Ok(())
    })();
    on_comm(comm_h, r)
}

/// Whether a send call is of the synchronous mode (`MPI_Ssend*`, `MPI_Issend*`): it then
/// completes only once a receive matched it.
fn synchronous(call: &str) -> bool {
    call.starts_with("MPI_Ssend") || call.starts_with("MPI_Issend")
}

/// `MPI_Send`: returns when `buf` may be reused (short and eager messages at once,
/// rendezvous ones once the receiver took the data).
#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        send(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            "MPI_Send",
            false,
        )
    }
}

/// `MPI_Send_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Send_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { send(buf, count, datatype, dest, tag, comm, "MPI_Send_c", false) }
}

/// `MPI_Ssend`: a send in synchronous mode (as standard mode today: see the docs).
#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        send(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            "MPI_Ssend",
            false,
        )
    }
}

/// `MPI_Rsend`: a send in ready mode (a matching receive is posted: standard mode is
/// correct for it).
#[no_mangle]
pub unsafe extern "C" fn MPI_Rsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        send(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            "MPI_Rsend",
            false,
        )
    }
}

/// `MPI_Bsend`: a buffered send: returns at once, the data counted against the buffer
/// of `MPI_Buffer_attach`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        send(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            "MPI_Bsend",
            true,
        )
    }
}

/// A blocking receive.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`; `status` is NULL or writable.
unsafe fn recv(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    status: *mut MPI_Status,
    call: &'static str,
) -> c_int {
    let r = (|| {
        let c = comm_ref(comm_h, call)?;
        let n = ccount(count, call)?;
        let t = committed_for_ref(datatype, n, call)?;
        buffer(buf as usize, n, &t, call, "buf")?;
        let tag = recv_tag(tag, call)?;
        let Some(from) = source(&c, src, call)? else {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, proc_null_status()) };
            return Ok(());
        };
        let cap = crate::datatype::bytes_of(n, &t, call)?;
        let result = if t.contiguous() && cap > 0 {
            // SAFETY: `cap` writable bytes (the caller's contract).
            let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) };
            c.comm.recv(dst, from, tag)
        } else if cap > 0 && cap <= SMALL {
            // Received on the stack, then unpacked (nothing is, if it was truncated).
            let mut stack = [0u8; SMALL];
            let got = c.comm.recv(&mut stack[..cap], from, tag);
            // SAFETY: `buf` holds elements of `t` with room for `cap` bytes of data (the
            // caller's contract).
            unsafe { unpack_short(got, &mut stack, buf, &t) }
        } else if cap > 0 {
            // Unpacked piece by piece as it arrives.
            let into = Unpacker {
                addr: buf as usize,
                t: t.arc(),
                cap,
            };
            c.comm.recv_scatter(into, from, tag)
        } else {
            c.comm.recv(&mut [0u8; 0], from, tag)
        };
        match result {
            Ok(st) => {
                // SAFETY: the caller's contract.
                unsafe { put_status(status, status_of(&st)) };
                Ok(())
            }
            Err(e) => {
                if let Some(s) = truncated_status(&e) {
                    // SAFETY: the caller's contract.
                    unsafe { put_status(status, s) };
                }
                Err(e.into())
            }
        }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Recv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        recv(
            buf,
            count.into(),
            datatype,
            source,
            tag,
            comm,
            status,
            "MPI_Recv",
        )
    }
}

/// `MPI_Recv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        recv(
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            status,
            "MPI_Recv_c",
        )
    }
}

/// The program's memory of a pending operation, handed to Spools in place (MPI's
/// contract: the buffer of a send or receive is the operation's until it completes).
pub(crate) struct ProgramMemory {
    addr: usize,
    len: usize,
}

// SAFETY: MPI's contract on the program's buffer: `len` bytes at `addr`, valid and left
// alone (written by nothing else, for a receive; not written, for a send) from the start
// of the operation until it completes; the value does not own them, so moving it moves
// nothing.
unsafe impl spools_msg::PinnedBuf for ProgramMemory {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.addr as *mut u8
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// Starts a non-blocking send: a contiguous buffer in place, other layouts packed into
/// the operation.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
pub(crate) unsafe fn start_send(
    buf: usize,
    count: i64,
    datatype: MPI_Datatype,
    d: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<Op, MpiError> {
    let s = send_args(buf, count, datatype, d, tag, comm_h, call)?;
    // SAFETY: the caller's contract.
    unsafe { start_checked_send(buf, &s, call) }
}

/// Starts a non-blocking send whose arguments were checked (`s`): a persistent send's
/// at each start, with the datatype and communicator it was made with (the program may
/// free their handles meanwhile).
///
/// # Safety
/// `buf` holds `s.n` elements of `s.t`.
pub(crate) unsafe fn start_checked_send(
    buf: usize,
    s: &Send,
    call: &'static str,
) -> Result<Op, MpiError> {
    Ok(match s.to {
        None => Op::Done(empty_status()),
        Some(to) => {
            let len = s.n * s.t.size;
            if s.t.contiguous() && len > 0 && !synchronous(call) {
                let m = ProgramMemory { addr: buf, len };
                return Ok(Op::Send(Some(s.c.comm.isend_pinned(m, to, s.tag)?)));
            }
            if !s.t.contiguous() && len > 0 {
                // Packed piece by piece as it leaves.
                let from = Packer {
                    addr: buf,
                    t: s.t.clone(),
                    len,
                };
                return Ok(Op::Send(Some(if synchronous(call) {
                    s.c.comm.issend_gather(from, to, s.tag)?
                } else {
                    s.c.comm.isend_gather(from, to, s.tag)?
                })));
            }
            // SAFETY: the caller's contract.
            let bytes = unsafe { data(buf as *const c_void, s.n, &s.t) }.into_owned();
            if synchronous(call) {
                Op::Send(Some(s.c.comm.issend(bytes, to, s.tag)?))
            } else {
                Op::Send(Some(s.c.comm.isend(bytes, to, s.tag)?))
            }
        }
    })
}

/// Starts a non-blocking receive into a buffer of the operation's, delivered to `buf`
/// (`count` elements of `datatype`) when it completes.
pub(crate) fn start_recv(
    buf: usize,
    count: i64,
    datatype: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<Op, MpiError> {
    let c = comm(comm_h, call)?;
    let n = ccount(count, call)?;
    let t = committed_for(datatype, n, call)?;
    buffer(buf, n, &t, call, "buf")?;
    let tag = recv_tag(tag, call)?;
    start_checked_recv(buf, n, t, src, tag, &c, call)
}

/// As [`start_recv`], with the arguments checked and resolved: a persistent receive's
/// at each start, with the datatype and communicator it was made with.
pub(crate) fn start_checked_recv(
    buf: usize,
    n: usize,
    t: std::sync::Arc<TypeObj>,
    src: c_int,
    tag: spools::Tag,
    c: &CommObj,
    call: &'static str,
) -> Result<Op, MpiError> {
    Ok(match source(c, src, call)? {
        None => Op::Done(proc_null_status()),
        Some(from) => {
            let len = crate::datatype::bytes_of(n, &t, call)?;
            if t.contiguous() && len > 0 {
                let m = ProgramMemory { addr: buf, len };
                let req = c.comm.irecv_pinned(m, from, tag)?;
                return Ok(Op::Recv {
                    req,
                    addr: buf,
                    t,
                    direct: true,
                });
            }
            if len > 0 {
                // Unpacked piece by piece as it arrives.
                let into = Unpacker {
                    addr: buf,
                    t: t.clone(),
                    cap: len,
                };
                let req = c.comm.irecv_scatter(into, from, tag)?;
                return Ok(Op::Recv {
                    req,
                    addr: buf,
                    t,
                    direct: true,
                });
            }
            let req = c.comm.irecv(Vec::new(), from, tag)?;
            Op::Recv {
                req,
                addr: buf,
                t,
                direct: false,
            }
        }
    })
}

/// A non-blocking send of any mode: the data is copied into the request.
///
/// # Safety
/// `buf` holds `count` elements; `request` is writable.
unsafe fn isend(
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    d: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> c_int {
    let r = (|| {
        // SAFETY: the caller's contract.
        let op = unsafe { start_send(buf as usize, count, datatype, d, tag, comm_h, call) }?;
        let h = give(op, comm_h)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Isend`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isend(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            request,
            "MPI_Isend",
        )
    }
}

/// `MPI_Issend` (as `MPI_Isend` today: see the docs).
#[no_mangle]
pub unsafe extern "C" fn MPI_Issend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isend(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            request,
            "MPI_Issend",
        )
    }
}

/// `MPI_Irsend`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isend(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            request,
            "MPI_Irsend",
        )
    }
}

/// `MPI_Ibsend`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isend(
            buf,
            count.into(),
            datatype,
            dest,
            tag,
            comm,
            request,
            "MPI_Ibsend",
        )
    }
}

/// A non-blocking receive into a buffer of the request's, copied out on completion.
///
/// # Safety
/// `buf` holds `count` elements until the request completes; `request` is writable.
unsafe fn irecv(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> c_int {
    let r = (|| {
        let op = start_recv(buf as usize, count, datatype, src, tag, comm_h, call)?;
        let h = give(op, comm_h)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Irecv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        irecv(
            buf,
            count.into(),
            datatype,
            source,
            tag,
            comm,
            request,
            "MPI_Irecv",
        )
    }
}

macro_rules! send_c {
    ($name:ident, $buffered:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: MPI_Count,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe {
                send(
                    buf,
                    count,
                    datatype,
                    dest,
                    tag,
                    comm,
                    stringify!($name),
                    $buffered,
                )
            }
        }
    };
}
send_c!(MPI_Ssend_c, false);
send_c!(MPI_Rsend_c, false);
send_c!(MPI_Bsend_c, true);

macro_rules! isend_c {
    ($name:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: MPI_Count,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe {
                isend(
                    buf,
                    count,
                    datatype,
                    dest,
                    tag,
                    comm,
                    request,
                    stringify!($name),
                )
            }
        }
    };
}
isend_c!(MPI_Isend_c);
isend_c!(MPI_Issend_c);
isend_c!(MPI_Irsend_c);
isend_c!(MPI_Ibsend_c);

/// `MPI_Irecv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        irecv(
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            request,
            "MPI_Irecv_c",
        )
    }
}

/// `MPI_Sendrecv`: sends and receives at once (neither waits for the other).
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        sendrecv(
            sendbuf,
            sendcount.into(),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            recvcount.into(),
            recvtype,
            source,
            recvtag,
            comm,
            status,
        )
    }
}

/// `MPI_Sendrecv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        sendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm, status,
        )
    }
}

/// Sends and receives at once.
///
/// # Safety
/// As `MPI_Sendrecv`'s arguments.
unsafe fn sendrecv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    const CALL: &str = "MPI_Sendrecv";
    let r = (|| {
        // Both halves checked before anything is posted or sent: a send that failed
        // after the receive was posted would leave the call waiting for a receive that
        // may never match. The communicator and datatypes are borrowed for the call, and
        // no request handle is made: the receive is posted, the message sent and the
        // receive finished in the messages' own blocking exchange.
        let c = comm_ref(comm, CALL)?;
        let sn = ccount(sendcount, CALL)?;
        let st = committed_for_ref(sendtype, sn, CALL)?;
        crate::datatype::bytes_of(sn, &st, CALL)?;
        buffer(sendbuf as usize, sn, &st, CALL, "sendbuf")?;
        let to = self::dest(&c, dest, CALL)?;
        let stag = send_tag(sendtag, CALL)?;
        let rn = ccount(recvcount, CALL)?;
        let rt = committed_for_ref(recvtype, rn, CALL)?;
        buffer(recvbuf as usize, rn, &rt, CALL, "recvbuf")?;
        let rtag = recv_tag(recvtag, CALL)?;
        let from = self::source(&c, source, CALL)?;
        let cap = crate::datatype::bytes_of(rn, &rt, CALL)?;
        let out = Leaving {
            buf: sendbuf,
            n: sn,
            t: &st,
        };
        let into = Landing {
            buf: recvbuf,
            cap,
            t: &rt,
        };
        // SAFETY: `sendbuf` holds `sendcount` elements of `sendtype` and `recvbuf`
        // `recvcount` elements of `recvtype`, apart from each other as MPI asks; the
        // caller's contract for `status`.
        unsafe { exchange_now(&c.comm, (out, to, stag), into, (from, rtag), status) }
    })();
    on_comm(comm, r)
}

/// What a blocking exchange sends: `n` elements of `t` at `buf`.
struct Leaving<'a> {
    buf: *const c_void,
    n: usize,
    t: &'a TypeRef,
}

impl Leaving<'_> {
    /// The message's bytes of data.
    fn len(&self) -> usize {
        self.n * self.t.size
    }

    /// Whether the message is sent piece by piece from scattered memory (packed as it
    /// leaves).
    fn scattered(&self) -> bool {
        !self.t.contiguous() && self.len() > 0
    }

    /// Packs the message piece by piece as it leaves.
    fn packer(&self) -> Packer {
        Packer {
            addr: self.buf as usize,
            t: self.t.arc(),
            len: self.len(),
        }
    }
}

/// Where a blocking exchange's message lands: `cap` bytes of `t` elements at `buf`.
struct Landing<'a> {
    buf: *mut c_void,
    cap: usize,
    t: &'a TypeRef,
}

impl Landing<'_> {
    /// Whether the message is put piece by piece into scattered memory (unpacked as it
    /// arrives).
    fn scattered(&self) -> bool {
        !self.t.contiguous() && self.cap > 0
    }
}

/// The blocking exchange of `MPI_Sendrecv(_replace)`, its arguments checked: `out` sent
/// to `to` with tag `stag` while a message from `from` with `rtag` is received `into`
/// the program's buffer, each half left out for `MPI_PROC_NULL`; the status put. Where
/// both are contiguous the messages' own blocking exchange runs straight from and into
/// the program's memory; where either is not, its half goes piece by piece (packed as it
/// leaves, unpacked as it arrives), never through a copy of the whole message.
///
/// # Safety
/// `out.buf` holds `out.n` elements of `out.t`, and `into.buf` `into.cap` bytes of
/// `into.t` elements, apart from each other; `status` is NULL or writable.
unsafe fn exchange_now(
    comm: &spools::Communicator,
    (out, to, stag): (Leaving<'_>, Option<u32>, i32),
    into: Landing<'_>,
    (from, rtag): (Option<Source>, Tag),
    status: *mut MPI_Status,
) -> Result<(), MpiError> {
    let send = |to: u32| -> Result<(), spools::MsgError> {
        if out.scattered() {
            comm.send_gather(out.packer(), to, stag, false)
        } else {
            // SAFETY: contiguous, so borrowed in place (the caller's contract).
            let bytes = unsafe { data(out.buf, out.n, out.t) };
            comm.send(&bytes, to, stag)
        }
    };
    let Some(from) = from else {
        if let Some(to) = to {
            send(to)?;
        }
        // SAFETY: the caller's contract.
        unsafe { put_status(status, proc_null_status()) };
        return Ok(());
    };
    let small = |b: usize| b <= SMALL;
    let result = if (out.scattered() || into.scattered()) && small(out.len()) && small(into.cap) {
        // Both halves short: packed and received on the stack, as one contiguous
        // exchange (no operation made per half).
        let (mut stack_out, mut stack_in) = ([0u8; SMALL], [0u8; SMALL]);
        // SAFETY: `out.buf` holds `out.len()` bytes of data (the caller's contract).
        let bytes = unsafe { pack_short(&mut stack_out, out.buf, out.t, out.len()) };
        let dst = &mut stack_in[..into.cap];
        let got = match to {
            Some(to) => comm.sendrecv(bytes, to, stag, dst, from, rtag),
            None => comm.recv(dst, from, rtag),
        };
        // SAFETY: `into.buf` holds room for `cap` bytes of data (the caller's
        // contract).
        unsafe { unpack_short(got, &mut stack_in, into.buf, into.t) }
    } else if !out.scattered() && !into.scattered() {
        // SAFETY: contiguous (or empty), so borrowed in place (the caller's contract).
        let bytes = unsafe { data(out.buf, out.n, out.t) };
        let dst: &mut [u8] = if into.cap > 0 {
            // SAFETY: `cap` writable bytes at `buf` (the caller's contract).
            unsafe { std::slice::from_raw_parts_mut(into.buf.cast::<u8>(), into.cap) }
        } else {
            &mut []
        };
        match to {
            Some(to) => comm.sendrecv(&bytes, to, stag, dst, from, rtag),
            None => comm.recv(dst, from, rtag),
        }
    } else {
        // The receive posted first (in place, or unpacked as it arrives), then the send,
        // then the wait; the receive never outlives the call.
        let r = if into.scattered() {
            let u = Unpacker {
                addr: into.buf as usize,
                t: into.t.arc(),
                cap: into.cap,
            };
            comm.irecv_scatter(u, from, rtag)?
        } else if into.cap > 0 {
            let m = ProgramMemory {
                addr: into.buf as usize,
                len: into.cap,
            };
            comm.irecv_pinned(m, from, rtag)?
        } else {
            comm.irecv(Vec::new(), from, rtag)?
        };
        match to.map_or(Ok(()), send) {
            Ok(()) => r.wait_or_release().map(|c| c.status),
            // A send that failed in the transport (its peer died): the receive is
            // finished still, so that a message it already matched from a live rank is
            // delivered, not dropped (as `Communicator::sendrecv`); the send's error
            // is reported.
            Err(e @ spools::MsgError::Am(spools::AmError::Fabric(_))) => {
                let _ = r.wait_or_release();
                Err(e)
            }
            // Anything else (an interrupt) ends the call at once, the receive removed.
            Err(e) => {
                r.release();
                Err(e)
            }
        }
    };
    match result {
        Ok(got) => {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, status_of(&got)) };
            Ok(())
        }
        Err(e) => {
            if let Some(s) = truncated_status(&e) {
                // SAFETY: the caller's contract.
                unsafe { put_status(status, s) };
            }
            Err(e.into())
        }
    }
}

/// `MPI_Sendrecv_replace`: sends the buffer's contents and receives into it.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        sendrecv_replace(
            buf,
            count.into(),
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            status,
        )
    }
}

/// `MPI_Sendrecv_replace_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        sendrecv_replace(
            buf, count, datatype, dest, sendtag, source, recvtag, comm, status,
        )
    }
}

/// Sends the buffer's contents and receives into it.
///
/// # Safety
/// As `MPI_Sendrecv_replace`'s arguments.
unsafe fn sendrecv_replace(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    const CALL: &str = "MPI_Sendrecv_replace";
    let r = (|| {
        // Every argument checked before anything is posted or sent (as in `sendrecv`);
        // the message sent from a copy of the buffer, which the receive then fills.
        let c = comm_ref(comm, CALL)?;
        let n = ccount(count, CALL)?;
        let t = committed_for_ref(datatype, n, CALL)?;
        let cap = crate::datatype::bytes_of(n, &t, CALL)?;
        buffer(buf as usize, n, &t, CALL, "buf")?;
        let to = self::dest(&c, dest, CALL)?;
        let stag = send_tag(sendtag, CALL)?;
        let rtag = recv_tag(recvtag, CALL)?;
        let from = self::source(&c, source, CALL)?;
        // SAFETY: `buf` holds `count` elements of `datatype` (the caller's contract).
        let copy = unsafe { data(buf, n, &t) }.into_owned();
        let bytes = committed_for_ref(MPI_BYTE, copy.len(), CALL)?;
        let out = Leaving {
            buf: copy.as_ptr().cast(),
            n: copy.len(),
            t: &bytes,
        };
        let into = Landing { buf, cap, t: &t };
        // SAFETY: `copy` holds its bytes, and `buf` `count` elements of `datatype`, apart
        // from `copy`; the caller's contract for `status`.
        unsafe { exchange_now(&c.comm, (out, to, stag), into, (from, rtag), status) }
    })();
    on_comm(comm, r)
}

/// `MPI_Probe`: waits until a matching message can be received; it stays queued.
#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Probe")?;
        let tag = recv_tag(tag, "MPI_Probe")?;
        let s = match self::source(&c, source, "MPI_Probe")? {
            None => proc_null_status(),
            Some(from) => status_of(&c.comm.probe(from, tag)?),
        };
        // SAFETY: the caller's contract.
        unsafe { put_status(status, s) };
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Iprobe`: whether a matching message can be received now.
#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Iprobe")?;
        let tag = recv_tag(tag, "MPI_Iprobe")?;
        let found = match self::source(&c, source, "MPI_Iprobe")? {
            None => Some(proc_null_status()),
            Some(from) => c.comm.iprobe(from, tag)?.as_ref().map(status_of),
        };
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(found.is_some()), "MPI_Iprobe") }?;
        if let Some(s) = found {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, s) };
        }
        Ok(())
    })();
    on_comm(comm, r)
}
