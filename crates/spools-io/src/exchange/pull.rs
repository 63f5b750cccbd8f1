//! The single-copy protocol between two ranks of one host: the source describes where
//! its buffers are ([`Descriptor`]), the destination copies the stream's runs straight
//! from there into its own buffers and answers ([`Reply`]); the source returns only
//! after that answer.

use spools_map::Plan;

use super::bounds::slice_mut;
use super::cma::{refused, CmaError, CmaReader};
use super::descriptor::{Area, Descriptor};
use super::options::ExchangeStats;
use super::stream::Stream;
use crate::error::{ExchangeError, Side};

/// Streams shorter than this go through transfer units: the two protocol messages and a
/// system call cost more than one eager message.
const MIN_BYTES: u64 = 16 * 1024;

/// Streams whose mean run is shorter than this go through transfer units: the kernel
/// pins each iovec's pages, which costs more than packing short runs.
const MIN_RUN: u64 = 256;

/// Whether the stream with `peer` is pulled (both ends decide the same from the plan).
pub(super) fn pulls(single_copy: bool, same_host: bool, st: &Stream) -> bool {
    single_copy && same_host && st.total >= MIN_BYTES && st.mean_run() >= MIN_RUN
}

/// The descriptor of the source buffers of stream `st` (of this rank's `src`).
pub(super) fn describe(st: &Stream, src: &[(u64, &[u8])]) -> Descriptor {
    let mut areas: Vec<Area> = Vec::new();
    for &(b, s, _) in &st.pairs {
        if !areas.iter().any(|a| a.unit == s) {
            areas.push(Area {
                unit: s,
                addr: src[b].1.as_ptr() as u64,
                len: src[b].1.len() as u64,
            });
        }
    }
    Descriptor {
        pid: std::process::id(),
        areas,
    }
}

/// Bytes of the largest descriptor `st`'s source can send.
pub(super) fn descriptor_capacity(st: &Stream) -> usize {
    let mut units: Vec<u64> = st.pairs.iter().map(|p| p.1).collect();
    units.sort_unstable();
    units.dedup();
    Descriptor {
        pid: 1,
        areas: vec![
            Area {
                unit: 0,
                addr: 0,
                len: 0
            };
            units.len()
        ],
    }
    .encode()
    .len()
}

/// What pulling one stream came to.
pub(super) enum Pulled {
    /// Every run was copied.
    Done,
    /// This process may not read the peer's memory: the stream must go through the
    /// rings.
    Refused,
}

/// Copies every run of stream `st` (received from `st.peer`) from the buffers `desc`
/// describes into `dst`.
///
/// # Errors
/// [`ExchangeError::Descriptor`] for a descriptor that does not cover the stream,
/// [`ExchangeError::Pull`] for a failed read, [`ExchangeError::BufferSize`].
pub(super) fn pull(
    st: &Stream,
    plan: &Plan,
    dst: &mut [(u64, &mut [u8])],
    desc: &Descriptor,
    stats: &mut ExchangeStats,
) -> Result<Pulled, ExchangeError> {
    if refused() {
        return Ok(Pulled::Refused);
    }
    let from = st.peer;
    let mut reader = CmaReader::new(desc.pid);
    let fail = |e: CmaError| match e {
        CmaError::Refused => Ok(Pulled::Refused),
        CmaError::Failed(source) => Err(ExchangeError::Pull { from, source }),
    };
    let mut runs = 0;
    for &(b, s, d) in &st.pairs {
        let area = desc.area(from, s)?;
        for run in plan.runs(s, d)?.filter(|r| r.len > 0) {
            if run.src.checked_add(run.len).is_none_or(|end| end > area.len) {
                return Err(ExchangeError::Descriptor {
                    from,
                    what: "a run lies beyond the source buffer",
                });
            }
            let to = slice_mut(Side::Destination, d, dst[b].1, run.dst, run.len)?;
            if let Err(e) = reader.push(to, area.addr + run.src) {
                return fail(e);
            }
            runs += 1;
        }
    }
    if let Err(e) = reader.flush() {
        return fail(e);
    }
    stats.received += st.total;
    stats.pulled += st.total;
    stats.runs += runs;
    Ok(Pulled::Done)
}
