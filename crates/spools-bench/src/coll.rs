//! `spools bench coll`: latency of barrier, broadcast, allreduce and alltoall, measured
//! exactly as `bench/peers/coll.c` measures MPI's: one verified call, a warm-up, then
//! batches sized from the slowest rank's warm-up; each batch's value is the largest mean
//! time per call over the ranks; the median over batches is reported.

use std::time::Instant;

use serde::Serialize;
use spools::{Op, World};

use crate::args::CollArgs;
use crate::error::{bail, ensure, BenchError};
use crate::output::print_json;
use crate::session::start;
use crate::sizes::parse_sizes;
use crate::stats::{median, rounded};

const WARMUP_BYTES: usize = 1 << 20;

/// A collective operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Coll {
    Barrier,
    Bcast,
    Allreduce,
    /// `iallreduce` and an immediate `wait` (a schedule's cost against `allreduce`).
    Iallreduce,
    Alltoall,
}

impl Coll {
    /// Its name on the command line and in documents.
    fn name(self) -> &'static str {
        match self {
            Coll::Barrier => "barrier",
            Coll::Bcast => "bcast",
            Coll::Allreduce => "allreduce",
            Coll::Iallreduce => "iallreduce",
            Coll::Alltoall => "alltoall",
        }
    }
}

/// One collective's latency at one size.
#[derive(Debug, Serialize)]
struct CollPoint {
    /// Bytes (per pair for alltoall; 0 for barrier).
    bytes: usize,
    /// Median over batches of the slowest rank's mean time per call, microseconds.
    #[serde(serialize_with = "rounded::<4, _>")]
    latency_us: f64,
}

/// One collective's points.
#[derive(Debug, Serialize)]
struct CollSeries {
    /// The collective.
    op: Coll,
    /// By size.
    points: Vec<CollPoint>,
}

/// The document of `spools bench coll --json`.
#[derive(Debug, Serialize)]
struct CollReport<'a> {
    /// Always `coll`.
    benchmark: &'static str,
    /// Always `spools` (the MPI peer writes `mpi`).
    #[serde(rename = "impl")]
    implementation: &'static str,
    /// Ranks of the job.
    ranks: usize,
    /// One per collective timed.
    series: &'a [CollSeries],
}

struct Bufs {
    bytes: Vec<u8>,
    out: Vec<u8>,
    f: Vec<f64>,
    fout: Vec<f64>,
    /// The vector handed to `iallreduce` and given back by its `wait` (reused, as a
    /// program would).
    fv: Vec<f64>,
}

fn call(w: &World, op: Coll, size: usize, b: &mut Bufs) -> Result<(), BenchError> {
    let n = w.size() as usize;
    match op {
        Coll::Barrier => w.barrier()?,
        Coll::Bcast => w.bcast(&mut b.bytes[..size], 0)?,
        Coll::Allreduce => {
            let k = (size / 8).max(1);
            w.allreduce(&b.f[..k], &mut b.fout[..k], &Op::Sum)?;
        }
        Coll::Iallreduce => {
            let k = (size / 8).max(1);
            // One copy of the input, as `allreduce` makes into `recv`.
            let mut v = std::mem::take(&mut b.fv);
            v.clear();
            v.extend_from_slice(&b.f[..k]);
            b.fv = w.iallreduce(v, Op::Sum)?.wait()?;
        }
        Coll::Alltoall => w.alltoall(&b.bytes[..size * n], &mut b.out[..size * n])?,
    }
    Ok(())
}

fn verified(w: &World, op: Coll, size: usize, b: &mut Bufs) -> Result<(), BenchError> {
    let (me, n) = (w.rank() as usize, w.size() as usize);
    match op {
        Coll::Barrier => w.barrier()?,
        Coll::Bcast => {
            for (i, x) in b.bytes[..size].iter_mut().enumerate() {
                *x = if me == 0 { (i * 7 + 1) as u8 } else { 0 };
            }
            w.bcast(&mut b.bytes[..size], 0)?;
            ensure!(
                b.bytes[..size]
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == (i * 7 + 1) as u8),
                "bcast of {size} B corrupt"
            );
        }
        Coll::Allreduce | Coll::Iallreduce => {
            let k = (size / 8).max(1);
            for (i, x) in b.f[..k].iter_mut().enumerate() {
                *x = (me + i) as f64;
            }
            call(w, op, size, b)?;
            let base = (n * (n - 1) / 2) as f64;
            let got = if op == Coll::Iallreduce {
                &b.fv[..]
            } else {
                &b.fout[..k]
            };
            ensure!(
                got.len() == k
                    && got
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == base + (n * i) as f64),
                "allreduce of {size} B wrong"
            );
        }
        Coll::Alltoall => {
            for j in 0..n {
                b.bytes[j * size..(j + 1) * size].fill((me * 16 + j) as u8);
            }
            w.alltoall(&b.bytes[..size * n], &mut b.out[..size * n])?;
            for i in 0..n {
                ensure!(
                    b.out[i * size..(i + 1) * size]
                        .iter()
                        .all(|&x| x == (i * 16 + me) as u8),
                    "alltoall block from {i} wrong"
                );
            }
        }
    }
    Ok(())
}

