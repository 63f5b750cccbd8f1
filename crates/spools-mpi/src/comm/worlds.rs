//! The jobs this process belongs to ([`WorldCtx`]), and how groups name processes
//! across them.
//!
//! A process starts in one job, the world of `MPI_Init`. `MPI_Comm_spawn` makes another,
//! which the parents and their children join together (`spawn.rs`): in a parent it is a
//! second Spools `World` beside the first, in a child the only one (its
//! `MPI_COMM_WORLD` is the children's part of it). Every communicator lives in one job,
//! and its members, contexts and point-to-point ranks are that job's ranks.
//!
//! Groups outlive that distinction: `MPI_Group_compare` or `MPI_Group_translate_ranks`
//! may compare a parent's `MPI_COMM_WORLD` with the local group of an intercommunicator
//! to its children. So a group holds *labels*: a process's number in this process's eyes,
//! the same whichever job names it. In the job of `MPI_Init` a process's label is its
//! job rank (nothing changes for a program that spawns nothing); a process first met in
//! a later job gets the next free label. Labels never leave the process: what crosses
//! the wire is always the job ranks of a job both ends share.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use spools::{Communicator, HostedJob, World};

use crate::abi::*;
use crate::env::error::MpiError;

/// A job this process belongs to.
pub(crate) struct WorldCtx {
    /// The job, for a job other than the runtime's own (which `Runtime::world` holds);
    /// `None` there, and once this one was left.
    world: Mutex<Option<Arc<World>>>,
    /// A private duplicate of the whole job, on which members that share no communicator
    /// yet agree on a new one's context (`context.rs`).
    pub(crate) bridge: Communicator,
    /// Each job rank's label; empty when the labels are the job ranks (the runtime's own
    /// job).
    labels: Vec<u32>,
    /// This process's job rank.
    pub(crate) me: u32,
    /// The rendezvous this process hosts for the job (the root of a spawn), kept for the
    /// job's life.
    hosted: Option<HostedJob>,
}

impl std::fmt::Debug for WorldCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldCtx")
            .field("me", &self.me)
            .field("size", &self.bridge.size())
            .finish_non_exhaustive()
    }
}

impl WorldCtx {
    /// The runtime's own job, whose labels are its job ranks.
    pub(crate) fn own(bridge: Communicator, me: u32) -> Arc<WorldCtx> {
        Arc::new(WorldCtx {
            world: Mutex::new(None),
            bridge,
            labels: Vec::new(),
            me,
            hosted: None,
        })
    }

    /// Another job: `world`, with `labels` (one per job rank).
    pub(crate) fn other(
        world: Arc<World>,
        bridge: Communicator,
        labels: Vec<u32>,
        hosted: Option<HostedJob>,
    ) -> Arc<WorldCtx> {
        let me = world.rank();
        Arc::new(WorldCtx {
            world: Mutex::new(Some(world)),
            bridge,
            labels,
            me,
            hosted,
        })
    }

    /// Whether this is the runtime's own job.
    pub(crate) fn is_own(&self) -> bool {
        self.labels.is_empty()
    }

    /// The label of job rank `job`.
    pub(crate) fn label(&self, job: u32) -> u32 {
        self.labels.get(job as usize).copied().unwrap_or(job)
    }

    /// The labels of job ranks `jobs`.
    pub(crate) fn labels_of(&self, jobs: &[u32]) -> Vec<u32> {
        jobs.iter().map(|&j| self.label(j)).collect()
    }

    /// This process's label.
    pub(crate) fn my_label(&self) -> u32 {
        self.label(self.me)
    }

    /// The job rank of the process labelled `label`, if it is in this job.
    pub(crate) fn job_of(&self, label: u32) -> Option<u32> {
        if self.labels.is_empty() {
            return (label < self.bridge.size()).then_some(label);
        }
        self.labels
            .iter()
            .position(|&l| l == label)
            .map(|p| p as u32)
    }

    /// The job ranks of the processes labelled `labels`, if all are in this job.
    pub(crate) fn jobs_of(&self, labels: &[u32]) -> Option<Vec<u32>> {
        labels.iter().map(|&l| self.job_of(l)).collect()
    }

