//! The test kit (`spools_testkit`) for the command line's tests, with the `spools` binary:
//! jobs launched through `spools run`, pipe ends of `spools bench pipe`.

#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

pub(crate) use spools_testkit::*;

/// The `spools` binary.
pub(crate) fn spools() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_spools"))
}

/// Launches `n` ranks of this executable playing `role` in test `test` under
/// `spools run` (the command, not the library launcher), and waits (bounded).
pub(crate) fn launch(n: u32, test: &str, role: &str, env: &[(&str, &str)]) -> Output {
    Job::new(n, test)
        .role(role)
        .envs(env)
        .via_cli(spools())
        .run()
}

/// One end of a parallel pipe run by this `spools` binary (see [`spools_testkit::pipe_end`]).
pub(crate) fn pipe_end(
    n: u32,
    role: &str,
    layout: &str,
    name: Option<&str>,
    records: u64,
    dir: &Path,
) -> Child {
    spools_testkit::pipe_end(&spools(), n, role, layout, name, records, dir)
}

/// Runs this `spools` binary with `args` and `env` (and none of the caller's `SPOOLS_*`
/// variables), no input, output captured, waited for at most `limit` (then stopped with
/// everything it started).
pub(crate) fn spools_command(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    #[allow(clippy::expect_used)]
    Spawned::new(c.spawn().expect("spawn spools")).wait(limit)
}

/// Starts `spools recv tcp:127.0.0.1:0 --out OUT MORE...`, guarded, and returns it with the
/// address it printed (read from its stderr, bounded) and a channel that gives the rest of
/// its stderr once it ends (drained all along, so that it never blocks on a full pipe).
pub(crate) fn spools_recv(
    out: &str,
    more: &[&str],
) -> (Spawned, String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c)
        .args(["recv", "tcp:127.0.0.1:0", "--out", out])
        .args(more)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut r = Spawned::new(c.spawn().expect("start spools recv"));
    let err = r.child().stderr.take().expect("its stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(err).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let _ = tx.send(rest.join("\n"));
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("spools recv printed where it listens");
    let addr = line
        .strip_prefix("spools recv: listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (r, addr, rx)
}
