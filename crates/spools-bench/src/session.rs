//! Starting the runtime for a benchmark and asking it about the job.

use spools::{Config, TransportChoice, World};

use crate::args::CommonArgs;
use crate::error::{ensure, BenchError};

/// Starts the runtime with the benchmark's transport.
pub(crate) fn start(c: &CommonArgs) -> Result<World, BenchError> {
    let mut cfg = Config::load().map_err(BenchError::Config)?;
    match c.transport.as_deref() {
        Some("shm") => cfg.transport = TransportChoice::Shm,
        Some("tcp") => cfg.transport = TransportChoice::Tcp,
        Some("ofi") => cfg.transport = TransportChoice::Ofi,
        Some(_) => cfg.transport = TransportChoice::Auto,
        None => {}
    }
    let env = spools_boot::identity::JobEnv::from_env().map_err(BenchError::JobEnv)?;
    spools::init_with(cfg, env).map_err(BenchError::Init)
}

/// The transport that carries traffic to `peer`, by name.
pub(crate) fn transport_name(w: &World, peer: u32) -> &'static str {
    match w.worker().route(peer) {
        Ok(spools::Route::Shm) => "shm",
        Ok(spools::Route::Net) if w.ofi().is_some() => "ofi",
        Ok(spools::Route::Net) => "tcp",
        _ => "self",
    }
}

/// Fails unless the job has exactly two ranks.
pub(crate) fn need_two(w: &World, what: &str) -> Result<(), BenchError> {
    ensure!(
        w.size() == 2,
        "`spools bench {what}` needs exactly 2 ranks: spools run -n 2 -- spools bench {what}"
    );
    Ok(())
}

/// Rank `rank`'s `f64` out of an allgather of one `f64` per rank (0 if it is short).
pub(crate) fn f64_of(all: &[Vec<u8>], rank: usize) -> f64 {
    let bytes = all
        .get(rank)
        .and_then(|b| b.get(..8))
        .and_then(|b| b.try_into().ok())
        .unwrap_or([0; 8]);
    f64::from_le_bytes(bytes)
}
