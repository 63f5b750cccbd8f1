//! The same program under Open MPI's `mpirun` (from Debian's packages): ranks read
//! `OMPI_COMM_WORLD_RANK`/`SIZE` and meet through the launcher's PMIx with nothing set, or
//! at `SPOOLS_BOOTSTRAP`, given as `file:PATH` or as `host:port` with `SPOOLS_SECRET`,
//! which wins when set. Also: a rank count that does not match the launcher's, and PMIx
//! variables with no PMIx server, are refused with errors that say so.
//!
//! Without `mpirun` the test says so and passes, unless `SPOOLS_REQUIRE_MPI=1` (set by
//! the CI script, which installs Open MPI), where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{e, rank_main, self_args, tempdir, wait_bounded};
use spools::{Channel, Delivery};

fn role(name: &str) -> Result<(), String> {
    if name == "wrong_size" {
        // A rank count that does not match the launcher's (as if a stale variable were
        // inherited); nothing else runs in this process yet.
        std::env::set_var("OMPI_COMM_WORLD_SIZE", "5");
        return match spools::init() {
            Ok(_) => Err("init accepted a size the launcher does not have".into()),
            Err(err) => {
                // One write of the whole line (a pipe write under PIPE_BUF is atomic):
                // `eprintln!` may write the pieces of the message one by one, and the
                // two ranks' lines then interleave in mpirun's output (seen under load).
                let line = format!("init refused: {err}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
                std::process::exit(3)
            }
        };
    }
    let mut w = e(spools::init())?;
    let (me, n) = (w.rank(), w.size());
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    e(w.worker().register("hello", move |_| {
        c.fetch_add(1, Ordering::SeqCst);
    }))?;
    e(w.worker().sync_handlers())?;
    let h = e(w.worker().handler_id("hello"))?;
    for peer in 0..n {
        e(w.endpoint().send_short(
            peer,
            h,
            [u64::from(me), 0, 0, 0],
            Channel::new(0),
            Delivery::Immediate,
        ))?;
    }
    e(w.worker()
        .wait_for(|| count.load(Ordering::SeqCst) == u64::from(n)))?;
    let all = e(w.allgather_bytes(&me.to_le_bytes()))?;
    if all.len() != n as usize {
        return Err("allgather size".into());
    }
    println!(
        "rank {me} of {n}: launcher {}, {} hellos, bootstrap {}",
        w.launcher().name(),
        count.load(Ordering::SeqCst),
        w.bootstrap()
    );
    e(w.finalize())
}

fn mpirun() -> Option<String> {
    let ok = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| "mpirun".to_string())
}

