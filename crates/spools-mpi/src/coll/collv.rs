//! The blocking allgatherv, alltoallv, gatherv, scatterv and reduce-scatters of an
//! intracommunicator on Spools' own (`Communicator::allgatherv`, `alltoallv`, `gatherv`,
//! `scatterv`, `reduce_scatter`: the shared-memory engine within a host, the ring,
//! pairwise or hierarchical algorithms beyond, a root's direct messages), instead of
//! `vcoll`'s exchange of packed copies. Gatherv and scatterv likewise use the root's
//! buffer in place when its datatype is contiguous and its blocks lie one after the
//! other in rank order. Allgatherv and alltoallv use
//! the program's buffers in place when a side's datatype is contiguous and its blocks lie
//! one after the other in rank order, else one packed copy, unpacked block by block; a reduce-scatter reduces packed elements (a predefined operator as
//! Spools' typed one, a user function on the caller's thread, block by block).
//! Intercommunicators, and reduce-scatters combined byte-wise (MINLOC, long double and
//! complex arithmetic, whose contributions are not packed), wait for the non-blocking
//! form (`vcoll`).

use std::borrow::Cow;
use std::ffi::{c_int, c_void};

use spools::{Communicator, Element, Op};

use crate::abi::*;
use crate::coll::op::{cast, direct, engine, slice_op, with_op, Engine, Reducer, WithOp};
use crate::coll::vcoll::{arr, counts, root_of, Counts, Ints, Wide};
use crate::coll::{is_inter, waited};
use crate::comm::comm_ref;
use crate::datatype::{
    block, buffer, committed, committed_ref, count as ccount, unpack, TypeObj, TypeRef,
};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::p2p::data;

/// `MPI_Allgatherv` and `MPI_Allgatherv_c`: one body for both widths (errors name
/// `call`), so that ranks calling either form meet in the same algorithm.
///
/// # Safety
/// The caller's contract of `MPI_Allgatherv`.
#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv<C: Wide, K: Copy + Wide, D: Copy + Wide>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    displs: *const D,
    recvtype: MPI_Datatype,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm_ref(comm_h, call)?;
    let n = c.comm.size() as usize;
    let me = c.comm.rank() as usize;
    let sendcount = sendcount.wide();
    if !displs.is_null() {
        // SAFETY: `size` values (the caller's contract).
        let d = unsafe { *displs.add(me) }.wide();
        let own = crate::coll::alias::own_block(recvbuf, recvtype, d);
        crate::coll::alias::unaliased(comm_h, sendbuf, own, None, sendcount != 0, call)?;
    }
    // SAFETY: `size` values each (the caller's contract).
    let (k, d, rt) = unsafe {
        blocks(
            recvbuf as usize,
            (recvcounts, displs),
            recvtype,
            n,
            (call, "recvbuf"),
        )
    }?;
    let at = |i: usize| (recvbuf as isize).wrapping_add(d[i] as isize * rt.extent) as *mut u8;
    let mine: Cow<'_, [u8]> = if sendbuf as usize == MPI_IN_PLACE {
        // SAFETY: this rank's block of the receive buffer (checked above).
        Cow::Owned(unsafe { data(at(me).cast_const().cast(), k[me], &rt) }.into_owned())
    } else {
        let (sn, st) = (ccount(sendcount, call)?, committed_ref(sendtype, call)?);
        buffer(sendbuf as usize, sn, &st, call, "sendbuf")?;
        // SAFETY: `sn` elements of `st` (the caller's contract, checked above); borrowed
        // only where it lies apart from the receive buffer (below).
        unsafe { data(sendbuf, sn, &st) }
    };
    let into = Landing {
        recvbuf,
        k: &k,
        d: &d,
        rt: &rt,
        me,
        skip: false,
    };
    // SAFETY: the receive blocks, checked above.
    unsafe {
        into.gather(mine, call, |mine, out, bytes| {
            c.comm.allgatherv(mine, out, bytes)
        })
    }
}

