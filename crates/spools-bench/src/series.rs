//! Latency against message size: the points and series of the ping-pongs, as reported,
//! serialised and plotted.

use serde::Serialize;

use crate::stats::rounded;

/// One measured point: a message size and its one-way latency.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Point {
    /// Message size in bytes.
    pub(crate) bytes: usize,
    /// One-way latency (half the round trip), microseconds.
    #[serde(serialize_with = "rounded::<4, _>")]
    pub(crate) latency_us: f64,
    /// Bytes per microsecond, i.e. MB/s.
    #[serde(rename = "bandwidth_MBps", serialize_with = "rounded::<1, _>")]
    pub(crate) mbps: f64,
}

impl Point {
    /// The point of `bytes` moved one way in `latency_us`.
    pub(crate) fn new(bytes: usize, latency_us: f64) -> Point {
        Point {
            bytes,
            latency_us,
            mbps: bytes as f64 / latency_us.max(1e-9),
        }
    }
}

/// The points of one path (`short`, `bulk`, `memory`, `tagged`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Series {
    /// The path's name.
    pub(crate) path: &'static str,
    /// Its points, by size.
    pub(crate) points: Vec<Point>,
}
