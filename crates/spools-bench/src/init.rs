//! `spools bench init`: the time `init` took on every rank.

use serde::Serialize;

use crate::args::CommonArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::session::{f64_of, start};

/// The document of `spools bench init --json`.
#[derive(Debug, Serialize)]
struct InitReport {
    /// Always `init`.
    benchmark: &'static str,
    /// Ranks of the job.
    ranks: u32,
    /// Milliseconds `init` took, by rank.
    init_ms: Vec<f64>,
}

/// Runs the init benchmark.
pub(crate) fn run(c: &CommonArgs) -> Result<(), BenchError> {
    let w = start(c)?;
    let mine = w.init_time().as_secs_f64() * 1e3;
    let all = w.allgather_bytes(&mine.to_le_bytes())?;
    if w.rank() == 0 {
        let ms: Vec<f64> = (0..all.len()).map(|r| f64_of(&all, r)).collect();
        if c.json {
            print_json(&InitReport {
                benchmark: "init",
                ranks: w.size(),
                init_ms: ms,
            })?;
        } else {
            for (r, t) in ms.iter().enumerate() {
                println!("rank {r}: init {t:.2} ms");
            }
        }
    }
    w.finalize()?;
    Ok(())
}
