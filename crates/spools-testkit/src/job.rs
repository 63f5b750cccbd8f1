//! [`Job`](crate::Job): N ranks of this test executable under the real launcher.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::env::{LAUNCH_VAR, ROLE_VAR};
use crate::guard::Spawned;
use crate::wait::Output;

/// How long a job may run by default before the launcher stops it.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long ranks get by default to report a failure before the launcher kills them: long,
/// so that ranks that see a failure report it and exit by themselves however loaded the
/// machine (a rank that does not is a bug the test should see).
pub const JOB_GRACE: Duration = Duration::from_secs(20);
/// How long the test waits for a job by default before it stops it (past
/// [`JOB_TIMEOUT`] plus the grace, so that the launcher's own timeout is seen first).
pub const JOB_WAIT: Duration = Duration::from_secs(150);

/// The launcher process of a [`Job`](crate::Job): starts the ranks (this executable with the same
/// arguments) with the library launcher, as `spools run` does.
pub(crate) fn run_launcher(spec: &str) -> i32 {
    // The launcher reports through the runtime's log, as under `spools run`.
    spools_boot::logger::install();
    let mut it = spec.split_whitespace().map(str::parse::<u64>);
    let (Some(Ok(ranks)), Some(Ok(timeout)), Some(Ok(grace))) = (it.next(), it.next(), it.next())
    else {
        eprintln!("spools-testkit: bad {LAUNCH_VAR}={spec:?}");
        return 2;
    };
    let program = match std::env::current_exe() {
        Ok(p) => p.into_os_string(),
        Err(e) => {
            eprintln!("spools-testkit: current executable: {e}");
            return 2;
        }
    };
    let spec = spools_launch::LaunchSpec {
        ranks: u32::try_from(ranks).unwrap_or(u32::MAX),
        program,
        args: std::env::args_os().skip(1).collect(),
        tag_output: false,
        timeout: Some(Duration::from_millis(timeout)),
        grace: Duration::from_millis(grace),
        liveness: None,
        secret: None,
        hosts: None,
        keepalive: spools_boot::keepalive::Keepalive::for_timeout(
            spools_boot::keepalive::NET_TIMEOUT_DEFAULT_S,
        ),
        bind: spools_launch::cpus::Bind::None,
    };
    match spools_launch::launch(&spec) {
        Ok(report) => report.exit_code,
        Err(e) => {
            eprintln!("spools run: {e}");
            match e {
                spools_launch::LaunchError::Spawn { .. } => 127,
                _ => 1,
            }
        }
    }
}

/// This test executable.
///
/// # Panics
/// When the executable's path is unknown.
#[allow(clippy::expect_used)]
pub fn current_exe() -> PathBuf {
    std::env::current_exe().expect("current exe")
}

/// The arguments that make this test executable run test `test` alone (the executable's
/// path first), quietly: without `-q` the harness writes `test NAME ... ` before the
/// test's body runs, which would begin a rank's first line of output.
pub fn self_args(test: &str) -> Vec<String> {
    vec![
        current_exe().to_string_lossy().into_owned(),
        "--exact".into(),
        test.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
        "-q".into(),
    ]
}

/// A job of N ranks of this test executable running one of its tests in a role.
#[derive(Debug, Clone)]
pub struct Job {
    ranks: u32,
    test: String,
    role: String,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
    grace: Duration,
    wait: Duration,
    cli: Option<PathBuf>,
    cli_args: Vec<OsString>,
}

impl Job {
    /// `ranks` ranks of this executable running test `test` (which must start with
    /// [`rank_main`](crate::rank_main)) in role `x`, [`JOB_TIMEOUT`], [`JOB_GRACE`], waited for at most
    /// [`JOB_WAIT`].
    pub fn new(ranks: u32, test: &str) -> Job {
        Job {
            ranks,
            test: test.to_string(),
            role: "x".into(),
            env: Vec::new(),
            timeout: JOB_TIMEOUT,
            grace: JOB_GRACE,
            wait: JOB_WAIT,
            cli: None,
            cli_args: Vec::new(),
        }
    }

    /// The role the ranks play (what [`rank_main`](crate::rank_main)'s body receives).
    pub fn role(mut self, role: &str) -> Job {
        self.role = role.to_string();
        self
    }

    /// Sets one environment variable for the ranks.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Job {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets environment variables for the ranks.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(mut self, vars: &[(K, V)]) -> Job {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// The launcher's timeout (the job's exit status is 124 past it); the test waits this
    /// plus the grace plus 10 s.
    pub fn timeout(mut self, timeout: Duration) -> Job {
        self.timeout = timeout;
        self.wait = timeout + self.grace + Duration::from_secs(10);
        self
    }

