//! Persistent point-to-point requests (`MPI_Send_init` ... `MPI_Start`), matched probes
//! (`MPI_Mprobe`, `MPI_Mrecv`) and `MPI_Isendrecv(_replace)`.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, PoisonError};

use crate::abi::*;
use crate::comm::comm;
use crate::datatype::{buffer, committed_for, count as ccount, unpack, TypeObj};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::handles::{Kind, Table};
use crate::out::out;
use crate::p2p::request::{
    empty_status, give, give_persistent, proc_null_status, put_status, status_with, Op,
};
use crate::p2p::{
    data, recv_tag, send_args, source, start_checked_recv, start_checked_send, start_recv,
    start_send,
};

/// A persistent send (any mode).
///
/// # Safety
/// `buf` holds `count` elements whenever the request is started; `request` writable.
unsafe fn send_init(
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> c_int {
    let r = (|| {
        // Check the arguments now, as MPI does, and keep the datatype and communicator
        // they name (the program may free the handles before it starts the request).
        let s = send_args(buf as usize, count, datatype, dest, tag, comm_h, call)?;
        let addr = buf as usize;
        // SAFETY: MPI's contract: the buffer holds the elements whenever it is started.
        let h = give_persistent(
            Box::new(move || unsafe { start_checked_send(addr, &s, call) }),
            comm_h,
        )?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

macro_rules! send_init {
    ($name:ident, $large:ident) => {
        #[doc = concat!("`", stringify!($name), "`: a persistent send.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
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
                send_init(
                    buf,
                    count.into(),
                    datatype,
                    dest,
                    tag,
                    comm,
                    request,
                    stringify!($name),
                )
            }
        }

        #[doc = concat!("`", stringify!($large), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $large(
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
                send_init(
                    buf,
                    count,
                    datatype,
                    dest,
                    tag,
                    comm,
                    request,
                    stringify!($large),
                )
            }
        }
    };
}
send_init!(MPI_Send_init, MPI_Send_init_c);
send_init!(MPI_Ssend_init, MPI_Ssend_init_c);
send_init!(MPI_Rsend_init, MPI_Rsend_init_c);
send_init!(MPI_Bsend_init, MPI_Bsend_init_c);

/// A persistent receive.
///
/// # Safety
/// `request` is writable.
unsafe fn recv_init(
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
        let c = comm(comm_h, call)?;
        let n = ccount(count, call)?;
        let t = committed_for(datatype, n, call)?;
        buffer(buf as usize, n, &t, call, "buf")?;
        source(&c, src, call)?;
        let tag = recv_tag(tag, call)?;
        let addr = buf as usize;
        // The datatype and communicator are kept: the program may free their handles
        // before it starts the request.
        let h = give_persistent(
            Box::new(move || start_checked_recv(addr, n, t.clone(), src, tag, &c, call)),
            comm_h,
        )?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Recv_init`: a persistent receive.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_init(
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
        recv_init(
            buf,
            count.into(),
            datatype,
            source,
            tag,
            comm,
            request,
            "MPI_Recv_init",
        )
    }
}

/// `MPI_Recv_init_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_init_c(
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
        recv_init(
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            request,
            "MPI_Recv_init_c",
        )
    }
}

/// Refuses a NULL request argument before anything is posted (a request made and then
/// not handed out would leave its operations posted).
fn request_arg(request: *mut MPI_Request, call: &'static str) -> Result<(), MpiError> {
    if request.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: the request argument is NULL"),
        ));
    }
    Ok(())
}