fn measure(
    w: &World,
    op: Coll,
    size: usize,
    a: &CollArgs,
    b: &mut Bufs,
) -> Result<f64, BenchError> {
    verified(w, op, size, b)?;
    let warm = (WARMUP_BYTES / size.max(1)).clamp(3, 200);
    w.barrier()?;
    let t = Instant::now();
    for _ in 0..warm {
        call(w, op, size, b)?;
    }
    let mine = t.elapsed().as_secs_f64() / warm as f64;
    let mut slowest = [0.0f64];
    w.reduce(&[mine], &mut slowest, &Op::Max, 0)?;
    let mut iters = [1u64];
    if w.rank() == 0 {
        let want = a.batch_ms as f64 * 1e-3 / slowest[0].max(1e-9);
        iters[0] = (want as u64).clamp(1, 10_000_000);
    }
    w.bcast(&mut iters, 0)?;
    let mut batch = Vec::with_capacity(a.batches);
    for _ in 0..a.batches.max(1) {
        w.barrier()?;
        let t = Instant::now();
        for _ in 0..iters[0] {
            call(w, op, size, b)?;
        }
        let mean_us = t.elapsed().as_secs_f64() * 1e6 / iters[0] as f64;
        let mut worst = [0.0f64];
        w.reduce(&[mean_us], &mut worst, &Op::Max, 0)?;
        batch.push(worst[0]);
    }
    Ok(median(&mut batch))
}

/// Parses `--ops`: each collective once.
fn parse_ops(list: &[String]) -> Result<Vec<Coll>, BenchError> {
    let mut ops = Vec::new();
    for o in list {
        let op = match o.as_str() {
            "barrier" => Coll::Barrier,
            "bcast" => Coll::Bcast,
            "allreduce" => Coll::Allreduce,
            "iallreduce" => Coll::Iallreduce,
            "alltoall" => Coll::Alltoall,
            other => bail!(
                "unknown collective {other:?} (barrier, bcast, allreduce, iallreduce, alltoall)"
            ),
        };
        ensure!(!ops.contains(&op), "collective {o} listed twice");
        ops.push(op);
    }
    Ok(ops)
}

/// Runs the collectives benchmark.
pub(crate) fn run(a: &CollArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    let ops = parse_ops(&a.ops)?;
    let sizes = parse_sizes(&a.sizes)?;
    ensure!(sizes.iter().all(|&s| s > 0), "sizes must be positive");
    let n = w.size() as usize;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let mut b = Bufs {
        bytes: vec![0; max * n],
        out: vec![0; max * n],
        f: vec![0.0; max / 8 + 1],
        fout: vec![0.0; max / 8 + 1],
        fv: Vec::new(),
    };
    let mut series = Vec::new();
    for &op in &ops {
        let mut points = Vec::new();
        if op == Coll::Barrier {
            let latency_us = measure(&w, op, 0, a, &mut b)?;
            points.push(CollPoint {
                bytes: 0,
                latency_us,
            });
        } else {
            for &s in &sizes {
                let latency_us = measure(&w, op, s, a, &mut b)?;
                points.push(CollPoint {
                    bytes: s,
                    latency_us,
                });
            }
        }
        series.push(CollSeries { op, points });
    }
    if w.rank() == 0 {
        if a.common.json {
            print_json(&CollReport {
                benchmark: "coll",
                implementation: "spools",
                ranks: n,
                series: &series,
            })?;
        } else {
            println!("# collectives on {n} ranks: median over {} batches of the slowest rank's mean time per call", a.batches);
            println!("{:>10} {:>10} {:>12}", "op", "bytes", "latency_us");
            for s in &series {
                for p in &s.points {
                    println!("{:>10} {:>10} {:>12.3}", s.op.name(), p.bytes, p.latency_us);
                }
            }
        }
    }
    w.finalize()?;
    Ok(())
}
