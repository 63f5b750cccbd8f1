//! `spools bench pingpong --api tagged`: one-way latency and bandwidth of tagged
//! send/recv (short, eager and rendezvous by size).

use std::time::Instant;

use serde::Serialize;

use crate::args::PingpongArgs;
use crate::error::{ensure, BenchError};
use crate::output::print_json;
use crate::plot;
use crate::raw_limits::{self, RawLimits};
use crate::series::{Point, Series};
use crate::session::{need_two, start, transport_name};
use crate::sizes::{pingpong_iters, pingpong_sizes};
use crate::stats::median;

/// The document of `spools bench pingpong --api tagged --json`.
#[derive(Debug, Serialize)]
struct TaggedReport<'a> {
    /// Always `pingpong`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// Largest message sent as a short message (bytes).
    short_limit: u64,
    /// Largest message sent eagerly; larger ones go by rendezvous (bytes).
    eager_limit: u64,
    /// Raw limits before the measurement.
    probe: Option<&'a RawLimits>,
    /// Raw limits after it.
    probe_end: Option<&'a RawLimits>,
    /// One series, `tagged`.
    series: &'a [Series],
}

/// Runs the tagged ping-pong.
pub(crate) fn run(a: &PingpongArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    need_two(&w, "pingpong")?;
    let sizes = pingpong_sizes(a.sizes.as_deref())?;
    let me = w.rank();
    let peer = 1 - me;
    let before = raw_limits::measure(&w)?;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let out = vec![0x5au8; max];
    let mut inb = vec![0u8; max];
    let reps = a.common.reps.max(1);
    let mut pts = Vec::new();
    for &s in &sizes {
        // One verified round trip first.
        let pattern: Vec<u8> = (0..s).map(|i| (i * 7 + s) as u8).collect();
        if me == 0 {
            w.send(&pattern, peer, 1)?;
            w.recv(&mut inb[..s], peer, 1)?;
        } else {
            w.recv(&mut inb[..s], peer, 1)?;
            ensure!(inb[..s] == pattern[..], "{s} B arrived corrupt");
            w.send(&inb[..s], peer, 1)?;
        }
        if me == 0 {
            ensure!(inb[..s] == pattern[..], "{s} B came back corrupt");
        }
        let n = pingpong_iters(s);
        let mut v = Vec::new();
        for rep in 0..=reps {
            w.barrier()?;
            let t = Instant::now();
            for _ in 0..n {
                if me == 0 {
                    w.send(&out[..s], peer, 0)?;
                    w.recv(&mut inb[..s], peer, 0)?;
                } else {
                    w.recv(&mut inb[..s], peer, 0)?;
                    w.send(&out[..s], peer, 0)?;
                }
            }
            if rep > 0 {
                v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * n) as f64);
            }
        }
        pts.push(Point::new(s, median(&mut v)));
    }
    let after = raw_limits::measure(&w)?;
    let series = vec![Series {
        path: "tagged",
        points: pts,
    }];
    if me == 0 {
        let transport = transport_name(&w, peer);
        let cfg = w.worker().config();
        if a.common.json {
            print_json(&TaggedReport {
                benchmark: "pingpong",
                transport,
                short_limit: cfg.short_limit,
                eager_limit: cfg.eager_limit,
                probe: before.as_ref(),
                probe_end: after.as_ref(),
                series: &series,
            })?;
        } else {
            println!("# tagged ping-pong over {transport}: one-way latency (half the round trip), medians of {reps}");
            println!("{:>10} {:>12} {:>12}", "bytes", "latency_us", "MB/s");
            for p in &series[0].points {
                println!("{:>10} {:>12.3} {:>12.1}", p.bytes, p.latency_us, p.mbps);
            }
        }
        if let Some(file) = &a.plot {
            plot::write(
                file,
                &format!("Spools tagged ping-pong over {transport}"),
                &series,
            )?;
        }
    }
    w.finalize()?;
    Ok(())
}
