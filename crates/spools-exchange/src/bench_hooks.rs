//! The ring path's hot loops, reachable from benchmarks: packing one (source unit,
//! destination unit) stream into transfer units and scattering them back.

use spools_map::Plan;

use crate::error::ExchangeError;
use crate::options::ExchangeStats;
use crate::peer_runs::PeerRuns;

fn stream(plan: &Plan, s: u64, d: u64) -> Result<PeerRuns, ExchangeError> {
    let mut st = PeerRuns::new(0);
    st.pairs.push((0, s, d));
    st.count(plan)?;
    Ok(st)
}

/// Packs the runs from source unit `s` (stored in `src`) to destination unit `d` into
/// transfer units of `tu` bytes, appending them all to `out` (cleared first). Returns the
/// runs packed.
///
/// # Errors
/// [`ExchangeError`] if the plan has no such units or `src` is too small.
#[doc(hidden)]
pub fn pack_stream(
    plan: &Plan,
    s: u64,
    d: u64,
    src: &[u8],
    tu: usize,
    out: &mut Vec<u8>,
) -> Result<u64, ExchangeError> {
    let mut st = stream(plan, s, d)?;
    let mut stats = ExchangeStats::default();
    let mut tu_buf = Vec::with_capacity(tu);
    out.clear();
    while st.remaining > 0 {
        tu_buf = st.pack(plan, &[(s, src)], tu_buf, tu, false, &mut stats)?;
        out.extend_from_slice(&tu_buf);
    }
    Ok(stats.runs)
}

/// Scatters `packed` (what [`pack_stream`] made for the same units and `tu`) into `dst`,
/// destination unit `d`'s storage.
///
/// # Errors
/// [`ExchangeError`] if the plan has no such units, `dst` is too small or `packed` is not
/// the stream's length.
#[doc(hidden)]
pub fn unpack_stream(
    plan: &Plan,
    s: u64,
    d: u64,
    packed: &[u8],
    tu: usize,
    dst: &mut [u8],
) -> Result<(), ExchangeError> {
    let mut st = stream(plan, s, d)?;
    let mut stats = ExchangeStats::default();
    for part in packed.chunks(tu.max(1)) {
        st.unpack(plan, &mut [(d, dst)], part, tu, false, &mut stats)?;
    }
    Ok(())
}
