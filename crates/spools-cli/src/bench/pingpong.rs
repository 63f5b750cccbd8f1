//! `spools bench pingpong`: one-way latency (half the round trip) and bandwidth.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use spools::{Channel, Delivery, World};

use super::probe::{self, round};
use super::{median, need_two, parse_size, plot, start, transport_name, PingpongArgs};

pub(crate) const DEFAULT_SIZES: [usize; 12] = [
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

/// The `series` of a ping-pong document: per path, bytes, latency and bandwidth.
pub(crate) fn series_json(series: &[(&str, Vec<Point>)]) -> serde_json::Value {
    serde_json::Value::Array(
        series
            .iter()
            .map(|(path, pts)| {
                json!({
                    "path": path,
                    "points": pts.iter().map(|p| json!({
                        "bytes": p.bytes,
                        "latency_us": round(p.latency_us, 4),
                        "bandwidth_MBps": round(p.mbps(), 1),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// Iterations for a size: about 50 ms per batch, estimating a round trip as 0.6 us plus
/// the bytes at 10 GB/s each way.
pub(crate) fn iters(bytes: usize) -> u64 {
    let round_trip_us = 0.6 + bytes as f64 / 5_000.0;
    ((50_000.0 / round_trip_us) as u64).clamp(4, 50_000)
}

/// One iteration of a ping-pong loop, as both ranks number it.
#[derive(Clone, Copy)]
struct Iter {
    /// Index within this repetition.
    i: u64,
    /// Messages this rank must have received once the peer's message of this iteration
    /// has arrived (counted, never re-read: a barrier keeps serving messages, so a
    /// counter read after one may already include the next repetition's first).
    target: u64,
    /// Index over every iteration of the run (the same on both ranks).
    global: u64,
}

/// Times `n` round trips, `reps` times after one warm-up, and returns the median one-way
/// time in microseconds. Rank 0 sends then waits; rank 1 waits then sends.
fn round_trips(
    w: &mut World,
    reps: usize,
    n: u64,
    send: impl Fn(&mut World, Iter) -> Result<()>,
    wait: impl Fn(&mut World, Iter) -> Result<()>,
    received: &mut u64,
    global: &mut u64,
) -> Result<f64> {
    let me = w.rank();
    let mut v = Vec::new();
    for rep in 0..=reps {
        w.barrier()?;
        let t = Instant::now();
        for i in 0..n {
            let it = Iter {
                i,
                target: *received + i + 1,
                global: *global + i,
            };
            if me == 0 {
                send(w, it)?;
                wait(w, it)?;
            } else {
                wait(w, it)?;
                send(w, it)?;
            }
        }
        *received += n;
        *global += n;
        if rep > 0 {
            v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
        }
    }
    Ok(median(&mut v))
}

pub(crate) fn run(a: &PingpongArgs) -> Result<()> {
    if a.api == "tagged" {
        return super::tagged::run(a);
    }
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
        w.worker()
            .register(name, move |_| {
                c.fetch_add(1, Ordering::Release);
            })
            .context("registering handlers")?;
    }
    w.worker().sync_handlers()?;
    let h_short = w.worker().handler_id("pp.short")?;
    let h_bulk = w.worker().handler_id("pp.bulk")?;
    let bulk_limit = w.worker().config().bulk_limit as usize;
    let max = sizes.iter().copied().max().unwrap_or(8).max(8);
    let region = w.worker().region(max)?;
    let keys = w.allgather_bytes(&region.key().to_le_bytes())?;
    let peer_key = u32::from_le_bytes(keys[peer as usize][..4].try_into().unwrap_or([0; 4]));
    let reps = a.common.reps.max(1);
    // Messages this rank has received so far: a barrier keeps serving messages, so a
    // count read after one may already include the peer's first message of the next
    // round. Expectations are therefore counted, never re-read.
    let mut seen = 0u64;

    // Short: handler id + 4 u64, reported as 8 B (the smallest point).
    let mut global = 0u64;
    let counted = |w: &mut World, it: Iter| -> Result<()> {
        w.worker()
            .wait_for(|| count.load(Ordering::Acquire) >= it.target)?;
        Ok(())
    };
    let send_short = |w: &mut World, it: Iter| -> Result<()> {
        let args = [it.i, 0, 0, 0];
        w.endpoint()
            .send_short(peer, h_short, args, Channel::new(0), Delivery::Immediate)?;
        Ok(())
    };
    let short = vec![Point {
        bytes: 8,
        latency_us: round_trips(
            &mut w,
            reps,
            20_000,
            send_short,
            counted,
            &mut seen,
            &mut global,
        )?,
    }];

    // Bulk: payloads up to the bulk limit.
    let buf = vec![0x5au8; max];
    let mut bulk = Vec::new();
    for &s in sizes.iter().filter(|&&s| s <= bulk_limit) {
        let send_bulk = |w: &mut World, it: Iter| -> Result<()> {
            w.endpoint()
                .send_bulk(peer, h_bulk, [it.i, 0, 0, 0], &buf[..s], Channel::new(0))?;
            Ok(())
        };
        let latency_us = round_trips(
            &mut w,
            reps,
            iters(s),
            send_bulk,
            counted,
            &mut seen,
            &mut global,
        )?;
        bulk.push(Point {
            bytes: s,
            latency_us,
        });
    }

    // Memory: put into the peer's region with a last byte that changes every iteration;
    // the peer watches that byte (puts are placed in order), then puts back.
    let tick = |it: Iter| (it.global % 255) as u8 + 1;
    let mut mem = Vec::new();
    let data = std::cell::RefCell::new(vec![0u8; max]);
    for &s in &sizes {
        let put = |w: &mut World, it: Iter| -> Result<()> {
            let mut d = data.borrow_mut();
            d[s - 1] = tick(it);
            w.endpoint().put(peer, peer_key, 0, &d[..s])?;
            Ok(())
        };
        let landed = |w: &mut World, it: Iter| -> Result<()> {
            let mut last = [0u8; 1];
            let want = tick(it);
            w.worker()
                .wait_for(|| region.read(s - 1, &mut last).is_ok() && last[0] == want)?;
            Ok(())
        };
        let latency_us = round_trips(&mut w, reps, iters(s), put, landed, &mut 0, &mut global)?;
        mem.push(Point {
            bytes: s,
            latency_us,
        });
    }
    let series = vec![("short", short), ("bulk", bulk), ("memory", mem)];
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
            "series": series_json(&series),
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
