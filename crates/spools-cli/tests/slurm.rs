//! Spools under a real Slurm (Debian's `slurmctld` and `slurmd`): a one-node cluster in a
//! temporary directory, started and stopped by `scripts/slurm-cluster.sh` (auth/none, no
//! munged, no systemd; 8 CPUs declared), then
//! - `srun -n 4 --mpi=pmi2` and `srun -n 4 --mpi=pmix` (each that `srun --mpi=list`
//!   names; Debian's 22.05 has both) of ranks that check an allreduce, with nothing set:
//!   they meet through the launcher's PMI, and say so;
//! - `SPOOLS_BOOTSTRAP` set: it wins over the PMI;
//! - `srun --mpi=none` without `SPOOLS_BOOTSTRAP`: every rank's error says what to set;
//! - a rank killed under `srun`: the others' allreduce fails naming it, no hang, nothing
//!   left in `/dev/shm`;
//! - an `sbatch --wait` job whose first step (a plain `srun -n 4`: the cluster's
//!   `MpiDefault=pmix`) writes a parallel `.npy` file with `spools bench io` and whose
//!   second step (`srun -n 3 --mpi=pmi2`) reads it back with another layout and verifies
//!   every element; the test then reads the file itself.
//!
//! The cluster is stopped (its jobs cancelled, its daemons and whatever they started
//! killed) whatever happens, by a guard; every `srun` and `sbatch` has a Slurm time limit
//! and a bounded wait; the daemons' logs are printed when something fails.
//!
//! Without Slurm (or not as root, or when the daemons cannot start) the test says exactly
//! why and passes, unless `SPOOLS_REQUIRE_SLURM=1` (set by the CI script, whose test
//! command installs Slurm with `scripts/install-slurm.sh`), where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "slurm/cluster.rs"]
mod cluster;
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use cluster::{installed, processes_with, skip, Cluster, SRUN_LIMIT};
use common::{e, rank_main, self_args, Output};
use spools::Op;

/// The ranks' check: an allreduce of `[rank, 1]` is `[n(n-1)/2, n]` on every rank.
fn allreduce_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let (me, n) = (u64::from(w.rank()), u64::from(w.size()));
    let mut out = [0u64; 2];
    e(w.allreduce(&[me, 1], &mut out, &Op::Sum))?;
    if out != [n * (n - 1) / 2, n] {
        return Err(format!("rank {me}: allreduce gave {out:?}"));
    }
    println!(
        "rank {me} of {n}: launcher {}, allreduce {} {}, bootstrap {}",
        w.launcher().name(),
        out[0],
        out[1],
        w.bootstrap()
    );
    e(w.finalize())
}

/// Rank 3 is killed (SIGKILL) once the job is up; the others then allreduce, which must
/// fail (not hang) naming the dead rank.
fn die_role() -> Result<(), String> {
    let w = e(spools::init())?;
    e(w.runtime_barrier())?;
    if w.rank() == 3 {
        // SAFETY: kill(2) of this process by itself, with a valid signal number.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    let mut out = [0u64; 1];
    match w.allreduce(&[1u64], &mut out, &Op::Sum) {
        Ok(()) => Err(format!(
            "rank {}: an allreduce with a dead rank gave {out:?}",
            w.rank()
        )),
        Err(x) => {
            println!(
                "rank {} of job {:016x}: the allreduce failed: {x}",
                w.rank(),
                w.job()
            );
            std::process::exit(3)
        }
    }
}

/// The dataset the batch job writes with 4 ranks and reads back with 3.
const SHAPE: (usize, usize) = (3000, 50);
/// Its layout for the writing step (4 units, rows in blocks).
const WRITE_LAYOUT: &str = "i64[3000,50] block,* on 4x1";
/// Its layout for the reading step (3 units, columns in blocks).
const READ_LAYOUT: &str = "i64[3000,50] *,block on 1x3";

/// How long the batch job may take (its Slurm time limit is 2 minutes).
const SBATCH_LIMIT: Duration = Duration::from_secs(180);

/// Checks the `.npy` file the batch job wrote: its header (little-endian i64, C order,
/// [`SHAPE`]) and every element (its own global index, as `spools bench io` writes).
fn check_npy(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x93NUMPY\x01\x00",
        "not a .npy file, version 1.0"
    );
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '<i8'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(
        header.contains(&format!("'shape': ({}, {})", SHAPE.0, SHAPE.1)),
        "{header}"
    );
    let data = &bytes[10 + header_len..];
    assert_eq!(data.len(), SHAPE.0 * SHAPE.1 * 8);
    for (i, x) in data.chunks_exact(8).enumerate() {
        let x = i64::from_le_bytes(x.try_into().unwrap());
        assert_eq!(x, i64::try_from(i).unwrap(), "element {i}");
    }
}

