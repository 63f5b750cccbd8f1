//! The parallel-I/O settings in effect, for `spools info`.

use crate::{file, pipe};
use spools_exchange::ExchangeOptions;

/// The parallel-I/O settings in effect, as `(name, value, meaning)`, for `spools info`.
/// The pipe settings come from the environment (`SPOOLS_PIPE_DIR`, `SPOOLS_PIPE_TIMEOUT`,
/// `SPOOLS_PIPE_SECRET`, `SPOOLS_PIPE_HOST`); the others are fixed.
pub fn settings() -> Vec<(&'static str, String, &'static str)> {
    let x = ExchangeOptions::default();
    vec![
        (
            "transfer_unit",
            format!("{} B", x.transfer_unit),
            "largest transfer unit of the exchange engine",
        ),
        (
            "window",
            x.window.to_string(),
            "transfer units in flight per peer and direction",
        ),
        (
            "direct_min_run",
            format!("{} B", file::DIRECT_MIN_RUN),
            "mean run from which ranks access a canonical file directly",
        ),
        (
            "pipe_dir",
            pipe::pipe_dir_path().display().to_string(),
            "meeting directory of pipe:NAME (SPOOLS_PIPE_DIR)",
        ),
        (
            "pipe_timeout",
            format!("{} s", pipe::meet_timeout().as_secs_f64()),
            "wait for the other program (SPOOLS_PIPE_TIMEOUT)",
        ),
        (
            "pipe_secret",
            std::env::var("SPOOLS_PIPE_SECRET").unwrap_or_else(|_| "none".into()),
            "secret proved at a tcp: pipe meeting (SPOOLS_PIPE_SECRET)",
        ),
        (
            "pipe_host",
            std::env::var("SPOOLS_PIPE_HOST").unwrap_or_else(|_| "bootstrap address".into()),
            "address consumer ranks listen on (SPOOLS_PIPE_HOST)",
        ),
    ]
}
