//! `spools bench redist`: in-memory redistribution between two layouts, against the
//! single-thread memcpy bandwidth of the same machine measured in the same run.
//!
//! Reported bandwidth is the dataset's bytes over the time of one collective
//! redistribution (median of `--reps`); memcpy is one rank copying a buffer of the
//! dataset's size, timed between the redistributions.

use std::time::Instant;

use serde::Serialize;
use spools::ExchangeOptions;

use crate::args::RedistArgs;
use crate::dataset::{parse_layout, share};
use crate::error::BenchError;
use crate::output::print_json;
use crate::session::start;
use crate::stats::median;

/// The document of `spools bench redist --json`.
#[derive(Debug, Serialize)]
struct RedistReport<'a> {
    /// Always `redist`.
    benchmark: &'static str,
    /// Ranks of the job.
    ranks: u32,
    /// `--from` as given.
    from: &'a str,
    /// `--to` as given.
    to: &'a str,
    /// The dataset's bytes.
    bytes: u64,
    /// Contiguous runs the plan moves.
    runs: u64,
    /// Mean bytes per run.
    mean_run_bytes: f64,
    /// Whether transfer units were checksummed.
    integrity: bool,
    /// Whether both buffers were in the shared heap.
    heap: bool,
    /// Whether same-host streams could be pulled in a single copy.
    single_copy: bool,
    /// Bytes all ranks pulled in one redistribution (single copy).
    pulled: u64,
    /// Seconds of one redistribution (median).
    redistribute_s: f64,
    /// Bytes over that time, GB/s.
    redistribute_gb_s: f64,
    /// Seconds of one memcpy of the dataset by one rank (median).
    memcpy_s: f64,
    /// Bytes over that time, GB/s.
    memcpy_gb_s: f64,
    /// `redistribute_gb_s` over `memcpy_gb_s`.
    ratio: f64,
}

/// Runs the redistribution benchmark.
pub(crate) fn run(a: &RedistArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    let from = parse_layout("--from", &a.from)?;
    let to = parse_layout("--to", &a.to)?;
    let plan = spools_map::Plan::new(&from, &to)?;
    let total = plan.total_bytes();
    let me = w.rank();
    let mut src = buffer(&w, share(plan.src(), me)? as usize, a.heap)?;
    for (i, b) in src.iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut dst = buffer(&w, share(plan.dst(), me)? as usize, a.heap)?;
    let sum = plan.summary()?;
    let opts = ExchangeOptions {
        integrity: a.integrity,
        single_copy: !a.no_single_copy,
        ..ExchangeOptions::default()
    };
    let mut pulled = 0;
    let big = vec![1u8; total as usize];
    let mut copy = vec![0u8; total as usize];
    let (mut t_x, mut t_m) = (Vec::new(), Vec::new());
    for _ in 0..=a.common.reps {
        w.barrier()?;
        let t = Instant::now();
        let st = spools_io::redistribute_plan(w.io_communicator()?, &plan, &src, &mut dst, &opts)?;
        pulled = st.pulled;
        w.barrier()?;
        t_x.push(t.elapsed().as_secs_f64());
        if w.rank() == 0 {
            let t = Instant::now();
            copy.copy_from_slice(&big);
            std::hint::black_box(&copy);
            t_m.push(t.elapsed().as_secs_f64());
        }
        w.barrier()?;
    }
    // Every rank's pulled bytes (rank 0 may pull nothing while others do).
    let mut all = [0u64];
    w.communicator()
        .allreduce(&[pulled], &mut all, &spools::Op::Sum)?;
    let pulled = all[0];
    // The first round warms the buffers and connections.
    t_x.remove(0);
    if !t_m.is_empty() {
        t_m.remove(0);
    }
    if w.rank() == 0 {
        let (x, m) = (median(&mut t_x), median(&mut t_m));
        let (bx, bm) = (total as f64 / x / 1e9, total as f64 / m / 1e9);
        if a.common.json {
            print_json(&RedistReport {
                benchmark: "redist",
                ranks: w.size(),
                from: &a.from,
                to: &a.to,
                bytes: total,
                runs: sum.total_runs(),
                mean_run_bytes: sum.mean_run_bytes(),
                integrity: a.integrity,
                heap: a.heap,
                single_copy: !a.no_single_copy,
                pulled,
                redistribute_s: x,
                redistribute_gb_s: bx,
                memcpy_s: m,
                memcpy_gb_s: bm,
                ratio: bx / bm,
            })?;
        } else {
            println!(
                "redistribute {} -> {}: {} bytes, mean run {:.0} B, {} buffers, single copy {}: \
                 {:.2} GB/s, memcpy {:.2} GB/s, ratio {:.2}",
                a.from,
                a.to,
                total,
                sum.mean_run_bytes(),
                if a.heap { "shared-heap" } else { "ordinary" },
                if pulled > 0 { "taken" } else { "not taken" },
                bx,
                bm,
                bx / bm
            );
        }
    }
    w.finalize()?;
    Ok(())
}

/// `len` zero bytes, in the shared heap if `heap` (an empty buffer stays ordinary).
fn buffer(
    w: &spools::World,
    len: usize,
    heap: bool,
) -> Result<Box<dyn std::ops::DerefMut<Target = [u8]>>, BenchError> {
    Ok(if heap && len > 0 {
        Box::new(w.alloc::<u8>(len)?)
    } else {
        Box::new(vec![0u8; len])
    })
}
