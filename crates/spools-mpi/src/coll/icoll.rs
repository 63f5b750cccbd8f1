//! The non-blocking and persistent forms of the uniform collectives of an
//! intracommunicator, on Spools' own non-blocking collectives (`Communicator::ibcast`,
//! `iallreduce`, ...: the shared-memory engine within a host, the message algorithms
//! across hosts) rather than on `vcoll`'s linear exchange. Each starts by packing this
//! rank's data and ends by unpacking its result into the program's buffer, once its
//! length is checked.
//!
//! The v forms of gatherv, scatterv, allgatherv and alltoallv are in `icollv.rs`, an
//! intercommunicator's collectives in `inter.rs`. What stays on the exchange: an
//! intercommunicator's v forms and alltoall(v/w), reductions with a user function
//! (Spools' collectives may combine from the progress thread, and a user function runs
//! on the caller's: [`Engine::User`]) and reduce-scatters of byte-wise combined types,
//! whose blocks are not packed elements.

use std::sync::Arc;

use spools::{CollRequest, Communicator, Element, Op};

use crate::abi::*;
use crate::coll::op::{cast, slice_op, with_op, Engine, Reducer, WithOp};
use crate::comm::CommObj;
use crate::datatype::{pack, unpack, TypeObj};
use crate::env::error::MpiError;
use crate::p2p::request::{CollOp, Start};

/// What writes a result into the program's buffer.
type Writer = Box<dyn FnOnce(&[u8]) + Send>;

/// Where a finished collective's result goes, and how many bytes it must have.
pub(super) struct Put {
    /// The result's length in bytes.
    pub(super) len: usize,
    /// Writes it into the program's buffer.
    pub(super) write: Writer,
}

impl Put {
    /// A reduction's result: `out`'s elements (its `len()` bytes), written by `out` at
    /// `recv`.
    pub(super) fn output(out: Reducer, recv: usize) -> Put {
        Put {
            len: out.len(),
            write: Box::new(move |b: &[u8]| {
                // SAFETY: the program's receive buffer holds this rank's result (MPI's
                // contract, checked by the call), of `out.len()` bytes (checked by
                // `EngineOp::finish`).
                unsafe { out.output(b, recv as *mut u8) }
            }),
        }
    }

    /// Unpacks the result as elements of `t` at `addr` (`n` of them: `len` bytes).
    pub(super) fn unpack(addr: usize, n: usize, t: Arc<TypeObj>) -> Put {
        Put {
            len: n * t.size,
            write: Box::new(move |b: &[u8]| {
                if !b.is_empty() {
                    // SAFETY: the program's buffer holds `n` elements of `t` (MPI's
                    // contract, checked when the collective was called), and `b` is
                    // `n` elements' bytes (checked by `EngineOp::finish`).
                    unsafe { unpack(b, addr as *mut u8, &t) };
                }
            }),
        }
    }
}

/// A collective in flight on Spools' own: its request, and where its result goes.
struct EngineOp<T: Element> {
    req: CollRequest<Vec<T>>,
    put: Option<Put>,
}

impl<T: Element> CollOp for EngineOp<T> {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.req.test())
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        let got = self.req.wait()?;
        let Some(put) = self.put else {
            return Ok(());
        };
        let bytes = spools::as_bytes(&got);
        if bytes.len() != put.len {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                format!(
                    "a collective's result has {} bytes where the receive buffer takes {}",
                    bytes.len(),
                    put.len
                ),
            ));
        }
        (put.write)(bytes);
        Ok(())
    }
}

/// Boxes a started collective.
pub(super) fn started<T: Element>(req: CollRequest<Vec<T>>, put: Option<Put>) -> Box<dyn CollOp> {
    Box::new(EngineOp { req, put })
}

/// A collective this rank takes part in (so that the others end) though its own
/// arguments do not fit: its result is dropped, and the wait fails with `e`.
struct DoomedOp<T: Element> {
    req: CollRequest<Vec<T>>,
    e: MpiError,
}