/// The batch script (nothing set for the ranks): step 1 writes the file with 4 ranks (a
/// plain `srun`: the cluster's `MpiDefault`), step 2 reads it with 3 (`--mpi=MPI_READ`).
fn batch_script(mpi_read: &str, file: &Path) -> String {
    let io = format!(
        "{} bench io --reps 1 --format npy --file {}",
        common::spools().display(),
        file.display()
    );
    format!(
        "#!/bin/sh\nset -e\n\
         srun -n 4 -t 1 {io} --layout '{WRITE_LAYOUT}' --write --keep\n\
         srun -n 3 -t 1 --mpi={mpi_read} {io} --layout '{READ_LAYOUT}' --read --verify\n"
    )
}

#[test]
fn spools_under_slurm() {
    rank_main(|r| {
        if r == "die" {
            die_role()
        } else {
            allreduce_role()
        }
    });
    if let Some(tool) = ["srun", "sbatch", "slurmctld", "slurmd"]
        .into_iter()
        .find(|t| !installed(t))
    {
        return skip(&format!("Slurm is not installed (no {tool})"));
    }
    let t0 = Instant::now();
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(why) => return skip(&why),
    };
    let plugins = cluster.mpi_plugins();
    assert!(
        !plugins.is_empty(),
        "srun --mpi=list names neither pmi2 nor pmix"
    );
    eprintln!(
        "Slurm's MPI plugins here: {plugins:?} (cluster up in {:.1?})",
        t0.elapsed()
    );

    srun_meets_through_pmi(&cluster, &plugins);
    srun_without_pmi_says_what_to_set(&cluster);
    sbatch_writes_and_reads_a_parallel_file(&cluster, &plugins);
    a_killed_rank_fails_the_others(&cluster, plugins[plugins.len() - 1]);

    // Stopped, the cluster leaves nothing running: no daemon, step or task of its own.
    let conf = format!("SLURM_CONF={}", cluster.dir.join("slurm.conf").display());
    drop(cluster);
    let left = processes_with(&conf);
    assert!(left.is_empty(), "left running with {conf}: {left:?}");
}