/// `MPI_Gatherv` and `MPI_Gatherv_c` on an intracommunicator: every rank's part to the
/// root, whose `recvcounts` and `displs` (there only) say where each lands; the root's
/// own part in place (`MPI_IN_PLACE`) or from its send buffer. A part of another length
/// than the root's count for it fails (the root reports it), after every rank took part.
///
/// # Safety
/// The caller's contract of `MPI_Gatherv`.
#[allow(clippy::too_many_arguments)]
unsafe fn gatherv<C: Wide, K: Copy + Wide, D: Copy + Wide>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    displs: *const D,
    recvtype: MPI_Datatype,
    root: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm_ref(comm_h, call)?;
    let n = c.comm.size() as usize;
    let me = c.comm.rank() as usize;
    let root = root_of(&c, root, call)?;
    let sendcount = sendcount.wide();
    let own = |rt: &crate::datatype::TypeObj, k: usize, d: i64| -> Result<Vec<u8>, MpiError> {
        let at = (recvbuf as isize).wrapping_add(d as isize * rt.extent);
        // SAFETY: the root's own receive block (checked by the caller).
        Ok(unsafe { data(at as *const c_void, k, rt) }.into_owned())
    };
    let part = || -> Result<Cow<'_, [u8]>, MpiError> {
        let (sn, st) = (ccount(sendcount, call)?, committed_ref(sendtype, call)?);
        buffer(sendbuf as usize, sn, &st, call, "sendbuf")?;
        // SAFETY: `sn` elements of `st` (the caller's contract, checked above).
        Ok(unsafe { data(sendbuf, sn, &st) })
    };
    if me != root as usize {
        let mine = part()?;
        let mut bytes: Counts = smallvec::smallvec![0; n];
        bytes[me] = mine.len();
        return Ok(c.comm.gatherv(&mine, &mut [], &bytes, root)?);
    }
    // SAFETY: `size` values each at the root (the caller's contract).
    let (k, d, rt) = unsafe {
        blocks(
            recvbuf as usize,
            (recvcounts, displs),
            recvtype,
            n,
            (call, "recvbuf"),
        )
    }?;
    let in_place = sendbuf as usize == MPI_IN_PLACE;
    let own_block = crate::coll::alias::own_block(recvbuf, recvtype, d[me]);
    crate::coll::alias::unaliased(
        comm_h,
        sendbuf,
        own_block,
        None,
        sendcount != 0 && k[me] != 0,
        call,
    )?;
    let mine: Cow<'_, [u8]> = if in_place {
        Cow::Owned(own(&rt, k[me], d[me])?)
    } else {
        part()?
    };
    let into = Landing {
        recvbuf,
        k: &k,
        d: &d,
        rt: &rt,
        me,
        skip: in_place,
    };
    // SAFETY: the receive blocks, checked above.
    unsafe {
        into.gather(mine, call, |mine, out, bytes| {
            c.comm.gatherv(mine, out, bytes, root)
        })
    }
}

