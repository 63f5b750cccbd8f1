//! Steps every I/O operation shares across its ranks: agreeing on the outcome of a local
//! step, checking that a layout's units fit the ranks, and a rank's share of a layout.

use crate::error::{ExchangeError, Side};

/// The collective agreement after a local step: every rank learns whether any failed.
/// This rank's own error wins; otherwise the first failing rank is named by `remote`.
pub(crate) fn agree_on_outcome<T, E: From<spools_msg::MsgError>>(
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
pub(crate) fn rank_bytes(
    layout: &spools_map::Layout,
    rank: u32,
) -> Result<u64, spools_map::LayoutError> {
    if u64::from(rank) < layout.units() {
        layout.local_bytes(u64::from(rank))
    } else {
        Ok(0)
    }
}
