//! The object behind an `MPI_Comm` handle ([`CommObj`]): a Spools communicator with
//! MPI's extras, among them its virtual topology ([`Topo`]) and, for an
//! intercommunicator, its two groups ([`Inter`]).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use spools::Communicator;

use crate::env::error::MpiError;

use crate::abi::*;

/// An MPI communicator: a Spools communicator with MPI's extras.
pub(crate) struct CommObj {
    /// The Spools communicator (its own context for messages and collectives).
    pub(crate) comm: Communicator,
    /// The job it lives in (`worlds.rs`): its members are that job's ranks.
    pub(crate) ctx: Arc<crate::comm::WorldCtx>,
    /// Its error handler (`MPI_ERRORS_ARE_FATAL` at first).
    pub(crate) errhandler: AtomicUsize,
    /// Its name (`MPI_Comm_set_name`).
    pub(crate) name: Mutex<String>,
    /// Cached attribute values by keyval.
    pub(crate) attrs: crate::comm::attrmap::Attrs,
    /// Hints set with `MPI_Comm_set_info` (or given at a dup).
    pub(crate) info: Mutex<Vec<(String, String)>>,
    /// Its virtual topology (Cartesian, graph, distributed graph).
    pub(crate) topo: Mutex<Option<Topo>>,
    /// For an intercommunicator, its two groups (`comm` is then the view that puts the
    /// remote group first: see `inter.rs`).
    pub(crate) inter: Option<Inter>,
    /// How many partitioned requests were made per (send, peer, tag) (`part.rs`): the
    /// n-th send request to a peer and tag meets the n-th receive request made there.
    part_inits: Mutex<Vec<(PartKey, u64)>>,
    /// How many persistent collectives were made on it (`coll/pcoll.rs`): the same count
    /// on every member at each init call, which are collective and in one order.
    persistent_inits: AtomicU32,
}

/// A partitioned request's direction (send), peer and tag.
type PartKey = (bool, u32, i32);

impl CommObj {
    pub(crate) fn new(
        comm: Communicator,
        ctx: Arc<crate::comm::WorldCtx>,
        name: &str,
    ) -> Arc<CommObj> {
        Arc::new(CommObj {
            comm,
            ctx,
            errhandler: AtomicUsize::new(MPI_ERRORS_ARE_FATAL),
            name: Mutex::new(name.to_string()),
            attrs: crate::comm::attrmap::Attrs::default(),
            info: Mutex::new(Vec::new()),
            topo: Mutex::new(None),
            inter: None,
            part_inits: Mutex::new(Vec::new()),
            persistent_inits: AtomicU32::new(0),
        })
    }

    /// This rank in the communicator (in its local group, for an intercommunicator).
    pub(crate) fn local_rank(&self) -> u32 {
        self.inter
            .as_ref()
            .map_or_else(|| self.comm.rank(), |i| i.local_rank)
    }

    /// The communicator's size (its local group's, for an intercommunicator).
    pub(crate) fn local_size(&self) -> u32 {
        self.inter
            .as_ref()
            .map_or_else(|| self.comm.size(), |i| i.local.len() as u32)
    }

    /// How many ranks point-to-point calls and collectives address: the communicator's
    /// size, or the remote group's for an intercommunicator (whose ranks come first in
    /// its view, so that remote rank r is rank r of `comm`).
    pub(crate) fn peers(&self) -> u32 {
        self.inter
            .as_ref()
            .map_or_else(|| self.comm.size(), |i| i.remote.len() as u32)
    }

    /// The number of the next partitioned request made here for (`send`, `peer`,
    /// `tag`): 0, 1, 2, ...
    pub(crate) fn next_part_init(&self, send: bool, peer: u32, tag: i32) -> u64 {
        let mut g = self
            .part_inits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (send, peer, tag);
        match g.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                g.push((key, 1));
                0
            }
        }
    }

    /// The number of the persistent collective being made on it: 0, 1, 2, ...
    pub(crate) fn next_persistent_init(&self) -> u32 {
        self.persistent_inits.fetch_add(1, Ordering::Relaxed)
    }

    /// A new communicator object for `comm`, inheriting this one's error handler.
    pub(crate) fn child(&self, comm: Communicator) -> CommObj {
        self.child_inter(comm, None)
    }

    /// As [`CommObj::child`], for an intercommunicator when `inter` is given.
    pub(crate) fn child_inter(&self, comm: Communicator, inter: Option<Inter>) -> CommObj {
        self.child_in(self.ctx.clone(), comm, inter)
    }

    /// As [`CommObj::child_inter`], in job `ctx` (an intercommunicator to spawned
    /// processes, made from a communicator of the parents' job).
    pub(crate) fn child_in(
        &self,
        ctx: Arc<crate::comm::WorldCtx>,
        comm: Communicator,
        inter: Option<Inter>,
    ) -> CommObj {
        CommObj {
            comm,
            ctx,
            errhandler: AtomicUsize::new(self.errhandler.load(Ordering::Relaxed)),
            name: Mutex::new(String::new()),
            attrs: crate::comm::attrmap::Attrs::default(),
            info: Mutex::new(Vec::new()),
            topo: Mutex::new(None),
            inter,
            part_inits: Mutex::new(Vec::new()),
            persistent_inits: AtomicU32::new(0),
        }
    }
}

/// A communicator's topology.
#[derive(Debug, Clone)]
pub(crate) enum Topo {
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
    Dist {
        sources: Vec<c_int>,
        sw: Option<Vec<c_int>>,
        dests: Vec<c_int>,
        dw: Option<Vec<c_int>>,
    },
}

/// The two groups of an intercommunicator.
pub(crate) struct Inter {
    /// Both groups, in the order every member agrees on.
    pub(crate) union: Communicator,
    /// This side's members (job ranks of the `CommObj`'s job), in local rank order.
    pub(crate) local: Vec<u32>,
    /// The other side's members.
    pub(crate) remote: Vec<u32>,
    /// This rank in `local`.
    pub(crate) local_rank: u32,
    /// Whether this side comes first in `union`.
    pub(crate) first: bool,
    /// The two groups as ranks of the `CommObj`'s `comm` (the remote group first): what
    /// its collectives run between (`coll/inter.rs`).
    pub(crate) sides: spools::Sides,
}

/// The intercommunicator object over `union` (in job `ctx`, whose ranks `local` and
/// `remote` are), with its point-to-point view made from `base` (a communicator of the
/// same members in a context of its own).
pub(crate) fn make_inter(
    parent: &CommObj,
    ctx: Arc<crate::comm::WorldCtx>,
    union: Communicator,
    base: &Communicator,
    local: Vec<u32>,
    remote: Vec<u32>,
    first: bool,
) -> Result<CommObj, MpiError> {
    let me = ctx.me;
    let local_rank = local.iter().position(|&r| r == me).ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_INTERN,
            "intercommunicator: this rank is not in its local group",
        )
    })? as u32;
    let view = base.view(remote.iter().chain(&local).copied().collect())?;
    let (r, l) = (remote.len() as u32, local.len() as u32);
    let sides = spools::Sides::new(&view, (r..r + l).collect(), (0..r).collect())?;
    Ok(parent.child_in(
        ctx,
        view,
        Some(Inter {
            union,
            local,
            remote,
            local_rank,
            first,
            sides,
        }),
    ))
}
