//! The same program under Open MPI's `mpirun` (from Debian's packages): ranks read
//! `OMPI_COMM_WORLD_RANK`/`SIZE` and meet at `SPOOLS_BOOTSTRAP`, given as `file:PATH` or
//! as `host:port` with `SPOOLS_SECRET`.
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

fn role() -> Result<(), String> {
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
        "rank {me} of {n}: launcher {}, {} hellos",
        w.launcher().name(),
        count.load(Ordering::SeqCst)
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

fn run_under_mpirun(n: u32, extra: &[(&str, String)]) -> common::Output {
    let mut cmd = common::grouped("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ]);
    cmd.args(["-x", "SPOOLS_TEST_ROLE=x"]);
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
    rank_main(|_| role());
    if mpirun().is_none() {
        if std::env::var("SPOOLS_REQUIRE_MPI").is_ok_and(|v| v == "1") {
            panic!("mpirun is missing but SPOOLS_REQUIRE_MPI=1: install Debian's openmpi-bin");
        }
        eprintln!("SKIPPED: mpirun not found (install Debian's openmpi-bin); set SPOOLS_REQUIRE_MPI=1 to make this a failure");
        return;
    }
    let dir = tempdir("mpirun");
    // Rendezvous through a file that rank 0 writes (with the secret, mode 0600).
    let o = run_under_mpirun(
        3,
        &[(
            "SPOOLS_BOOTSTRAP",
            format!("file:{}", dir.join("rdv").display()),
        )],
    );
    common::assert_ok(&o);
    for r in 0..3 {
        assert!(
            o.stdout
                .contains(&format!("rank {r} of 3: launcher Open MPI, 3 hellos")),
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
        &[
            ("SPOOLS_BOOTSTRAP", format!("127.0.0.1:{port}")),
            ("SPOOLS_SECRET", secret),
        ],
    );
    common::assert_ok(&o);
    assert_eq!(
        o.stdout.matches("launcher Open MPI, 4 hellos").count(),
        4,
        "{o:?}"
    );
}