impl<T: Element> CollOp for DoomedOp<T> {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.req.test())
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        // The collective's own error, if any, says more.
        self.req.wait()?;
        Err(self.e)
    }
}

/// Boxes a started collective whose wait fails with `e` ([`DoomedOp`]).
pub(super) fn doomed<T: Element>(req: CollRequest<Vec<T>>, e: MpiError) -> Box<dyn CollOp> {
    Box::new(DoomedOp { req, e })
}

/// What a reduction gives, and to whom.
#[derive(Clone)]
pub(crate) enum Goal {
    /// Every rank, the fold of all.
    All,
    /// The root only, the fold of all.
    Root(u32),
    /// Rank i, the fold of ranks 0 to i.
    Scan,
    /// Rank i > 0, the fold of ranks 0 to i - 1 (rank 0's buffer is left as it was).
    Exscan,
    /// Rank i, block i (of `counts[i]` elements) of the fold of all.
    Scatter(Vec<usize>),
}

/// Whether a reduction of this kind runs on Spools' own collectives (else on the
/// exchange): not with a user function, nor a reduce-scatter combined byte-wise.
pub(crate) fn takes(how: &Engine, goal: &Goal) -> bool {
    match how {
        Engine::Typed(..) => true,
        Engine::Bytes => !matches!(goal, Goal::Scatter(_)),
        Engine::User => false,
    }
}

/// A reduction begun with a typed operator, or (`T = u8`) with the reducer's function.
struct Begin<'a> {
    c: &'a Communicator,
    input: Vec<u8>,
    /// Bytes of one element of the program's datatype in `input`.
    esize: usize,
    goal: &'a Goal,
    put: Option<Put>,
}

impl WithOp for Begin<'_> {
    type Out = Box<dyn CollOp>;

    fn with<T: Element>(self, op: Op<T>) -> Result<Box<dyn CollOp>, MpiError> {
        let buf: Vec<T> = cast(&self.input);
        let req = match self.goal {
            Goal::All => self.c.iallreduce(buf, op)?,
            Goal::Root(r) => self.c.ireduce(buf, op, *r)?,
            Goal::Scan => self.c.iscan(buf, op)?,
            Goal::Exscan => self.c.iexscan(buf, op)?,
            Goal::Scatter(counts) => {
                let per = std::mem::size_of::<T>().max(1);
                let counts = counts.iter().map(|k| k * self.esize / per).collect();
                self.c.ireduce_scatter(buf, counts, op)?
            }
        };
        Ok(started(req, self.put))
    }
}

/// Starts a reduction on Spools' own collectives: `red` reduces `n` elements from
/// `src` (the program's input: its send buffer, or its receive buffer in place); the
/// result goes to `recv` on the ranks `goal` names. Run only where [`takes`] says so;
/// the buffers were checked by the call.
///
/// # Errors
/// Those of Spools' collective, as MPI errors.
pub(crate) fn reduction(
    c: &CommObj,
    src: usize,
    recv: usize,
    red: &Reducer,
    how: &Engine,
    goal: &Goal,
) -> Result<Box<dyn CollOp>, MpiError> {
    // SAFETY: the program's input holds the reduction's elements (MPI's contract,
    // checked by the call).
    let input = unsafe { red.input(src as *const u8) };
    let me = c.comm.rank();
    let out = match goal {
        Goal::Root(r) if *r != me => None,
        Goal::Exscan if me == 0 => None,
        Goal::Scatter(counts) => {
            Some(red.with_count(counts.get(me as usize).copied().unwrap_or(0)))
        }
        _ => Some(red.with_count(red.count())),
    };
    let put = out.map(|out| Put::output(out, recv));
    let begin = Begin {
        c: &c.comm,
        esize: red.len() / red.count().max(1),
        input,
        goal,
        put,
    };
    match *how {
        Engine::Typed(b, op) => with_op(b, op, begin),
        Engine::Bytes | Engine::User => begin.with(slice_op(red)),
    }
}

/// One side of a data-moving collective: its buffer, its count (per block) and its
/// datatype, where this rank uses it (`None`: it does not).
pub(crate) type Side = (usize, usize, Option<Arc<TypeObj>>);

