//! Blocking collectives over Spools' collectives (tree, ring and shared-memory
//! algorithms chosen by Spools), with `MPI_IN_PLACE`.

pub(crate) mod alias;
pub(crate) mod collv;
pub(crate) mod icoll;
pub(crate) mod icollv;
pub(crate) mod inter;
pub(crate) mod op;
pub(crate) mod pcoll;
pub(crate) mod segment;
pub(crate) mod vcoll;

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::coll::alias::{own_block, unaliased};
use crate::coll::op::{reduce, Which};
use crate::coll::segment::{agree, SEGMENT, SEGMENTED_FROM};
use crate::comm::comm;
use crate::comm::CommRef;
use crate::datatype::runs::Way;
use crate::datatype::{buffer, committed_ref, count as ccount, unpack, TypeObj, TypeRef};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::p2p::data;

fn in_place(p: *const c_void) -> bool {
    p as usize == MPI_IN_PLACE
}

/// Reports a failed [`unaliased`] on `comm` (the blocking entry points' form).
fn aliased(comm: MPI_Comm, r: Result<(), MpiError>) -> Option<c_int> {
    r.err().map(|e| on_comm(comm, Err(e)))
}

fn root_of(c: &crate::comm::CommObj, root: c_int, call: &'static str) -> Result<u32, MpiError> {
    match u32::try_from(root) {
        Ok(r) if r < c.comm.size() => Ok(r),
        _ => Err(MpiError::invalid(
            MPI_ERR_ROOT,
            format!(
                "{call}: root {root} is not in this communicator of {} ranks",
                c.comm.size()
            ),
        )),
    }
}

/// Writes packed `bytes` as elements of `t` at `buf`.
///
/// # Safety
/// `buf` holds as many elements of `t` as `bytes` has.
unsafe fn put(bytes: &[u8], buf: *mut c_void, t: &TypeObj) {
    if !bytes.is_empty() {
        // SAFETY: the caller's contract.
        unsafe { unpack(bytes, buf.cast(), t) };
    }
}

/// Whether `comm` is an intercommunicator: its blocking collectives are their
/// non-blocking forms (vcoll.rs, which know intercommunicators), waited for.
pub(crate) fn is_inter(comm: MPI_Comm) -> bool {
    self::comm(comm, "a collective").is_ok_and(|c| c.inter.is_some())
}

/// Looks up handle `comm` once for a whole blocking collective (errors name `call`):
/// its communicator, which also says whether it is an intercommunicator, or else the
/// error code of `comm`'s error handler for the failed lookup, for the call to return.
fn comm_or_raise(comm: MPI_Comm, call: &'static str) -> Result<CommRef, c_int> {
    crate::comm::comm_ref(comm, call).map_err(|e| on_comm(comm, Err(e)))
}

/// Waits for the request of a non-blocking collective that returned `rc`.
///
/// # Safety
/// `req` is the request it made.
pub(crate) unsafe fn waited(rc: c_int, req: &mut MPI_Request) -> c_int {
    if rc != MPI_SUCCESS {
        return rc;
    }
    // SAFETY: a request of this library; the status is ignored.
    unsafe { crate::p2p::request::MPI_Wait(req, MPI_STATUS_IGNORE as *mut MPI_Status) }
}

/// `MPI_Barrier`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    let c = match comm_or_raise(comm, "MPI_Barrier") {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe { waited(crate::coll::vcoll::MPI_Ibarrier(comm, &mut q), &mut q) };
    }
    on_comm(comm, c.comm.barrier().map_err(MpiError::from))
}

