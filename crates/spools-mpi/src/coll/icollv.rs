//! The non-blocking and persistent forms of an intracommunicator's gatherv, scatterv,
//! allgatherv, alltoallv and alltoallw (every form of the last: its blocks' datatypes
//! differ) on Spools' own (`Communicator::igatherv`, `iscatterv`, `iallgatherv`,
//! `ialltoallv`: the shared-memory engine within a host, what does not fit its slots by
//! messages beside it; the messages' schedules across hosts) rather than on `vcoll`'s
//! exchange.
//! Each packs this rank's blocks in rank order when it starts and unpacks the blocks it
//! receives into the program's buffer, at their displacements, when it ends; block
//! lengths travel in bytes of the packed datatypes.

use std::sync::Arc;

use spools::{CollRequest, Element};

use crate::abi::{MPI_Datatype, MPI_ERR_TRUNCATE};
use crate::coll::icoll::{doomed, packed, started, Put, Side};
use crate::comm::CommObj;
use crate::datatype::{block, committed, count as ccount, pack, unpack, TypeObj};
use crate::env::error::MpiError;
use crate::p2p::request::{CollOp, Start};

/// One side of a collective with a block per rank: block i is `counts[i]` elements of
/// its datatype at byte offset `offsets[i]` from `addr`.
#[derive(Clone)]
pub(crate) struct Blocks {
    addr: usize,
    counts: Vec<usize>,
    offsets: Vec<isize>,
    types: Types,
}

/// The datatypes of a side's blocks.
#[derive(Clone)]
enum Types {
    /// One for every block (the v forms).
    One(Arc<TypeObj>),
    /// Block i's is entry i (alltoallw).
    Each(Vec<Arc<TypeObj>>),
}

impl Blocks {
    /// Block i's datatype.
    fn t(&self, i: usize) -> &Arc<TypeObj> {
        match &self.types {
            Types::One(t) => t,
            Types::Each(ts) => &ts[i],
        }
    }

    /// The blocks of an alltoallw's side: `counts[i]` elements of `dts[i]` at byte
    /// displacement `displs[i]` from `addr`, each checked.
    ///
    /// # Errors
    /// As [`Blocks::new`].
    pub(crate) fn each(
        addr: usize,
        (counts, displs, dts): (&[i64], &[i64], &[MPI_Datatype]),
        (call, what): (&'static str, &'static str),
    ) -> Result<Blocks, MpiError> {
        let mut ns = Vec::with_capacity(counts.len());
        let mut ts = Vec::with_capacity(counts.len());
        for ((&k, &d), &dt) in counts.iter().zip(displs).zip(dts) {
            let (n, t) = (ccount(k, call)?, committed(dt, call)?);
            block(addr, d as isize, n, &t, call, what)?;
            ns.push(n);
            ts.push(t);
        }
        Ok(Blocks {
            addr,
            counts: ns,
            offsets: displs.iter().map(|&d| d as isize).collect(),
            types: Types::Each(ts),
        })
    }

    /// The blocks the program named: `counts[i]` elements of `dt` at displacement
    /// `displs[i]` (in extents of `dt`) from `addr`, each checked.
    ///
    /// # Errors
    /// A negative count, an uncommitted datatype, a block the buffer cannot hold.
    pub(crate) fn new(
        addr: usize,
        (counts, displs): (&[i64], &[i64]),
        dt: MPI_Datatype,
        (call, what): (&'static str, &'static str),
    ) -> Result<Blocks, MpiError> {
        let t = committed(dt, call)?;
        let mut ns = Vec::with_capacity(counts.len());
        let mut offsets = Vec::with_capacity(counts.len());
        for (&k, &d) in counts.iter().zip(displs) {
            let n = ccount(k, call)?;
            let at = (d as isize).wrapping_mul(t.extent);
            block(addr, at, n, &t, call, what)?;
            ns.push(n);
            offsets.push(at);
        }
        Ok(Blocks {
            addr,
            counts: ns,
            offsets,
            types: Types::One(t),
        })
    }

