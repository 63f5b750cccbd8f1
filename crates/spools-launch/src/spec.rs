//! What to launch ([`LaunchSpec`]), how a job ended ([`LaunchReport`]) and why it could
//! not start ([`LaunchError`]).

use std::ffi::OsString;
use std::time::Duration;

use thiserror::Error;

use crate::plan::MAX_LOCAL_RANKS;
use spools_boot::BootStep;

/// How long ranks are given by default to report an abort before they are killed.
pub const GRACE: Duration = Duration::from_millis(500);

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// Number of ranks.
    pub ranks: u32,
    /// Program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Prefix each output line with `[rank]`.
    pub tag_output: bool,
    /// Stop the job after this long.
    pub timeout: Option<Duration>,
    /// How long ranks get to report a failure before they are killed ([`GRACE`]).
    pub grace: Duration,
    /// Fail a rank that stays stopped (SIGSTOP, a debugger) this long; `None`: wait.
    pub liveness: Option<Duration>,
    /// The job secret; `None`: a fresh random one (the usual case). Given, the job can
    /// prove it to a destination outside the job that requires it (a stream receiver
    /// started with the same secret).
    pub secret: Option<spools_proto::auth::Secret>,
    /// The hosts to start the ranks on, through an agent (`spools run --hosts`); `None`:
    /// all on this host.
    pub hosts: Option<crate::plan::HostPlan>,
    /// The keepalive of the rendezvous connections (the job's configuration's
    /// `net_timeout_s`: [`Keepalive::for_timeout`](spools_boot::keepalive::Keepalive::for_timeout)).
    pub keepalive: Option<spools_boot::keepalive::Keepalive>,
    /// How the ranks are bound to this host's CPUs: only without `hosts` (ranks started
    /// through an agent run on other hosts, whose CPUs this launcher does not know).
    pub bind: crate::cpus::Bind,
}

impl LaunchSpec {
    /// Checks what can be checked before anything starts.
    ///
    /// # Errors
    /// [`LaunchError::BadCount`] for no ranks or more than [`MAX_LOCAL_RANKS`] (on this
    /// host), [`LaunchError::Hosts`] for a host list that does not hold `ranks`,
    /// [`LaunchError::BindWithHosts`] for binding with a host list.
    pub fn check(&self) -> Result<(), LaunchError> {
        let n = self.ranks;
        if let Some(plan) = &self.hosts {
            if self.bind != crate::cpus::Bind::None {
                return Err(LaunchError::BindWithHosts);
            }
            plan.check(n)?;
            if n == 0 || n > spools_proto::boot::MAX_RANKS {
                return Err(LaunchError::BadCount(n));
            }
            return Ok(());
        }
        if n == 0 || n > MAX_LOCAL_RANKS.min(spools_proto::boot::MAX_RANKS) {
            return Err(LaunchError::BadCount(n));
        }
        Ok(())
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchReport {
    /// The exit status `spools run` returns: 0, the first failing rank's exit code,
    /// 128 + signal number, 124 on timeout.
    pub exit_code: i32,
    /// The first failure: rank and description.
    pub failure: Option<(u32, String)>,
}

/// The job could not be launched.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// Zero ranks, or more than one host should run.
    #[error("cannot launch {0} ranks on this host (1 to {MAX_LOCAL_RANKS}); for more, use a cluster launcher (srun, mpirun)")]
    BadCount(u32),
    /// A signal asked the launcher to stop while it was still starting ranks.
    #[error(
        "stopped by {signal} while starting rank {started} of {ranks}; no rank was left running"
    )]
    Interrupted {
        /// The signal's name.
        signal: &'static str,
        /// Its number.
        number: i32,
        /// How many ranks had been started.
        started: u32,
        /// How many were to be.
        ranks: u32,
    },
    /// A system call failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done.
        step: BootStep,
        /// The error.
        source: std::io::Error,
    },
    /// The launcher's signal handlers could not be installed.
    #[error("installing signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// The program could not be started.
    #[error("cannot start {program:?} for rank {rank}: {source}")]
    Spawn {
        /// The program.
        program: OsString,
        /// The rank being started.
        rank: u32,
        /// The error.
        source: std::io::Error,
    },
    /// The rendezvous could not start.
    #[error(transparent)]
    Boot(#[from] spools_boot::BootError),
    /// The host list does not fit the job.
    #[error(transparent)]
    Hosts(#[from] crate::plan::HostsError),
    /// Ranks are to be bound, and started through an agent on other hosts, whose CPUs
    /// this launcher does not know.
    #[error("binding ranks to CPUs (--bind) needs them started on this host; with a host list, bind through the agent")]
    BindWithHosts,
}
