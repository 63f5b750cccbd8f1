//! `spools bench pingpong`: one-way latency (half the round trip) and bandwidth.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use spools::{Channel, Mode};

use super::probe::{self, round};
use super::{median, need_two, parse_size, plot, start, transport_name, PingpongArgs};

const DEFAULT_SIZES: [usize; 12] = [
    8,
    64,
    512,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    0,
];

/// One measured point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Point {
    pub(crate) bytes: usize,
    pub(crate) latency_us: f64,
}

impl Point {
    pub(crate) fn mbps(&self) -> f64 {
        self.bytes as f64 / self.latency_us.max(1e-9)
    }
}

/// Iterations for a size: about 50 ms per batch, estimating a round trip as 0.6 us plus
/// the bytes at 10 GB/s each way.
fn iters(bytes: usize) -> u64 {
    let round_trip_us = 0.6 + bytes as f64 / 5_000.0;
    ((50_000.0 / round_trip_us) as u64).clamp(4, 50_000)
}

pub(crate) fn run(a: &PingpongArgs) -> Result<()> {
    let mut w = start(&a.common)?;
    need_two(&w, "pingpong")?;
    let sizes: Vec<usize> = match &a.sizes {
        Some(list) => list.iter().map(|s| parse_size(s)).collect::<Result<_>>()?,
        None => DEFAULT_SIZES.iter().copied().filter(|&s| s > 0).collect(),
    };
    let me = w.rank();
    let peer = 1 - me;
    let before = probe::run(&w)?;
    let count = Arc::new(AtomicU64::new(0));
    for name in ["pp.short", "pp.bulk"] {
        let c = count.clone();
        w.comm()
            .register(name, move |_| {
                c.fetch_add(1, Ordering::Release);
            })
            .context("registering handlers")?;
    }
    w.comm().sync_handlers()?;
    let h_short = w.comm().handler_id("pp.short")?;
    let h_bulk = w.comm().handler_id("pp.bulk")?;
    let bulk_limit = w.comm().config().bulk_limit as usize;
    let max = sizes.iter().copied().max().unwrap_or(8).max(8);
    let region = w.comm().region(max)?;
    let keys = w.allgather(&region.key().to_le_bytes())?;
    let peer_key = u32::from_le_bytes(keys[peer as usize][..4].try_into().unwrap_or([0; 4]));
    let reps = a.common.reps.max(1);
    // Messages this rank has received so far: a barrier keeps serving messages, so a
    // count read after one may already include the peer's first message of the next
    // round. Expectations are therefore counted, never re-read.
    let mut seen = 0u64;

    // Short: handler id + 4 u64, reported as 8 B (the smallest point).
    let mut series = Vec::new();
    let mut short = Vec::new();
    {
        let n = 20_000u64;
        let mut v = Vec::new();
        for rep in 0..=reps {
            w.barrier()?;
            let base = seen;
            seen += n;
            let t = Instant::now();
            for i in 0..n {
                if me == 0 {
                    w.endpoint().send_short(
                        peer,
                        h_short,
                        [i, 0, 0, 0],
                        Channel::new(0),
                        Mode::Immediate,
                    )?;
                    w.comm()
                        .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
                } else {
                    w.comm()
                        .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
                    w.endpoint().send_short(
                        peer,
                        h_short,
                        [i, 0, 0, 0],
                        Channel::new(0),
                        Mode::Immediate,
                    )?;
                }
            }
            if rep > 0 {
                v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
            }
        }
        short.push(Point {
            bytes: 8,
            latency_us: median(&mut v),
        });
    }
    series.push(("short", short));

    // Bulk: payloads up to the bulk limit.
    let mut bulk = Vec::new();
    let buf = vec![0x5au8; max];
    for &s in sizes.iter().filter(|&&s| s <= bulk_limit) {
        let n = iters(s);
        let mut v = Vec::new();
        for rep in 0..=reps {
            w.barrier()?;
            let base = seen;
            seen += n;
            let t = Instant::now();
            for i in 0..n {
                if me == 0 {
                    w.endpoint().send_bulk(
                        peer,
                        h_bulk,
                        [i, 0, 0, 0],
                        &buf[..s],
                        Channel::new(0),
                    )?;
                    w.comm()
                        .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
                } else {
                    w.comm()
                        .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
                    w.endpoint().send_bulk(
                        peer,
                        h_bulk,
                        [i, 0, 0, 0],
                        &buf[..s],
                        Channel::new(0),
                    )?;
                }
            }
            if rep > 0 {
                v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
            }
        }
        bulk.push(Point {
            bytes: s,
            latency_us: median(&mut v),
        });
    }
    series.push(("bulk", bulk));

    // Memory: put into the peer's region; the peer watches the last byte of the block
    // (puts are placed in order), then puts back.
    let mut mem = Vec::new();
    let mut tick = 0u8;
    let mut data = vec![0u8; max];
    for &s in &sizes {
        let n = iters(s);
        let mut v = Vec::new();
        for rep in 0..=reps {
            w.barrier()?;
            let t = Instant::now();
            for _ in 0..n {
                tick = tick.wrapping_add(1).max(1);
                data[s - 1] = tick;
                let mut last = [0u8; 1];
                if me == 0 {
                    w.endpoint().put(peer, peer_key, 0, &data[..s])?;
                    w.comm()
                        .wait_for(|| region.read(s - 1, &mut last).is_ok() && last[0] == tick)?;
                } else {
                    w.comm()
                        .wait_for(|| region.read(s - 1, &mut last).is_ok() && last[0] == tick)?;
                    w.endpoint().put(peer, peer_key, 0, &data[..s])?;
                }
            }
            if rep > 0 {
                v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
            }
        }
        mem.push(Point {
            bytes: s,
            latency_us: median(&mut v),
        });
    }
    series.push(("memory", mem));
    let after = probe::run(&w)?;

    if me == 0 {
        let transport = transport_name(&w, peer);
        let probe_json = |p: &Option<probe::Probe>| p.as_ref().map(probe::Probe::json);
        let doc = json!({
            "benchmark": "pingpong",
            "transport": transport,
            "probe": probe_json(&before),
            "probe_end": probe_json(&after),
            "single_copy": w.shm_caps().map(|c| format!("{:?}: {}", c.single_copy, c.single_copy_reason)),
            "series": series.iter().map(|(path, pts)| json!({
                "path": path,
                "points": pts.iter().map(|p| json!({
                    "bytes": p.bytes,
                    "latency_us": round(p.latency_us, 4),
                    "bandwidth_MBps": round(p.mbps(), 1),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        if a.common.json {
            println!("{doc}");
        } else {
            println!("# pingpong over {transport}: one-way latency (half the round trip), medians of {reps}");
            if let Some(p) = &before {
                println!(
                    "# raw probes: flag through a cache line {:.0} ns, bare ring {:.0} ns one-way",
                    p.flag_pingpong_ns, p.ring_floor_ns
                );
            }
            println!(
                "{:>8} {:>10} {:>12} {:>12}",
                "path", "bytes", "latency_us", "MB/s"
            );
            for (path, pts) in &series {
                for p in pts {
                    println!(
                        "{path:>8} {:>10} {:>12.3} {:>12.1}",
                        p.bytes,
                        p.latency_us,
                        p.mbps()
                    );
                }
            }
        }
        if let Some(file) = &a.plot {
            plot::write(file, &format!("Spools ping-pong over {transport}"), &series)?;
        }
    }
    w.finalize()?;
    Ok(())
}
