//! `spools bench ring`: a token passed around all ranks; time per hop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use spools::{Channel, Delivery};

use crate::args::RingArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::raw_limits::{self, RawLimits};
use crate::session::{start, transport_name};
use crate::stats::{median, rounded};

/// The document of `spools bench ring --json`.
#[derive(Debug, Serialize)]
struct RingReport<'a> {
    /// Always `ring`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self` (between ranks 0 and 1).
    transport: &'static str,
    /// Ranks in the ring.
    ranks: u32,
    /// Times the token went around per repetition.
    rounds: u64,
    /// CPUs of this host.
    cores: usize,
    /// Median time per hop, microseconds.
    #[serde(serialize_with = "rounded::<4, _>")]
    hop_us: f64,
    /// Raw limits before the measurement.
    probe: Option<&'a RawLimits>,
    /// Raw limits after it.
    probe_end: Option<&'a RawLimits>,
}

/// Runs the token ring.
pub(crate) fn run(a: &RingArgs) -> Result<(), BenchError> {
    let mut w = start(&a.common)?;
    let (me, n) = (w.rank(), w.size());
    let before = raw_limits::measure(&w)?;
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
    let after = raw_limits::measure(&w)?;
    if me == 0 {
        let hop = median(&mut v);
        let transport = if n > 1 { transport_name(&w, 1) } else { "self" };
        let cores = spools_fabric::cpu_count();
        if a.common.json {
            print_json(&RingReport {
                benchmark: "ring",
                transport,
                ranks: n,
                rounds,
                cores,
                hop_us: hop,
                probe: before.as_ref(),
                probe_end: after.as_ref(),
            })?;
        } else {
            println!(
                "ring of {n} ranks over {transport} on {cores} cores, {rounds} rounds: {hop:.3} us per hop (median of {})",
                v.len()
            );
        }
    }
    w.finalize()?;
    Ok(())
}
