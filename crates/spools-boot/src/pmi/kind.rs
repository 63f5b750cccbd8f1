//! Which process-management interface the launcher offers ([`PmiKind`]): how the
//! environment shows it, and the library it is loaded from.

/// The library PMIx is loaded from.
pub(super) const PMIX_LIBRARY: &str = "libpmix.so.2";
/// The library PMI2 is loaded from.
pub(super) const PMI2_LIBRARY: &str = "libpmi2.so.0";

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
            PmiKind::Pmix => PMIX_LIBRARY,
            PmiKind::Pmi2 => PMI2_LIBRARY,
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
