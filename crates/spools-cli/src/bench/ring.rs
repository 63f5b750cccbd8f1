//! `spools bench ring`: a token passed around all ranks; time per hop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use serde_json::json;
use spools::{Channel, Delivery};

use super::probe::{self, round};
use super::{median, start, transport_name, RingArgs};

pub(crate) fn run(a: &RingArgs) -> Result<()> {
    let mut w = start(&a.common)?;
    let (me, n) = (w.rank(), w.size());
    let before = probe::run(&w)?;
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    w.worker().register("ring.token", move |_| {
        g.fetch_add(1, Ordering::Release);
    })?;
    w.worker().sync_handlers()?;
    let h = w.worker().handler_id("ring.token")?;
    let next = (me + 1) % n;
    let rounds = a.rounds.max(1);
    let mut v = Vec::new();
    // Tokens received so far, counted (a barrier keeps serving messages, so a count read
    // after it may already include the next round's token).
    let mut seen = 0u64;
    for rep in 0..=a.common.reps.max(1) {
        w.barrier()?;
        let base = seen;
        seen += rounds;
        let t = Instant::now();
        for r in 0..rounds {
            if me == 0 {
                w.endpoint().send_short(
                    next,
                    h,
                    [r, 0, 0, 0],
                    Channel::new(0),
                    Delivery::Immediate,
                )?;
                w.worker()
                    .wait_for(|| got.load(Ordering::Acquire) > base + r)?;
            } else {
                w.worker()
                    .wait_for(|| got.load(Ordering::Acquire) > base + r)?;
                w.endpoint().send_short(
                    next,
                    h,
                    [r, 0, 0, 0],
                    Channel::new(0),
                    Delivery::Immediate,
                )?;
            }
        }
        if rep > 0 {
            v.push(t.elapsed().as_nanos() as f64 / 1e3 / (rounds * u64::from(n)) as f64);
        }
    }
    let after = probe::run(&w)?;
    if me == 0 {
        let hop = median(&mut v);
        let transport = if n > 1 { transport_name(&w, 1) } else { "self" };
        if a.common.json {
            println!(
                "{}",
                json!({
                    "benchmark": "ring",
                    "transport": transport,
                    "ranks": n,
                    "rounds": rounds,
                    "cores": spools_fabric::cpu_count(),
                    "hop_us": round(hop, 4),
                    "probe": before.as_ref().map(probe::Probe::json),
                    "probe_end": after.as_ref().map(probe::Probe::json),
                })
            );
        } else {
            println!(
                "ring of {n} ranks over {transport} on {} cores, {rounds} rounds: {hop:.3} us per hop (median of {})",
                spools_fabric::cpu_count(),
                v.len()
            );
        }
    }
    w.finalize()?;
    Ok(())
}