    /// Each block's packed length in bytes.
    fn lens(&self) -> Vec<usize> {
        let size = |i: usize| self.t(i).size;
        self.counts
            .iter()
            .enumerate()
            .map(|(i, n)| n * size(i))
            .collect()
    }

    /// Block i, packed.
    fn pack(&self, i: usize) -> Vec<u8> {
        let p = (self.addr as isize).wrapping_add(self.offsets[i]) as *const u8;
        // SAFETY: the program's buffer holds block i (checked by `Blocks::new`; MPI's
        // contract keeps it valid until the collective completes).
        unsafe { pack(p, self.counts[i], self.t(i)) }
    }

    /// Every block, packed one after the other in rank order.
    fn pack_all(&self) -> Vec<u8> {
        let mut all = Vec::with_capacity(self.lens().iter().sum());
        for i in 0..self.counts.len() {
            all.extend_from_slice(&self.pack(i));
        }
        all
    }

    /// Unpacks a result of every block packed one after the other into place, but
    /// block `skip` (a root's own block, in place).
    fn put(&self, skip: Option<usize>) -> Put {
        let lens = self.lens();
        let this = self.clone();
        Put {
            len: lens.iter().sum(),
            write: Box::new(move |b: &[u8]| {
                let mut at = 0;
                for (i, &len) in lens.iter().enumerate() {
                    let part = &b[at..at + len];
                    at += len;
                    if Some(i) == skip || part.is_empty() {
                        continue;
                    }
                    let p = (this.addr as isize).wrapping_add(this.offsets[i]) as *mut u8;
                    // SAFETY: the program's buffer holds block i (checked by
                    // `Blocks::new`), of `len` bytes packed (`b` has the sum of the
                    // blocks' lengths: checked by `EngineOp::finish`).
                    unsafe { unpack(part, p, this.t(i)) };
                }
            }),
        }
    }
}

/// Each rank's block length as this rank knows it: `mine` for itself, 0 for the others
/// (whose entries only the root reads).
fn own_only(c: &CommObj, mine: usize) -> Vec<usize> {
    let mut counts = vec![0; c.peers() as usize];
    counts[c.comm.rank() as usize] = mine;
    counts
}

/// The error of a rank whose block to itself has `got` bytes where it takes `want`.
fn own_mismatch(call: &'static str, got: usize, want: usize) -> MpiError {
    MpiError::invalid(
        MPI_ERR_TRUNCATE,
        format!("{call}: this rank's block to itself has {got} bytes, its receive block {want}"),
    )
}

/// This rank's own part of a gather(v) or allgather(v) into `recv`, whose block `me` it
/// must fill: `send` packed, or in place (`send` unused) its block of `recv`, which the
/// result then skips. A `send` of another length than that block goes as zeros of the
/// block's length, so that the others end, with the error its wait gives.
fn own_part(
    send: &Side,
    recv: &Blocks,
    me: usize,
    call: &'static str,
) -> (Vec<u8>, Option<usize>, Option<MpiError>) {
    if send.2.is_none() {
        return (recv.pack(me), Some(me), None);
    }
    let part = packed(send, 0, 1);
    let want = recv.counts[me] * recv.t(me).size;
    if part.len() == want {
        return (part, None, None);
    }
    (
        vec![0u8; want],
        None,
        Some(own_mismatch(call, part.len(), want)),
    )
}

/// A started collective whose result goes into `recv` (but block `skip`), or whose wait
/// fails with `fault`.
fn landing<T: Element>(
    req: CollRequest<Vec<T>>,
    recv: &Blocks,
    (skip, fault): (Option<usize>, Option<MpiError>),
) -> Box<dyn CollOp> {
    match fault {
        Some(e) => doomed(req, e),
        None => started(req, Some(recv.put(skip))),
    }
}