/// Sends and receives, as one request.
///
/// # Safety
/// As `MPI_Isendrecv`'s arguments.
unsafe fn isendrecv(
    sendbuf: usize,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: usize,
    recvcount: i64,
    recvtype: MPI_Datatype,
    src: c_int,
    recvtag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> c_int {
    let r = (|| {
        // The send and the request argument are checked before the receive is posted:
        // a send that fails after it would leave the receive posted with no request to
        // complete it.
        send_args(sendbuf, sendcount, sendtype, dest, sendtag, comm_h, call)?;
        request_arg(request, call)?;
        let recv = start_recv(recvbuf, recvcount, recvtype, src, recvtag, comm_h, call)?;
        // SAFETY: the caller's contract.
        let send = match unsafe {
            start_send(sendbuf, sendcount, sendtype, dest, sendtag, comm_h, call)
        } {
            Ok(send) => send,
            Err(e) => {
                // A send that failed once started (a dead rank, an interrupt): the
                // call fails, and its receive goes with it.
                recv.abandon();
                return Err(e);
            }
        };
        let h = give(Op::Pair(Box::new(recv), Box::new(send)), comm_h)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Isendrecv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv(
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
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isendrecv(
            sendbuf as usize,
            sendcount.into(),
            sendtype,
            dest,
            sendtag,
            recvbuf as usize,
            recvcount.into(),
            recvtype,
            source,
            recvtag,
            comm,
            request,
            "MPI_Isendrecv",
        )
    }
}

/// `MPI_Isendrecv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_c(
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
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isendrecv(
            sendbuf as usize,
            sendcount,
            sendtype,
            dest,
            sendtag,
            recvbuf as usize,
            recvcount,
            recvtype,
            source,
            recvtag,
            comm,
            request,
            "MPI_Isendrecv_c",
        )
    }
}

/// Sends the buffer's contents (copied first) and receives into it, as one request.
///
/// # Safety
/// As `MPI_Isendrecv_replace`'s arguments.
unsafe fn isendrecv_replace(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    src: c_int,
    recvtag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> c_int {
    let r = (|| {
        // The buffer, the send and the request argument are checked before the receive
        // is posted.
        let s = send_args(buf as usize, count, datatype, dest, sendtag, comm_h, call)?;
        request_arg(request, call)?;
        // SAFETY: the caller's contract.
        let copy = unsafe { data(buf, s.n, &s.t) }.into_owned();
        let recv = start_recv(buf as usize, count, datatype, src, recvtag, comm_h, call)?;
        // The copy goes to the send, which owns it until the message left (a long one
        // streams or is pulled from it after this call returns).
        let send = match s.to {
            None => Op::Done(empty_status()),
            Some(to) => match s.c.comm.isend(copy, to, s.tag) {
                Ok(r) => Op::Send(Some(r)),
                Err(e) => {
                    // As in `isendrecv`: the receive goes with the failed call.
                    recv.abandon();
                    return Err(e.into());
                }
            },
        };
        let h = give(Op::Pair(Box::new(recv), Box::new(send)), comm_h)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Isendrecv_replace`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isendrecv_replace(
            buf,
            count.into(),
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            request,
            "MPI_Isendrecv_replace",
        )
    }
}

/// `MPI_Isendrecv_replace_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        isendrecv_replace(
            buf,
            count,
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            request,
            "MPI_Isendrecv_replace_c",
        )
    }
}

/// A matched message (`MPI_Mprobe`): taken off the queue with its data, so that only
/// `MPI_Mrecv` of its handle receives it.
struct Matched {
    data: Vec<u8>,
    status: MPI_Status,
}

static MESSAGES: Table<Mutex<Option<Matched>>> = Table::new(Kind::Message);

/// Keeps a message a matched probe received, for `MPI_Mrecv` of its handle.
fn keep(data: Vec<u8>, got: &spools::Status) -> Result<MPI_Message, MpiError> {
    let m = Matched {
        data,
        status: status_with(got.source as c_int, got.tag, got.len, false),
    };
    MESSAGES
        .insert(Mutex::new(Some(m)))
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many matched messages"))
}

/// Held by a matched probe (`MPI_Mprobe`, `MPI_Improbe`) from its look at the queue to
/// the receive that takes what it saw, so that no two threads' matched probes ever match
/// one message.
static MATCHING: Mutex<()> = Mutex::new(());

/// A matched probe's match: a message matching `from` and `tag` taken off the queue, or
/// `None` when none has arrived. Under [`MATCHING`] the queue is probed, then the message
/// the probe saw is taken by a receive of its source and tag, of any length; that receive
/// is cancelled if it matched nothing (a plain receive of another thread took the message
/// first), and then the queue is probed again. What the receive matched (the probed
/// message, or the next of that source and tag when a plain receive took the probed one,
/// whatever its length) is the message kept, with its own status.
fn try_take(
    c: &crate::comm::CommObj,
    from: spools::Source,
    tag: spools::Tag,
) -> Result<Option<(MPI_Message, spools::Status)>, MpiError> {
    let _matching = MATCHING.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let Some(st) = c.comm.iprobe(from, tag)? else {
            return Ok(None);
        };
        let req = c.comm.irecv_any_len(st.source, st.tag)?;
        if req.cancel() {
            // Matched nothing: another thread's receive took the message the probe saw.
            let _ = req.wait();
            continue;
        }
        let done = req.wait()?;
        let got = done.status;
        return Ok(Some((keep(done.buf, &got)?, got)));
    }
}

/// `MPI_Mprobe`: waits for a matching message and takes it for `MPI_Mrecv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let call = "MPI_Mprobe";
        let c = self::comm(comm, call)?;
        let tag = recv_tag(tag, call)?;
        let (m, s) = match self::source(&c, source, call)? {
            None => (MPI_MESSAGE_NO_PROC, proc_null_status()),
            Some(from) => loop {
                // Waits for a message without the matching lock, then takes one under it
                // (another thread may have matched the one seen: then waits again).
                c.comm.probe(from, tag)?;
                if let Some((m, got)) = try_take(&c, from, tag)? {
                    break (m, crate::p2p::request::status_of(&got));
                }
            },
        };
        // SAFETY: the caller's contract.
        unsafe {
            put_status(status, s);
            out(message, m, call)
        }
    })();
    on_comm(comm, r)
}

