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

/// Set in a spawned process's environment: its job's id and how many parents the job
/// has (`JOB:P`, the job id in hexadecimal as `SPOOLS_JOB`; ranks below P are the
/// parents). A process of another job that inherits it (one started by `spools run`
/// from a spawned process) ignores it.
pub(crate) const PARENTS_VAR: &str = "SPOOLS_SPAWN_PARENTS";

/// Set in a spawned process's environment: the index of its command in
/// `MPI_Comm_spawn_multiple` (the `MPI_APPNUM` attribute).
pub(crate) const APPNUM_VAR: &str = "SPOOLS_APPNUM";

/// A process's key: the id of the job it started in (`MPI_Init`'s) and its rank there,
/// which names it in every job it joins.
pub(crate) type Key = (u64, u32);

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
    /// The job's id (as `World::job`).
    pub(crate) job: u64,
    /// The rendezvous this process hosts for the job (the root of a spawn), kept for the
    /// job's life.
    hosted: Option<HostedJob>,
    /// Whether this process left the job (`depart`).
    left: std::sync::atomic::AtomicBool,
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
    pub(crate) fn own(bridge: Communicator, me: u32, job: u64) -> Arc<WorldCtx> {
        Arc::new(WorldCtx {
            world: Mutex::new(None),
            bridge,
            labels: Vec::new(),
            me,
            job,
            hosted: None,
            left: std::sync::atomic::AtomicBool::new(false),
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
        let job = world.job();
        Arc::new(WorldCtx {
            world: Mutex::new(Some(world)),
            bridge,
            labels,
            me,
            job,
            hosted,
            left: std::sync::atomic::AtomicBool::new(false),
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

    /// The job as a `World`, for a job other than the runtime's own and not left
    /// (`jobs::world_of` gives the runtime's own too).
    pub(crate) fn other_world(&self) -> Option<Arc<World>> {
        self.world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Leaves this job (not the runtime's own) without waiting for its other members:
    /// announces that this process finalises (`World::depart`), after which they see it
    /// as finalised (`MPI_Comm_disconnect` of its last communicator, or `MPI_Finalize`).
    ///
    /// # Errors
    /// `MPI_ERR_PROC_ABORTED` when the job's rendezvous is gone.
    pub(crate) fn depart(&self) -> Result<(), MpiError> {
        self.left.store(true, Ordering::Release);
        let w = self
            .world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match w {
            Some(w) => w
                .depart()
                .map_err(|e| MpiError::invalid(MPI_ERR_PROC_ABORTED, e.to_string())),
            None => Ok(()),
        }
    }

    /// Whether something beyond this record holds the job's `World` (a window or a
    /// file on one of its communicators).
    pub(crate) fn world_in_use(&self) -> bool {
        self.world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|w| Arc::strong_count(w) > 1)
    }

    /// Whether this process left the job.
    pub(crate) fn left(&self) -> bool {
        self.left.load(Ordering::Acquire)
    }

    /// For a job whose rendezvous this process hosts: waits until every member has
    /// finalised it or it ended (`MPI_Finalize`: the members still need the rendezvous,
    /// which ends with this process).
    pub(crate) fn wait_hosted(&self) {
        if let Some(h) = &self.hosted {
            let s = h.server();
            while !s.job_finalized() && s.abort_record().is_none() {
                s.wait_final_sent(std::time::Duration::from_millis(200));
            }
            // An abort reaches every member before the rendezvous goes with this process.
            if s.abort_record().is_some() {
                s.wait_abort_sent(std::time::Duration::from_secs(2));
            }
        }
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
    /// The labels of the processes met in jobs joined, by key (`newjob::Key`).
    known: Mutex<std::collections::HashMap<Key, u32>>,
}

impl Worlds {
    /// For a runtime whose own job has `size` ranks.
    pub(crate) fn new(size: u32) -> Worlds {
        Worlds {
            others: Mutex::new(Vec::new()),
            next_label: AtomicU32::new(size),
            known: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The label of the process with key `k`: its job rank if it started in `own` (the
    /// runtime's own job), the label it got when first met, or a fresh one.
    pub(crate) fn label_of(&self, k: Key, own: &WorldCtx) -> u32 {
        if k.0 == own.job {
            return k.1;
        }
        *self
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(k)
            .or_insert_with(|| self.next_label.fetch_add(1, Ordering::Relaxed))
    }

    /// Records that the process with key `k` has label `label` (a spawned process's
    /// parents, which its own job names by their ranks there).
    pub(crate) fn know(&self, k: Key, label: u32) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(k, label);
    }

    /// Records a job joined.
    pub(crate) fn add(&self, w: Arc<WorldCtx>) {
        self.others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
    }

    /// The jobs joined, oldest first (left ones too, until `MPI_Finalize`).
    pub(crate) fn all(&self) -> Vec<Arc<WorldCtx>> {
        self.others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes every job joined (`MPI_Finalize`, an abort).
    pub(crate) fn take_all(&self) -> Vec<Arc<WorldCtx>> {
        std::mem::take(&mut *self.others.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