/// `MPI_Igatherv` to `root`: every rank's `send` (the root's own block of `recv` in
/// place: `send` is then unused), the root's `recv` blocks (`None` elsewhere). A root
/// whose own send and receive blocks differ in length fails at the wait, once every rank
/// took part.
pub(crate) fn gatherv(
    c: Arc<CommObj>,
    send: Side,
    recv: Option<Blocks>,
    root: u32,
    call: &'static str,
) -> Start {
    Arc::new(move || {
        let me = c.comm.rank() as usize;
        let Some(r) = &recv else {
            let part = packed(&send, 0, 1);
            let counts = own_only(&c, part.len());
            return Ok(started(c.comm.igatherv(part, &counts, root)?, None));
        };
        let (part, skip, fault) = own_part(&send, r, me, call);
        let req = c.comm.igatherv(part, &r.lens(), root)?;
        Ok(landing(req, r, (skip, fault)))
    })
}

/// `MPI_Iscatterv` from `root`: the root's `send` blocks (`None` elsewhere), every
/// rank's `recv` (unused at a root in place). A root whose own send and receive blocks
/// differ in length fails at the wait, once every rank took part.
pub(crate) fn scatterv(
    c: Arc<CommObj>,
    send: Option<Blocks>,
    recv: Side,
    root: u32,
    call: &'static str,
) -> Start {
    Arc::new(move || {
        let me = c.comm.rank() as usize;
        let mine = recv.2.as_ref().map_or(0, |t| recv.1 * t.size);
        let put = recv
            .2
            .as_ref()
            .map(|t| Put::unpack(recv.0, recv.1, t.clone()));
        let Some(s) = &send else {
            let counts = own_only(&c, mine);
            return Ok(started(
                c.comm.iscatterv(Vec::<u8>::new(), &counts, root)?,
                put,
            ));
        };
        let counts = s.lens();
        let req = c.comm.iscatterv(s.pack_all(), &counts, root)?;
        if put.is_some() && counts[me] != mine {
            return Ok(doomed(req, own_mismatch(call, counts[me], mine)));
        }
        Ok(started(req, put))
    })
}

/// `MPI_Iallgatherv`: this rank's `send` (its own block of `recv` in place: `send` is
/// then unused), everyone's blocks into `recv`. A rank whose send block differs from its
/// own receive block in length fails at the wait, once every rank took part.
pub(crate) fn allgatherv(c: Arc<CommObj>, send: Side, recv: Blocks, call: &'static str) -> Start {
    Arc::new(move || {
        let me = c.comm.rank() as usize;
        let (part, skip, fault) = own_part(&send, &recv, me, call);
        let req = c.comm.iallgatherv(part, &recv.lens())?;
        Ok(landing(req, &recv, (skip, fault)))
    })
}

/// `MPI_Ialltoallv` and `MPI_Ialltoallw`: this rank's `send` blocks (those of `recv` in place: `send` is then
/// `None`), one to each rank, and theirs into `recv`'s blocks. A rank whose block to
/// itself differs in length from its receive block fails at the wait, once every rank
/// took part.
pub(crate) fn alltoallv(
    c: Arc<CommObj>,
    send: Option<Blocks>,
    recv: Blocks,
    call: &'static str,
) -> Start {
    Arc::new(move || {
        let me = c.comm.rank() as usize;
        let from = send.as_ref().unwrap_or(&recv);
        let (mut sc, rc) = (from.lens(), recv.lens());
        if sc[me] == rc[me] {
            let put = recv.put(None);
            return Ok(started(
                c.comm.ialltoallv(from.pack_all(), &sc, &rc)?,
                Some(put),
            ));
        }
        // This rank's own block as its receive count says, so that the others end.
        let e = own_mismatch(call, sc[me], rc[me]);
        sc[me] = rc[me];
        let mut data = Vec::with_capacity(sc.iter().sum());
        for i in 0..sc.len() {
            if i == me {
                data.resize(data.len() + rc[me], 0);
            } else {
                data.extend_from_slice(&from.pack(i));
            }
        }
        Ok(doomed(c.comm.ialltoallv(data, &sc, &rc)?, e))
    })
}
