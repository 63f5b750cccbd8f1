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

mod api;
mod error;
mod kind;
mod pmi2;
mod pmix;

use std::time::Duration;

pub use api::Pmi;
pub use error::PmiError;
pub use kind::PmiKind;
pub use pmix::Spawned;
#[doc(hidden)]
pub use pmix::ABI_SIZES as PMIX_ABI_SIZES;

/// The key under which rank 0 publishes the rendezvous (`ADDR/SECRET`).
pub const RENDEZVOUS_KEY: &str = "spools.rdv";

/// Starts `procs` through the launcher's interface `kind` (PMIx's `PMIx_Spawn`, in a
/// session of its own; MPI's `MPI_Comm_spawn` under mpirun or srun) and returns the new
/// namespace, and where each process runs. Waits at most `timeout` (on a thread of its own: a server that never
/// answers cannot hold the caller).
///
/// # Errors
/// [`PmiError::NoSpawn`] for PMI2, [`PmiError::NoReturn`] past `timeout`, and the
/// server's refusal (Slurm's PMIx has no spawn: `PMIx_Spawn` fails, naming why).
pub fn spawn(
    kind: PmiKind,
    procs: Vec<spools_proto::boot::SpawnProc>,
    timeout: Duration,
) -> Result<Spawned, PmiError> {
    if kind != PmiKind::Pmix {
        return Err(PmiError::NoSpawn { kind });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let started = std::thread::Builder::new()
        .name("spools-pmix-spawn".into())
        .spawn(move || {
            let run = || {
                let mut pmix = pmix::Pmix::init(timeout)?;
                let r = pmix.spawn(&procs);
                let _ = pmix.finalize();
                r
            };
            let _ = tx.send(run());
        });
    if let Err(e) = started {
        return Err(PmiError::Thread {
            call: "PMIx_Spawn",
            why: e.to_string(),
        });
    }
    match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(PmiError::NoReturn {
            call: "PMIx_Spawn",
            secs: timeout.as_secs(),
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(PmiError::Thread {
            call: "PMIx_Spawn",
            why: "it ended without an answer".into(),
        }),
    }
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