    /// How long the launcher lets the other ranks exit by themselves once one has failed
    /// before it kills them ([`JOB_GRACE`] by default); the test waits the timeout plus
    /// this plus 10 s.
    pub fn grace(mut self, grace: Duration) -> Job {
        self.grace = grace;
        self.wait = self.timeout + grace + Duration::from_secs(10);
        self
    }

    /// Launches through `spools run` of this `spools` binary instead of the library
    /// launcher (for tests of the command line).
    pub fn via_cli(mut self, spools: impl Into<PathBuf>) -> Job {
        self.cli = Some(spools.into());
        self
    }

    /// More options of `spools run` (with [`Job::via_cli`]), e.g. `["--secret", FILE]`.
    pub fn cli_args<S: AsRef<OsStr>>(mut self, args: &[S]) -> Job {
        self.cli_args
            .extend(args.iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The launcher's command, in a process group of its own, output piped, in an
    /// environment without any of the caller's `SPOOLS_*` variables (then
    /// `SPOOLS_THREAD_LEVEL` from [`TEST_THREAD_LEVEL_VAR`], then the job's own settings:
    /// [`Job::env`]).
    pub fn command(&self) -> Command {
        let secs = |d: Duration| format!("{}", d.as_secs_f64());
        let mut cmd = match &self.cli {
            Some(spools) => {
                let mut c = grouped(spools);
                c.args(["run", "-n", &self.ranks.to_string()])
                    .args(&self.cli_args)
                    .args(["--timeout", &secs(self.timeout)])
                    .args(["--grace", &secs(self.grace), "--"])
                    .args(self_args(&self.test));
                c
            }
            None => {
                let mut c = grouped(current_exe());
                c.args(&self_args(&self.test)[1..]);
                c
            }
        };
        // The job sees the test's settings only: none of the caller's SPOOLS_* variables
        // (a rank's identity, SPOOLS_PROGRESS_THREAD, SPOOLS_LOG, whose level the
        // verdicts reading the launcher's reports depend on, ...).
        without_ambient_spools_env(&mut cmd);
        // The one exception, by name: the thread level a test pass runs every job at
        // (scripts/test.sh runs the message tests again at `single`), unless the test
        // sets its own.
        if let Some(level) = std::env::var_os(TEST_THREAD_LEVEL_VAR) {
            cmd.env("SPOOLS_THREAD_LEVEL", level);
        }
        if self.cli.is_none() {
            cmd.env(
                LAUNCH_VAR,
                format!(
                    "{} {} {}",
                    self.ranks,
                    self.timeout.as_millis(),
                    self.grace.as_millis()
                ),
            );
        }
        cmd.env(ROLE_VAR, &self.role)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts the job, not waiting (wait with [`wait_bounded`](crate::wait_bounded) and [`Job::wait_limit`]).
    ///
    /// # Panics
    /// When the launcher cannot be started.
    #[allow(clippy::expect_used)]
    pub fn spawn(&self) -> Child {
        self.command().spawn().expect("spawn the launcher")
    }

    /// Starts the job, guarded: it is stopped with its ranks when the guard is dropped
    /// unless waited for ([`Spawned::wait`], with [`Job::wait_limit`]).
    ///
    /// # Panics
    /// When the launcher cannot be started.
    pub fn start(&self) -> Spawned {
        Spawned::new(self.spawn())
    }

    /// How long [`Job::run`] waits.
    pub fn wait_limit(&self) -> Duration {
        self.wait
    }

    /// Runs the job to its end (bounded) and returns what it printed.
    pub fn run(&self) -> Output {
        self.start().wait(self.wait)
    }
}

/// The variable that sets the thread level (`SPOOLS_THREAD_LEVEL`) of every job a test
/// starts, unless the test sets its own: `scripts/test.sh` runs the message, collective
/// and watchdog tests once more with it at `single`, the path that takes no lock.
pub const TEST_THREAD_LEVEL_VAR: &str = "SPOOLS_TEST_THREAD_LEVEL";

/// Launches `n` ranks of this executable playing `role` in test `test`, with extra
/// environment, under the real launcher, and waits (bounded): `Job::new(n, test)
/// .role(role).envs(env).run()`.
pub fn launch(n: u32, test: &str, role: &str, env: &[(&str, &str)]) -> Output {
    Job::new(n, test).role(role).envs(env).run()
}

/// Removes from `cmd`'s environment every `SPOOLS_*` variable of this process's own (set
/// the ones the command needs after this): what a test starts must not depend on the
/// environment the test suite was run in (`SPOOLS_PROGRESS_THREAD=1`, `SPOOLS_LOG=off`,
/// a rank's identity when a rank starts it, ...).
pub fn without_ambient_spools_env(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SPOOLS_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// A command in a process group of its own (see [`wait_bounded`](crate::wait_bounded)).
pub fn grouped(program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(program);
    c.process_group(0);
    c
}