/// `MPI_Scatterv` and `MPI_Scatterv_c` on an intracommunicator: block i of the root's
/// send buffer (`sendcounts` and `displs`, there only) to rank i; the root's own stays
/// where it is with `MPI_IN_PLACE`. A receive count of another length than the root's
/// block fails, after every rank took part.
///
/// # Safety
/// The caller's contract of `MPI_Scatterv`.
#[allow(clippy::too_many_arguments)]
unsafe fn scatterv<K: Copy + Wide, D: Copy + Wide, C: Wide>(
    sendbuf: *const c_void,
    sendcounts: *const K,
    displs: *const D,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    root: c_int,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm_ref(comm_h, call)?;
    let n = c.comm.size() as usize;
    let me = c.comm.rank() as usize;
    let root = root_of(&c, root, call)?;
    let recvcount = recvcount.wide();
    let in_place = me == root as usize && recvbuf as usize == MPI_IN_PLACE;
    // This rank's receive side: its type and count, unless in place at the root.
    let side = if in_place {
        None
    } else {
        let (rn, rt) = (ccount(recvcount, call)?, committed_ref(recvtype, call)?);
        buffer(recvbuf as usize, rn, &rt, call, "recvbuf")?;
        Some((rn, rt))
    };
    let want = side.as_ref().map_or(0, |(rn, rt)| rn * rt.size);
    let (whole, bytes): (Cow<'_, [u8]>, Counts) = if me == root as usize {
        // SAFETY: `size` values each at the root (the caller's contract).
        let (k, d, st) = unsafe {
            blocks(
                sendbuf as usize,
                (sendcounts, displs),
                sendtype,
                n,
                (call, "sendbuf"),
            )
        }?;
        let own_block = crate::coll::alias::own_block(sendbuf, sendtype, d[me]);
        crate::coll::alias::unaliased(
            comm_h,
            recvbuf,
            own_block,
            None,
            recvcount != 0 && k[me] != 0,
            call,
        )?;
        let bytes: Counts = k.iter().map(|&k| k * st.size).collect();
        let total: usize = bytes.iter().sum();
        let whole = if packed_displs(&k, &d) && st.contiguous() && total > 0 && !sendbuf.is_null() {
            // SAFETY: the send buffer's blocks, one after the other from its start, are
            // `total` bytes (checked above).
            Cow::Borrowed(unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), total) })
        } else {
            let mut all = Vec::with_capacity(total);
            for (&k, &d) in k.iter().zip(&d) {
                let at = (sendbuf as isize).wrapping_add(d as isize * st.extent);
                // SAFETY: block i of the send buffer (checked above).
                all.extend_from_slice(&unsafe { data(at as *const c_void, k, &st) });
            }
            Cow::Owned(all)
        };
        (whole, bytes)
    } else {
        let mut bytes: Counts = smallvec::smallvec![0; n];
        bytes[me] = want;
        (Cow::Borrowed(&[][..]), bytes)
    };
    // The root receives its own block as it sends it: a receive count that differs fails
    // once every rank had its block.
    let recv_span = recvbuf as usize..(recvbuf as usize).saturating_add(want);
    let contiguous = matches!(&side, Some((_, rt)) if rt.contiguous());
    if contiguous
        && want == bytes[me]
        && want > 0
        && !recvbuf.is_null()
        && !overlaps(&whole, &recv_span)
    {
        // SAFETY: `want` bytes at the receive buffer (checked above), apart from the
        // send blocks (an overlap, erroneous, goes through a copy below).
        let out = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), want) };
        return Ok(c.comm.scatterv(&whole, &bytes, out, root)?);
    }
    let mut tmp = vec![0u8; bytes[me]];
    c.comm.scatterv(&whole, &bytes, &mut tmp, root)?;
    let Some((_, rt)) = side else {
        return Ok(());
    };
    if want != bytes[me] {
        return Err(truncated(call, "receives", want, bytes[me]));
    }
    if want > 0 {
        // SAFETY: `rn` elements of `rt` at the receive buffer (checked above).
        unsafe { unpack(&tmp, recvbuf.cast::<u8>(), &rt) };
    }
    Ok(())
}

/// Where the blocks of a gather (to every rank, or to a root) land: blocks of `k`
/// elements of `rt` at `d` extents from `recvbuf` (checked), this rank's the `me`th; with
/// `skip`, this rank's block is in place already.
struct Landing<'a> {
    recvbuf: *mut c_void,
    k: &'a [usize],
    d: &'a [i64],
    rt: &'a TypeObj,
    me: usize,
    skip: bool,
}