    /// The job as a `World`, for what needs more than a communicator (windows, files).
    ///
    /// # Errors
    /// [`MpiError::NotInitialized`] once left.
    pub(crate) fn world(&self, call: &'static str) -> Result<Arc<World>, MpiError> {
        if self.is_own() {
            return crate::runtime::rt(call)?.world(call);
        }
        self.world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(MpiError::NotInitialized(call))
    }

    /// Leaves this job (not the runtime's own): announces that this process finalises
    /// and waits for every member to do the same (`MPI_Comm_disconnect` of its last
    /// communicator, or `MPI_Finalize`).
    ///
    /// # Errors
    /// `MPI_ERR_PROC_ABORTED` when a member died first.
    pub(crate) fn leave(&self) -> Result<(), MpiError> {
        let w = self
            .world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(w) = w else { return Ok(()) };
        let r = match Arc::try_unwrap(w) {
            Ok(w) => w.finalize(),
            // A clone lives on (a request still running): it leaves at its drop.
            Err(_) => Ok(()),
        };
        if let Some(h) = &self.hosted {
            // Every member has been told the job is over before this process may exit.
            h.server()
                .wait_final_sent(std::time::Duration::from_secs(5));
        }
        r.map_err(|e| MpiError::invalid(MPI_ERR_PROC_ABORTED, e.to_string()))
    }

    /// Ends this job (not the runtime's own) because of `cause`: every other member's
    /// operations on it fail.
    pub(crate) fn abort(&self, cause: &str) {
        let w = self
            .world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = w {
            spools::shared::abort(&w, cause);
        }
    }
}

/// The jobs beyond the runtime's own that this process belongs to, and the next free
/// label.
#[derive(Debug)]
pub(crate) struct Worlds {
    others: Mutex<Vec<Arc<WorldCtx>>>,
    next_label: AtomicU32,
}

impl Worlds {
    /// For a runtime whose own job has `size` ranks.
    pub(crate) fn new(size: u32) -> Worlds {
        Worlds {
            others: Mutex::new(Vec::new()),
            next_label: AtomicU32::new(size),
        }
    }

    /// `n` fresh labels, for processes first met now.
    pub(crate) fn fresh(&self, n: u32) -> std::ops::Range<u32> {
        let a = self.next_label.fetch_add(n, Ordering::Relaxed);
        a..a + n
    }

    /// Records a job joined.
    pub(crate) fn add(&self, w: Arc<WorldCtx>) {
        self.others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
    }

    /// Forgets a job left; whether it was recorded.
    pub(crate) fn remove(&self, w: &Arc<WorldCtx>) -> bool {
        let mut g = self.others.lock().unwrap_or_else(PoisonError::into_inner);
        let before = g.len();
        g.retain(|x| !Arc::ptr_eq(x, w));
        g.len() != before
    }

    /// The jobs joined and not left, oldest first.
    pub(crate) fn all(&self) -> Vec<Arc<WorldCtx>> {
        self.others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes every job joined and not left (`MPI_Finalize`, an abort).
    pub(crate) fn take_all(&self) -> Vec<Arc<WorldCtx>> {
        std::mem::take(&mut *self.others.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The job whose members include every process labelled `labels`: the runtime's own
/// if it does, else the oldest other job that does.
///
/// # Errors
/// `MPI_ERR_GROUP` when no job holds them all (processes of two jobs that were never
/// connected together).
pub(crate) fn holding(labels: &[u32], call: &'static str) -> Result<Arc<WorldCtx>, MpiError> {
    let rt = crate::runtime::rt(call)?;
    if rt.ctx.jobs_of(labels).is_some() {
        return Ok(rt.ctx.clone());
    }
    rt.worlds
        .all()
        .into_iter()
        .find(|w| w.jobs_of(labels).is_some())
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_GROUP,
                format!("{call}: the group's processes do not all belong to one job this process shares with them (processes of two different spawns or connections)"),
            )
        })
}
