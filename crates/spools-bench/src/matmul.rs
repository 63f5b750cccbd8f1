//! `spools bench matmul`: the StarT-X paper's application check (Table 2), the same
//! algorithm as `bench/peers/matmul.c`: C = A·B in doubles, column-major, each rank
//! owning a block of columns of A, B and C; the A blocks travel around a ring (P steps of
//! multiply, then send right / receive left). Times are the median over repetitions of
//! the slowest rank's time; communication time is reported separately.

use std::time::Instant;

use serde::Serialize;
use spools::Op;

use crate::args::MatmulArgs;
use crate::error::{ensure, BenchError};
use crate::output::print_json;
use crate::session::start;
use crate::stats::{median, rounded};

/// The document of `spools bench matmul --json`.
#[derive(Debug, Serialize)]
struct MatmulReport {
    /// Always `matmul`.
    benchmark: &'static str,
    /// Always `spools` (the MPI peer writes `mpi`).
    #[serde(rename = "impl")]
    implementation: &'static str,
    /// Ranks of the job.
    ranks: usize,
    /// Matrix order.
    n: usize,
    /// The slowest rank's time, median over repetitions.
    #[serde(serialize_with = "rounded::<6, _>")]
    seconds: f64,
    /// The slowest rank's time communicating, median over repetitions.
    #[serde(serialize_with = "rounded::<6, _>")]
    comm_seconds: f64,
    /// 2 n^3 over `seconds`, in units of 10^9.
    #[serde(serialize_with = "rounded::<3, _>")]
    gflops: f64,
    /// Always `ok`: sampled elements of C were checked (a wrong one fails the run).
    check: &'static str,
}

fn a_at(i: usize, k: usize) -> f64 {
    ((i + 2 * k) % 7) as f64
}

fn b_at(k: usize, j: usize) -> f64 {
    ((k + j) % 5) as f64 - 2.0
}

/// Runs the matrix multiply.
pub(crate) fn run(a: &MatmulArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    let (me, p) = (w.rank() as usize, w.size() as usize);
    let n = a.n;
    ensure!(
        n > 0 && n % p == 0,
        "N must be a positive multiple of the number of ranks: N = {n}, P = {p}"
    );
    let nb = n / p;
    // Local blocks, column-major: column j of the block at [j * n ..].
    let col0 = me * nb;
    let mut ablk: Vec<f64> = (0..nb)
        .flat_map(|k| (0..n).map(move |i| a_at(i, col0 + k)))
        .collect();
    let b: Vec<f64> = (0..nb)
        .flat_map(|j| (0..n).map(move |k| b_at(k, col0 + j)))
        .collect();
    let mut c = vec![0.0f64; n * nb];
    let mut other = vec![0.0f64; n * nb];
    let right = ((me + 1) % p) as u32;
    let left = ((me + p - 1) % p) as u32;
    let reps = a.common.reps.max(1);
    let (mut totals, mut comms) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        c.fill(0.0);
        w.barrier()?;
        let t = Instant::now();
        let mut comm_s = 0.0;
        for s in 0..p {
            // The A block held now came from rank me - s: global columns kb0.. of A.
            let owner = (me + p - s) % p;
            let kb0 = owner * nb;
            for j in 0..nb {
                let cj = &mut c[j * n..(j + 1) * n];
                for k in 0..nb {
                    let bkj = b[j * n + kb0 + k];
                    let ak = &ablk[k * n..(k + 1) * n];
                    for (ci, ai) in cj.iter_mut().zip(ak) {
                        *ci += ai * bkj;
                    }
                }
            }
            if s + 1 < p {
                let tc = Instant::now();
                w.sendrecv(&ablk, right, 7, &mut other, left, 7)?;
                std::mem::swap(&mut ablk, &mut other);
                comm_s += tc.elapsed().as_secs_f64();
            }
        }
        w.barrier()?;
        let total = t.elapsed().as_secs_f64();
        // After p - 1 shifts the block is one step from home; shift once more so every
        // repetition starts from the same state.
        if p > 1 {
            w.sendrecv(&ablk, right, 8, &mut other, left, 8)?;
            std::mem::swap(&mut ablk, &mut other);
        }
        if rep == 0 {
            for q in 0..16usize {
                let i = (q * 7919 + q * q * 31) % n;
                let j = (q * 104_729 + 13 * q) % n;
                if j / nb != me {
                    continue;
                }
                let want: f64 = (0..n).map(|k| a_at(i, k) * b_at(k, j)).sum();
                let got = c[(j - col0) * n + i];
                ensure!(
                    got == want,
                    "wrong result C[{i}][{j}]: expected {want}, got {got}"
                );
            }
        }
        let mut worst = [0.0f64; 2];
        w.allreduce(&[total, comm_s], &mut worst, &Op::Max)?;
        totals.push(worst[0]);
        comms.push(worst[1]);
    }
    let seconds = median(&mut totals);
    let comm_seconds = median(&mut comms);
    if me == 0 {
        let gflops = 2.0 * (n as f64).powi(3) / seconds / 1e9;
        if a.common.json {
            print_json(&MatmulReport {
                benchmark: "matmul",
                implementation: "spools",
                ranks: p,
                n,
                seconds,
                comm_seconds,
                gflops,
                check: "ok",
            })?;
        } else {
            println!("matmul n={n} on {p} ranks: {seconds:.4} s ({comm_seconds:.4} s communicating), {gflops:.2} GFLOP/s, result checked");
        }
    }
    w.finalize()?;
    Ok(())
}