impl Landing<'_> {
    /// Runs `run(mine, out, bytes)` (the collective: this rank's part `mine`, every rank's
    /// in `out`, `bytes` of each) and puts what arrived in the blocks: in the receive
    /// buffer itself where the blocks follow each other in a contiguous type (`mine`
    /// read in place where it lies apart from them), else through one packed copy. A part
    /// of another length than this rank's own count takes part with what it sends, so
    /// that the others find the disagreement, and then fails.
    ///
    /// # Safety
    /// The blocks were checked against the receive buffer.
    unsafe fn gather(
        &self,
        mine: Cow<'_, [u8]>,
        call: &'static str,
        run: impl FnOnce(&[u8], &mut [u8], &[usize]) -> Result<(), spools::MsgError>,
    ) -> Result<(), MpiError> {
        let (recvbuf, rt, me) = (self.recvbuf, self.rt, self.me);
        let mut bytes: Counts = self.k.iter().map(|&k| k * rt.size).collect();
        let agrees = mine.len() == bytes[me];
        bytes[me] = mine.len();
        let total: usize = bytes.iter().sum();
        if agrees
            && packed_displs(self.k, self.d)
            && rt.contiguous()
            && total > 0
            && !recvbuf.is_null()
        {
            // The send buffer in place when it lies apart from the receive buffer: a peer
            // that reads it in place (single copy) then reads lines this rank only reads,
            // not a copy rewritten at every call, whose lines the next call's copy would
            // take back from that peer. One that overlaps (not MPI_IN_PLACE: erroneous)
            // is copied.
            let recv_span = recvbuf as usize..(recvbuf as usize).saturating_add(total);
            let mine = match mine {
                Cow::Borrowed(b) if !overlaps(b, &recv_span) => Cow::Borrowed(b),
                m => Cow::Owned(m.into_owned()),
            };
            // SAFETY: the receive buffer's blocks, one after the other from its start, are
            // `total` bytes (checked by the caller); `mine` lies apart from them.
            let out = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
            return Ok(run(&mine, out, &bytes)?);
        }
        let mut all = vec![0u8; total];
        // A copy: the receive buffer is written below, by raw pointer, and may overlap it.
        let mine = mine.into_owned();
        run(&mine, &mut all, &bytes)?;
        if !agrees {
            return Err(truncated(call, "sends", mine.len(), self.k[me] * rt.size));
        }
        let mut from = 0;
        for (i, &len) in bytes.iter().enumerate() {
            if len > 0 && !(self.skip && i == me) {
                let at = (recvbuf as isize).wrapping_add(self.d[i] as isize * rt.extent);
                // SAFETY: block i of the receive buffer holds `k[i]` elements, `len`
                // bytes (checked by the caller).
                unsafe { unpack(&all[from..from + len], at as *mut u8, rt) };
            }
            from += len;
        }
        Ok(())
    }
}

/// A part of this rank's that differs from the count for it (its own, or the root's).
fn truncated(call: &'static str, what: &str, got: usize, want: usize) -> MpiError {
    MpiError::invalid(
        MPI_ERR_TRUNCATE,
        format!("{call}: this rank {what} {got} bytes where its count takes {want}"),
    )
}

/// A v collective's blocks, checked: their counts, displacements and datatype.
type Checked = (Counts, Ints, TypeRef);

/// The blocks of a v collective's buffer at `buf`: `counts` elements of `dt` at `displs`
/// extents each (`n` of them), checked; with the datatype.
///
/// # Safety
/// `counts` and `displs` hold `n` values each (the caller's contract).
unsafe fn blocks<K: Copy + Wide, D: Copy + Wide>(
    buf: usize,
    (counts_at, displs): (*const K, *const D),
    dt: MPI_Datatype,
    n: usize,
    (call, what): (&'static str, &'static str),
) -> Result<Checked, MpiError> {
    // SAFETY: the caller's contract.
    let (k, d) = unsafe {
        (
            counts(&arr(counts_at, n, call)?, call)?,
            arr(displs, n, call)?,
        )
    };
    let t = committed_ref(dt, call)?;
    for (&k, &d) in k.iter().zip(&d) {
        block(buf, d as isize * t.extent, k, &t, call, what)?;
    }
    Ok((k, d, t))
}

/// Whether the bytes of `b` share an address with `span`.
fn overlaps(b: &[u8], span: &std::ops::Range<usize>) -> bool {
    let at = b.as_ptr() as usize;
    !b.is_empty() && at < span.end && span.start < at.saturating_add(b.len())
}

/// Whether `d` puts blocks of `k` elements one after the other from 0, in rank order.
fn packed_displs(k: &[usize], d: &[i64]) -> bool {
    d.iter()
        .zip(k)
        .try_fold(0i64, |next, (&d, &k)| {
            (d == next).then_some(next + k as i64)
        })
        .is_some()
}

