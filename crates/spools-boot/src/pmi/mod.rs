//! The launcher's own process-management interface: PMIx (Open MPI's `mpirun`,
//! `srun --mpi=pmix`) and PMI2 (`srun --mpi=pmi2`), loaded at run time.
//!
//! Under such a launcher a job needs nothing set: rank 0 starts the rendezvous server and
//! publishes its address and the job secret through the launcher's key-value store (put,
//! commit, fence); the other ranks read them after the fence. The libraries are opened
//! with `dlopen` (`libpmix.so.2`, `libpmi2.so.0`) only when the environment says the
//! launcher offers them, so a Spools binary does not require them anywhere else.
//!
//! ```
//! use spools_boot::pmi::PmiKind;
//! // What the environment offers, read through a lookup (here: Open MPI's mpirun).
//! let env = |k: &str| (k == "PMIX_NAMESPACE").then(|| "12345".to_string());
//! assert_eq!(PmiKind::detect(env), Some(PmiKind::Pmix));
//! assert_eq!(PmiKind::detect(|_| None), None);
//! ```

mod error;
mod pmi2;
mod pmix;

use std::time::Duration;

pub use error::PmiError;
#[doc(hidden)]
pub use pmix::ABI_SIZES as PMIX_ABI_SIZES;

/// The key under which rank 0 publishes the rendezvous (`ADDR/SECRET`).
pub const RENDEZVOUS_KEY: &str = "spools.rdv";

/// Which process-management interface the launcher offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiKind {
    /// PMIx (`PMIX_NAMESPACE` is set): Open MPI's `mpirun`, `srun --mpi=pmix`, PRRTE.
    Pmix,
    /// PMI2 (`PMI_FD` is set): `srun --mpi=pmi2`, MPICH's Hydra.
    Pmi2,
}

impl PmiKind {
    /// What the environment offers (PMIx first), read through `get`.
    pub fn detect(get: impl Fn(&str) -> Option<String>) -> Option<PmiKind> {
        [PmiKind::Pmix, PmiKind::Pmi2]
            .into_iter()
            .find(|k| get(k.variable()).is_some_and(|v| !v.is_empty()))
    }

    /// Its name, for messages and `spools info`.
    pub fn name(self) -> &'static str {
        match self {
            PmiKind::Pmix => "PMIx",
            PmiKind::Pmi2 => "PMI2",
        }
    }

    /// The variable whose presence says the launcher offers it.
    pub fn variable(self) -> &'static str {
        match self {
            PmiKind::Pmix => "PMIX_NAMESPACE",
            PmiKind::Pmi2 => "PMI_FD",
        }
    }

    /// The shared library it is loaded from.
    pub fn library(self) -> &'static str {
        match self {
            PmiKind::Pmix => pmix::LIBRARY,
            PmiKind::Pmi2 => pmi2::LIBRARY,
        }
    }

    /// The Debian package that provides [`PmiKind::library`].
    pub fn package(self) -> &'static str {
        match self {
            PmiKind::Pmix => "libpmix2",
            PmiKind::Pmi2 => "libpmi2-0",
        }
    }
}

/// This process's session with the launcher's process-management interface.
pub trait Pmi {
    /// Which interface.
    fn kind(&self) -> PmiKind;
    /// This process's rank, as the launcher knows it.
    fn rank(&self) -> u32;
    /// The job size, as the launcher knows it.
    fn size(&self) -> u32;
    /// Stores `value` under `key` for every rank of the job, visible after the next
    /// [`Pmi::fence`].
    ///
    /// # Errors
    /// [`PmiError`] when the launcher refuses.
    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError>;
    /// Commits what was put and waits until every rank of the job has reached its fence.
    ///
    /// # Errors
    /// [`PmiError`] when the launcher reports a failure (a timeout among them).
    fn fence(&mut self) -> Result<(), PmiError>;
    /// The value `rank` put under `key` before the fence.
    ///
    /// # Errors
    /// [`PmiError`] when there is none or the launcher fails.
    fn get(&mut self, rank: u32, key: &str) -> Result<String, PmiError>;
    /// Ends the session (the launcher then knows this process initialised and finalised
    /// its interface properly; the job goes on).
    ///
    /// # Errors
    /// [`PmiError`] when the launcher reports a failure.
    fn finalize(&mut self) -> Result<(), PmiError>;
}

/// Opens a session with the interface `kind`, waiting at most `timeout` in the fence.
///
/// # Errors
/// [`PmiError::Load`] when the library is missing, [`PmiError::Call`] when it fails.
pub fn open(kind: PmiKind, timeout: Duration) -> Result<Box<dyn Pmi + Send>, PmiError> {
    Ok(match kind {
        PmiKind::Pmix => Box::new(pmix::Pmix::init(timeout)?),
        PmiKind::Pmi2 => Box::new(pmi2::Pmi2::init()?),
    })
}
