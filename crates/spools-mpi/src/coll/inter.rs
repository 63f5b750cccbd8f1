//! The collectives of an intercommunicator on Spools' own (`Communicator::inter_*`,
//! between the two groups of its [`Sides`](spools::Sides)): barrier, bcast, reduce,
//! allreduce, gather, scatter, allgather and reduce-scatter, in their non-blocking and
//! persistent forms (the blocking ones wait for these). A rooted one's data crosses
//! once, between the root and the other group's leader, and meets or spreads within
//! that group; the symmetric ones (barrier, allreduce, allgather, reduce-scatter) go
//! flat between groups of up to `spools::INTER_FLAT_PAIRS` pairs of members, every
//! member with every member of the other group in one round, and through both groups'
//! leaders beyond. Before, the exchange sent every block from every rank to every rank
//! of the other group, and its barrier waited for nothing (it skips empty blocks).
//!
//! What stays on `vcoll`'s exchange: the v forms and alltoall(v/w) (their counts differ
//! per rank: every block goes straight to its rank, as MPICH's intercommunicator
//! algorithms send them too), and reductions with a user function or a reduce-scatter
//! combined byte-wise (as on an intracommunicator, `icoll::takes`).

use std::sync::Arc;

use spools::{Communicator, Element, InterRoot, Op, Sides};

use crate::abi::*;
use crate::coll::icoll::{self, packed, started, Goal, Put, Side};
use crate::coll::op::{cast, slice_op, with_op, Engine, Reducer, WithOp};
use crate::comm::CommObj;
use crate::datatype::TypeObj;
use crate::env::error::MpiError;
use crate::p2p::request::{CollOp, Start};

/// The groups of intercommunicator `c`.
fn sides(c: &CommObj) -> Result<&Sides, MpiError> {
    c.inter.as_ref().map(|i| &i.sides).ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_INTERN,
            "an intercommunicator's collective on an intracommunicator",
        )
    })
}

/// A barrier in flight.
struct BarrierOp(spools::CollRequest<()>);

impl CollOp for BarrierOp {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.0.test())
    }
    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        Ok(self.0.wait()?)
    }
}

/// `MPI_Ibarrier`: done on a rank once the whole other group entered.
pub(crate) fn barrier(c: Arc<CommObj>) -> Start {
    Arc::new(move || {
        let req = c.comm.inter_ibarrier(sides(&c)?)?;
        Ok(Box::new(BarrierOp(req)) as Box<dyn CollOp>)
    })
}

/// Where `blocks` blocks of `side` land, or nothing where this rank does not use it.
fn landing(side: &Side, blocks: usize) -> Option<Put> {
    match side {
        (addr, n, Some(t)) => Some(Put::unpack(*addr, n * blocks, t.clone())),
        _ => None,
    }
}

/// The bytes of one block of `side` (0 where this rank does not use it).
fn block(side: &Side) -> usize {
    side.2.as_ref().map_or(0, |t| side.1 * t.size)
}

/// `MPI_Ibcast` of `n` elements of `t` at `buf` from `root`.
pub(crate) fn bcast(
    c: Arc<CommObj>,
    buf: usize,
    n: usize,
    t: Arc<TypeObj>,
    root: InterRoot,
) -> Start {
    let side: Side = (buf, n, Some(t));
    Arc::new(move || {
        let (data, put) = match root {
            InterRoot::Here => (packed(&side, 0, 1), None),
            InterRoot::There(_) => (vec![0u8; block(&side)], landing(&side, 1)),
            InterRoot::Bystander => (Vec::new(), None),
        };
        Ok(started(c.comm.inter_ibcast(sides(&c)?, data, root)?, put))
    })
}

/// `MPI_Igather` to `root`: the contributors' `send`, the root's `recv` (a block per
/// member of the other group).
pub(crate) fn gather(c: Arc<CommObj>, send: Side, recv: Side, root: InterRoot) -> Start {
    Arc::new(move || {
        let (data, size, put) = match root {
            InterRoot::Here => (Vec::new(), block(&recv), landing(&recv, c.peers() as usize)),
            InterRoot::There(_) => (packed(&send, 0, 1), block(&send), None),
            InterRoot::Bystander => (Vec::new(), 0, None),
        };
        let req = c.comm.inter_igather(sides(&c)?, data, size, root)?;
        Ok(started(req, put))
    })
}