/// The blocking alltoallv: block j of this rank's send blocks (`sk[j]` elements of `st`
/// at `sd[j]` extents; in place, the receive blocks) to rank j, rank i's block for this
/// rank into receive block i.
///
/// # Safety
/// The caller's contract of `MPI_Alltoallv`.
unsafe fn alltoallv(
    sendbuf: *const c_void,
    (sk, sd, st): (&[i64], &[i64], MPI_Datatype),
    recvbuf: *mut c_void,
    (rk, rd, rt): (&[i64], &[i64], MPI_Datatype),
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm_ref(comm_h, call)?;
    let inplace = sendbuf as usize == MPI_IN_PLACE;
    let rt = committed_ref(rt, call)?;
    let rk = counts(rk, call)?;
    for (&k, &d) in rk.iter().zip(rd) {
        block(
            recvbuf as usize,
            d as isize * rt.extent,
            k,
            &rt,
            call,
            "recvbuf",
        )?;
    }
    let rat = |i: usize| (recvbuf as isize).wrapping_add(rd[i] as isize * rt.extent) as *mut u8;
    // This rank's send blocks, one after the other.
    let (send, sbytes): (std::borrow::Cow<'_, [u8]>, Counts) = if inplace {
        let mut all = Vec::new();
        for (i, &k) in rk.iter().enumerate() {
            // SAFETY: receive block i (checked above).
            all.extend_from_slice(&unsafe { data(rat(i).cast_const().cast(), k, &rt) });
        }
        (all.into(), rk.iter().map(|k| k * rt.size).collect())
    } else {
        let st = committed_ref(st, call)?;
        let sk = counts(sk, call)?;
        for (&k, &d) in sk.iter().zip(sd) {
            block(
                sendbuf as usize,
                d as isize * st.extent,
                k,
                &st,
                call,
                "sendbuf",
            )?;
        }
        let sbytes: Counts = sk.iter().map(|k| k * st.size).collect();
        let total: usize = sbytes.iter().sum();
        if st.contiguous() && packed_displs(&sk, sd) && total > 0 && !sendbuf.is_null() {
            // SAFETY: the send blocks, one after the other from the buffer's start, are
            // `total` bytes (checked above).
            let whole = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), total) };
            (whole.into(), sbytes)
        } else {
            let mut all = Vec::with_capacity(total);
            for (i, &k) in sk.iter().enumerate() {
                let p = (sendbuf as isize).wrapping_add(sd[i] as isize * st.extent);
                // SAFETY: send block i (checked above).
                all.extend_from_slice(&unsafe { data(p as *const c_void, k, &st) });
            }
            (all.into(), sbytes)
        }
    };
    let rbytes: Counts = rk.iter().map(|k| k * rt.size).collect();
    let total: usize = rbytes.iter().sum();
    let me = c.comm.rank() as usize;
    // A block to itself of two lengths: this rank still takes part (its peers are owed
    // their blocks), with that block cut or padded to its receive length, and fails.
    let (send, sbytes, own) = match (sbytes.get(me), rbytes.get(me)) {
        (Some(&s), Some(&r)) if s != r => {
            let at: usize = sbytes[..me].iter().sum();
            let mut fixed = send[..at].to_vec();
            fixed.extend_from_slice(&send[at..at + s.min(r)]);
            fixed.resize(at + r, 0);
            fixed.extend_from_slice(&send[at + s..]);
            let mut sb = sbytes.clone();
            sb[me] = r;
            (fixed.into(), sb, Some((s, r)))
        }
        _ => (send, sbytes, None),
    };
    let direct = !inplace && own.is_none() && rt.contiguous() && packed_displs(&rk, rd);
    if direct && total > 0 && !recvbuf.is_null() {
        let (s0, r0) = (send.as_ptr() as usize, recvbuf as usize);
        if s0 + send.len() <= r0 || r0 + total <= s0 {
            // SAFETY: the receive blocks, one after the other from the buffer's start,
            // are `total` bytes (checked above), apart from the send bytes.
            let out = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
            return Ok(c.comm.alltoallv(&send, &sbytes, out, &rbytes)?);
        }
    }
    let mut all = vec![0u8; total];
    c.comm.alltoallv(&send, &sbytes, &mut all, &rbytes)?;
    if let Some((s, r)) = own {
        return Err(MpiError::invalid(
            MPI_ERR_TRUNCATE,
            format!("{call}: this rank's block to itself is {s} bytes sent and {r} received"),
        ));
    }
    let mut from = 0;
    for (i, &len) in rbytes.iter().enumerate() {
        if len > 0 {
            // SAFETY: receive block i holds `rk[i]` elements, `len` bytes (checked
            // above).
            unsafe { unpack(&all[from..from + len], rat(i), &rt) };
        }
        from += len;
    }
    Ok(())
}