/// Packs `blocks` blocks of this side's count of its datatype from `at` bytes into its
/// buffer (nothing where this rank does not use the side).
pub(super) fn packed(side: &Side, at: isize, blocks: usize) -> Vec<u8> {
    match side {
        (addr, n, Some(t)) => {
            let p = (*addr as isize).wrapping_add(at) as *const u8;
            // SAFETY: the program's buffer holds these blocks (MPI's contract, checked
            // by the call).
            unsafe { pack(p, n * blocks, t) }
        }
        _ => Vec::new(),
    }
}

/// Where this side's `blocks` blocks of result go.
fn put(side: &Side, blocks: usize) -> Option<Put> {
    match side {
        (addr, n, Some(t)) => Some(Put::unpack(*addr, n * blocks, t.clone())),
        _ => None,
    }
}

/// The byte offset of block `i` of a side.
fn offset(side: &Side, i: u32) -> isize {
    match side {
        (_, n, Some(t)) => (i as isize) * (*n as isize) * t.extent,
        _ => 0,
    }
}

/// `MPI_Ibcast` of `n` elements of `t` at `buf` from `root`.
pub(crate) fn bcast(c: Arc<CommObj>, buf: usize, n: usize, t: Arc<TypeObj>, root: u32) -> Start {
    let side: Side = (buf, n, Some(t));
    Arc::new(move || {
        let me = c.comm.rank();
        let (data, put) = if me == root {
            (packed(&side, 0, 1), None)
        } else {
            let len = side.2.as_ref().map_or(0, |t| t.size) * n;
            (vec![0u8; len], put(&side, 1))
        };
        Ok(started(c.comm.ibcast(data, root)?, put))
    })
}

/// `MPI_Igather` to `root`: every rank's `send` (the root's own block of `recv` in
/// place: `send` is then `None`), the root's `recv` blocks.
pub(crate) fn gather(c: Arc<CommObj>, send: Side, recv: Side, root: u32) -> Start {
    Arc::new(move || {
        let me = c.comm.rank();
        let part = if send.2.is_some() {
            packed(&send, 0, 1)
        } else {
            packed(&recv, offset(&recv, me), 1)
        };
        let put = if me == root {
            put(&recv, c.peers() as usize)
        } else {
            None
        };
        Ok(started(c.comm.igather(part, root)?, put))
    })
}

/// `MPI_Iscatter` from `root`: the root's `send` blocks, every rank's `recv` (none at
/// a root in place). `part` is a block's bytes as this rank counts them.
pub(crate) fn scatter(c: Arc<CommObj>, send: Side, recv: Side, root: u32, part: usize) -> Start {
    Arc::new(move || {
        let me = c.comm.rank();
        let data = if me == root {
            packed(&send, 0, c.peers() as usize)
        } else {
            Vec::new()
        };
        Ok(started(c.comm.iscatter(data, part, root)?, put(&recv, 1)))
    })
}

/// `MPI_Iallgather`: this rank's `send` (its own block of `recv` in place: `send` is
/// then `None`), everyone's blocks into `recv`.
pub(crate) fn allgather(c: Arc<CommObj>, send: Side, recv: Side) -> Start {
    Arc::new(move || {
        let me = c.comm.rank();
        let part = if send.2.is_some() {
            packed(&send, 0, 1)
        } else {
            packed(&recv, offset(&recv, me), 1)
        };
        let put = put(&recv, c.peers() as usize);
        Ok(started(c.comm.iallgather(part)?, put))
    })
}

/// `MPI_Ialltoall`: this rank's `send` blocks (those of `recv` in place: `send` is then
/// `None`), one to each rank, and theirs into `recv`.
pub(crate) fn alltoall(c: Arc<CommObj>, send: Side, recv: Side) -> Start {
    Arc::new(move || {
        let n = c.peers() as usize;
        let data = if send.2.is_some() {
            packed(&send, 0, n)
        } else {
            packed(&recv, 0, n)
        };
        Ok(started(c.comm.ialltoall(data)?, put(&recv, n)))
    })
}
