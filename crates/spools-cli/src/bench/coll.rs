//! `spools bench coll`: latency of barrier, broadcast, allreduce and alltoall, measured
//! exactly as `bench/peers/coll.c` measures MPI's: one verified call, a warm-up, then
//! batches sized from the slowest rank's warm-up; each batch's value is the largest mean
//! time per call over the ranks; the median over batches is reported.

use std::time::Instant;

use anyhow::{bail, ensure, Result};
use serde_json::json;
use spools::{Op, World};

use super::probe::round;
use super::{median, parse_size, start, CollArgs};

const WARMUP_BYTES: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Coll {
    Barrier,
    Bcast,
    Allreduce,
    Alltoall,
}

struct Bufs {
    bytes: Vec<u8>,
    out: Vec<u8>,
    f: Vec<f64>,
    fout: Vec<f64>,
}

fn call(w: &World, op: Coll, size: usize, b: &mut Bufs) -> Result<()> {
    let n = w.size() as usize;
    match op {
        Coll::Barrier => w.barrier()?,
        Coll::Bcast => w.bcast(&mut b.bytes[..size], 0)?,
        Coll::Allreduce => {
            let k = (size / 8).max(1);
            w.allreduce(&b.f[..k], &mut b.fout[..k], &Op::Sum)?;
        }
        Coll::Alltoall => w.alltoall(&b.bytes[..size * n], &mut b.out[..size * n])?,
    }
    Ok(())
}

fn verified(w: &World, op: Coll, size: usize, b: &mut Bufs) -> Result<()> {
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
        Coll::Allreduce => {
            let k = (size / 8).max(1);
            for (i, x) in b.f[..k].iter_mut().enumerate() {
                *x = (me + i) as f64;
            }
            w.allreduce(&b.f[..k], &mut b.fout[..k], &Op::Sum)?;
            let base = (n * (n - 1) / 2) as f64;
            ensure!(
                b.fout[..k]
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

fn measure(w: &World, op: Coll, size: usize, a: &CollArgs, b: &mut Bufs) -> Result<f64> {
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

pub(crate) fn run(a: &CollArgs) -> Result<()> {
    let w = start(&a.common)?;
    let mut ops = Vec::new();
    for o in &a.ops {
        let op = match o.as_str() {
            "barrier" => Coll::Barrier,
            "bcast" => Coll::Bcast,
            "allreduce" => Coll::Allreduce,
            "alltoall" => Coll::Alltoall,
            other => bail!("unknown collective {other:?} (barrier, bcast, allreduce, alltoall)"),
        };
        ensure!(!ops.contains(&op), "collective {o} listed twice");
        ops.push(op);
    }
    let sizes: Vec<usize> = a
        .sizes
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<_>>()?;
    ensure!(sizes.iter().all(|&s| s > 0), "sizes must be positive");
    let n = w.size() as usize;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let mut b = Bufs {
        bytes: vec![0; max * n],
        out: vec![0; max * n],
        f: vec![0.0; max / 8 + 1],
        fout: vec![0.0; max / 8 + 1],
    };
    let mut series = Vec::new();
    for &op in &ops {
        let mut pts = Vec::new();
        if op == Coll::Barrier {
            pts.push((0, measure(&w, op, 0, a, &mut b)?));
        } else {
            for &s in &sizes {
                pts.push((s, measure(&w, op, s, a, &mut b)?));
            }
        }
        series.push((op, pts));
    }
    if w.rank() == 0 {
        let name = |op: Coll| format!("{op:?}").to_lowercase();
        if a.common.json {
            let doc = json!({
                "benchmark": "coll",
                "impl": "spools",
                "ranks": n,
                "series": series.iter().map(|(op, pts)| json!({
                    "op": name(*op),
                    "points": pts.iter().map(|(s, l)| json!({"bytes": s, "latency_us": round(*l, 4)})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            });
            println!("{doc}");
        } else {
            println!("# collectives on {n} ranks: median over {} batches of the slowest rank's mean time per call", a.batches);
            println!("{:>10} {:>10} {:>12}", "op", "bytes", "latency_us");
            for (op, pts) in &series {
                for (s, l) in pts {
                    println!("{:>10} {:>10} {:>12.3}", name(*op), s, l);
                }
            }
        }
    }
    w.finalize()?;
    Ok(())
}
