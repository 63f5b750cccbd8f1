//! `Comm` (a communicator: a group of ranks with its own message space; `World`, the
//! communicator of every rank, plus the job's end, is in `world.rs`). Messaging,
//! collectives, RPC and parallel I/O add their methods to `Comm` in their own files.

use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyModule;
use spools::Communicator;

use crate::errors;
use crate::runtime::{self, Runtime};

/// A group of ranks with a message space of its own (MPI's communicator). `World` is
/// the one of every rank; `split` and `dup` make others.
#[pyclass(subclass, frozen, module = "spools")]
pub(crate) struct Comm {
    /// The Rust communicator.
    pub(crate) comm: Communicator,
    /// The runtime it belongs to (kept alive while the communicator is).
    pub(crate) rt: Arc<Runtime>,
    /// The duplicate collective I/O calls of this communicator run on, once made (the
    /// world's is the runtime's own: see `Runtime::io_comm`).
    io: OnceLock<Communicator>,
    /// For an MPI intercommunicator (`spools.Comm(parent)`): its groups. `comm` is then
    /// its point-to-point view, the remote group first (`mpi_abi::embed::Embedded`):
    /// messages and RPCs address the remote group's ranks; group operations are refused.
    pub(crate) inter: Option<mpi_abi::embed::InterShape>,
    /// For a communicator of an MPI job joined after `MPI_Init`: keeps this process in
    /// that job while the communicator lives (`mpi_abi::embed::JobHold`).
    hold: Option<mpi_abi::embed::JobHold>,
}

impl Comm {
    pub(crate) fn new(comm: Communicator, rt: Arc<Runtime>) -> Comm {
        Comm {
            comm,
            rt,
            io: OnceLock::new(),
            inter: None,
            hold: None,
        }
    }

    /// The communicator of an MPI communicator of a job joined after `MPI_Init`, which
    /// `hold` keeps this process in.
    pub(crate) fn holding(mut self, hold: Option<mpi_abi::embed::JobHold>) -> Comm {
        self.hold = hold;
        self
    }

    /// The communicator of an MPI intercommunicator of groups `shape` (see `inter`).
    pub(crate) fn new_inter(
        comm: Communicator,
        rt: Arc<Runtime>,
        shape: mpi_abi::embed::InterShape,
    ) -> Comm {
        Comm {
            inter: Some(shape),
            ..Comm::new(comm, rt)
        }
    }

    /// As [`Comm::live`], for an operation of the whole group (a collective, a split, a
    /// file, a pipe): refused on an intercommunicator.
    ///
    /// # Errors
    /// As `live`; `TypeError` on an intercommunicator.
    pub(crate) fn live_group(&self) -> PyResult<()> {
        self.live()?;
        self.intra_only()
    }

    /// `TypeError` on an intercommunicator, which has no group operations.
    ///
    /// # Errors
    /// As said.
    pub(crate) fn intra_only(&self) -> PyResult<()> {
        match self.inter {
            None => Ok(()),
            Some(_) => Err(errors::type_error(
                "this spools.Comm is an intercommunicator (two groups): it has point-to-point \
                 messages and RPC to the other group's ranks only; merge it first \
                 (mpi4py's Intercomm.Merge) for collectives, files, pipes and streams"
                    .to_string(),
            )),
        }
    }

    /// The communicator collective I/O calls (redistribution, files, pipes) of this one
    /// run on: a duplicate made by the first such call (collective then), so that their
    /// messages never match the program's own. `world` says whether this is the World
    /// (whose duplicate the runtime keeps).
    ///
    /// # Errors
    /// `FinalizedError`, or the duplicate failing (a dead peer).
    pub(crate) fn io_comm(&self, py: Python<'_>, world: bool) -> PyResult<Communicator> {
        self.intra_only()?;
        if world {
            return self.rt.io_comm(py);
        }
        if let Some(c) = self.io.get() {
            return Ok(c.clone());
        }
        let dup = runtime::blocking(py, || self.comm.dup()).map_err(errors::from_msg)?;
        Ok(self.io.get_or_init(|| dup).clone())
    }

