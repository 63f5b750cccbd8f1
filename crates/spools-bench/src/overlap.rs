//! `spools bench overlap`: SCI-MPICH's overlap benchmark (Fig. 10/11). Rank 0 sends a
//! message to rank 1 and computes for a given time; the total time from the start of the
//! send to the end of both is reported against the computation time for
//! - *blocking*: send, then compute;
//! - *nonblocking*: isend, compute (without calling Spools), wait.
//!
//! Whether a progress thread runs comes from the configuration (run once with
//! `SPOOLS_PROGRESS_THREAD=1`); it is printed with the results. Rank 1 receives with a
//! posted receive and waits. The break-even point is the shortest computation at which
//! the non-blocking total is within 10% of the computation alone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::args::OverlapArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::session::{need_two, start};
use crate::sizes::parse_sizes;
use crate::stats::{median, rounded};

/// How rank 0 sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Send, then compute.
    Blocking,
    /// Isend, compute, wait.
    Nonblocking,
}

/// The total time at one computation time.
#[derive(Debug, Serialize)]
struct OverlapPoint {
    /// Computation, milliseconds.
    compute_ms: u64,
    /// From the start of the send until both ranks are done, milliseconds (median).
    #[serde(serialize_with = "rounded::<4, _>")]
    total_ms: f64,
}

/// One mode at one message size.
#[derive(Debug, Serialize)]
struct OverlapSeries {
    /// How rank 0 sends.
    mode: Mode,
    /// Message size.
    bytes: usize,
    /// By computation time.
    points: Vec<OverlapPoint>,
}

/// The document of `spools bench overlap --json`.
#[derive(Debug, Serialize)]
struct OverlapReport<'a> {
    /// Always `overlap`.
    benchmark: &'static str,
    /// Whether a progress thread ran.
    progress_thread: bool,
    /// One bit of the computation's result (so that it is not optimised away).
    sink: u64,
    /// Per mode and size.
    series: &'a [OverlapSeries],
    /// By message size: the shortest computation the non-blocking send hides behind.
    break_even_ms: BTreeMap<String, Option<u64>>,
}

/// Computes for `d` without calling Spools; returns a value so it is not optimised away.
fn compute(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 1u64;
    while t.elapsed() < d {
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    x
}

/// The shortest computation at which the non-blocking total of `bytes` is within 10 % of
/// the computation alone.
fn break_even(series: &[OverlapSeries], bytes: usize) -> Option<u64> {
    series
        .iter()
        .find(|s| s.mode == Mode::Nonblocking && s.bytes == bytes)
        .and_then(|s| {
            s.points
                .iter()
                .find(|p| p.compute_ms > 0 && p.total_ms <= 1.1 * p.compute_ms as f64)
                .map(|p| p.compute_ms)
        })
}

/// Runs the overlap benchmark.
pub(crate) fn run(a: &OverlapArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    need_two(&w, "overlap")?;
    let me = w.rank();
    let threaded = w.worker().config().progress_thread;
    let sizes = parse_sizes(&a.sizes)?;
    let reps = a.common.reps.max(1);
    let mut series = Vec::new();
    let mut sink = 0u64;
    for &s in &sizes {
        let data = vec![0x42u8; s];
        for mode in [Mode::Blocking, Mode::Nonblocking] {
            let mut points = Vec::new();
            for &ms in &a.compute_ms {
                let d = Duration::from_millis(ms);
                let mut v = Vec::new();
                for _ in 0..=reps {
                    w.barrier()?;
                    let t = Instant::now();
                    if me == 0 {
                        if mode == Mode::Blocking {
                            w.send(&data, 1, 0)?;
                            sink ^= compute(d);
                        } else {
                            let r = w.isend(data.clone(), 1, 0)?;
                            sink ^= compute(d);
                            r.wait()?;
                        }
                    } else {
                        let r = w.irecv(vec![0u8; s], 0, 0)?;
                        r.wait()?;
                    }
                    // The job's time: both ranks done.
                    w.barrier()?;
                    v.push(t.elapsed().as_secs_f64() * 1e3);
                }
                v.remove(0);
                points.push(OverlapPoint {
                    compute_ms: ms,
                    total_ms: median(&mut v),
                });
            }
            series.push(OverlapSeries {
                mode,
                bytes: s,
                points,
            });
        }
    }
    if me == 0 {
        if a.common.json {
            print_json(&OverlapReport {
                benchmark: "overlap",
                progress_thread: threaded,
                sink: sink % 2,
                series: &series,
                break_even_ms: sizes
                    .iter()
                    .map(|&s| (s.to_string(), break_even(&series, s)))
                    .collect(),
            })?;
        } else {
            println!("# overlap: total ms against computation ms, progress thread {threaded} (medians of {reps})");
            println!(
                "{:>12} {:>10} {:>11} {:>10}",
                "mode", "bytes", "compute_ms", "total_ms"
            );
            for s in &series {
                let m = match s.mode {
                    Mode::Blocking => "blocking",
                    Mode::Nonblocking => "nonblocking",
                };
                for p in &s.points {
                    println!(
                        "{m:>12} {:>10} {:>11} {:>10.3}",
                        s.bytes, p.compute_ms, p.total_ms
                    );
                }
            }
            for &s in &sizes {
                println!("# break-even for {s} B: {:?} ms", break_even(&series, s));
            }
        }
    }
    w.finalize()?;
    Ok(())
}
