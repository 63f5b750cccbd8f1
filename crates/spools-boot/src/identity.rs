//! Who this process is in its job: rank, size, where to meet, the secret.

use std::path::PathBuf;

use spools_proto::auth::Secret;

use crate::pmi::PmiKind;
use thiserror::Error;

/// Where the ranks of a job meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// `host:port`: rank 0 (or the launcher) listens there.
    Addr(String),
    /// `file:PATH` on a file system all ranks see: rank 0 writes its address and the job
    /// secret there (mode 0600).
    File(PathBuf),
    /// No `SPOOLS_BOOTSTRAP`, but the launcher offers a process-management interface:
    /// rank 0 publishes its rendezvous and the job secret through it ([`crate::pmi`]).
    Pmi(PmiKind),
    /// A job of one rank started without a launcher: no rendezvous.
    Singleton,
}

/// Which launcher started this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LauncherKind {
    /// `spools run`.
    Spools,
    /// Slurm (`SLURM_PROCID`, `SLURM_NTASKS`).
    Slurm,
    /// Open MPI's `mpirun` (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`).
    OpenMpi,
    /// A PMI launcher such as MPICH's Hydra (`PMI_RANK`, `PMI_SIZE`).
    Pmi,
    /// None: a singleton.
    None,
}

impl LauncherKind {
    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            LauncherKind::Spools => "spools run",
            LauncherKind::Slurm => "Slurm",
            LauncherKind::OpenMpi => "Open MPI",
            LauncherKind::Pmi => "PMI",
            LauncherKind::None => "none (singleton)",
        }
    }
}

/// This process's place in its job, as read from the environment.
#[derive(Debug, Clone)]
pub struct JobEnv {
    /// Rank of this process.
    pub rank: u32,
    /// Number of ranks.
    pub size: u32,
    /// Where to meet.
    pub rendezvous: Rendezvous,
    /// The job secret, if handed over in the environment (`SPOOLS_SECRET`).
    pub secret: Option<Secret>,
    /// Who launched us.
    pub launcher: LauncherKind,
    /// Job id chosen by the launcher, if any (`SPOOLS_JOB`, hexadecimal).
    pub job: Option<u64>,
}

/// The environment does not describe a usable job.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdentityError {
    /// A variable holds something that is not a number.
    #[error("{var}={value:?} is not a valid number")]
    NotANumber {
        /// Variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// Rank outside `0..size`, or size zero.
    #[error("rank {rank} is not in a job of {size} ranks ({source_name})")]
    RankOutOfRange {
        /// Rank read.
        rank: u32,
        /// Size read.
        size: u32,
        /// Which launcher's variables.
        source_name: &'static str,
    },
    /// Several ranks, no `SPOOLS_BOOTSTRAP` and no process-management interface.
    #[error("{launcher} started {size} ranks but offers neither PMIx (PMIX_NAMESPACE) nor PMI2 (PMI_FD), and SPOOLS_BOOTSTRAP is not set: set SPOOLS_BOOTSTRAP=file:PATH to a path on a file system every rank sees (rank 0 writes its address and the job secret there), or SPOOLS_BOOTSTRAP=HOST:PORT together with SPOOLS_SECRET (from `spools secret`); under Slurm, srun --mpi=pmix or --mpi=pmi2 needs neither")]
    NoRendezvous {
        /// Launcher name.
        launcher: &'static str,
        /// Job size.
        size: u32,
    },
    /// `SPOOLS_BOOTSTRAP` does not parse.
    #[error("SPOOLS_BOOTSTRAP={0:?}: expected host:port or file:PATH")]
    BadRendezvous(String),
    /// `host:port` rendezvous without a secret.
    #[error("SPOOLS_BOOTSTRAP=host:port needs the job secret in SPOOLS_SECRET (32 hex digits, the same for every rank, e.g. from `spools secret`); or use file:PATH, where rank 0 writes it")]
    NoSecret,
    /// The launcher's process-management interface places this process elsewhere than
    /// the launcher's environment variables do.
    #[error("{launcher} says rank {rank} of {size}, but its {pmi} interface says rank {pmi_rank} of {pmi_size}; the job's rank count does not match the launcher's (a program started by a launcher inside another launcher's job?)")]
    PmiDisagrees {
        /// Launcher name.
        launcher: &'static str,
        /// Rank from the environment.
        rank: u32,
        /// Size from the environment.
        size: u32,
        /// The interface's name.
        pmi: &'static str,
        /// Rank from the interface.
        pmi_rank: u32,
        /// Size from the interface.
        pmi_size: u32,
    },
    /// `SPOOLS_SECRET` does not parse.
    #[error("SPOOLS_SECRET: {0}")]
    BadSecret(String),
}

fn num(var: &'static str, value: String) -> Result<u32, IdentityError> {
    value
        .trim()
        .parse()
        .map_err(|_| IdentityError::NotANumber { var, value })
}

