//! The one-node Slurm cluster of the Slurm test: started and stopped by
//! `scripts/slurm-cluster.sh` in a temporary directory, its clients' commands, whether
//! Slurm is there at all, and what of it is left running.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, tempdir, wait_bounded, Output, TempDir};

/// How long the cluster may take to start (the script's own limit is 60 s).
const START_LIMIT: Duration = Duration::from_secs(90);
/// How long one `srun` may take (its Slurm time limit is 1 minute).
pub(crate) const SRUN_LIMIT: Duration = Duration::from_secs(90);

/// `scripts/slurm-cluster.sh` of this repository.
fn cluster_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-cluster.sh")
}

/// Whether a missing or unusable Slurm is a failure (CI) rather than a skip.
fn required() -> bool {
    std::env::var("SPOOLS_REQUIRE_SLURM").is_ok_and(|v| v == "1")
}

/// Whether `program` is in `PATH` (or in `/usr/sbin`, where Debian puts the daemons).
pub(crate) fn installed(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .any(|d| d.join(program).is_file())
}

/// Fails with `why` when Slurm is required, otherwise says why the test is skipped.
pub(crate) fn skip(why: &str) {
    if required() {
        panic!("{why}\n(SPOOLS_REQUIRE_SLURM=1: scripts/install-slurm.sh installs Debian's Slurm)");
    }
    eprintln!("SKIPPED: {why} (set SPOOLS_REQUIRE_SLURM=1 to make this a failure)");
}

/// A one-node cluster in a temporary directory, stopped when dropped (before the directory
/// is removed).
pub(crate) struct Cluster {
    pub(crate) dir: TempDir,
}

impl Cluster {
    /// Starts the cluster; the error is what the script printed (why it could not).
    pub(crate) fn start() -> Result<Cluster, String> {
        let cluster = Cluster {
            dir: tempdir("slurm"),
        };
        // The guard exists before the daemons do: a start that fails or hangs is stopped.
        // A watchdog stops the cluster if this process is killed (no guard runs then).
        let o = wait_bounded(
            cluster
                .script("start")
                .env("SPOOLS_SLURM_OWNER", std::process::id().to_string())
                .spawn()
                .expect("run slurm-cluster.sh"),
            START_LIMIT,
        );
        if o.status.success() {
            Ok(cluster)
        } else {
            Err(format!(
                "the Slurm daemons did not start ({:?}):\n{}{}",
                o.status, o.stdout, o.stderr
            ))
        }
    }

    /// `slurm-cluster.sh CMD DIR`, in a process group of its own, output captured.
    fn script(&self, cmd: &str) -> Command {
        let mut c = common::grouped("bash");
        c.arg(cluster_script())
            .args([cmd])
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// `program` as a client of this cluster: `SLURM_CONF` names its configuration, and
    /// none of the caller's `SLURM_*` (an allocation the test may run in) or `SPOOLS_*`
    /// variables reach it; run in the cluster's directory, output captured.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut c = common::grouped(program);
        common::without_ambient_spools_env(&mut c);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("SLURM_") {
                c.env_remove(k);
            }
        }
        c.env("SLURM_CONF", self.dir.join("slurm.conf"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs a client command to its end (at most `limit`).
    pub(crate) fn run(&self, c: &mut Command, limit: Duration) -> Output {
        wait_bounded(c.spawn().expect("start a Slurm client"), limit)
    }

    /// The daemons' logs (their last lines).
    pub(crate) fn logs(&self) -> String {
        match self.script("logs").output() {
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(x) => format!("(no logs: {x})"),
        }
    }

    /// Asserts that `o` (of `what`) succeeded, printing its output and the daemons' logs
    /// otherwise.
    pub(crate) fn assert_ok(&self, o: &Output, what: &str) {
        assert!(
            o.status.success(),
            "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{}\nthe daemons' logs:\n{}",
            o.status,
            o.stdout,
            o.stderr,
            self.logs()
        );
    }

    /// The `--mpi` plugins this Slurm offers among `pmi2` and `pmix`.
    pub(crate) fn mpi_plugins(&self) -> Vec<&'static str> {
        let o = self.run(self.command("srun").arg("--mpi=list"), SRUN_LIMIT);
        self.assert_ok(&o, "srun --mpi=list");
        let names: Vec<&str> = o
            .stdout
            .lines()
            .chain(o.stderr.lines())
            .map(str::trim)
            .collect();
        ["pmi2", "pmix"]
            .into_iter()
            .filter(|p| names.contains(p))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Bounded, and never a panic here (this may run while a test panics).
        let Ok(mut c) = self.script("stop").stdout(Stdio::null()).spawn() else {
            return;
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(&mut c);
    }
}

/// Kills `c` (a process group of its own) and reaps it.
fn kill_group(c: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", c.id())])
        .status();
    let _ = c.wait();
}

/// The processes (but zombies) whose environment holds `entry` (`K=V`), with their
/// command lines.
pub(crate) fn processes_with(entry: &str) -> Vec<String> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter(|p| p.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|p| {
            std::fs::read(p.path().join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == entry.as_bytes()))
        })
        .map(|p| {
            let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            format!(
                "{} {}",
                p.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            )
        })
        .collect()
}
