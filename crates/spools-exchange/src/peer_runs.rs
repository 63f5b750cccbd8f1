//! The runs between this rank and one peer ([`PeerRuns`]), moved through transfer units: packed from the
//! source buffers into a TU, unpacked from the TU into the destination runs (the ring
//! path, used between hosts and where a single copy is not possible).

use spools_map::{Plan, Strided};

use crate::bounds::{slice, slice_mut};
use crate::crc::{copy_crc, extend_crc, STEP};
use crate::error::{ExchangeError, Side};
use crate::options::ExchangeStats;
use crate::pieces::Pieces;
use crate::short_copy::{append_run, copy_run, gather, scatter, span};

/// The runs of `peer` in `list`, added if missing.
pub(super) fn peer_runs_for(list: &mut Vec<PeerRuns>, peer: u32) -> &mut PeerRuns {
    let i = match list.iter().position(|s| s.peer == peer) {
        Some(i) => i,
        None => {
            list.push(PeerRuns::new(peer));
            list.len() - 1
        }
    };
    &mut list[i]
}

/// The runs between this rank and one peer, consumed a transfer unit at a time.
pub(super) struct PeerRuns {
    pub(super) peer: u32,
    /// (local buffer index, source unit, destination unit), in the order they move.
    pub(super) pairs: Vec<(usize, u64, u64)>,
    next_pair: usize,
    buf: usize,
    units: (u64, u64),
    runs: Option<Pieces>,
    /// Payload bytes of all the runs.
    pub(super) total: u64,
    /// Payload bytes not yet packed or unpacked.
    pub(super) remaining: u64,
    /// Receives posted.
    pub(super) posted: u64,
    /// Transfer units unpacked.
    pub(super) done: u64,
    /// Received transfer units waiting for their turn: (index, buffer, length).
    pub(super) ready: Vec<(u64, Vec<u8>, usize)>,
}

impl PeerRuns {
    pub(super) fn new(peer: u32) -> Self {
        PeerRuns {
            peer,
            pairs: Vec::new(),
            next_pair: 0,
            buf: 0,
            units: (0, 0),
            runs: None,
            total: 0,
            remaining: 0,
            posted: 0,
            done: 0,
            ready: Vec::new(),
        }
    }

    /// Counts the runs' bytes into `total` and `remaining`.
    pub(super) fn count(&mut self, plan: &Plan) -> Result<(), ExchangeError> {
        let mut bytes = 0;
        for &(_, s, d) in &self.pairs {
            bytes += plan.bytes(s, d)?;
        }
        self.total = bytes;
        self.remaining = bytes;
        Ok(())
    }