/// `MPI_Bcast` and `MPI_Bcast_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Bcast`.
#[allow(clippy::too_many_arguments)]
unsafe fn bcast(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    let c = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Ibcast_c(buffer, count, datatype, root, comm, &mut q),
                &mut q,
            )
        };
    }
    let r = (|| {
        let root = root_of(&c, root, call)?;
        let n = ccount(count, call)?;
        let t = committed_ref(datatype, call)?;
        crate::datatype::buffer(buffer as usize, n, &t, call, "buffer")?;
        let len = n * t.size;
        if len >= SEGMENTED_FROM && agree(&c.comm, "bcast", len, !t.contiguous())? {
            // SAFETY: the caller's contract.
            return unsafe { bcast_segmented(&c, buffer, len, &t, root) };
        }
        if t.contiguous() && len > 0 {
            // SAFETY: `len` bytes (the caller's contract).
            let b = unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) };
            c.comm.bcast(b, root)?;
            return Ok(());
        }
        let mut b = if c.comm.rank() == root {
            // SAFETY: the caller's contract.
            unsafe { data(buffer, n, &t) }.into_owned()
        } else {
            vec![0u8; len]
        };
        c.comm.bcast(&mut b, root)?;
        if c.comm.rank() != root {
            // SAFETY: the caller's contract.
            unsafe { put(&b, buffer, &t) };
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Bcast` of `len` packed bytes of `t` elements at `buffer` (not contiguous here
/// or on another rank), in segments: the root packs each into one scratch buffer, which
/// is broadcast, and every other rank unpacks it from its own, each while it is in the
/// caches.
///
/// # Safety
/// `buffer` holds elements of `t` with `len` bytes of data.
unsafe fn bcast_segmented(
    c: &crate::comm::CommObj,
    buffer: *mut c_void,
    len: usize,
    t: &TypeObj,
    root: u32,
) -> Result<(), MpiError> {
    let mut seg = vec![0u8; SEGMENT.min(len)];
    let is_root = c.comm.rank() == root;
    let mut off = 0;
    while off < len {
        let piece = &mut seg[..SEGMENT.min(len - off)];
        let k = piece.len();
        if is_root {
            // SAFETY: bytes `off..off + k` of the data lie in `buffer` (the caller's
            // contract); `piece` holds `k` bytes of its own.
            unsafe { t.copy_at(Way::Pack, buffer.cast(), off, piece.as_mut_ptr(), k) };
        }
        c.comm.bcast(piece, root)?;
        if !is_root {
            // SAFETY: as above.
            unsafe { t.copy_at(Way::Unpack, buffer.cast(), off, piece.as_mut_ptr(), k) };
        }
        off += k;
    }
    Ok(())
}

/// A reduction collective on `c`, the communicator of handle `comm` (an
/// intracommunicator).
///
/// # Safety
/// The buffers hold `count` elements of `datatype` where MPI says they are used.
#[allow(clippy::too_many_arguments)]
unsafe fn reduction(
    c: &crate::comm::CommObj,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    which: Option<c_int>,
    scan: Option<bool>,
    call: &'static str,
) -> c_int {
    let r = (|| {
        let n = ccount(count, call)?;
        let t = committed_ref(datatype, call)?;
        let which = match (which, scan) {
            (_, Some(true)) => Which::Scan,
            (_, Some(false)) => Which::Exscan,
            (Some(root), None) => Which::Root(root_of(c, root, call)?),
            (None, None) => Which::All,
        };
        // The root's result and everyone's in the other reductions but an exclusive
        // scan's rank 0; in place there (and on that rank 0).
        let gets = which.gets(c.comm.rank());
        let inplace = (gets || matches!(which, Which::Exscan)) && in_place(sendbuf);
        if !inplace {
            buffer(sendbuf as usize, n, &t, call, "sendbuf")?;
        }
        // In place, the receive buffer is the input too (an exclusive scan's rank 0's).
        if gets || inplace {
            buffer(recvbuf as usize, n, &t, call, "recvbuf")?;
        }
        let send = if inplace {
            recvbuf.cast_const()
        } else {
            sendbuf
        };
        // SAFETY: the caller's contract.
        unsafe {
            reduce(
                &c.comm,
                send.cast(),
                recvbuf.cast(),
                n,
                &t,
                datatype,
                op,
                which,
            )
        }
    })();
    on_comm(comm, r)
}

/// `MPI_Reduce` and `MPI_Reduce_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Reduce`.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        unaliased(comm, sendbuf, recvbuf, Some(root), count != 0, call),
    ) {
        return rc;
    }
    let c = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Ireduce_c(
                    sendbuf, recvbuf, count, datatype, op, root, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    // SAFETY: the caller's contract.
    unsafe {
        reduction(
            &c,
            sendbuf,
            recvbuf,
            count,
            datatype,
            op,
            comm,
            Some(root),
            None,
            call,
        )
    }
}

/// `MPI_Allreduce` and `MPI_Allreduce_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Allreduce`.
#[allow(clippy::too_many_arguments)]
unsafe fn allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        unaliased(comm, sendbuf, recvbuf, None, count != 0, call),
    ) {
        return rc;
    }
    let c = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Iallreduce_c(
                    sendbuf, recvbuf, count, datatype, op, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    // SAFETY: the caller's contract.
    unsafe {
        reduction(
            &c, sendbuf, recvbuf, count, datatype, op, comm, None, None, call,
        )
    }
}

/// `MPI_Scan` and `MPI_Exscan` (`inclusive`: a scan; rank i gets the reduction of ranks
/// 0 to i, else of ranks 0 to i - 1), one body for the `int` and the `MPI_Count` counts
/// (the error messages name `call`).
///
/// # Safety
/// The caller's contract of `MPI_Scan`.
#[allow(clippy::too_many_arguments)]
unsafe fn prefix(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    inclusive: bool,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        unaliased(comm, sendbuf, recvbuf, None, count != 0, call),
    ) {
        return rc;
    }
    let c = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on (refused there: no scan on an
        // intercommunicator).
        let rc = unsafe {
            if inclusive {
                crate::coll::vcoll::MPI_Iscan_c(sendbuf, recvbuf, count, datatype, op, comm, &mut q)
            } else {
                crate::coll::vcoll::MPI_Iexscan_c(
                    sendbuf, recvbuf, count, datatype, op, comm, &mut q,
                )
            }
        };
        // SAFETY: the request it made.
        return unsafe { waited(rc, &mut q) };
    }
    let scan = Some(inclusive);
    // SAFETY: the caller's contract.
    unsafe {
        reduction(
            &c, sendbuf, recvbuf, count, datatype, op, comm, None, scan, call,
        )
    }
}

/// `MPI_Scan` and `MPI_Scan_c` ([`prefix`]).
///
/// # Safety
/// The caller's contract of `MPI_Scan`.
unsafe fn scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { prefix(sendbuf, recvbuf, count, datatype, op, comm, true, call) }
}

/// `MPI_Exscan` and `MPI_Exscan_c` ([`prefix`]).
///
/// # Safety
/// The caller's contract of `MPI_Exscan`.
unsafe fn exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { prefix(sendbuf, recvbuf, count, datatype, op, comm, false, call) }
}

/// The arguments of a gather, scatter, allgather or alltoall.
struct Moves {
    c: CommRef,
    st: Option<TypeRef>,
    sn: usize,
    rt: Option<TypeRef>,
    rn: usize,
}

/// Checks the arguments of a gather, scatter, allgather or alltoall: each side's type
/// and count per block where that side is used, and its buffer.
fn moves(
    c: CommRef,
    (sendbuf, sc, sdt): (*const c_void, MPI_Count, MPI_Datatype),
    (recvbuf, rc, rdt): (*mut c_void, MPI_Count, MPI_Datatype),
    send_used: bool,
    recv_used: bool,
    call: &'static str,
) -> Result<Moves, MpiError> {
    let m = Moves {
        c,
        st: if send_used {
            Some(committed_ref(sdt, call)?)
        } else {
            None
        },
        sn: if send_used { ccount(sc, call)? } else { 0 },
        rt: if recv_used {
            Some(committed_ref(rdt, call)?)
        } else {
            None
        },
        rn: if recv_used { ccount(rc, call)? } else { 0 },
    };
    if let Some(st) = &m.st {
        buffer(sendbuf as usize, m.sn, st, call, "sendbuf")?;
    }
    if let Some(rt) = &m.rt {
        buffer(recvbuf as usize, m.rn, rt, call, "recvbuf")?;
    }
    Ok(m)
}

/// The program's send and receive buffers as bytes, used in place (no copies, and the
/// same memory call after call, which Spools' large-message paths reuse), when both
/// datatypes are contiguous, the byte counts agree (`send` bytes per block either way)
/// and the buffers do not overlap; `None` sends the call down the packing path.
///
/// # Safety
/// `sendbuf` holds `sn` bytes and `recvbuf` `rn` bytes (the caller's contract).
unsafe fn in_place_bytes<'a>(
    sendbuf: *const c_void,
    sn: usize,
    recvbuf: *mut c_void,
    rn: usize,
) -> Option<(&'a [u8], &'a mut [u8])> {
    let (s, r) = (sendbuf as usize, recvbuf as usize);
    // Empty buffers may be NULL (no slice is made of them); others must not be.
    let apart = sn == 0 || rn == 0 || s + sn <= r || r + rn <= s;
    if !apart || (sn > 0 && s == 0) || (rn > 0 && r == 0) {
        return None;
    }
    let send: &[u8] = if sn == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract: `sn` readable bytes, apart from `recvbuf`'s.
        unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), sn) }
    };
    let recv: &mut [u8] = if rn == 0 {
        &mut []
    } else {
        // SAFETY: the caller's contract: `rn` writable bytes.
        unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), rn) }
    };
    Some((send, recv))
}

/// Whether the blocks of a regular collective can move in place: both datatypes
/// contiguous with the same bytes per block.
fn same_contiguous(m: &Moves) -> Option<(usize, usize)> {
    match (m.st.as_ref(), m.rt.as_ref()) {
        (Some(st), Some(rt))
            if st.contiguous() && rt.contiguous() && m.sn * st.size == m.rn * rt.size =>
        {
            Some((m.sn * st.size, m.rn * rt.size))
        }
        _ => None,
    }
}

/// Bytes of one block on a side of a rooted collective when its datatype is contiguous
/// (`Some(0)` for a side this rank does not use), else `None`.
fn contiguous_block(t: Option<&TypeObj>, n: usize) -> Option<usize> {
    match t {
        None => Some(0),
        Some(t) if t.contiguous() => Some(n * t.size),
        Some(_) => None,
    }
}

/// `MPI_Gather` and `MPI_Gather_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Gather`.
#[allow(clippy::too_many_arguments)]
unsafe fn gather(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        unaliased(
            comm,
            sendbuf,
            own_block(recvbuf, recvtype, i64::from(root) * recvcount),
            Some(root),
            sendcount != 0 && recvcount != 0,
            call,
        ),
    ) {
        return rc;
    }
    let c0 = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c0.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Igather_c(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let r = (|| {
        let root = root_of(&c0, root, call)?;
        let me_root = c0.comm.rank() == root;
        let inplace = me_root && in_place(sendbuf);
        let m = moves(
            c0,
            (sendbuf, sendcount, sendtype),
            (recvbuf, recvcount, recvtype),
            !inplace,
            me_root,
            call,
        )?;
        let blocks = (
            contiguous_block(m.st.as_deref(), m.sn),
            contiguous_block(m.rt.as_deref(), m.rn),
        );
        if let (false, (Some(sb), Some(rb))) = (inplace, blocks) {
            let size = m.c.comm.size() as usize;
            // Contiguous types with blocks of one length: the program's buffers in place.
            // SAFETY: the caller's contract: `sb` bytes to send; at the root, `size`
            // blocks of `rb` bytes to receive (elsewhere none).
            let bufs = unsafe { in_place_bytes(sendbuf, sb, recvbuf, rb * size) };
            if let (true, Some((s, r))) = (!me_root || rb == sb, bufs) {
                m.c.comm.gather(s, r, root)?;
                return Ok(());
            }
        }
        let mine = if inplace {
            let rt =
                m.rt.as_ref()
                    .ok_or_else(|| MpiError::invalid(MPI_ERR_TYPE, "no recvtype"))?;
            // SAFETY: the root's block of `recvbuf` (the caller's contract).
            unsafe {
                data(
                    recvbuf
                        .cast::<u8>()
                        .wrapping_offset(root as isize * m.rn as isize * rt.extent)
                        .cast(),
                    m.rn,
                    rt,
                )
            }
            .into_owned()
        } else {
            let st =
                m.st.as_ref()
                    .ok_or_else(|| MpiError::invalid(MPI_ERR_TYPE, "no sendtype"))?;
            // SAFETY: the caller's contract.
            unsafe { data(sendbuf, m.sn, st) }.into_owned()
        };
        // A root whose own part is not as long as its receive blocks (the ranks'
        // counts disagree) still takes part, with a block of the receive's length, so
        // the others end; it then fails (and never writes past its receive buffer).
        let block = match (me_root, m.rt.as_ref()) {
            (true, Some(rt)) => m.rn * rt.size,
            _ => mine.len(),
        };
        let own_len = mine.len();
        let mut mine = mine;
        mine.resize(block, 0);
        let mut all = if me_root {
            vec![0u8; block * m.c.comm.size() as usize]
        } else {
            Vec::new()
        };
        m.c.comm.gather(&mine, &mut all, root)?;
        if own_len != block {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                format!(
                    "{call}: the root's own part of {own_len} bytes differs from its receive blocks of {block}"
                ),
            ));
        }
        if let (true, Some(rt)) = (me_root, m.rt.as_ref()) {
            // SAFETY: `recvbuf` holds size x recvcount elements at the root.
            unsafe { put(&all, recvbuf, rt) };
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Scatter` and `MPI_Scatter_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Scatter`.
#[allow(clippy::too_many_arguments)]
unsafe fn scatter(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        // The root's own send block against its receive (in place: no alias).
        unaliased(
            comm,
            recvbuf,
            own_block(sendbuf, sendtype, i64::from(root) * sendcount),
            Some(root),
            recvcount != 0 && sendcount != 0,
            call,
        ),
    ) {
        return rc;
    }
    let c0 = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c0.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Iscatter_c(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let r = (|| {
        let root = root_of(&c0, root, call)?;
        let me_root = c0.comm.rank() == root;
        let inplace = me_root && in_place(recvbuf);
        let m = moves(
            c0,
            (sendbuf, sendcount, sendtype),
            (recvbuf, recvcount, recvtype),
            me_root,
            !inplace,
            call,
        )?;
        let size = m.c.comm.size() as usize;
        let blocks = (
            contiguous_block(m.st.as_deref(), m.sn),
            contiguous_block(m.rt.as_deref(), m.rn),
        );
        if let (false, (Some(sb), Some(rb))) = (inplace, blocks) {
            // Contiguous types with blocks of one length: the program's buffers in place.
            // SAFETY: the caller's contract: at the root, `size` blocks of `sb` bytes to
            // send (elsewhere none); `rb` bytes to receive.
            let bufs = unsafe { in_place_bytes(sendbuf, sb * size, recvbuf, rb) };
            if let (true, Some((s, r))) = (!me_root || rb == sb, bufs) {
                m.c.comm.scatter(s, r, root)?;
                return Ok(());
            }
        }
        let all = match (me_root, m.st.as_ref()) {
            // SAFETY: size x sendcount elements at the root (the caller's contract).
            (true, Some(st)) => unsafe { data(sendbuf, m.sn * size, st) }.into_owned(),
            _ => Vec::new(),
        };
        let block = if me_root {
            all.len() / size.max(1)
        } else {
            m.rn * m.rt.as_ref().map_or(0, |t| t.size)
        };
        let mut mine = vec![0u8; block];
        m.c.comm.scatter(&all, &mut mine, root)?;
        let want = m.rn * m.rt.as_ref().map_or(0, |t| t.size);
        if me_root && !inplace && block != want {
            // The root's counts disagree: it took part (the others end), and never
            // writes past its receive buffer.
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                format!("{call}: the root's own block of {block} bytes differs from its receive of {want}"),
            ));
        }
        if let (false, Some(rt)) = (inplace, m.rt.as_ref()) {
            // SAFETY: `recvbuf` holds recvcount elements.
            unsafe { put(&mine, recvbuf, rt) };
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Allgather` and `MPI_Allgather_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Allgather`.
#[allow(clippy::too_many_arguments)]
unsafe fn allgather(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    let c0 = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    let me = i64::from(c0.comm.rank());
    let own = own_block(recvbuf, recvtype, me * recvcount);
    if let Some(rc) = aliased(
        comm,
        unaliased(comm, sendbuf, own, None, sendcount != 0, call),
    ) {
        return rc;
    }
    if c0.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Iallgather_c(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let r = (|| {
        let inplace = in_place(sendbuf);
        let m = moves(
            c0,
            (sendbuf, sendcount, sendtype),
            (recvbuf, recvcount, recvtype),
            !inplace,
            true,
            call,
        )?;
        let rt =
            m.rt.as_ref()
                .ok_or_else(|| MpiError::invalid(MPI_ERR_TYPE, "no recvtype"))?;
        let size = m.c.comm.size() as usize;
        if let (false, Some((sb, rb))) = (inplace, same_contiguous(&m)) {
            // SAFETY: the caller's contract: a block to send, `size` blocks to receive.
            if let Some((s, r)) = unsafe { in_place_bytes(sendbuf, sb, recvbuf, rb * size) } {
                m.c.comm.allgather(s, r)?;
                return Ok(());
            }
        }
        let me = m.c.comm.rank() as isize;
        let mine = match (inplace, m.st.as_ref()) {
            // SAFETY: this rank's block of `recvbuf` (the caller's contract).
            (true, _) => unsafe {
                data(
                    recvbuf
                        .cast::<u8>()
                        .wrapping_offset(me * m.rn as isize * rt.extent)
                        .cast(),
                    m.rn,
                    rt,
                )
            }
            .into_owned(),
            // SAFETY: the caller's contract.
            (false, Some(st)) => unsafe { data(sendbuf, m.sn, st) }.into_owned(),
            (false, None) => Vec::new(),
        };
        let mut all = vec![0u8; mine.len() * m.c.comm.size() as usize];
        m.c.comm.allgather(&mine, &mut all)?;
        // SAFETY: `recvbuf` holds size x recvcount elements.
        unsafe { put(&all, recvbuf, rt) };
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Alltoall` and `MPI_Alltoall_c`: one body for both counts (`int`, `MPI_Count`; errors
/// name `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Alltoall`.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoall(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    call: &'static str,
) -> c_int {
    if let Some(rc) = aliased(
        comm,
        unaliased(comm, sendbuf, recvbuf, None, sendcount != 0, call),
    ) {
        return rc;
    }
    let c0 = match comm_or_raise(comm, call) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    if c0.inter.is_some() {
        let mut q = MPI_REQUEST_NULL;
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            waited(
                crate::coll::vcoll::MPI_Ialltoall_c(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mut q,
                ),
                &mut q,
            )
        };
    }
    let r = (|| {
        let inplace = in_place(sendbuf);
        let m = moves(
            c0,
            (sendbuf, sendcount, sendtype),
            (recvbuf, recvcount, recvtype),
            !inplace,
            true,
            call,
        )?;
        let rt =
            m.rt.as_ref()
                .ok_or_else(|| MpiError::invalid(MPI_ERR_TYPE, "no recvtype"))?;
        let size = m.c.comm.size() as usize;
        if let (false, Some((sb, rb))) = (inplace, same_contiguous(&m)) {
            // SAFETY: the caller's contract: `size` blocks each way.
            if let Some((s, r)) = unsafe { in_place_bytes(sendbuf, sb * size, recvbuf, rb * size) }
            {
                m.c.comm.alltoall(s, r)?;
                return Ok(());
            }
        }
        let send = match (inplace, m.st.as_ref()) {
            // SAFETY: `recvbuf` holds size x recvcount elements (the caller's contract).
            (true, _) => unsafe { data(recvbuf, m.rn * size, rt) }.into_owned(),
            // SAFETY: `sendbuf` holds size x sendcount elements (the caller's contract).
            (false, Some(st)) => unsafe { data(sendbuf, m.sn * size, st) }.into_owned(),
            (false, None) => Vec::new(),
        };
        let mut all = vec![0u8; m.rn * rt.size * size];
        m.c.comm.alltoall(&send, &mut all)?;
        // SAFETY: `recvbuf` holds size x recvcount elements.
        unsafe { put(&all, recvbuf, rt) };
        Ok(())
    })();
    on_comm(comm, r)
}

/// Defines the `int` form (`$int`) and the large-count form (`$large`) of a blocking
/// collective, both calling `$body` with the counts as `MPI_Count`. One algorithm for
/// every count: which one runs never depends on a rank's own counts, which may differ
/// between ranks (a gather's `recvcount` matters at the root only, and type signatures
/// match while counts of different datatypes do not), so ranks never take different
/// protocols. mpi4py calls the `_c` forms whenever the library has them.
macro_rules! both_forms {
    ($int:ident, $large:ident; $body:ident; ($($p:ident: $ti:ty => $tl:ty),*)) => {
        #[doc = concat!("`", stringify!($int), "`.")]
        #[no_mangle]
        #[allow(clippy::useless_conversion)]
        pub unsafe extern "C" fn $int($($p: $ti),*) -> c_int {
            // SAFETY: the caller's contract, passed on (the counts widened).
            unsafe { $body($($p.into()),*, stringify!($int)) }
        }

        #[doc = concat!("`", stringify!($large), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $large($($p: $tl),*) -> c_int {
            // SAFETY: the caller's contract, passed on.
            unsafe { $body($($p),*, stringify!($large)) }
        }
    };
}

both_forms!(MPI_Bcast, MPI_Bcast_c; bcast;
    (buffer: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Reduce, MPI_Reduce_c; reduce_;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Allreduce, MPI_Allreduce_c; allreduce;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Scan, MPI_Scan_c; scan;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Exscan, MPI_Exscan_c; exscan;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Gather, MPI_Gather_c; gather;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Scatter, MPI_Scatter_c; scatter;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Allgather, MPI_Allgather_c; allgather;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm));
both_forms!(MPI_Alltoall, MPI_Alltoall_c; alltoall;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm));