/// The body of `MPI_Alltoallv` and `MPI_Alltoallv_c`: their count and displacement
/// arrays read (the send ones unless in place).
///
/// # Safety
/// The caller's contract of `MPI_Alltoallv`.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv_arrays<K: Copy + Wide, D: Copy + Wide>(
    sendbuf: *const c_void,
    sendcounts: *const K,
    sdispls: *const D,
    st: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    rdispls: *const D,
    rt: MPI_Datatype,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let n = comm_ref(comm_h, call)?.comm.size() as usize;
    // SAFETY: `size` values each (the caller's contract).
    let (rk, rd) = unsafe { (arr(recvcounts, n, call)?, arr(rdispls, n, call)?) };
    let (sk, sd) = if sendbuf as usize == MPI_IN_PLACE {
        (Ints::new(), Ints::new())
    } else {
        // SAFETY: as above.
        unsafe { (arr(sendcounts, n, call)?, arr(sdispls, n, call)?) }
    };
    // As MPICH: the same counts, displacements and type on both sides (a program may
    // send from one part of a buffer and receive into another with its displacements).
    let same = std::ptr::eq(sendcounts, recvcounts) && std::ptr::eq(sdispls, rdispls) && st == rt;
    let nonempty = same && sk.iter().any(|&k| k.wide() != 0);
    crate::coll::alias::unaliased(comm_h, sendbuf, recvbuf, None, nonempty, call)?;
    // SAFETY: the caller's contract.
    unsafe {
        alltoallv(
            sendbuf,
            (&sk, &sd, st),
            recvbuf,
            (&rk, &rd, rt),
            comm_h,
            call,
        )
    }
}

/// Whether a reduce-scatter of `dt` with `op` on `comm` waits for the non-blocking
/// form: on an intercommunicator, or combined byte-wise (see the module's comment). A
/// bad argument is reported by the blocking body.
fn exchanged(comm_h: MPI_Comm, dt: MPI_Datatype, op: MPI_Op) -> bool {
    is_inter(comm_h)
        || committed(dt, "a reduce-scatter")
            .and_then(|t| engine(op, dt, &t))
            .is_ok_and(|e| matches!(e, Engine::Bytes))
}

/// A reduce-scatter's input and output.
enum Io<'a> {
    /// The input packed (a copy); the result comes back as bytes.
    Packed(&'a [u8]),
    /// The program's own buffers, used in place: `send` holds `total` bytes and `recv`
    /// this rank's block of `mine` bytes, both aligned for the element type, disjoint.
    Direct {
        send: *const u8,
        total: usize,
        recv: *mut u8,
        mine: usize,
    },
}

/// A typed reduce-scatter: blocks of `counts` elements of `esize` bytes; this rank's
/// block, as bytes (nothing where it went to the program's buffer directly).
struct Blocks<'a> {
    c: &'a Communicator,
    io: Io<'a>,
    counts: &'a [usize],
    esize: usize,
}

impl WithOp for Blocks<'_> {
    type Out = Vec<u8>;

    fn with<T: Element>(self, op: Op<T>) -> Result<Vec<u8>, MpiError> {
        let per = std::mem::size_of::<T>().max(1);
        let counts: Vec<usize> = self.counts.iter().map(|k| k * self.esize / per).collect();
        let me = self.c.rank() as usize;
        let input = match self.io {
            Io::Packed(b) => b,
            Io::Direct {
                send,
                total,
                recv,
                mine,
            } => {
                // SAFETY: `Io::Direct`'s contract: aligned elements of `T`, disjoint.
                let (s, r) = unsafe {
                    (
                        std::slice::from_raw_parts(send.cast::<T>(), total / per),
                        std::slice::from_raw_parts_mut(recv.cast::<T>(), mine / per),
                    )
                };
                self.c.reduce_scatter(s, r, &counts, &op)?;
                return Ok(Vec::new());
            }
        };
        let send: Vec<T> = cast(input);
        let mut recv = vec![T::default(); counts.get(me).copied().unwrap_or(0)];
        self.c.reduce_scatter(&send, &mut recv, &counts, &op)?;
        Ok(spools::as_bytes(&recv).to_vec())
    }
}

