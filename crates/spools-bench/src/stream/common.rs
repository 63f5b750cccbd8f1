//! What the parts of `spools bench stream` share: the runs of one configuration and their
//! median ([`Timing`]), and the outcomes and receiver address every rank agrees on.

use std::net::SocketAddr;

use serde::Serialize;
use spools::World;

use crate::error::{bail, BenchError};
use crate::stats::{median, rounded};

/// The runs of one configuration and their median.
#[derive(Debug, Default, Serialize)]
pub(super) struct Timing<R> {
    /// Every run, in order.
    pub(super) runs: Vec<R>,
    /// Median seconds.
    #[serde(serialize_with = "rounded::<6, _>")]
    pub(super) median_s: f64,
    /// Bytes of one run over the median seconds, MB/s.
    #[serde(serialize_with = "rounded::<1, _>")]
    pub(super) mb_per_s: f64,
}

impl<R> Timing<R> {
    pub(super) fn new() -> Timing<R> {
        Timing {
            runs: Vec::new(),
            median_s: 0.0,
            mb_per_s: 0.0,
        }
    }

    /// Sets the median and the rate from the runs' seconds and bytes.
    pub(super) fn summarise(&mut self, secs: impl Fn(&R) -> f64, bytes: u64) {
        let mut s: Vec<f64> = self.runs.iter().map(secs).collect();
        self.median_s = median(&mut s);
        self.mb_per_s = bytes as f64 / self.median_s.max(1e-9) / 1e6;
    }
}

/// An outcome agreed by every rank: this rank's error message (empty when fine) gathered;
/// the first rank's error fails the call everywhere.
pub(super) fn agree(w: &World, mine: Result<(), BenchError>) -> Result<(), BenchError> {
    let msg = match &mine {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    };
    let all = w.allgather_bytes(msg.as_bytes())?;
    if let Some((r, m)) = all.iter().enumerate().find(|(_, m)| !m.is_empty()) {
        bail!("rank {r}: {}", String::from_utf8_lossy(m));
    }
    Ok(())
}

/// The address of the receiver rank 0 started (`Some` there, `None` elsewhere), on every
/// rank; rank 0's failure to start it fails the call on every rank.
pub(super) fn receiver_addr(
    w: &World,
    started: Option<Result<SocketAddr, String>>,
) -> Result<SocketAddr, BenchError> {
    let text = match &started {
        Some(Ok(a)) => a.to_string(),
        _ => String::new(),
    };
    agree(
        w,
        match started {
            Some(Err(e)) => Err(BenchError::Invalid(e)),
            _ => Ok(()),
        },
    )?;
    let dest = w.bcast_bytes(0, text.as_bytes())?;
    match String::from_utf8_lossy(&dest).parse::<SocketAddr>() {
        Ok(a) => Ok(a),
        Err(_) => bail!("the receiver's address did not reach every rank"),
    }
}
