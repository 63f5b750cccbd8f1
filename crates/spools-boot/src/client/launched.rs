//! Processes a rank asks its launcher to start ([`Bootstrap::launch`]: MPI's
//! `MPI_Comm_spawn` under `spools run`): the request goes to the rendezvous, which the
//! launcher hosts; the launcher starts them where its job's ranks run, supervises them as
//! it does its ranks (one that dies ends the job), forwards their output, and tells the
//! asking rank when each one ends ([`Exits`]).

use std::sync::mpsc::RecvTimeoutError;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use spools_proto::boot::{SpawnProc, ToServer, NOT_A_LAUNCHER};
use thiserror::Error;

use crate::error::BootError;
use crate::net::write_frame;

use super::requests::Exits;
use super::Bootstrap;

/// How long a rank waits for its launcher's answer (starting processes takes
/// milliseconds; an agent such as ssh is started, not waited for).
const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// Why [`Bootstrap::launch`] started nothing.
#[derive(Debug, Error)]
pub enum LaunchRefused {
    /// No launcher hosts this job's rendezvous (rank 0 does, under a foreign launcher or
    /// in a spawned job): the caller starts the processes some other way.
    #[error("{NOT_A_LAUNCHER}")]
    NoLauncher,
    /// The launcher tried, and started none of them (a program it cannot start, a host
    /// not in the job).
    #[error("{0}")]
    Failed(String),
    /// The launcher did not answer within two minutes.
    #[error("the launcher did not answer within {} s", ANSWER_WAIT.as_secs())]
    NoAnswer,
    /// The request could not be sent, or the job ended while it waited.
    #[error(transparent)]
    Boot(#[from] BootError),
}

impl Bootstrap {
    /// Asks the launcher to start `procs`; returns once all are started. `exits` hears of
    /// each one's end (from the watchdog thread: it must not block).
    ///
    /// # Errors
    /// [`LaunchRefused::NoLauncher`] when no launcher hosts this job's rendezvous;
    /// [`LaunchRefused::Failed`] when the launcher could not start them (it started
    /// none); [`LaunchRefused::Boot`] when the job ended meanwhile.
    pub fn launch(&self, procs: Vec<SpawnProc>, exits: Exits) -> Result<(), LaunchRefused> {
        if self.server.is_some() {
            // This process hosts the rendezvous itself: no launcher behind it.
            return Err(LaunchRefused::NoLauncher);
        }
        let (id, rx) = self.requests.register(exits);
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