/// The blocking reduce-scatter: every rank's input (`sendbuf`, or `recvbuf` in place)
/// of the sum of `k` elements of `dt` is combined with `op`, and block i (`k[i]`
/// elements) goes to rank i's `recvbuf`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter`.
unsafe fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    k: &[usize],
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let c = comm_ref(comm_h, call)?;
    let me = c.comm.rank() as usize;
    let t = committed(dt, call)?;
    let total: usize = k.iter().sum();
    let mine = k.get(me).copied().unwrap_or(0);
    // This rank's block is the only part of the receive buffer.
    crate::coll::alias::unaliased(comm_h, sendbuf, recvbuf, None, mine != 0, call)?;
    let src = if sendbuf as usize == MPI_IN_PLACE {
        buffer(recvbuf as usize, total, &t, call, "recvbuf")?;
        recvbuf.cast_const()
    } else {
        buffer(sendbuf as usize, total, &t, call, "sendbuf")?;
        buffer(recvbuf as usize, mine, &t, call, "recvbuf")?;
        sendbuf
    };
    let red = Reducer::new(op, dt, &t, total)?;
    let how = engine(op, dt, &t)?;
    // The program's buffers in place where they can be (typed, contiguous, aligned,
    // disjoint, not in place): no copy of the input, and the same buffers call after
    // call (see `spools-msg`'s `ring_reduce_scatter_into`).
    let (bytes, mine_bytes) = (total * t.size, mine * t.size);
    let not_in_place = std::ptr::eq(src, sendbuf);
    if let Engine::Typed(b, o) = how {
        let out = Some((recvbuf as usize, mine_bytes));
        if not_in_place && direct(&t, (src as usize, bytes), out) {
            let io = Io::Direct {
                send: src.cast(),
                total: bytes,
                recv: recvbuf.cast(),
                mine: mine_bytes,
            };
            let counts = k;
            with_op(
                b,
                o,
                Blocks {
                    c: &c.comm,
                    io,
                    counts,
                    esize: t.size,
                },
            )?;
            return Ok(());
        }
    }
    // SAFETY: the input holds `total` elements (checked above).
    let input = unsafe { red.input(src.cast()) };
    let out = match how {
        Engine::Typed(b, o) => with_op(
            b,
            o,
            Blocks {
                c: &c.comm,
                io: Io::Packed(&input),
                counts: k,
                esize: t.size,
            },
        )?,
        Engine::Bytes | Engine::User => {
            let bytes: Vec<usize> = k.iter().map(|k| k * t.size).collect();
            let mut out = vec![0u8; mine * t.size];
            c.comm
                .reduce_scatter(&input, &mut out, &bytes, &slice_op(&red))?;
            out
        }
    };
    // SAFETY: this rank's block of the receive buffer holds `mine` elements (checked
    // above).
    unsafe { red.with_count(mine).output(&out, recvbuf.cast()) };
    Ok(())
}

/// The body of `MPI_Reduce_scatter_block` and `MPI_Reduce_scatter_block_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter_block`.
unsafe fn reduce_scatter_block<C: Wide>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let n = comm_ref(comm_h, call)?.comm.size() as usize;
    let k = vec![ccount(recvcount.wide(), call)?; n];
    // SAFETY: the caller's contract.
    unsafe { reduce_scatter(sendbuf, recvbuf, &k, dt, op, comm_h, call) }
}

/// The body of `MPI_Reduce_scatter` and `MPI_Reduce_scatter_c`.
///
/// # Safety
/// The caller's contract of `MPI_Reduce_scatter`.
unsafe fn reduce_scatter_v<K: Copy + Wide>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const K,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm_h: MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let n = comm_ref(comm_h, call)?.comm.size() as usize;
    // SAFETY: `size` values (the caller's contract).
    let k = counts(&unsafe { arr(recvcounts, n, call) }?, call)?;
    // SAFETY: the caller's contract.
    unsafe { reduce_scatter(sendbuf, recvbuf, &k, dt, op, comm_h, call) }
}

