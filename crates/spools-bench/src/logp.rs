//! `spools bench logp`: the LogP signature of the StarT-X paper (section 6.1.1, Table 1):
//! send overhead o_s, receive overhead o_r, gap g and latency L, for 16-byte (short) and
//! 64-byte (bulk) messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use spools::{Channel, Delivery, HandlerId, World};

use crate::args::CommonArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::raw_limits::{self, RawLimits};
use crate::session::{f64_of, need_two, start, transport_name};
use crate::stats::{median, rounded};

const BURST: u64 = 64;

/// The LogP signature of one message size, microseconds.
#[derive(Debug, Serialize)]
struct Signature {
    /// Send overhead: the time a send call takes.
    #[serde(rename = "o_s_us", serialize_with = "rounded::<4, _>")]
    os: f64,
    /// Receive overhead: the receiver's time per message of a waiting burst.
    #[serde(rename = "o_r_us", serialize_with = "rounded::<4, _>")]
    or: f64,
    /// Gap: the interval between messages of a long stream.
    #[serde(rename = "g_us", serialize_with = "rounded::<4, _>")]
    g: f64,
    /// Latency: half the round trip less both overheads.
    #[serde(rename = "L_us", serialize_with = "rounded::<4, _>")]
    l: f64,
    /// Half the round trip.
    #[serde(rename = "half_rtt_us", serialize_with = "rounded::<4, _>")]
    rtt_half: f64,
}

/// The document of `spools bench logp --json`.
#[derive(Debug, Serialize)]
struct LogpReport<'a> {
    /// Always `logp`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// 16-byte short messages.
    #[serde(rename = "16B")]
    short: &'a Signature,
    /// 64-byte bulk messages.
    #[serde(rename = "64B")]
    bulk: &'a Signature,
    /// Raw limits before the measurement.
    probe: Option<&'a RawLimits>,
    /// Raw limits after it.
    probe_end: Option<&'a RawLimits>,
}

/// Spins `d` without calling into Spools.
fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn send(
    w: &mut World,
    h: HandlerId,
    bytes: usize,
    i: u64,
    payload: &[u8],
) -> Result<(), BenchError> {
    let peer = 1 - w.rank();
    if bytes <= 32 {
        w.endpoint()
            .send_short(peer, h, [i, 0, 0, 0], Channel::new(0), Delivery::Immediate)?;
    } else {
        w.endpoint()
            .send_bulk(peer, h, [i, 0, 0, 0], &payload[..bytes], Channel::new(0))?;
    }
    Ok(())
}

fn signature(w: &mut World, bytes: usize, reps: usize) -> Result<Signature, BenchError> {
    let me = w.rank();
    let count = Arc::new(AtomicU64::new(0));
    let name = format!("logp.{bytes}");
    let c = count.clone();
    w.worker().register(&name, move |_| {
        c.fetch_add(1, Ordering::Release);
    })?;
    w.worker().sync_handlers()?;
    let h = w.worker().handler_id(&name)?;
    let payload = vec![7u8; 64];
    let (mut os, mut or, mut g, mut half) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut expect = 0u64;
    // o_s: the time a send call takes, one message at a time with a pause between them so
    // that the receiver keeps up (no back-pressure), less the cost of reading the clock.
    // o_r: the time the receiver spends per message on a burst that is already waiting.
    let clock = {
        let mut c: Vec<f64> = (0..1000)
            .map(|_| {
                let t = Instant::now();
                t.elapsed().as_nanos() as f64
            })
            .collect();
        median(&mut c) / 1e3
    };
    for _ in 0..reps {
        w.barrier()?;
        if me == 0 {
            for i in 0..BURST {
                let t = Instant::now();
                send(w, h, bytes, i, &payload)?;
                os.push(t.elapsed().as_nanos() as f64 / 1e3 - clock);
                busy(Duration::from_micros(2));
            }
        } else {
            expect += BURST;
            w.worker()
                .wait_for(|| count.load(Ordering::Acquire) >= expect)?;
        }
        w.barrier()?;
        if me == 0 {
            // A barrier keeps serving messages: give rank 1 time to leave it first.
            busy(Duration::from_micros(500));
            for i in 0..BURST {
                send(w, h, bytes, i, &payload)?;
            }
        } else {
            expect += BURST;
            // Let the burst land while not polling, then time the handling.
            busy(Duration::from_millis(3));
            let t = Instant::now();
            w.worker()
                .wait_for(|| count.load(Ordering::Acquire) >= expect)?;
            or.push(t.elapsed().as_nanos() as f64 / 1e3 / BURST as f64);
        }
    }
    // g: the interval between messages of a long stream.
    for _ in 0..reps {
        w.barrier()?;
        let n = 100_000u64;
        if me == 0 {
            let t = Instant::now();
            for i in 0..n {
                send(w, h, bytes, i, &payload)?;
            }
            g.push(t.elapsed().as_nanos() as f64 / 1e3 / n as f64);
        }
        if me == 1 {
            expect += n;
            w.worker()
                .wait_for(|| count.load(Ordering::Acquire) >= expect)?;
        }
    }
    // Round trips for L.
    for _ in 0..reps {
        w.barrier()?;
        let n = 20_000u64;
        let base = expect;
        expect += n;
        let t = Instant::now();
        for i in 0..n {
            if me == 0 {
                send(w, h, bytes, i, &payload)?;
                w.worker()
                    .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
            } else {
                w.worker()
                    .wait_for(|| count.load(Ordering::Acquire) > base + i)?;
                send(w, h, bytes, i, &payload)?;
            }
        }
        half.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
    }
    w.barrier()?;
    // Share the receiver's o_r with rank 0.
    let or_med = median(&mut or);
    let all = w.allgather_bytes(&or_med.to_le_bytes())?;
    let or_recv = f64_of(&all, 1);
    let (os, g, rtt_half) = (median(&mut os), median(&mut g), median(&mut half));
    Ok(Signature {
        os,
        or: or_recv,
        g,
        l: (rtt_half - os - or_recv).max(0.0),
        rtt_half,
    })
}

/// Runs the LogP benchmark.
pub(crate) fn run(a: &CommonArgs) -> Result<(), BenchError> {
    let mut w = start(a)?;
    need_two(&w, "logp")?;
    let before = raw_limits::measure(&w)?;
    let reps = a.reps.max(1);
    let s16 = signature(&mut w, 16, reps)?;
    let s64 = signature(&mut w, 64, reps)?;
    let after = raw_limits::measure(&w)?;
    if w.rank() == 0 {
        let transport = transport_name(&w, 1);
        if a.json {
            print_json(&LogpReport {
                benchmark: "logp",
                transport,
                short: &s16,
                bulk: &s64,
                probe: before.as_ref(),
                probe_end: after.as_ref(),
            })?;
        } else {
            println!("# LogP signature over {transport} (StarT-X Table 1 layout), microseconds, medians of {reps}");
            println!(
                "{:<14} {:>8} {:>8} {:>8} {:>8} {:>10}",
                "message", "o_s", "o_r", "g", "L", "RTT/2"
            );
            for (name, s) in [("16 B (short)", &s16), ("64 B (bulk)", &s64)] {
                println!(
                    "{name:<14} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>10.3}",
                    s.os, s.or, s.g, s.l, s.rtt_half
                );
            }
        }
    }
    w.finalize()?;
    Ok(())
}
