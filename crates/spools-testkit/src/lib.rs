//! Spools test kit (dev-only: use it from `[dev-dependencies]` only).
//!
//! Multi-process tests run real jobs: the test executable re-runs itself as the ranks of a
//! job, each rank playing the role named by [`ROLE_VAR`]. A test starts with
//! [`rank_main`], which runs the rank's body (and exits) when this process is a rank, and
//! returns at once in the test harness's own process:
//!
//! ```no_run
//! use spools_testkit::{assert_ok, e, rank_main, Job};
//!
//! #[test]
//! fn two_ranks_meet() {
//!     rank_main(|_role| {
//!         // ... spools::init(), the rank's checks ...
//!         Ok(())
//!     });
//!     let o = Job::new(2, "two_ranks_meet").env("SPOOLS_TRANSPORT", "tcp").run();
//!     assert_ok(&o);
//! }
//! ```
//!
//! A [`Job`] is launched by the real launcher, [`spools_boot::launcher::launch`]: the test
//! executable is first re-run as the launcher (in a process group of its own), which then
//! starts the ranks; so the job's standard output and error are captured as `spools run`
//! would forward them. Tests of the command line launch through the `spools` binary
//! instead ([`Job::via_cli`]). Every wait is bounded ([`wait_bounded`]): at its limit the
//! whole process group is stopped (SIGTERM, so that the launcher stops its ranks, then
//! SIGKILL) and the test fails with what the job printed. Temporary directories
//! ([`tempdir`]) are removed when dropped, also when the test fails.
//!
//! Verdicts must come from events the test controls (a file a rank writes, a message
//! received), never from the clock: the clock only bounds waits, as a safety net.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the role a rank plays (set for every rank of a
/// [`Job`] and of a [`foreign_rank`]).
pub const ROLE_VAR: &str = "SPOOLS_TEST_ROLE";

/// Set (to `RANKS TIMEOUT_MS GRACE_MS`) in the process that plays the launcher of a
/// [`Job`]; removed before the ranks start.
const LAUNCH_VAR: &str = "SPOOLS_TESTKIT_LAUNCH";

/// How long a job may run by default before the launcher stops it.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long ranks get by default to report a failure before the launcher kills them: long,
/// so that ranks that see a failure report it and exit by themselves however loaded the
/// machine (a rank that does not is a bug the test should see).
pub const JOB_GRACE: Duration = Duration::from_secs(20);
/// How long the test waits for a job by default before it stops it (past
/// [`JOB_TIMEOUT`] plus the grace, so that the launcher's own timeout is seen first).
pub const JOB_WAIT: Duration = Duration::from_secs(150);

/// The role this process plays when it was started as a rank by a test.
pub fn role() -> Option<String> {
    std::env::var(ROLE_VAR).ok()
}

/// Runs `body` as a rank and exits with its result (0 on success, the error printed and
/// 1 otherwise), so the test harness never runs the parent test's body in a rank. In the
/// process that plays a [`Job`]'s launcher, runs the launcher and exits with its status.
/// In the test harness's own process (no role), returns at once.
pub fn rank_main(body: impl FnOnce(&str) -> Result<(), String>) {
    if let Some(spec) = std::env::var_os(LAUNCH_VAR) {
        // The ranks must not launch again.
        std::env::remove_var(LAUNCH_VAR);
        std::process::exit(run_launcher(&spec.to_string_lossy()));
    }
    if let Some(r) = role() {
        let code = match body(&r) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("rank error: {e}");
                1
            }
        };
        std::process::exit(code);
    }
}

/// The launcher process of a [`Job`]: starts the ranks (this executable with the same
/// arguments) with the library launcher, as `spools run` does.
fn run_launcher(spec: &str) -> i32 {
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
    let spec = spools_boot::launcher::LaunchSpec {
        ranks: u32::try_from(ranks).unwrap_or(u32::MAX),
        program,
        args: std::env::args_os().skip(1).collect(),
        tag_output: false,
        timeout: Some(Duration::from_millis(timeout)),
        grace: Duration::from_millis(grace),
        liveness: None,
    };
    match spools_boot::launcher::launch(&spec) {
        Ok(report) => report.exit_code,
        Err(e) => {
            eprintln!("spools run: {e}");
            match e {
                spools_boot::launcher::LaunchError::Spawn { .. } => 127,
                _ => 1,
            }
        }
    }
}

