//! A reduction's combining step (`Op::combine`, which accumulates and every reduction
//! run) on 32 KiB to 1 MiB of `i32` and `f64`, against the plain loop as the baseline
//! target compiles it (no run-time choice of vector width), in the same run. (A copy of
//! the same bytes is no reference on every machine: glibc 2.36's `memcpy` takes `rep
//! movsb` from 2 KiB on, which runs 20x slower on an AMD EPYC where the destination lies
//! 1 to 31 bytes past the source modulo 4 KiB, as these vectors may.)
//!
//! Run with `cargo bench -p spools-msg --bench combine`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use spools_msg::{Element, Op};

/// The loop `Op::Sum` ran before it chose its vector width at run time.
#[inline(never)]
fn plain_sum<T: Element>(acc: &mut [T], other: &[T]) {
    acc.iter_mut()
        .zip(other)
        .for_each(|(a, b)| *a = T::add(*a, *b));
}

fn group<T: Element + From<u8>>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("combine/{name}"));
    g.measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(500));
    for kib in [32usize, 64, 128, 1024] {
        let n = kib * 1024 / std::mem::size_of::<T>();
        let other: Vec<T> = (0..n).map(|i| T::from((i % 251) as u8)).collect();
        let mut acc: Vec<T> = vec![T::from(1); n];
        g.throughput(Throughput::Bytes((kib * 1024) as u64));
        g.bench_with_input(BenchmarkId::new("sum", kib), &kib, |b, _| {
            b.iter(|| Op::Sum.combine(black_box(&mut acc), black_box(&other), false))
        });
        g.bench_with_input(BenchmarkId::new("max", kib), &kib, |b, _| {
            b.iter(|| Op::Max.combine(black_box(&mut acc), black_box(&other), false))
        });
        g.bench_with_input(BenchmarkId::new("plain-sum", kib), &kib, |b, _| {
            b.iter(|| plain_sum(black_box(&mut acc), black_box(&other)))
        });
    }
    g.finish();
}

fn combine(c: &mut Criterion) {
    group::<i32>(c, "i32");
    group::<f64>(c, "f64");
}

criterion_group!(benches, combine);
criterion_main!(benches);
