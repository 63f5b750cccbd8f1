//! `spools bench pingpong --api tagged`: one-way latency and bandwidth of tagged
//! send/recv (short, eager and rendezvous by size).

use std::time::Instant;

use anyhow::Result;
use serde_json::json;

use super::pingpong::{iters, series_json, Point, DEFAULT_SIZES};
use super::probe;
use super::{median, need_two, parse_size, plot, start, transport_name, PingpongArgs};

pub(crate) fn run(a: &PingpongArgs) -> Result<()> {
    let w = start(&a.common)?;
    need_two(&w, "pingpong")?;
    let sizes: Vec<usize> = match &a.sizes {
        Some(list) => list.iter().map(|s| parse_size(s)).collect::<Result<_>>()?,
        None => DEFAULT_SIZES.iter().copied().filter(|&s| s > 0).collect(),
    };
    let me = w.rank();
    let peer = 1 - me;
    let before = probe::run(&w)?;
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
            anyhow::ensure!(inb[..s] == pattern[..], "{s} B arrived corrupt");
            w.send(&inb[..s], peer, 1)?;
        }
        if me == 0 {
            anyhow::ensure!(inb[..s] == pattern[..], "{s} B came back corrupt");
        }
        let n = iters(s);
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
        pts.push(Point {
            bytes: s,
            latency_us: median(&mut v),
        });
    }
    let after = probe::run(&w)?;
    let series = vec![("tagged", pts)];
    if me == 0 {
        let transport = transport_name(&w, peer);
        let cfg = w.worker().config();
        let probe_json = |p: &Option<probe::Probe>| p.as_ref().map(probe::Probe::json);
        let doc = json!({
            "benchmark": "pingpong",
            "transport": transport,
            "short_limit": cfg.short_limit,
            "eager_limit": cfg.eager_limit,
            "probe": probe_json(&before),
            "probe_end": probe_json(&after),
            "series": series_json(&series),
        });
        if a.common.json {
            println!("{doc}");
        } else {
            println!("# tagged ping-pong over {transport}: one-way latency (half the round trip), medians of {reps}");
            println!("{:>10} {:>12} {:>12}", "bytes", "latency_us", "MB/s");
            for p in &series[0].1 {
                println!("{:>10} {:>12.3} {:>12.1}", p.bytes, p.latency_us, p.mbps());
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
