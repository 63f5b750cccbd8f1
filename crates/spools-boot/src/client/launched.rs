//! Processes a rank asks its launcher to start ([`Bootstrap::launch`]: MPI's
//! `MPI_Comm_spawn`). Under `spools run` the request goes to the rendezvous, which the
//! launcher hosts; the launcher starts them where its job's ranks run, supervises them as
//! it does its ranks (one that dies ends the job), forwards their output, and tells the
//! asking rank when each one ends ([`Exits`]). Under mpirun or srun they go through the
//! launcher's PMIx spawn (`crate::pmi::spawn`), where the server has one.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use spools_proto::boot::{SpawnProc, ToServer, NOT_A_LAUNCHER};
use thiserror::Error;

use crate::error::BootError;
use crate::identity::LauncherKind;
use crate::net::write_frame;
use crate::pmi::PmiKind;

use super::requests::Exits;
use super::Bootstrap;

/// How long a rank waits for its launcher's answer (starting processes takes
/// milliseconds; an agent such as ssh is started, not waited for).
const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// Why [`Bootstrap::launch`] started nothing.
#[derive(Debug, Error)]
pub enum LaunchRefused {
    /// No launcher hosts this job's rendezvous (a singleton; a spawned job, whose
    /// rendezvous its root parent hosts): the caller starts the processes itself.
    #[error("{NOT_A_LAUNCHER}")]
    NoLauncher,
    /// The launcher tried, and started none of them (a program it cannot start, a host
    /// not in the job), or a foreign launcher has no spawn Spools can use: why.
    #[error("{0}")]
    Failed(String),
    /// The launcher did not answer within two minutes.
    #[error("the launcher did not answer within {} s", ANSWER_WAIT.as_secs())]
    NoAnswer,
    /// The request could not be sent, or the job ended while it waited.
    #[error(transparent)]
    Boot(#[from] BootError),
}

/// Whether `program` names an executable file: a path as it is, a name in `PATH`.
fn executable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let is_exe = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return is_exe(std::path::Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| is_exe(&d.join(program))))
}

impl Bootstrap {
    /// Under a foreign launcher: through its PMIx spawn, or refused naming why.
    fn launch_through_pmi(
        &self,
        launcher: LauncherKind,
        procs: Vec<SpawnProc>,
    ) -> Result<(), LaunchRefused> {
        let how = self.rendezvous.describe(launcher);
        let Some(kind) = PmiKind::detect(|k| std::env::var(k).ok()) else {
            return Err(LaunchRefused::Failed(format!(
                "this job was started by {} ({how}), which offers no PMIx server to start processes through: start it with spools run",
                launcher.name()
            )));
        };
        // A launcher that cannot start one ends the whole job (Open MPI's mpirun does):
        // what is not there to start is refused here instead, as the other paths do.
        if let Some(p) = procs.iter().find(|p| !executable(&p.program)) {
            return Err(LaunchRefused::Failed(format!(
                "cannot start {:?}: no executable file of that name on this host",
                p.program
            )));
        }
        let n = procs.len();
        crate::pmi::spawn(kind, procs, ANSWER_WAIT)
            .map(|s| {
                crate::logger::emit(
                    log::Level::Debug,
                    format_args!(
                        "spools: {n} processes started through {}'s {} spawn, namespace {} (on {})",
                        launcher.name(),
                        kind.name(),
                        s.namespace,
                        s.where_
                            .iter()
                            .map(|(h, _)| h.as_deref().unwrap_or("?"))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                )
            })
            .map_err(|e| {
                LaunchRefused::Failed(format!(
                    "this job was started by {} ({how}), whose {} spawn failed: {e}; start it with spools run",
                    launcher.name(),
                    kind.name()
                ))
            })
    }

    /// Asks the launcher to start `procs`; returns once all are started. `exits` hears of
    /// each one's end (from the watchdog thread: it must not block).
    ///
    /// # Errors
    /// [`LaunchRefused::NoLauncher`] when no launcher hosts this job's rendezvous;
    /// [`LaunchRefused::Failed`] when the launcher could not start them (it started
    /// none); [`LaunchRefused::Boot`] when the job ended meanwhile.
    pub fn launch(&self, procs: Vec<SpawnProc>, exits: Exits) -> Result<(), LaunchRefused> {
        match self.launcher {
            // This process hosts the rendezvous itself (a spawned job's, one set up by
            // hand with SPOOLS_BOOTSTRAP), or there is no launcher at all.
            LauncherKind::Spools if self.server.is_some() => return Err(LaunchRefused::NoLauncher),
            LauncherKind::None => return Err(LaunchRefused::NoLauncher),
            LauncherKind::Spools => {}
            other => return self.launch_through_pmi(other, procs),
        }
        if let Err(why) = spools_proto::boot::check_spawn(&procs) {
            return Err(LaunchRefused::Failed(why));
        }
        let (id, rx) = self.requests.register(exits, procs.len());
        let forget = || self.requests.forget(id);
        let sent = write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Spawn { id, procs },
        );
        if let Err(e) = sent {
            forget();
            return Err(e.into());
        }
        let until = Instant::now() + ANSWER_WAIT;
        loop {
            if let Some(f) = self.state.any_failure() {
                forget();
                return Err(super::bootstrap::failure_error(f).into());
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(None) => return Ok(()),
                Ok(Some(why)) if why == NOT_A_LAUNCHER => return Err(LaunchRefused::NoLauncher),
                Ok(Some(why)) => return Err(LaunchRefused::Failed(why)),
                Err(RecvTimeoutError::Timeout) if Instant::now() < until => {}
                Err(RecvTimeoutError::Timeout) => {
                    forget();
                    return Err(LaunchRefused::NoAnswer);
                }
                Err(RecvTimeoutError::Disconnected) => {
                    forget();
                    return Err(self.watchdog_gone().into());
                }
            }
        }
    }
}