    /// Mean bytes per piece of the source's memory among the first `n` runs (0
    /// when empty): a progression of runs of at least `spread` bytes that lie one after
    /// the other at the source is one piece (the pull reads it as one), any other run a
    /// piece of its own.
    pub(super) fn sample_mean_piece(
        &self,
        plan: &Plan,
        n: usize,
        spread: u64,
    ) -> Result<u64, ExchangeError> {
        let (mut bytes, mut runs, mut pieces) = (0u64, 0u64, 0u64);
        let n = n as u64;
        'pairs: for &(_, s, d) in &self.pairs {
            for p in plan.runs(s, d)?.strided().filter(|p| p.len > 0) {
                let k = p.count.min(n - runs);
                bytes += k * p.len;
                runs += k;
                pieces += if p.src_stride == p.len && p.len >= spread {
                    1
                } else {
                    k
                };
                if runs >= n {
                    break 'pairs;
                }
            }
        }
        Ok(bytes.checked_div(pieces).unwrap_or(0))
    }

    /// The length of the next receive to post, if any remain.
    pub(super) fn next_len(&mut self, tu: usize, integrity: bool) -> Option<usize> {
        let already = self.posted * tu as u64;
        if already >= self.total {
            return None;
        }
        self.posted += 1;
        let n = (self.total - already).min(tu as u64) as usize;
        Some(n + if integrity { 4 } else { 0 })
    }

    /// The next piece of at most `limit` bytes: (buffer index, runs).
    fn take(&mut self, plan: &Plan, limit: u64) -> Result<Option<(usize, Strided)>, ExchangeError> {
        loop {
            if let Some(c) = &mut self.runs {
                if let Some(r) = c.take(limit) {
                    return Ok(Some((self.buf, r)));
                }
                self.runs = None;
            }
            let Some(&(b, s, d)) = self.pairs.get(self.next_pair) else {
                return Ok(None);
            };
            self.next_pair += 1;
            self.buf = b;
            self.units = (s, d);
            self.runs = Some(Pieces::new(plan.runs(s, d)?.strided()));
        }
    }

    /// Packs the next transfer unit into `out` (reused).
    pub(super) fn pack(
        &mut self,
        plan: &Plan,
        src: &[(u64, &[u8])],
        mut out: Vec<u8>,
        tu: usize,
        integrity: bool,
        stats: &mut ExchangeStats,
    ) -> Result<Vec<u8>, ExchangeError> {
        out.clear();
        let mut crc = 0u32;
        // The transfer unit's bytes up to here are in `crc`: checksummed in steps of at
        // least `STEP` bytes while they are still in the cache, however short the runs.
        let mut summed = 0usize;
        while out.len() < tu {
            let Some((b, p)) = self.take(plan, (tu - out.len()) as u64)? else {
                break;
            };
            let from = slice(
                Side::Source,
                self.units.0,
                src[b].1,
                p.src,
                span(p.len, p.count, p.src_stride),
            )?;
            match p.count {
                1 if integrity && out.len() == summed => {
                    crc = extend_crc(&mut out, from, crc);
                    summed = out.len();
                }
                1 => append_run(&mut out, from),
                _ => gather(
                    &mut out,
                    from,
                    p.src_stride as usize,
                    p.len as usize,
                    p.count as usize,
                ),
            }
            if integrity && out.len() - summed >= STEP {
                crc = crc32c::crc32c_append(crc, &out[summed..]);
                summed = out.len();
            }
            stats.runs += p.count;
        }
        if integrity && out.len() > summed {
            crc = crc32c::crc32c_append(crc, &out[summed..]);
        }
        self.remaining -= out.len() as u64;
        stats.sent += out.len() as u64;
        stats.messages += 1;
        if integrity {
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Ok(out)
    }

    /// Scatters one arrived transfer unit.
    pub(super) fn unpack(
        &mut self,
        plan: &Plan,
        dst: &mut [(u64, &mut [u8])],
        data: &[u8],
        tu: usize,
        integrity: bool,
        stats: &mut ExchangeStats,
    ) -> Result<(), ExchangeError> {
        let index = self.done;
        self.done += 1;
        let expected = self.remaining.min(tu as u64) as usize;
        let (payload, sent) = if integrity {
            let Some((p, c)) = data.split_last_chunk::<4>() else {
                return Err(ExchangeError::Length {
                    from: self.peer,
                    index,
                    expected: 4,
                    got: data.len(),
                });
            };
            (p, Some(u32::from_le_bytes(*c)))
        } else {
            (data, None)
        };
        if payload.len() != expected {
            return Err(ExchangeError::Length {
                from: self.peer,
                index,
                expected,
                got: payload.len(),
            });
        }
        let mut at = 0usize;
        let mut crc = 0u32;
        // As in `pack`: the payload up to `summed` is in `crc`.
        let mut summed = 0usize;
        while at < payload.len() {
            let Some((b, p)) = self.take(plan, (payload.len() - at) as u64)? else {
                break;
            };
            let n = p.bytes() as usize;
            let to = slice_mut(
                Side::Destination,
                self.units.1,
                dst[b].1,
                p.dst,
                span(p.len, p.count, p.dst_stride),
            )?;
            let from = &payload[at..at + n];
            match p.count {
                1 if integrity && at == summed => {
                    crc = copy_crc(to, from, crc);
                    summed = at + n;
                }
                1 => copy_run(to, from),
                _ => scatter(to, p.dst_stride as usize, from, p.len as usize),
            }
            at += n;
            if integrity && at - summed >= STEP {
                crc = crc32c::crc32c_append(crc, &payload[summed..at]);
                summed = at;
            }
        }
        if integrity && at > summed {
            crc = crc32c::crc32c_append(crc, &payload[summed..at]);
        }
        self.remaining -= payload.len() as u64;
        stats.received += payload.len() as u64;
        if let Some(sent) = sent {
            if sent != crc {
                return Err(ExchangeError::Checksum {
                    from: self.peer,
                    index,
                    sent,
                    got: crc,
                });
            }
        }
        Ok(())
    }
}