/// `MPI_Improbe`: as `MPI_Mprobe` without waiting.
#[no_mangle]
pub unsafe extern "C" fn MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let call = "MPI_Improbe";
        let c = self::comm(comm, call)?;
        let tag = recv_tag(tag, call)?;
        let found = match self::source(&c, source, call)? {
            None => Some((MPI_MESSAGE_NO_PROC, proc_null_status())),
            Some(from) => {
                try_take(&c, from, tag)?.map(|(m, got)| (m, crate::p2p::request::status_of(&got)))
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(found.is_some()), call)? };
        if let Some((m, s)) = found {
            // SAFETY: the caller's contract.
            unsafe {
                put_status(status, s);
                out(message, m, call)?;
            }
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// Receives a matched message into `buf`.
///
/// # Safety
/// `buf` holds `count` elements; `message` is writable.
unsafe fn mrecv(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    call: &'static str,
) -> Result<MPI_Status, MpiError> {
    if message.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: message is NULL"),
        ));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *message };
    if h == MPI_MESSAGE_NO_PROC {
        // SAFETY: as above.
        unsafe { *message = MPI_MESSAGE_NULL };
        return Ok(proc_null_status());
    }
    let n = ccount(count, call)?;
    let t: Arc<TypeObj> = committed_for(datatype, n, call)?;
    // Checked before the message is taken: it stays for a correct call.
    buffer(buf as usize, n, &t, call, "buf")?;
    let m = MESSAGES
        .remove(h)
        .and_then(|m| m.lock().unwrap_or_else(PoisonError::into_inner).take())
        .ok_or(MpiError::Handle {
            class: MPI_ERR_REQUEST,
            what: "message",
            handle: h,
        })?;
    // SAFETY: as above.
    unsafe { *message = MPI_MESSAGE_NULL };
    let cap = n * t.size;
    if m.data.len() > cap {
        return Err(MpiError::invalid(
            MPI_ERR_TRUNCATE,
            format!(
                "{call}: message truncated: {} bytes do not fit a receive buffer of {cap} bytes",
                m.data.len()
            ),
        ));
    }
    // SAFETY: `buf` holds `count` elements (the caller's contract).
    unsafe { unpack(&m.data, buf.cast(), &t) };
    Ok(m.status)
}

/// `MPI_Mrecv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { mrecv(buf, count.into(), datatype, message, "MPI_Mrecv") }.map(|s| {
        // SAFETY: the caller's contract.
        unsafe { put_status(status, s) }
    });
    on_comm(MPI_COMM_WORLD, r)
}

/// `MPI_Mrecv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Mrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { mrecv(buf, count, datatype, message, "MPI_Mrecv_c") }.map(|s| {
        // SAFETY: the caller's contract.
        unsafe { put_status(status, s) }
    });
    on_comm(MPI_COMM_WORLD, r)
}

/// `MPI_Imrecv`: the message is already here: a request complete at once.
#[no_mangle]
pub unsafe extern "C" fn MPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Imrecv_c(buf, count.into(), datatype, message, request) }
}

/// `MPI_Imrecv_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Imrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        // SAFETY: the caller's contract.
        let s = unsafe { mrecv(buf, count, datatype, message, "MPI_Imrecv") }?;
        let h = give(Op::Done(s), MPI_COMM_WORLD)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, "MPI_Imrecv") }
    })();
    on_comm(MPI_COMM_WORLD, r)
}
