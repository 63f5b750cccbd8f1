//! The in-memory hot path of a striped write: an aggregator's rows of the byte stream
//! turned into unit chunks (data, RAID-5 parity, per-block CRC32C), RAID-0 against RAID-5
//! over the same stream and unit size (the layout of `bench/io/run.py --only raid`:
//! 1 MiB units over 4 files).
//!
//! Run with `cargo bench -p spools-io --bench rows [-- RUNS] [--write DIR] [--count K]`. RAID-0 and
//! RAID-5 runs alternate (the machine is noisy: a slow phase hits both alike); it prints
//! the median of each and the ratio RAID-5 / RAID-0. With `--write DIR`, each run also
//! writes the chunks to the unit files in DIR (an aggregator's whole part of a striped
//! write but the exchange, which is the same for both; no sync).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spools_io::file::stripe_chunks;
use spools_map::Layout;

/// Stream bytes: 16 RAID-5 rows of 3 MiB.
const SIZE: u64 = 48 << 20;

fn layout(kind: &str, count: u64) -> Layout {
    format!("{kind}(unit=1MiB,count={count},size={SIZE}B)")
        .parse()
        .expect("valid layout")
}

fn time(l: &Layout, stream: &[u8], dir: Option<&Path>) -> Duration {
    let t = Instant::now();
    let (chunks, crcs) = stripe_chunks(l, black_box(stream)).expect("sized layout");
    if let Some(d) = dir {
        for (u, c) in chunks.iter().enumerate() {
            std::fs::write(d.join(format!("u{u}")), c).expect("unit file written");
        }
    }
    black_box((chunks, crcs));
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(11);
    let dir = args
        .iter()
        .position(|a| a == "--write")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let dir = dir.as_deref();
    let count: u64 = args
        .iter()
        .position(|a| a == "--count")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(4);
    let stream: Vec<u8> = (0..SIZE).map(|i| (i * 31 + i / 4093) as u8).collect();
    let (r0, r5) = (layout("stripe", count), layout("raid5", count));
    // One warm-up of each (page faults of the first allocations).
    time(&r0, &stream, dir);
    time(&r5, &stream, dir);
    let (mut t0, mut t5) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        t0.push(time(&r0, &stream, dir));
        t5.push(time(&r5, &stream, dir));
    }
    let (m0, m5) = (median(t0), median(t5));
    let gib = |d: Duration| SIZE as f64 / d.as_secs_f64() / f64::from(1u32 << 30);
    let what = if dir.is_some() { " -> unit files" } else { "" };
    println!("rows -> chunks{what}, {} MiB stream, 1 MiB units over {count} files, median of {runs} alternating runs:", SIZE >> 20);
    println!(
        "  RAID-0 {:8.2} ms  {:5.2} GiB/s",
        m0.as_secs_f64() * 1e3,
        gib(m0)
    );
    println!(
        "  RAID-5 {:8.2} ms  {:5.2} GiB/s",
        m5.as_secs_f64() * 1e3,
        gib(m5)
    );
    println!(
        "  RAID-5 / RAID-0: {:.3}",
        m5.as_secs_f64() / m0.as_secs_f64()
    );
}