impl JobEnv {
    /// Reads this process's environment.
    ///
    /// # Errors
    /// [`IdentityError`] when the variables are inconsistent.
    pub fn from_env() -> Result<JobEnv, IdentityError> {
        JobEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads a job description through `get` (a variable lookup), in this order:
    /// `SPOOLS_RANK`/`SPOOLS_SIZE` (spools run),
    /// `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE` (before Slurm's: `mpirun` inside a
    /// Slurm allocation), `SLURM_PROCID`/`SLURM_NTASKS`, `PMI_RANK`/`PMI_SIZE`; none of
    /// them means a singleton. The rendezvous is `SPOOLS_BOOTSTRAP` when set, else the
    /// launcher's PMIx or PMI2 interface when it offers one ([`PmiKind::detect`]).
    ///
    /// ```
    /// use spools_boot::identity::{JobEnv, LauncherKind, Rendezvous};
    /// let env = |k: &str| match k {
    ///     "OMPI_COMM_WORLD_RANK" => Some("2".to_string()),
    ///     "OMPI_COMM_WORLD_SIZE" => Some("4".to_string()),
    ///     "SPOOLS_BOOTSTRAP" => Some("file:/shared/job.addr".to_string()),
    ///     _ => None,
    /// };
    /// let job = JobEnv::from_lookup(env).unwrap();
    /// assert_eq!((job.rank, job.size, job.launcher), (2, 4, LauncherKind::OpenMpi));
    /// assert_eq!(job.rendezvous, Rendezvous::File("/shared/job.addr".into()));
    /// ```
    ///
    /// # Errors
    /// [`IdentityError`] when the variables are inconsistent.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<JobEnv, IdentityError> {
        const SOURCES: [(&str, &str, LauncherKind); 4] = [
            ("SPOOLS_RANK", "SPOOLS_SIZE", LauncherKind::Spools),
            (
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                LauncherKind::OpenMpi,
            ),
            ("SLURM_PROCID", "SLURM_NTASKS", LauncherKind::Slurm),
            ("PMI_RANK", "PMI_SIZE", LauncherKind::Pmi),
        ];
        let mut found = None;
        for (rv, sv, kind) in SOURCES {
            if let (Some(r), Some(s)) = (get(rv), get(sv)) {
                found = Some((num(rv, r)?, num(sv, s)?, kind));
                break;
            }
        }
        let (rank, size, launcher) = found.unwrap_or((0, 1, LauncherKind::None));
        if size == 0 || rank >= size {
            return Err(IdentityError::RankOutOfRange {
                rank,
                size,
                source_name: launcher.name(),
            });
        }
        let secret = match get("SPOOLS_SECRET") {
            Some(s) => {
                Some(Secret::from_hex(&s).map_err(|e| IdentityError::BadSecret(e.to_string()))?)
            }
            None => None,
        };
        let rendezvous = match (get("SPOOLS_BOOTSTRAP"), PmiKind::detect(&get)) {
            (Some(b), _) => parse_rendezvous(&b)?,
            (None, _) if size == 1 => Rendezvous::Singleton,
            (None, Some(kind)) => Rendezvous::Pmi(kind),
            (None, None) => {
                return Err(IdentityError::NoRendezvous {
                    launcher: launcher.name(),
                    size,
                })
            }
        };
        if matches!(rendezvous, Rendezvous::Addr(_)) && secret.is_none() {
            return Err(IdentityError::NoSecret);
        }
        let job = get("SPOOLS_JOB").and_then(|j| u64::from_str_radix(j.trim(), 16).ok());
        Ok(JobEnv {
            rank,
            size,
            rendezvous,
            secret,
            launcher,
            job,
        })
    }
}

impl Rendezvous {
    /// How the job met, for `spools info` and messages.
    pub fn describe(&self, launcher: LauncherKind) -> String {
        match self {
            Rendezvous::Addr(_) if launcher == LauncherKind::Spools => "spools run".into(),
            Rendezvous::Addr(a) => format!("SPOOLS_BOOTSTRAP={a}"),
            Rendezvous::File(p) => format!("SPOOLS_BOOTSTRAP=file:{}", p.display()),
            Rendezvous::Pmi(k) => format!("{} (the launcher's)", k.name()),
            Rendezvous::Singleton => "none (one rank)".into(),
        }
    }
}

/// Parses a `SPOOLS_BOOTSTRAP` value.
///
/// # Errors
/// [`IdentityError::BadRendezvous`].
pub fn parse_rendezvous(s: &str) -> Result<Rendezvous, IdentityError> {
    let s = s.trim();
    if let Some(path) = s.strip_prefix("file:") {
        if path.is_empty() {
            return Err(IdentityError::BadRendezvous(s.to_string()));
        }
        return Ok(Rendezvous::File(PathBuf::from(path)));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(Rendezvous::Addr(s.to_string()))
        }
        _ => Err(IdentityError::BadRendezvous(s.to_string())),
    }
}
