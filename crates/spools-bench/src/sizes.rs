//! Message sizes: parsing them, the ping-pong's default list, and iterations per size.

use crate::error::BenchError;

/// The ping-pong's sizes when none are given: 8 B to 64 MiB.
const PINGPONG_SIZES: [usize; 11] = [
    8,
    64,
    512,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
];

/// Parses `8`, `64K`, `1M`, `1MiB`.
pub(crate) fn parse_size(s: &str) -> Result<usize, BenchError> {
    let n = spools_boot::config::parse_size(s).map_err(|reason| BenchError::Size {
        spec: s.to_string(),
        reason,
    })?;
    usize::try_from(n).map_err(BenchError::SizeTooLarge)
}

/// Parses every size of a list.
pub(crate) fn parse_sizes(list: &[String]) -> Result<Vec<usize>, BenchError> {
    list.iter().map(|s| parse_size(s)).collect()
}

/// The sizes of a ping-pong: those given, else the default list.
pub(crate) fn pingpong_sizes(given: Option<&[String]>) -> Result<Vec<usize>, BenchError> {
    match given {
        Some(list) => parse_sizes(list),
        None => Ok(PINGPONG_SIZES.to_vec()),
    }
}

/// Iterations for a size: about 50 ms per batch, estimating a round trip as 0.6 us plus
/// the bytes at 10 GB/s each way.
pub(crate) fn pingpong_iters(bytes: usize) -> u64 {
    let round_trip_us = 0.6 + bytes as f64 / 5_000.0;
    ((50_000.0 / round_trip_us) as u64).clamp(4, 50_000)
}