/// The entry points `$int` and `$large` (`int` and `MPI_Count` counts) of one body,
/// generic over the widths, so that ranks calling either form meet in the same
/// algorithm: where `$exchanged` holds (an intercommunicator, a reduce-scatter combined
/// byte-wise) they wait for the non-blocking form (`vcoll`'s `$nb`, `$nb_c`).
macro_rules! both_widths {
    ($int:ident, $large:ident; $nb:ident, $nb_c:ident; $body:ident; $comm:ident;
     exchanged: $ex:expr; ($($p:ident: $ti:ty => $tl:ty),*)) => {
        #[doc = concat!("`", stringify!($int), "`.")]
        ///
        /// # Safety
        /// The caller's contract of the MPI function.
        #[no_mangle]
        pub unsafe extern "C" fn $int($($p: $ti),*) -> c_int {
            if $ex {
                let mut q = MPI_REQUEST_NULL;
                // SAFETY: the caller's contract, passed on.
                return unsafe { waited(crate::coll::vcoll::$nb($($p,)* &mut q), &mut q) };
            }
            // SAFETY: the caller's contract.
            let r = unsafe { $body($($p,)* stringify!($int)) };
            on_comm($comm, r)
        }

        #[doc = concat!("`", stringify!($large), "`.")]
        ///
        /// # Safety
        /// The caller's contract of the MPI function.
        #[no_mangle]
        pub unsafe extern "C" fn $large($($p: $tl),*) -> c_int {
            if $ex {
                let mut q = MPI_REQUEST_NULL;
                // SAFETY: the caller's contract, passed on.
                return unsafe { waited(crate::coll::vcoll::$nb_c($($p,)* &mut q), &mut q) };
            }
            // SAFETY: the caller's contract.
            let r = unsafe { $body($($p,)* stringify!($large)) };
            on_comm($comm, r)
        }
    };
}

both_widths!(MPI_Allgatherv, MPI_Allgatherv_c; MPI_Iallgatherv, MPI_Iallgatherv_c; allgatherv; comm;
    exchanged: is_inter(comm);
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm));
both_widths!(MPI_Alltoallv, MPI_Alltoallv_c; MPI_Ialltoallv, MPI_Ialltoallv_c; alltoallv_arrays; comm;
    exchanged: is_inter(comm);
    (sendbuf: *const c_void => *const c_void, sendcounts: *const c_int => *const MPI_Count, sdispls: *const c_int => *const MPI_Aint, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, rdispls: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm));
both_widths!(MPI_Gatherv, MPI_Gatherv_c; MPI_Igatherv, MPI_Igatherv_c; gatherv; comm;
    exchanged: is_inter(comm);
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_widths!(MPI_Scatterv, MPI_Scatterv_c; MPI_Iscatterv, MPI_Iscatterv_c; scatterv; comm;
    exchanged: is_inter(comm);
    (sendbuf: *const c_void => *const c_void, sendcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm));
both_widths!(MPI_Reduce_scatter_block, MPI_Reduce_scatter_block_c; MPI_Ireduce_scatter_block, MPI_Ireduce_scatter_block_c; reduce_scatter_block; comm;
    exchanged: exchanged(comm, datatype, op);
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm));
both_widths!(MPI_Reduce_scatter, MPI_Reduce_scatter_c; MPI_Ireduce_scatter, MPI_Ireduce_scatter_c; reduce_scatter_v; comm;
    exchanged: exchanged(comm, datatype, op);
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm));

#[cfg(test)]
mod tests {
    use super::overlaps;

    #[test]
    fn a_send_buffer_overlaps_a_span_only_where_they_share_a_byte() {
        let buf = [0u8; 64];
        let at = buf.as_ptr() as usize;
        assert!(overlaps(&buf[8..16], &(at..at + 9)));
        assert!(overlaps(&buf[8..16], &(at + 15..at + 64)));
        assert!(!overlaps(&buf[8..16], &(at..at + 8)));
        assert!(!overlaps(&buf[8..16], &(at + 16..at + 64)));
        assert!(!overlaps(&buf[8..8], &(at..at + 64)));
    }
}