/// `srun -n 4` (Slurm not asked to end the step when a task fails) whose rank 3 is killed
/// once the job is up: the other ranks' allreduce fails naming it (no hang: the step ends
/// within its bounds), and nothing of the job is left in `/dev/shm`.
fn a_killed_rank_fails_the_others(cluster: &Cluster, mpi: &str) {
    let o = cluster.run(
        cluster
            .command("srun")
            .args(["-n", "4", "-t", "1", "--kill-on-bad-exit=0"])
            .arg(format!("--mpi={mpi}"))
            .env(common::ROLE_VAR, "die")
            .args(self_args("spools_under_slurm")),
        SRUN_LIMIT,
    );
    assert!(!o.status.success(), "{o:?}");
    let mut jobs = Vec::new();
    for r in 0..3 {
        let line = o
            .stdout
            .lines()
            .find_map(|l| l.split_once(&format!("rank {r} of job ")))
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_else(|| panic!("rank {r} did not report:\n{o:?}"));
        let (job, error) = line.split_once(": the allreduce failed: ").unwrap();
        assert!(error.starts_with("rank 3 died"), "rank {r}: {error}");
        jobs.push(job.to_string());
    }
    assert!(jobs.iter().all(|j| *j == jobs[0]), "{jobs:?}");
    let left = common::shm_leftovers(&jobs[0]);
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// `srun -n 4` with nothing set meets through each PMI of `plugins`; `SPOOLS_BOOTSTRAP`
/// wins over it.
fn srun_meets_through_pmi(cluster: &Cluster, plugins: &[&str]) {
    // srun -n 4 with nothing set: the ranks meet through each PMI the build has.
    for mpi in plugins {
        let o = srun_allreduce(cluster, mpi, &[]);
        let how = if *mpi == "pmix" { "PMIx" } else { "PMI2" };
        for r in 0..4 {
            let want = format!(
                "rank {r} of 4: launcher Slurm, allreduce 6 4, bootstrap {how} (the launcher's)"
            );
            assert!(
                o.stdout.contains(&want),
                "srun --mpi={mpi}: no {want:?} in\n{o:?}"
            );
        }
    }
    // SPOOLS_BOOTSTRAP wins over the launcher's PMI.
    let rdv = format!("file:{}", cluster.dir.join("rdv").display());
    let o = srun_allreduce(cluster, plugins[0], &[("SPOOLS_BOOTSTRAP", rdv.clone())]);
    assert_eq!(
        o.stdout
            .matches(&format!("allreduce 6 4, bootstrap SPOOLS_BOOTSTRAP={rdv}"))
            .count(),
        4,
        "{o:?}"
    );
}

/// `srun --mpi=none` without `SPOOLS_BOOTSTRAP`: every rank fails saying what to set.
fn srun_without_pmi_says_what_to_set(cluster: &Cluster) {
    // Without a PMI (--mpi=none) and without SPOOLS_BOOTSTRAP, every rank says what to set.
    let o = cluster.run(
        cluster
            .command("srun")
            // (Both ranks run to their error: the first to fail does not end the other.)
            .args(["-n", "2", "-t", "1", "--kill-on-bad-exit=0", "--mpi=none"])
            .arg(common::spools())
            .arg("info"),
        SRUN_LIMIT,
    );
    assert!(!o.status.success(), "{o:?}");
    assert_eq!(
        o.stderr
            .matches("offers neither PMIx (PMIX_NAMESPACE) nor PMI2 (PMI_FD), and SPOOLS_BOOTSTRAP is not set: set SPOOLS_BOOTSTRAP=")
            .count(),
        2,
        "{o:?}"
    );
}

/// An `sbatch` job (nothing set for its ranks): a parallel file written by 4 ranks, read
/// back and verified by 3 (and by this test).
fn sbatch_writes_and_reads_a_parallel_file(cluster: &Cluster, plugins: &[&str]) {
    // sbatch: a parallel file written by 4 ranks, read back and verified by 3.
    let file = cluster.dir.join("data.npy");
    let script = cluster.dir.join("job.sh");
    std::fs::write(&script, batch_script(plugins[0], &file)).unwrap();
    let out = cluster.dir.join("job.out");
    let t = Instant::now();
    let o = cluster.run(
        cluster
            .command("sbatch")
            .args(["--wait", "-n", "4", "-t", "2", "-J", "spools-test", "-o"])
            .arg(&out)
            .arg(&script),
        SBATCH_LIMIT,
    );
    eprintln!("sbatch --wait: {:.1?}", t.elapsed());
    let printed = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        o.status.success(),
        "sbatch failed: {o:?}\nthe job's output:\n{printed}\nthe daemons' logs:\n{}",
        cluster.logs()
    );
    let bytes = SHAPE.0 * SHAPE.1 * 8;
    for want in [
        format!("io: {bytes} bytes, 4 ranks, layout {WRITE_LAYOUT}"),
        format!("io: {bytes} bytes, 3 ranks, layout {READ_LAYOUT}"),
        "verified every element".to_string(),
    ] {
        assert!(printed.contains(&want), "no {want:?} in:\n{printed}");
    }
    check_npy(&file);
}

/// `srun -n 4 --mpi=MPI` of ranks that check an allreduce, with `env`; returns what
/// they printed (after checking that srun succeeded).
fn srun_allreduce(cluster: &Cluster, mpi: &str, env: &[(&str, String)]) -> Output {
    let mut c = cluster.command("srun");
    // A rank that fails ends the step at once (the others are not left waiting for it).
    c.args([
        "-n",
        "4",
        "-t",
        "1",
        "--kill-on-bad-exit=1",
        &format!("--mpi={mpi}"),
    ])
    .env(common::ROLE_VAR, "allreduce")
    .args(self_args("spools_under_slurm"));
    for (k, v) in env {
        c.env(k, v);
    }
    let t = Instant::now();
    let o = cluster.run(&mut c, SRUN_LIMIT);
    eprintln!("srun -n 4 --mpi={mpi}: {:.1?}", t.elapsed());
    cluster.assert_ok(&o, &format!("srun -n 4 --mpi={mpi}"));
    o
}