/// Runs a rank's checks on an initialised runtime; on failure prints the error and exits
/// at once, without finalising, so that the launcher stops the job (dropping the runtime
/// would wait for ranks that may be waiting for this one).
pub fn checked<W>(w: &W, body: impl FnOnce(&W) -> Result<(), String>) {
    if let Err(e) = body(w) {
        eprintln!("rank error: {e}");
        std::process::exit(1);
    }
}

/// Turns any displayable error into the rank body's error.
///
/// # Errors
/// `r`'s error, as text.
pub fn e<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// What a finished process or job produced.
#[derive(Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error.
    pub stderr: String,
}

impl Output {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Sends `signal` to the process group `pgid`.
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits for `child` (started in a process group of its own, see [`grouped`]) at most
/// `limit`, capturing its piped output; at the limit stops its whole process group
/// (SIGTERM, which makes a launcher stop its ranks, then SIGKILL) and panics with what it
/// printed.
///
/// # Panics
/// At the limit, or when the process cannot be waited for.
#[allow(clippy::panic, clippy::expect_used)]
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            // Ask first: a launcher stops its ranks (in process groups of their own) on
            // SIGTERM. Then kill whatever is left of the group.
            signal_group(child.id(), "-TERM");
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            signal_group(child.id(), "-KILL");
            let _ = child.kill();
            let s = child.wait().expect("wait after kill");
            let stdout = t_out.join().unwrap_or_default();
            let stderr = t_err.join().unwrap_or_default();
            panic!("process did not end within {limit:?}; stopped it.\nstdout:\n{stdout}\nstderr:\n{stderr}\nstatus {s:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
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
/// path first).
pub fn self_args(test: &str) -> Vec<String> {
    vec![
        current_exe().to_string_lossy().into_owned(),
        "--exact".into(),
        test.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
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
}

impl Job {
    /// `ranks` ranks of this executable running test `test` (which must start with
    /// [`rank_main`]) in role `x`, [`JOB_TIMEOUT`], [`JOB_GRACE`], waited for at most
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
        }
    }

    /// The role the ranks play (what [`rank_main`]'s body receives).
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

    /// Launches through `spools run` of this `spools` binary instead of the library
    /// launcher (for tests of the command line).
    pub fn via_cli(mut self, spools: impl Into<PathBuf>) -> Job {
        self.cli = Some(spools.into());
        self
    }

    /// The launcher's command, in a process group of its own, output piped.
    pub fn command(&self) -> Command {
        let secs = |d: Duration| format!("{}", d.as_secs_f64());
        let mut cmd = match &self.cli {
            Some(spools) => {
                let mut c = grouped(spools);
                c.args(["run", "-n", &self.ranks.to_string()])
                    .args(["--timeout", &secs(self.timeout)])
                    .args(["--grace", &secs(self.grace), "--"])
                    .args(self_args(&self.test));
                c
            }
            None => {
                let mut c = grouped(current_exe());
                c.args(&self_args(&self.test)[1..]).env(
                    LAUNCH_VAR,
                    format!(
                        "{} {} {}",
                        self.ranks,
                        self.timeout.as_millis(),
                        self.grace.as_millis()
                    ),
                );
                c
            }
        };
        cmd.env(ROLE_VAR, &self.role)
            .env_remove("SPOOLS_RANK")
            .env_remove("SPOOLS_SIZE")
            .env_remove("SPOOLS_BOOTSTRAP")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts the job, not waiting (wait with [`wait_bounded`] and [`Job::wait_limit`]).
    ///
    /// # Panics
    /// When the launcher cannot be started.
    #[allow(clippy::expect_used)]
    pub fn spawn(&self) -> Child {
        self.command().spawn().expect("spawn the launcher")
    }

    /// How long [`Job::run`] waits.
    pub fn wait_limit(&self) -> Duration {
        self.wait
    }

    /// Runs the job to its end (bounded) and returns what it printed.
    pub fn run(&self) -> Output {
        wait_bounded(self.spawn(), self.wait)
    }
}

/// Launches `n` ranks of this executable playing `role` in test `test`, with extra
/// environment, under the real launcher, and waits (bounded): `Job::new(n, test)
/// .role(role).envs(env).run()`.
pub fn launch(n: u32, test: &str, role: &str, env: &[(&str, &str)]) -> Output {
    Job::new(n, test).role(role).envs(env).run()
}

/// A command in a process group of its own (see [`wait_bounded`]).
pub fn grouped(program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(program);
    c.process_group(0);
    c
}

/// Asserts a job succeeded, showing its output otherwise.
pub fn assert_ok(o: &Output) {
    assert_ok_as(o, "job");
}

/// Asserts that `what` (a job or a command) succeeded, showing its output otherwise.
pub fn assert_ok_as(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
}

/// Entries of /dev/shm whose names start with `spools-{job}`.
pub fn shm_leftovers(job: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("spools-{job}")))
                .collect()
        })
        .unwrap_or_default()
}

