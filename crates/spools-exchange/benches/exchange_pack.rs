//! The exchange engine's ring path in one process: packing the stream from one source
//! unit to one destination unit into transfer units, and scattering it back, for runs of
//! 8 B (block -> cyclic(1) of f64) up to 4 KiB; and the plan's run generator alone, which
//! every path pays.
//!
//! Run with `cargo bench -p spools-exchange --bench exchange_pack`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spools_exchange::bench_hooks::{pack_stream, unpack_stream};
use spools_map::{Layout, Plan};

const N: u64 = 1 << 20;
const TU: usize = 512 * 1024;

fn plan(cyclic: u64) -> Plan {
    let from: Layout = format!("f64[{N}] block on 4").parse().expect("layout");
    let to: Layout = format!("f64[{N}] cyclic({cyclic}) on 4")
        .parse()
        .expect("layout");
    Plan::new(&from, &to).expect("plan")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("exchange_pack");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_millis(500));
    for cyclic in [1u64, 2, 8, 512] {
        let plan = plan(cyclic);
        let src_len = plan.src().local_bytes(0).unwrap() as usize;
        let dst_len = plan.dst().local_bytes(1).unwrap() as usize;
        let src: Vec<u8> = (0..src_len).map(|i| i as u8).collect();
        let mut packed = Vec::new();
        let runs = pack_stream(&plan, 0, 1, &src, TU, &mut packed).unwrap();
        let run = packed.len() as u64 / runs;
        g.throughput(Throughput::Bytes(packed.len() as u64));
        // The runs alone (what every path pays): the plan's lazy run generator.
        g.bench_function(format!("runs/run {run} B"), |b| {
            b.iter(|| plan.runs(0, 1).unwrap().map(|r| r.len).sum::<u64>())
        });
        g.bench_function(format!("pack/run {run} B"), |b| {
            b.iter(|| pack_stream(&plan, 0, 1, black_box(&src), TU, &mut packed).unwrap())
        });
        let mut dst = vec![0u8; dst_len];
        g.bench_function(format!("unpack/run {run} B"), |b| {
            b.iter(|| unpack_stream(&plan, 0, 1, black_box(&packed), TU, &mut dst).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
