//! `spools bench pingpong`: one-way latency (half the round trip) and bandwidth of active
//! messages, by path: short messages, bulk payloads and puts into the peer's memory.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use spools::{Channel, Delivery, World};

use crate::args::PingpongArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::plot;
use crate::raw_limits::{self, RawLimits, RawTcp};
use crate::series::{Point, Series};
use crate::session::{need_two, start, transport_name};
use crate::sizes::{pingpong_iters, pingpong_sizes};
use crate::stats::median;

/// The document of `spools bench pingpong --json`.
#[derive(Debug, Serialize)]
struct PingpongReport<'a> {
    /// Always `pingpong`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// Raw limits before the measurement.
    probe: Option<&'a RawLimits>,
    /// Raw limits after it.
    probe_end: Option<&'a RawLimits>,
    /// Raw TCP limits before and after the measurement (over TCP only): a busy-polling
    /// socket ping-pong and a plain socket stream in the same window.
    raw_tcp: [Option<&'a RawTcp>; 2],
    /// The shared-memory single-copy mechanism and why it was chosen.
    single_copy: Option<String>,
    /// `short`, `bulk` and `memory`.
    series: &'a [Series],
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
    send: impl Fn(&mut World, Iter) -> Result<(), BenchError>,
    wait: impl Fn(&mut World, Iter) -> Result<(), BenchError>,
    received: &mut u64,
    global: &mut u64,
) -> Result<f64, BenchError> {
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

/// Runs the active-message ping-pong.
pub(crate) fn run(a: &PingpongArgs) -> Result<(), BenchError> {
    let mut w = start(&a.common)?;
    need_two(&w, "pingpong")?;
    let sizes = pingpong_sizes(a.sizes.as_deref())?;
    let me = w.rank();
    let peer = 1 - me;
    let before = raw_limits::measure(&w)?;
    let over_tcp = transport_name(&w, peer) == "tcp";
    let tcp_before = if over_tcp {
        raw_limits::measure_tcp(&w)?
    } else {
        None
    };
    let count = Arc::new(AtomicU64::new(0));
    for name in ["pp.short", "pp.bulk"] {
        let c = count.clone();
        w.worker()
            .register(name, move |_| {
                c.fetch_add(1, Ordering::Release);
            })
            .map_err(BenchError::Register)?;
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
    let counted = |w: &mut World, it: Iter| -> Result<(), BenchError> {
        w.worker()
            .wait_for(|| count.load(Ordering::Acquire) >= it.target)?;
        Ok(())
    };
    let send_short = |w: &mut World, it: Iter| -> Result<(), BenchError> {
        let args = [it.i, 0, 0, 0];
        w.endpoint()
            .send_short(peer, h_short, args, Channel::new(0), Delivery::Immediate)?;
        Ok(())
    };
    let short = vec![Point::new(
        8,
        round_trips(
            &mut w,
            reps,
            20_000,
            send_short,
            counted,
            &mut seen,
            &mut global,
        )?,
    )];

    // Bulk: payloads up to the bulk limit.
    let buf = vec![0x5au8; max];
    let mut bulk = Vec::new();
    for &s in sizes.iter().filter(|&&s| s <= bulk_limit) {
        let send_bulk = |w: &mut World, it: Iter| -> Result<(), BenchError> {
            w.endpoint()
                .send_bulk(peer, h_bulk, [it.i, 0, 0, 0], &buf[..s], Channel::new(0))?;
            Ok(())
        };
        let latency_us = round_trips(
            &mut w,
            reps,
            pingpong_iters(s),
            send_bulk,
            counted,
            &mut seen,
            &mut global,
        )?;
        bulk.push(Point::new(s, latency_us));
    }

    // Memory: put into the peer's region with a last byte that changes every iteration;
    // the peer watches that byte (puts are placed in order), then puts back.
    let tick = |it: Iter| (it.global % 255) as u8 + 1;
    let mut mem = Vec::new();
    let data = RefCell::new(vec![0u8; max]);
    for &s in &sizes {
        let put = |w: &mut World, it: Iter| -> Result<(), BenchError> {
            let mut d = data.borrow_mut();
            d[s - 1] = tick(it);
            w.endpoint().put(peer, peer_key, 0, &d[..s])?;
            Ok(())
        };
        let landed = |w: &mut World, it: Iter| -> Result<(), BenchError> {
            let mut last = [0u8; 1];
            let want = tick(it);
            w.worker()
                .wait_for(|| region.read(s - 1, &mut last).is_ok() && last[0] == want)?;
            Ok(())
        };
        let latency_us = round_trips(
            &mut w,
            reps,
            pingpong_iters(s),
            put,
            landed,
            &mut 0,
            &mut global,
        )?;
        mem.push(Point::new(s, latency_us));
    }
    let series = vec![
        Series {
            path: "short",
            points: short,
        },
        Series {
            path: "bulk",
            points: bulk,
        },
        Series {
            path: "memory",
            points: mem,
        },
    ];
    let after = raw_limits::measure(&w)?;
    let tcp_after = if over_tcp {
        raw_limits::measure_tcp(&w)?
    } else {
        None
    };
    let raw_tcp = [tcp_before.as_ref(), tcp_after.as_ref()];

    if me == 0 {
        let transport = transport_name(&w, peer);
        if a.common.json {
            print_json(&PingpongReport {
                benchmark: "pingpong",
                transport,
                single_copy: w
                    .shm_caps()
                    .map(|c| format!("{:?}: {}", c.single_copy, c.single_copy_reason)),
                probe: before.as_ref(),
                probe_end: after.as_ref(),
                raw_tcp,
                series: &series,
            })?;
        } else {
            print_table(transport, reps, before.as_ref(), raw_tcp, &series);
        }
        if let Some(file) = &a.plot {
            plot::write(file, &format!("Spools ping-pong over {transport}"), &series)?;
        }
    }
    w.finalize()?;
    Ok(())
}

fn print_table(
    transport: &str,
    reps: usize,
    before: Option<&RawLimits>,
    raw_tcp: [Option<&RawTcp>; 2],
    series: &[Series],
) {
    println!(
        "# pingpong over {transport}: one-way latency (half the round trip), medians of {reps}"
    );
    if let Some(p) = before {
        println!(
            "# raw probes: flag through a cache line {:.0} ns, bare ring {:.0} ns one-way",
            p.flag_pingpong_ns, p.ring_floor_ns
        );
    }
    for (when, t) in ["before", "after"].iter().zip(raw_tcp) {
        if let Some(t) = t {
            println!(
                "# raw tcp {when}: busy-polling socket ping-pong 8 B {:.3} us one-way, plain socket stream of 1 MiB writes {:.0} MB/s",
                t.pingpong_us, t.stream_mbps
            );
        }
    }
    println!(
        "{:>8} {:>10} {:>12} {:>12}",
        "path", "bytes", "latency_us", "MB/s"
    );
    for s in series {
        for p in &s.points {
            println!(
                "{:>8} {:>10} {:>12.3} {:>12.1}",
                s.path, p.bytes, p.latency_us, p.mbps
            );
        }
    }
}
