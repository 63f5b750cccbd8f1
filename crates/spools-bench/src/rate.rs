//! `spools bench rate`: short-message rate from one sender to one receiver whose handler
//! counts, immediate against batched mode.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use spools::{Channel, Delivery, World};

use crate::args::RateArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::raw_limits::{self, RawLimits};
use crate::session::{need_two, start, transport_name};
use crate::stats::{median, rounded};

/// The document of `spools bench rate --json`.
#[derive(Debug, Serialize)]
struct RateReport<'a> {
    /// Always `rate`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// Messages per measurement.
    messages: u64,
    /// Messages per batch in batched mode.
    batch: u32,
    /// Million messages per second, sent one at a time.
    #[serde(rename = "immediate_Mmsgs", serialize_with = "rounded::<2, _>")]
    immediate_mmsgs: f64,
    /// Million messages per second, sent in batches.
    #[serde(rename = "batched_Mmsgs", serialize_with = "rounded::<2, _>")]
    batched_mmsgs: f64,
    /// Raw limits before the measurement.
    probe: Option<&'a RawLimits>,
    /// Raw limits after it.
    probe_end: Option<&'a RawLimits>,
}

/// Messages per second (median over `reps`) for `messages` shorts in `mode`.
fn measure(w: &mut World, mode: Delivery, messages: u64, reps: usize) -> Result<f64, BenchError> {
    let me = w.rank();
    let count = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let name = format!("rate.count.{mode:?}");
    let c = count.clone();
    w.worker().register(&name, move |_| {
        c.fetch_add(1, Ordering::Relaxed);
    })?;
    let d = done.clone();
    w.worker().register(&format!("{name}.done"), move |_| {
        d.fetch_add(1, Ordering::Release);
    })?;
    w.worker().sync_handlers()?;
    let h = w.worker().handler_id(&name)?;
    let h_done = w.worker().handler_id(&format!("{name}.done"))?;
    let mut v = Vec::new();
    for rep in 0..=reps {
        w.barrier()?;
        let t = Instant::now();
        if me == 0 {
            let ep = w.endpoint();
            for i in 0..messages {
                ep.send_short(1, h, [i, 0, 0, 0], Channel::new(0), mode)?;
            }
            ep.flush()?;
            let want = rep as u64 + 1;
            w.worker()
                .wait_for(|| done.load(Ordering::Acquire) >= want)?;
            if rep > 0 {
                v.push(messages as f64 / t.elapsed().as_secs_f64());
            }
        } else {
            let want = (rep as u64 + 1) * messages;
            w.worker()
                .wait_for(|| count.load(Ordering::Relaxed) >= want)?;
            w.endpoint()
                .send_short(0, h_done, [0; 4], Channel::new(0), Delivery::Immediate)?;
        }
    }
    Ok(median(&mut v))
}

/// Runs the message-rate benchmark.
pub(crate) fn run(a: &RateArgs) -> Result<(), BenchError> {
    let mut w = start(&a.common)?;
    need_two(&w, "rate")?;
    let before = raw_limits::measure(&w)?;
    let reps = a.common.reps.max(1);
    let immediate = measure(&mut w, Delivery::Immediate, a.messages, reps)?;
    let batched = measure(&mut w, Delivery::Batched, a.messages, reps)?;
    let after = raw_limits::measure(&w)?;
    if w.rank() == 0 {
        let transport = transport_name(&w, 1);
        let batch = w.worker().config().batch;
        if a.common.json {
            print_json(&RateReport {
                benchmark: "rate",
                transport,
                messages: a.messages,
                batch,
                immediate_mmsgs: immediate / 1e6,
                batched_mmsgs: batched / 1e6,
                probe: before.as_ref(),
                probe_end: after.as_ref(),
            })?;
        } else {
            println!("# short-message rate over {transport}, one sender, one counting receiver ({} messages, median of {reps})", a.messages);
            println!("immediate  {:8.2} M messages/s", immediate / 1e6);
            println!(
                "batched    {:8.2} M messages/s (batches of {batch})",
                batched / 1e6
            );
        }
    }
    w.finalize()?;
    Ok(())
}