    /// A rank argument checked against the communicator's size.
    ///
    /// # Errors
    /// `ValueError` naming the valid range.
    pub(crate) fn check_rank(&self, rank: i64, what: &str) -> PyResult<u32> {
        let (size, group) = match self.inter {
            None => (self.comm.size(), "this communicator"),
            // Messages go to the other group (its ranks come first in `comm`).
            Some(i) => (i.remote_size, "the other group of this intercommunicator"),
        };
        if rank < 0 || rank >= i64::from(size) {
            return Err(errors::value_error(format!(
                "{what} must be a rank of {group} (0 to {}), got {rank}",
                size.saturating_sub(1)
            )));
        }
        Ok(rank as u32)
    }

    /// `FinalizedError` once the runtime ended (`finalize()`, `abort()`): every method
    /// that communicates calls it first (an atomic load). Inside an RPC function, the
    /// `RuntimeError` of `reentry::refuse_in_rpc` (such a call would wait for the progress
    /// its own thread holds).
    ///
    /// # Errors
    /// As said.
    pub(crate) fn live(&self) -> PyResult<()> {
        crate::reentry::refuse_in_rpc("a Spools communication call")?;
        runtime::check_live()
    }
}

#[pymethods]
impl Comm {
    /// This process's rank in the communicator (0 to size - 1; in its own group for an
    /// intercommunicator).
    #[getter]
    fn rank(&self) -> u32 {
        self.inter
            .map_or_else(|| self.comm.rank(), |i| i.local_rank)
    }

    /// How many ranks the communicator has (its own group's, for an intercommunicator).
    #[getter]
    fn size(&self) -> u32 {
        self.inter
            .map_or_else(|| self.comm.size(), |i| i.local_size)
    }

    /// Whether this is an intercommunicator (MPI's, of two groups: a spawn's parents and
    /// children, a port's two sides), whose messages go to the other group.
    #[getter]
    fn is_inter(&self) -> bool {
        self.inter.is_some()
    }

    /// How many ranks the other group of an intercommunicator has; `None` for an
    /// intracommunicator.
    #[getter]
    fn remote_size(&self) -> Option<u32> {
        self.inter.map(|i| i.remote_size)
    }

    /// Whether `rank` runs on this process's host (so messages go through shared memory).
    fn same_host(&self, rank: i64) -> PyResult<bool> {
        let r = self.check_rank(rank, "rank")?;
        Ok(self.comm.same_host(r))
    }

    /// Waits until every rank of the communicator has called `barrier`.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.live_group()?;
        runtime::blocking(py, || self.comm.barrier()).map_err(errors::from_msg)
    }

    /// A new communicator of the ranks that give the same `color`, ordered by `key` (then
    /// by rank here); `None` for a rank that gives `color=None`. Collective.
    #[pyo3(signature = (color, key = 0))]
    fn split(&self, py: Python<'_>, color: Option<i64>, key: i32) -> PyResult<Option<Comm>> {
        self.live_group()?;
        let color = match color {
            None => None,
            Some(c) if (0..=i64::from(u32::MAX)).contains(&c) => Some(c as u32),
            Some(c) => {
                return Err(errors::value_error(format!(
                    "color must be None or 0 to {}, got {c}",
                    u32::MAX
                )))
            }
        };
        let c = runtime::blocking(py, || self.comm.split(color, key)).map_err(errors::from_msg)?;
        Ok(c.map(|c| Comm::new(c, self.rt.clone())))
    }

    /// A new communicator of the same ranks with its own message space. Collective.
    fn dup(&self, py: Python<'_>) -> PyResult<Comm> {
        self.live_group()?;
        let c = runtime::blocking(py, || self.comm.dup()).map_err(errors::from_msg)?;
        Ok(Comm::new(c, self.rt.clone()))
    }

    fn __repr__(&self) -> String {
        match self.inter {
            None => format!(
                "<spools.Comm rank {} of {}>",
                self.comm.rank(),
                self.comm.size()
            ),
            Some(i) => format!(
                "<spools.Comm rank {} of {}, intercommunicator to {} ranks>",
                i.local_rank, i.local_size, i.remote_size
            ),
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Comm>()?;
    Ok(())
}