/// A temporary directory, removed with everything in it when dropped (also when the test
/// panics). It derefs to its [`Path`].
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<OsStr> for TempDir {
    fn as_ref(&self) -> &OsStr {
        self.0.path().as_os_str()
    }
}

/// A fresh temporary directory for one test, named after `name` (removed when dropped).
///
/// # Panics
/// When it cannot be created.
#[allow(clippy::expect_used)]
pub fn tempdir(name: &str) -> TempDir {
    TempDir(
        tempfile::Builder::new()
            .prefix(&format!("spools-test-{name}-"))
            .tempdir()
            .expect("a temporary directory"),
    )
}

/// Waits until `path` exists (an event another process controls), polling; the limit is a
/// safety net, not a verdict.
///
/// # Errors
/// When `path` did not appear within `limit`.
pub fn wait_for_file(path: &Path, limit: Duration) -> Result<(), String> {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() > limit {
            return Err(format!(
                "{} never appeared (waited {limit:?})",
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Writes `contents` to `path` atomically (a temporary file renamed into place), so that
/// a process waiting for `path` ([`wait_for_file`]) never reads it half written.
///
/// # Errors
/// The file system's.
pub fn signal_file(path: &Path, contents: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp-signal");
    std::fs::write(&tmp, contents).map_err(|x| format!("{}: {x}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|x| format!("{}: {x}", path.display()))
}

/// One end of a parallel pipe: a job of `n` ranks of `spools bench pipe` (the `spools`
/// binary `spools`) playing `role` with `records` records of `layout`, meeting through
/// `dir` (by name when `name` is given), the consumer verifying; spawned in a process
/// group of its own, not waited for.
///
/// # Panics
/// When it cannot be started.
#[allow(clippy::expect_used)]
pub fn pipe_end(
    spools: &Path,
    n: u32,
    role: &str,
    layout: &str,
    name: Option<&str>,
    records: u64,
    dir: &Path,
) -> Child {
    let mut c = grouped(spools);
    c.args(["run", "-n", &n.to_string(), "--timeout", "100", "--"])
        .arg(spools)
        .args([
            "bench",
            "pipe",
            "--role",
            role,
            "--layout",
            layout,
            "--records",
            &records.to_string(),
        ])
        .env("SPOOLS_PIPE_DIR", dir)
        .env("SPOOLS_PIPE_TIMEOUT", "30")
        .env_remove("SPOOLS_RANK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(n) = name {
        c.args(["--name", n]);
    }
    if role == "consumer" {
        c.arg("--verify");
    }
    c.spawn().expect("spawn a pipe end")
}

/// Starts rank `rank` of `size` of this test executable (playing `test`'s role `x`) as
/// another launcher would (Open MPI's variables, no launcher of ours): rank 0 then hosts
/// the rendezvous. Spawned in a process group of its own, not waited for.
///
/// # Panics
/// When it cannot be started.
#[allow(clippy::expect_used)]
pub fn foreign_rank(test: &str, rank: u32, size: u32, env: &[(&str, String)]) -> Child {
    let mut c = grouped(current_exe());
    c.args(&self_args(test)[1..])
        .env(ROLE_VAR, "x")
        .env("OMPI_COMM_WORLD_RANK", rank.to_string())
        .env("OMPI_COMM_WORLD_SIZE", size.to_string())
        .env_remove("SPOOLS_RANK")
        .env_remove("SPOOLS_SIZE")
        .env_remove(LAUNCH_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("spawn a rank")
}

/// A free TCP port on 127.0.0.1 below the ephemeral range (32768 on), so that no listener
/// bound with port 0 (a consumer rank's, say) can take it before the test's program binds
/// it; `salt` spreads the tests of one process over the range.
///
/// # Panics
/// When no port of the range is free.
#[allow(clippy::expect_used)]
pub fn free_port(salt: u16) -> u16 {
    let start = (std::process::id() as u16 % 4000).wrapping_mul(3) % 12000;
    (0..12000u16)
        .map(|i| 20000 + (start + salt.wrapping_mul(101) + i) % 12000)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port")
}
