//! Blocking tagged point-to-point messages, and probes.

use std::ffi::c_void;

use spools::{MsgError, Source, Status, Tag};

use crate::args::{bytes, bytes_mut, handle, maybe_out, out};
use crate::comm::spools_comm_t;
use crate::status::{guard, spools_status_t, Failure};

/// `src` of a receive or probe that accepts any sender.
pub const SPOOLS_ANY_SOURCE: i32 = -1;
/// `tag` of a receive or probe that accepts any tag.
pub const SPOOLS_ANY_TAG: i32 = -1;

/// What a completed receive (or send, or probe) reports (MPI's status).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct spools_msg_status_t {
    /// The sender, as a rank of the communicator (for a send: this rank).
    pub source: u32,
    /// The message's tag.
    pub tag: i32,
    /// The message's length in bytes. After `SPOOLS_ERR_TRUNCATED`: the length of the
    /// message that did not fit.
    pub len: usize,
    /// 1 if the receive was cancelled before a message matched it, else 0.
    pub cancelled: i32,
}

impl From<Status> for spools_msg_status_t {
    fn from(s: Status) -> Self {
        spools_msg_status_t {
            source: s.source,
            tag: s.tag,
            len: s.len,
            cancelled: i32::from(s.cancelled),
        }
    }
}

/// Fills `status` (when not NULL) with what a finished receive or send reports: its
/// status, or after a truncation the sender, tag and full length of the message that did
/// not fit; gives the error otherwise.
///
/// # Safety
/// `status` is NULL or writable.
pub(crate) unsafe fn report(
    status: *mut spools_msg_status_t,
    r: Result<Status, MsgError>,
) -> Result<(), Failure> {
    let st = match &r {
        Ok(st) => Some((*st).into()),
        Err(MsgError::Truncated {
            len,
            source_rank,
            tag,
            ..
        }) => Some(spools_msg_status_t {
            source: *source_rank,
            tag: *tag,
            len: *len,
            cancelled: 0,
        }),
        Err(_) => None,
    };
    if let Some(st) = st {
        // SAFETY: the caller's contract.
        unsafe { maybe_out(status, st) };
    }
    r.map(drop).map_err(Failure::from)
}

/// A receive's `src` argument.
pub(crate) fn source(src: i32) -> Result<Source, Failure> {
    match src {
        SPOOLS_ANY_SOURCE => Ok(Source::Any),
        s if s >= 0 => Ok(Source::Rank(s.unsigned_abs())),
        s => Err(Failure::arg(format!(
            "source {s} is negative (a rank, or SPOOLS_ANY_SOURCE)"
        ))),
    }
}

/// A receive's `tag` argument.
pub(crate) fn tag(t: i32) -> Result<Tag, Failure> {
    match t {
        SPOOLS_ANY_TAG => Ok(Tag::Any),
        t if t >= 0 => Ok(Tag::Is(t)),
        t => Err(Failure::arg(format!(
            "tag {t} is negative (0 to 2147483647, or SPOOLS_ANY_TAG)"
        ))),
    }
}

/// Sends `len` bytes at `buf` to rank `dest` of `comm` with `tag` (0 or more); returns
/// when `buf` may be reused. Short messages travel inline, longer ones eagerly, long
/// ones by rendezvous (then it returns once the receiver has taken the data).
///
/// Thread safety: any thread; messages of one thread to one destination and tag arrive
/// in order.
///
/// ```c
/// double x[2] = {1.5, 2.5};
/// spools_send(comm, x, sizeof x, 1, 7);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a rank outside `comm`, a negative tag, NULL `buf`
/// with `len > 0`), `SPOOLS_ERR_PEER_GONE`, `SPOOLS_ERR_TRANSPORT`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `buf` holds `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_send(
    comm: *const spools_comm_t,
    buf: *const c_void,
    len: usize,
    dest: u32,
    tag: i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let data = unsafe { bytes(buf, len, "buf") }?;
        c.comm.send(data, dest, tag)?;
        Ok(())
    })
}

/// Receives a message from `src` (a rank of `comm`, or `SPOOLS_ANY_SOURCE`) with `tag`
/// (or `SPOOLS_ANY_TAG`) into `buf` of `cap` bytes; `status` (may be NULL) tells the
/// sender, tag and length.
///
/// Thread safety: any thread; receives matching the same messages are matched in the
/// order they were posted.
///
/// ```c
/// double x[2];
/// spools_msg_status_t st;
/// spools_recv(comm, x, sizeof x, SPOOLS_ANY_SOURCE, 7, &st);
/// ```
///
/// Errors: `SPOOLS_ERR_TRUNCATED` (the message is longer than `cap`: nothing past
/// `buf + cap` is written and `status` holds the message's length),
/// `SPOOLS_ERR_INVALID_ARG`, `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `buf` holds `cap` writable bytes; `status` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_recv(
    comm: *const spools_comm_t,
    buf: *mut c_void,
    cap: usize,
    src: i32,
    tag: i32,
    status: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let dst = unsafe { bytes_mut(buf, cap, "buf") }?;
        let r = c.comm.recv(dst, source(src)?, self::tag(tag)?);
        // SAFETY: the caller's contract.
        unsafe { report(status, r) }
    })
}

/// Waits until a message matching `src` and `tag` can be received and describes it in
/// `status`; the message stays queued for a receive.
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG`, `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_probe(
    comm: *const spools_comm_t,
    src: i32,
    tag: i32,
    status: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let status = unsafe { out(status, "status") }?;
        *status = c.comm.probe(source(src)?, self::tag(tag)?)?.into();
        Ok(())
    })
}

/// As `spools_probe()` without waiting: `*flag` is 1 and `status` describes the message
/// if one has arrived, else `*flag` is 0.
///
/// Thread safety: any thread.
///
/// # Safety
/// `comm` is NULL or a live communicator; `flag` and `status` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_iprobe(
    comm: *const spools_comm_t,
    src: i32,
    tag: i32,
    flag: *mut i32,
    status: *mut spools_msg_status_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let flag = unsafe { out(flag, "flag") }?;
        match c.comm.iprobe(source(src)?, self::tag(tag)?)? {
            Some(st) => {
                *flag = 1;
                // SAFETY: the caller's contract.
                unsafe { maybe_out(status, st.into()) };
            }
            None => *flag = 0,
        }
        Ok(())
    })
}
