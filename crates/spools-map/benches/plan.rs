//! Planning benchmarks: the nCUBE / iWarp matrix cases, a large 3-D case, and the
//! run generator on 8-byte runs (one by one against progressions).
//!
//! Run with `cargo bench -p spools-map --bench plan`. Before measuring, the large case's
//! per-peer plan sizes are printed, since the goal is stated in bytes as well as time.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spools_map::{Layout, Plan};

fn l(spec: &str) -> Layout {
    spec.parse().expect("valid spec")
}

const ROWS8: &str = "f64[1000,1000] block,* on 8x1";
const MATRIX: [(&str, &str); 3] = [
    ("row-swath", "f64[1000,1000] block,* on 64x1"),
    ("blocks", "f64[1000,1000] block,block on 8x8"),
    ("cyclic2", "f64[1000,1000] cyclic(2),cyclic(2) on 8x8"),
];
const LARGE_FROM: &str = "i32[2176,1152,1408] block,block,block on 2x1x1";
const LARGE_TO: [(&str, &str); 2] = [
    ("stripe4MiB", "stripe(unit=4MiB,count=4)"),
    ("cyclic16", "i32[2176,1152,1408] cyclic(16),*,* on 3x1x1"),
];

/// Computes every unit's sends and enumerates every run: the whole plan.
fn whole_plan(plan: &Plan) -> (u64, u64) {
    let mut bytes = 0;
    let mut runs = 0;
    for s in 0..plan.src().units() {
        for peer in plan.sends(s).unwrap().peers {
            for r in peer.runs() {
                bytes += r.len;
                runs += 1;
            }
        }
    }
    (bytes, runs)
}

fn matrix_cases(c: &mut Criterion) {
    let mut g = c.benchmark_group("ncube_1000x1000_f64");
    for (name, spec) in MATRIX {
        for (dir, from, to) in [("to_rows8", spec, ROWS8), ("from_rows8", ROWS8, spec)] {
            let (a, b) = (l(from), l(to));
            g.bench_function(format!("{name}/{dir}/whole_plan"), |bench| {
                bench.iter(|| whole_plan(&Plan::new(black_box(&a), black_box(&b)).unwrap()))
            });
            let plan = Plan::new(&a, &b).unwrap();
            g.bench_function(format!("{name}/{dir}/unit0_sends"), |bench| {
                bench.iter(|| black_box(plan.sends(0).unwrap()))
            });
        }
    }
    g.finish();
}

fn large_cases(c: &mut Criterion) {
    let from = l(LARGE_FROM);
    let mut g = c.benchmark_group("large_3d_i32_2176x1152x1408");
    for (name, spec) in LARGE_TO {
        let to = l(spec);
        let plan = Plan::new(&from, &to).unwrap();
        for s in 0..plan.src().units() {
            let part = plan.sends(s).unwrap();
            let held: Vec<usize> = part.peers.iter().map(|p| p.stored_bytes()).collect();
            let runs: Vec<usize> = part.peers.iter().map(|p| p.runs().count()).collect();
            eprintln!(
                "{name}: unit {s} ({:?} path) sends to {} peers; bytes held per peer {held:?}; runs per peer {runs:?}",
                plan.path(),
                part.peers.len()
            );
        }
        g.bench_function(format!("{name}/unit_plan"), |bench| {
            bench.iter(|| {
                let plan = Plan::new(black_box(&from), black_box(&to)).unwrap();
                black_box(plan.sends(1).unwrap())
            })
        });
        g.bench_function(format!("{name}/unit_plan_and_enumerate"), |bench| {
            bench.iter(|| {
                let plan = Plan::new(black_box(&from), black_box(&to)).unwrap();
                plan.sends(1)
                    .unwrap()
                    .peers
                    .iter()
                    .map(|p| p.runs().count())
                    .sum::<usize>()
            })
        });
    }
    g.finish();
}

/// Block -> cyclic(1) of f64 columns: every run is one element (8 B). Unit 0's sends,
/// enumerated run by run and as progressions; the throughput is in runs, so the time per
/// element is the time per run.
fn short_runs(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_to_cyclic1_f64_2048x2048");
    for ranks in [4, 8] {
        let from = l(&format!("f64[2048,2048] block,* on {ranks}x1 order=F"));
        let to = l(&format!("f64[2048,2048] cyclic,* on {ranks}x1 order=F"));
        let plan = Plan::new(&from, &to).unwrap();
        let part = plan.sends(0).unwrap();
        let runs: u64 = part.peers.iter().map(|p| p.runs().count() as u64).sum();
        g.throughput(Throughput::Elements(runs));
        g.bench_function(format!("{ranks}_ranks/runs"), |bench| {
            bench.iter(|| {
                part.peers
                    .iter()
                    .flat_map(|p| p.runs())
                    .map(|r| r.src ^ r.dst)
                    .fold(0u64, u64::wrapping_add)
            })
        });
        g.bench_function(format!("{ranks}_ranks/strided"), |bench| {
            bench.iter(|| {
                part.peers
                    .iter()
                    .flat_map(|p| p.strided())
                    .map(|s| (s.src ^ s.dst).wrapping_mul(s.count))
                    .fold(0u64, u64::wrapping_add)
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = matrix_cases, large_cases, short_runs
}
criterion_main!(benches);
