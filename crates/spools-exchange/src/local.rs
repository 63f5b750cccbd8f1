//! The runs of a plan from one unit to another, both held by this rank: copied as strided
//! progressions, with no message and no other rank taking part ([`copy_local`]). The
//! engine copies between a rank's own units so; a sieved file read copies a window of
//! the file it read into its own storage so.

use spools_map::Plan;

use crate::bounds::{slice, slice_mut};
use crate::error::{ExchangeError, Side};
use crate::options::ExchangeStats;
use crate::short_copy::{copy_strided, span};

/// Copies the runs of `plan` from source unit `s`, whose local storage is `src`, to
/// destination unit `d`, whose local storage is `dst`; adds the bytes and runs to
/// `stats.local` and `stats.runs`. Not collective: nothing is sent.
///
/// ```
/// use spools_exchange::{copy_local, ExchangeStats};
/// use spools_map::{Layout, Plan};
/// // The file's bytes as one unit, to rank 1 of a cyclic vector on 2.
/// let file: Layout = "stripe(unit=8B,count=1)".parse()?;
/// let mine: Layout = "u8[8] cyclic on 2".parse()?;
/// let plan = Plan::new(&file, &mine)?;
/// let mut out = [0u8; 4];
/// let mut stats = ExchangeStats::default();
/// copy_local(&plan, 0, b"abcdefgh", 1, &mut out, &mut stats)?;
/// assert_eq!((&out, stats.local), (b"bdfh", 4));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ExchangeError::BufferSize`]: `src` or `dst` is shorter than the runs reach;
/// [`ExchangeError::Plan`]: `s` or `d` is no unit of the plan's layouts.
pub fn copy_local(
    plan: &Plan,
    s: u64,
    src: &[u8],
    d: u64,
    dst: &mut [u8],
    stats: &mut ExchangeStats,
) -> Result<(), ExchangeError> {
    for p in plan.runs(s, d)?.strided() {
        let from = slice(
            Side::Source,
            s,
            src,
            p.src,
            span(p.len, p.count, p.src_stride),
        )?;
        let to = slice_mut(
            Side::Destination,
            d,
            dst,
            p.dst,
            span(p.len, p.count, p.dst_stride),
        )?;
        copy_strided(
            (to, p.dst_stride as usize),
            (from, p.src_stride as usize),
            p.len as usize,
            p.count as usize,
        );
        stats.local += p.bytes();
        stats.runs += p.count;
    }
    Ok(())
}
