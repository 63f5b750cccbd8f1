//! Helpers for tests that launch real processes: the test executable re-runs itself as
//! the ranks of a job (selected by `SPOOLS_TEST_ROLE`), under `spools run` or `mpirun`.
//! Every launch has a bounded wait and kills what it started.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The role this process plays when it was started as a rank by a test.
pub(crate) fn role() -> Option<String> {
    std::env::var("SPOOLS_TEST_ROLE").ok()
}

/// Runs `body` as a rank and exits with its result (0 on success, the error printed and
/// 1 otherwise), so the test harness never runs the parent test's body in a rank.
pub(crate) fn rank_main(body: impl FnOnce(&str) -> Result<(), String>) {
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

/// Runs a rank's checks on an initialised runtime; on failure prints the error and exits
/// at once, without finalising, so that the launcher stops the job (dropping the runtime
/// would wait for ranks that may be waiting for this one).
pub(crate) fn checked<W>(w: &W, body: impl FnOnce(&W) -> Result<(), String>) {
    if let Err(e) = body(w) {
        eprintln!("rank error: {e}");
        std::process::exit(1);
    }
}

/// The `spools` binary.
pub(crate) fn spools() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_spools"))
}

/// What a finished job produced.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Output {
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Waits for `child` at most `limit`; kills it (and its process group) after that.
pub(crate) fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            // Children are started in their own process group: kill all of it, so that
            // nothing a launcher started outlives the test.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let s = child.wait().expect("wait after kill");
            let stdout = t_out.join().unwrap_or_default();
            let stderr = t_err.join().unwrap_or_default();
            panic!("process did not end within {limit:?}; killed it.\nstdout:\n{stdout}\nstderr:\n{stderr}\nstatus {s:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// A command that re-runs this test executable as the ranks of `test` in `role`.
pub(crate) fn self_args(test: &str) -> Vec<String> {
    vec![
        std::env::current_exe()
            .expect("current exe")
            .to_string_lossy()
            .into_owned(),
        "--exact".into(),
        test.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
}

/// Launches `n` ranks of this executable playing `role` in test `test`, with extra
/// environment, under `spools run --timeout --grace`, and waits (bounded).
pub(crate) fn launch(n: u32, test: &str, role: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(spools());
    // A long grace: ranks that see a failure report it and exit by themselves, however
    // loaded the machine; a rank that does not is a bug the test should see.
    cmd.args([
        "run",
        "-n",
        &n.to_string(),
        "--timeout",
        "120",
        "--grace",
        "20",
        "--",
    ])
    .args(self_args(test))
    .env("SPOOLS_TEST_ROLE", role)
    .env_remove("SPOOLS_RANK")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn spools run");
    wait_bounded(child, Duration::from_secs(150))
}

/// A command in a process group of its own (see [`wait_bounded`]).
pub(crate) fn grouped(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.process_group(0);
    c
}

/// Asserts a job succeeded, showing its output otherwise.
pub(crate) fn assert_ok(o: &Output) {
    assert_ok_as(o, "job");
}

/// Asserts that `what` (a job or a command) succeeded, showing its output otherwise.
pub(crate) fn assert_ok_as(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
}

/// Entries of /dev/shm that belong to job `job`.
pub(crate) fn shm_leftovers(job: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("spools-{job}")))
                .collect()
        })
        .unwrap_or_default()
}

/// Turns any displayable error into the rank body's error.
pub(crate) fn e<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// A fresh temporary directory for one test.
pub(crate) fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "spools-test-{name}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// One end of a parallel pipe: a job of `n` ranks of `spools bench pipe` playing `role`
/// with `records` records of `layout`, meeting through `dir` (by name when `name` is
/// given), the consumer verifying; spawned, not waited for.
pub(crate) fn pipe_end(
    n: u32,
    role: &str,
    layout: &str,
    name: Option<&str>,
    records: u64,
    dir: &std::path::Path,
) -> Child {
    let mut c = grouped(spools());
    c.args(["run", "-n", &n.to_string(), "--timeout", "100", "--"])
        .arg(spools())
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

/// Starts rank `rank` of `size` of this test executable (playing `test`'s role) as another
/// launcher would (Open MPI's variables, no `spools run`): rank 0 then hosts the
/// rendezvous. Spawned in a process group of its own, not waited for.
pub(crate) fn foreign_rank(test: &str, rank: u32, size: u32, env: &[(&str, String)]) -> Child {
    let mut c = grouped(std::env::current_exe().expect("current exe"));
    c.args(&self_args(test)[1..])
        .env("SPOOLS_TEST_ROLE", "x")
        .env("OMPI_COMM_WORLD_RANK", rank.to_string())
        .env("OMPI_COMM_WORLD_SIZE", size.to_string())
        .env_remove("SPOOLS_RANK")
        .env_remove("SPOOLS_SIZE")
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
pub(crate) fn free_port(salt: u16) -> u16 {
    let start = (std::process::id() as u16 % 4000).wrapping_mul(3) % 12000;
    (0..12000u16)
        .map(|i| 20000 + (start + salt.wrapping_mul(101) + i) % 12000)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port")
}
