//! Collective steps both file formats share: agreeing on an outcome, checking a rank's
//! buffer, deciding whether to reshuffle, sums over the ranks.

use std::path::Path;

use spools_map::Layout;
use spools_msg::{Communicator, Op};

use crate::error::{ExchangeError, FileError, Side};
use crate::exchange::ExchangeOptions;
use crate::file::options::{Reshuffle, DIRECT_MIN_RUN};

/// The collective end of an operation: every rank learns whether any failed. This rank's
/// own error wins; otherwise the first failing rank is named.
pub(crate) fn agree_on_outcome<T>(
    comm: &Communicator,
    path: &Path,
    local: Result<T, FileError>,
) -> Result<T, FileError> {
    crate::collective::agree_on_outcome(comm, local, |rank| FileError::Remote {
        rank,
        path: path.to_path_buf(),
    })
}

/// Exchange options with or without checksums.
pub(crate) fn integrity(on: bool) -> ExchangeOptions {
    ExchangeOptions {
        integrity: on,
        ..ExchangeOptions::default()
    }
}

/// Sums a count over all ranks.
pub(crate) fn sum(comm: &Communicator, x: u64) -> Result<u64, FileError> {
    let mut out = [0u64];
    comm.allreduce(&[x], &mut out, &Op::Sum)?;
    Ok(out[0])
}

/// Whether to reshuffle, decided identically on every rank from the mean run length of
/// `layout` (over the ranks that hold a unit).
pub(crate) fn decide(
    comm: &Communicator,
    layout: &Layout,
    choice: Reshuffle,
) -> Result<bool, FileError> {
    Ok(match choice {
        Reshuffle::Always => true,
        Reshuffle::Never => false,
        Reshuffle::Auto => {
            let (runs, bytes) = run_totals(comm, layout)?;
            runs > 0 && bytes / runs < DIRECT_MIN_RUN
        }
    })
}

/// The runs and bytes of `layout` over all ranks (those that hold a unit). Collective.
pub(crate) fn run_totals(comm: &Communicator, layout: &Layout) -> Result<(u64, u64), FileError> {
    let me = u64::from(comm.rank());
    let (mut runs, mut bytes) = (0u64, 0u64);
    if me < layout.units() {
        for e in layout.extents(me)? {
            runs += 1;
            bytes += e.len;
        }
    }
    let mut out = [0u64; 2];
    comm.allreduce(&[runs, bytes], &mut out, &Op::Sum)?;
    Ok((out[0], out[1]))
}

/// Checks that `data` holds this rank's share of `layout`, which must fit the ranks
/// (`side`: the source for a write, the destination for a read).
pub(crate) fn check_share(
    comm: &Communicator,
    layout: &Layout,
    len: usize,
    side: Side,
) -> Result<(), FileError> {
    crate::collective::fit_ranks(layout, comm.size(), side)?;
    let units = layout.units();
    let me = u64::from(comm.rank());
    let need = if me < units {
        layout.local_bytes(me)?
    } else {
        0
    };
    if (len as u64) < need {
        return Err(ExchangeError::BufferSize {
            side,
            unit: me,
            need,
            got: len as u64,
        }
        .into());
    }
    Ok(())
}