/// `MPI_Iscatter` from `root`: the root's `send` (a block per member of the other
/// group), the receivers' `recv`.
pub(crate) fn scatter(c: Arc<CommObj>, send: Side, recv: Side, root: InterRoot) -> Start {
    Arc::new(move || {
        let (data, size, put) = match root {
            InterRoot::Here => (packed(&send, 0, c.peers() as usize), block(&send), None),
            InterRoot::There(_) => (Vec::new(), block(&recv), landing(&recv, 1)),
            InterRoot::Bystander => (Vec::new(), 0, None),
        };
        let req = c.comm.inter_iscatter(sides(&c)?, data, size, root)?;
        Ok(started(req, put))
    })
}

/// `MPI_Iallgather`: this rank's `send`, the other group's blocks into `recv`.
pub(crate) fn allgather(c: Arc<CommObj>, send: Side, recv: Side) -> Start {
    Arc::new(move || {
        let put = landing(&recv, c.peers() as usize);
        let req = c
            .comm
            .inter_iallgather(sides(&c)?, packed(&send, 0, 1), block(&recv))?;
        Ok(started(req, put))
    })
}

/// A reduction begun with a typed operator, or (`T = u8`) with the reducer's function.
struct Begin<'a> {
    c: &'a Communicator,
    sides: &'a Sides,
    input: Vec<u8>,
    /// Bytes of one element of the program's datatype in `input`.
    esize: usize,
    goal: &'a Goal,
    root: InterRoot,
    put: Option<Put>,
}

impl WithOp for Begin<'_> {
    type Out = Box<dyn CollOp>;

    fn with<T: Element>(self, op: Op<T>) -> Result<Box<dyn CollOp>, MpiError> {
        let buf: Vec<T> = cast(&self.input);
        let (c, s) = (self.c, self.sides);
        let req = match self.goal {
            Goal::Root(_) => c.inter_ireduce(s, buf, op, self.root)?,
            Goal::Scatter(counts) => {
                let per = std::mem::size_of::<T>().max(1);
                let counts = counts.iter().map(|k| k * self.esize / per).collect();
                c.inter_ireduce_scatter(s, buf, counts, op)?
            }
            Goal::All | Goal::Scan | Goal::Exscan => c.inter_iallreduce(s, buf, op)?,
        };
        Ok(started(req, self.put))
    }
}

/// Starts a reduction of intercommunicator `c` on Spools' own: `red` reduces `n`
/// elements from `send` where this rank gives (every rank but a reduce's root and
/// bystanders); the result goes to `recv` where it gets one: everywhere for an
/// allreduce, this rank's block (of `counts[local rank]`) for a reduce-scatter, at the
/// root (`root`) for a reduce. `goal` is `All`, `Root` or `Scatter` (the scans are
/// refused on an intercommunicator before). Run only where `icoll::takes` says so; the
/// buffers were checked by the call.
///
/// # Errors
/// Those of Spools' collective, as MPI errors.
pub(crate) fn reduction(
    c: &CommObj,
    (send, recv): (usize, usize),
    red: &Reducer,
    how: &Engine,
    (goal, root): (&Goal, InterRoot),
) -> Result<Box<dyn CollOp>, MpiError> {
    let gives = !matches!(goal, Goal::Root(_)) || matches!(root, InterRoot::There(_));
    let input = if gives {
        // SAFETY: the program's send buffer holds the reduction's elements (MPI's
        // contract, checked by the call).
        unsafe { red.input(send as *const u8) }
    } else if root == InterRoot::Here {
        vec![0u8; red.len()]
    } else {
        Vec::new()
    };
    let out = match goal {
        Goal::Root(_) if root != InterRoot::Here => None,
        Goal::Scatter(counts) => {
            let mine = counts.get(c.local_rank() as usize).copied().unwrap_or(0);
            Some(red.with_count(mine))
        }
        _ => Some(red.with_count(red.count())),
    };
    let put = out.map(|out| Put::output(out, recv));
    let begin = Begin {
        c: &c.comm,
        sides: sides(c)?,
        esize: red.len() / red.count().max(1),
        input,
        goal,
        root,
        put,
    };
    debug_assert!(icoll::takes(how, goal));
    match *how {
        Engine::Typed(b, op) => with_op(b, op, begin),
        Engine::Bytes | Engine::User => begin.with(slice_op(red)),
    }
}
