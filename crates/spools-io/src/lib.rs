//! Spools parallel I/O: moving a distributed dataset in one call, following a plan
//! `M1^-1 o M2` (see `spools-map`), between ranks ([`redistribute`]), into and out of
//! parallel files ([`mod@file`]), and between two parallel programs ([`pipe`]).
//!
//! One engine ([`exchange`]) executes every plan: it packs each peer's runs into transfer
//! units, moves them with tagged messages, checksums while copying, and scatters them on
//! arrival, with two transfer units in flight per peer so packing, moving and unpacking
//! overlap.

mod crc;
mod cursor;
mod error;
mod exchange;
pub mod file;
pub mod pipe;
mod redistribute;

pub use crc::crc32c;
pub use error::{ExchangeError, FileError, PipeError, Side};
pub use exchange::{exchange, ExchangeOptions, ExchangeStats, Owners};
pub use redistribute::{redistribute, redistribute_plan};

/// The collective agreement after a local step: every rank learns whether any failed.
/// This rank's own error wins; otherwise the first failing rank is named by `remote`.
pub(crate) fn agree_with<T, E: From<spools_msg::MsgError>>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    remote: impl FnOnce(u32) -> E,
) -> Result<T, E> {
    let flag = [match &local {
        Ok(_) => u32::MAX,
        Err(_) => comm.rank(),
    }];
    let mut first = [0u32];
    let agreed = comm.allreduce(&flag, &mut first, &spools_msg::Op::Min);
    // This rank's own error wins, even when the agreement fails too (a peer that failed
    // first may have ended the job already): it is the cause this rank knows.
    match (local, agreed, first[0]) {
        (Err(e), _, _) => Err(e),
        (Ok(_), Err(e), _) => Err(e.into()),
        (Ok(v), Ok(()), u32::MAX) => Ok(v),
        (Ok(_), Ok(()), rank) => Err(remote(rank)),
    }
}

/// Checks that `layout` has no more units than `ranks` (rank `r` holds unit `r`: a unit
/// beyond the ranks would never be sent or received).
pub(crate) fn fit_ranks(
    layout: &spools_map::Layout,
    ranks: u32,
    side: Side,
) -> Result<(), ExchangeError> {
    let units = layout.units();
    if units > u64::from(ranks) {
        return Err(ExchangeError::TooManyUnits { side, units, ranks });
    }
    Ok(())
}

/// Bytes of rank `rank`'s share of `layout` (rank `r` holds unit `r`; none beyond the
/// layout's units).
pub(crate) fn share(
    layout: &spools_map::Layout,
    rank: u32,
) -> Result<u64, spools_map::LayoutError> {
    if u64::from(rank) < layout.units() {
        layout.local_bytes(u64::from(rank))
    } else {
        Ok(0)
    }
}

/// Feeds untrusted bytes to every decoder of the I/O layer (pipe hellos and frames, `.npy`
/// headers, manifests) and returns how many accepted them. For fuzzing and garbage tests:
/// it must never panic, hang, or allocate beyond the input's size.
#[doc(hidden)]
pub fn decode_untrusted(data: &[u8]) -> usize {
    let mut ok = 0;
    ok += usize::from(pipe::decode_any(data).is_ok());
    ok += usize::from(file::parse_npy_header(data).is_ok());
    ok += usize::from(file::Manifest::parse(std::path::Path::new("fuzz"), data).is_ok());
    ok
}

/// The parallel-I/O settings in effect, as `(name, value, meaning)`, for `spools info`.
/// The pipe settings come from the environment (`SPOOLS_PIPE_DIR`, `SPOOLS_PIPE_TIMEOUT`,
/// `SPOOLS_PIPE_HOST`); the others are fixed.
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
            "pipe_host",
            std::env::var("SPOOLS_PIPE_HOST").unwrap_or_else(|_| "127.0.0.1".into()),
            "address consumer ranks listen on (SPOOLS_PIPE_HOST)",
        ),
    ]
}
