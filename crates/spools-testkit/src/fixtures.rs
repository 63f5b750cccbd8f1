//! Assertions and fixtures tests share: job verdicts, temporary directories, shared
//! memory left behind, free ports, pipe ends, ranks started as another launcher would.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::env::ROLE_VAR;
use crate::job::{current_exe, grouped, self_args, without_ambient_spools_env};
use crate::wait::Output;

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

/// One end of a parallel pipe: a job of `n` ranks of `spools bench pipe` (the `spools`
/// binary `spools`) playing `role` with `records` records of `layout`, meeting through
/// `dir` (by name when `name` is given), the consumer verifying; spawned in a process
/// group of its own, in an environment without the caller's `SPOOLS_*` variables, not
/// waited for (guard it with [`Spawned`](crate::Spawned)).
///
/// # Panics
/// When it cannot be started.
pub fn pipe_end(
    spools: &Path,
    n: u32,
    role: &str,
    layout: &str,
    name: Option<&str>,
    records: u64,
    dir: &Path,
) -> Child {
    let ranks = ["-n".to_string(), n.to_string()];
    pipe_end_placed(spools, &ranks, role, layout, name, records, dir)
}

/// [`pipe_end`] with the ranks given by `spools run` options `ranks` (`-n N`, or
/// `--hosts ...` with its agent).
///
/// # Panics
/// When it cannot be started.
#[allow(clippy::expect_used)]
pub fn pipe_end_placed(
    spools: &Path,
    ranks: &[String],
    role: &str,
    layout: &str,
    name: Option<&str>,
    records: u64,
    dir: &Path,
) -> Child {
    let mut c = grouped(spools);
    without_ambient_spools_env(&mut c)
        .env("SPOOLS_PIPE_DIR", dir)
        .env("SPOOLS_PIPE_TIMEOUT", "30");
    c.arg("run")
        .args(ranks)
        .args(["--timeout", "100", "--"])
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
/// the rendezvous. Spawned in a process group of its own, in an environment without the
/// caller's `SPOOLS_*` variables (then `env`), not waited for (guard it with
/// [`Spawned`](crate::Spawned)).
///
/// # Panics
/// When it cannot be started.
#[allow(clippy::expect_used)]
pub fn foreign_rank(test: &str, rank: u32, size: u32, env: &[(&str, String)]) -> Child {
    let mut c = grouped(current_exe());
    without_ambient_spools_env(&mut c)
        .args(&self_args(test)[1..])
        .env(ROLE_VAR, "x")
        .env("OMPI_COMM_WORLD_RANK", rank.to_string())
        .env("OMPI_COMM_WORLD_SIZE", size.to_string())
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
