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

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::probe::round;
use super::{median, need_two, parse_size, start, OverlapArgs};

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

pub(crate) fn run(a: &OverlapArgs) -> Result<()> {
    let w = start(&a.common)?;
    need_two(&w, "overlap")?;
    let me = w.rank();
    let threaded = w.worker().config().progress_thread;
    let sizes: Vec<usize> = a
        .sizes
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<_>>()?;
    let reps = a.common.reps.max(1);
    let mut series = Vec::new();
    let mut sink = 0u64;
    for &s in &sizes {
        let data = vec![0x42u8; s];
        for mode in ["blocking", "nonblocking"] {
            let mut pts = Vec::new();
            for &ms in &a.compute_ms {
                let d = Duration::from_millis(ms);
                let mut v = Vec::new();
                for _ in 0..=reps {
                    w.barrier()?;
                    let t = Instant::now();
                    if me == 0 {
                        if mode == "blocking" {
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
                pts.push((ms, median(&mut v)));
            }
            series.push((mode, s, pts));
        }
    }
    if me == 0 {
        let break_even = |s: usize| {
            series
                .iter()
                .find(|(m, b, _)| *m == "nonblocking" && *b == s)
                .and_then(|(_, _, pts)| {
                    pts.iter()
                        .find(|(c, t)| *c > 0 && *t <= 1.1 * *c as f64)
                        .map(|(c, _)| *c)
                })
        };
        if a.common.json {
            let doc = json!({
                "benchmark": "overlap",
                "progress_thread": threaded,
                "sink": sink % 2,
                "series": series.iter().map(|(m, b, pts)| json!({
                    "mode": m,
                    "bytes": b,
                    "points": pts.iter().map(|(c, t)| json!({"compute_ms": c, "total_ms": round(*t, 4)})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "break_even_ms": sizes.iter().map(|&s| (s.to_string(), json!(break_even(s)))).collect::<serde_json::Map<_, _>>(),
            });
            println!("{doc}");
        } else {
            println!("# overlap: total ms against computation ms, progress thread {threaded} (medians of {reps})");
            println!(
                "{:>12} {:>10} {:>11} {:>10}",
                "mode", "bytes", "compute_ms", "total_ms"
            );
            for (m, b, pts) in &series {
                for (c, t) in pts {
                    println!("{m:>12} {b:>10} {c:>11} {t:>10.3}");
                }
            }
            for &s in &sizes {
                println!("# break-even for {s} B: {:?} ms", break_even(s));
            }
        }
    }
    w.finalize()?;
    Ok(())
}