fn run_under_mpirun(n: u32, role: &str, extra: &[(&str, String)]) -> common::Output {
    let mut cmd = common::grouped("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ]);
    cmd.args(["-x", &format!("SPOOLS_TEST_ROLE={role}")]);
    for (k, v) in extra {
        cmd.args(["-x", &format!("{k}={v}")]);
    }
    // Only the test's own SPOOLS_* settings reach the ranks.
    common::without_ambient_spools_env(&mut cmd)
        .args(self_args("ranks_under_open_mpi"))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(cmd.spawn().unwrap(), Duration::from_secs(120))
}

#[test]
fn ranks_under_open_mpi() {
    rank_main(role);
    if mpirun().is_none() {
        if std::env::var("SPOOLS_REQUIRE_MPI").is_ok_and(|v| v == "1") {
            panic!("mpirun is missing but SPOOLS_REQUIRE_MPI=1: install Debian's openmpi-bin");
        }
        eprintln!("SKIPPED: mpirun not found (install Debian's openmpi-bin); set SPOOLS_REQUIRE_MPI=1 to make this a failure");
        return;
    }
    let dir = tempdir("mpirun");
    // Nothing set: the ranks meet through mpirun's PMIx.
    let o = run_under_mpirun(4, "x", &[]);
    common::assert_ok(&o);
    for r in 0..4 {
        assert!(
            o.stdout.contains(&format!(
                "rank {r} of 4: launcher Open MPI, 4 hellos, bootstrap PMIx (the launcher's)"
            )),
            "{o:?}"
        );
    }
    // A size that is not the launcher's is refused on every rank, naming both.
    let o = run_under_mpirun(2, "wrong_size", &[]);
    assert!(!o.status.success(), "{o:?}");
    assert_eq!(
        o.stderr
            .matches("of 5, but its PMIx interface says rank")
            .count(),
        2,
        "{o:?}"
    );
    assert!(
        o.stderr
            .contains("the job's rank count does not match the launcher's"),
        "{o:?}"
    );
    // Rendezvous through a file that rank 0 writes (with the secret, mode 0600).
    let o = run_under_mpirun(
        3,
        "x",
        &[(
            "SPOOLS_BOOTSTRAP",
            format!("file:{}", dir.join("rdv").display()),
        )],
    );
    common::assert_ok(&o);
    for r in 0..3 {
        assert!(
            o.stdout.contains(&format!(
                "rank {r} of 3: launcher Open MPI, 3 hellos, bootstrap SPOOLS_BOOTSTRAP=file:"
            )),
            "{o:?}"
        );
    }
    // Rendezvous at host:port that rank 0 binds, with the secret in the environment, as
    // the README shows: `SPOOLS_SECRET=$(spools secret)`. The port is one below the
    // ephemeral range (no listener bound to port 0 can take it meanwhile).
    let port = common::free_port(3);
    let secret = wait_bounded(
        common::grouped(common::spools())
            .arg("secret")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    common::assert_ok_as(&secret, "spools secret");
    let secret = secret.stdout.trim().to_string();
    let o = run_under_mpirun(
        4,
        "x",
        &[
            ("SPOOLS_BOOTSTRAP", format!("127.0.0.1:{port}")),
            ("SPOOLS_SECRET", secret),
        ],
    );
    common::assert_ok(&o);
    assert_eq!(
        o.stdout
            .matches(&format!(
                "launcher Open MPI, 4 hellos, bootstrap SPOOLS_BOOTSTRAP=127.0.0.1:{port}"
            ))
            .count(),
        4,
        "{o:?}"
    );
}

/// PMIx or PMI2 variables without their server (a program started outside the launcher
/// that set them): a clear error naming the variable, at once, not a hang.
#[test]
fn pmi_variables_without_a_server_are_refused() {
    rank_main(|_| {
        let err = match spools::init() {
            Ok(_) => return Err("init succeeded without a PMI server".into()),
            Err(err) => err.to_string(),
        };
        println!("{err}");
        Ok(())
    });
    for (var, name, lib) in [
        ("PMIX_NAMESPACE", "PMIx", "libpmix.so.2"),
        ("PMI_FD", "PMI2", "libpmi2.so.0"),
    ] {
        let mut cmd = common::grouped(common::current_exe());
        common::without_ambient_spools_env(&mut cmd)
            .args(&self_args("pmi_variables_without_a_server_are_refused")[1..])
            .env("SPOOLS_TEST_ROLE", "x")
            .env("SLURM_PROCID", "1")
            .env("SLURM_NTASKS", "2")
            .env(var, "99")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let o = wait_bounded(cmd.spawn().unwrap(), Duration::from_secs(60));
        common::assert_ok(&o);
        // Either the library is there and finds no server, or it is missing and the
        // error names the package; both name the interface and SPOOLS_BOOTSTRAP.
        let served = format!("{name} variables are set ({var}) but no {name} server");
        let missing = format!("but {lib} cannot be loaded");
        assert!(
            (o.stdout.contains(&served) || o.stdout.contains(&missing))
                && o.stdout.contains("SPOOLS_BOOTSTRAP"),
            "{o:?}"
        );
    }
}
