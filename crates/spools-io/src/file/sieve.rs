//! Sieved reads of the one-file formats whose dataset is one contiguous stream
//! (canonical, `.npy`, and MPI-IO's whole-array reads through `read_from`): where a
//! collective read's runs are short and every rank runs on one host, every rank reads
//! the windows of the file that hold its runs, one window at a time (checked against the
//! checksums where the call asks), and copies its runs out of each as
//! strided progressions (ROMIO's *data sieving*, applied to a collective read). No rank
//! aggregates, nothing is exchanged and no rank waits for another: the file's bytes are
//! read from the host's page cache by each rank whose runs lie in them (at most the
//! ranks' count times the file), where the exchange would move every short run through
//! an aggregator and the shared memory twice.
//!
//! A window is planned as one round of the collective buffer is ([`rounds`]): a slab of
//! the array where windows start at whole periods of its slowest dimension, else by rows
//! (`Plan::window`, arrays of two or more dimensions); a layout whose windows are
//! neither is not read sieved.

use std::fs::File;
use std::path::Path;

use spools_exchange::copy_local;
use spools_map::{Layout, Plan};
use spools_msg::Communicator;

use crate::error::FileError;
use crate::file::options::{FileStats, Reshuffle};
use crate::file::rounds::{self, Rounds};
use crate::file::steps::Opening;
use crate::file::sums::Verify;
use crate::file::sys;

/// A read is sieved only where the layout's runs are shorter than this on average
/// (bytes): there each run costs the exchange far more than its bytes cost a copy.
/// Measured at 3 and 4 ranks, 32 MiB: 4- and 8-byte runs read in half the exchange's
/// time, 16-byte runs a little faster, 32-byte runs no faster.
const SIEVE_MAX_RUN: u64 = 32;

/// The bytes of the file a rank reads at once (or the collective buffer where smaller;
/// moved up by at most 1/16 to whole slab periods, [`rounds::slab_chunk`]): each
/// window is planned anew, which 256 KiB windows paid for (1.5x the time of 1 MiB ones,
/// 3 and 4 ranks, `i32[134,250,250] *,*,cyclic`); 4 MiB read a little faster than 1 MiB
/// and no slower than 16 MiB.
const SIEVE_WINDOW: u64 = 1 << 22;

/// The windows of a sieved read of `layout`'s `total` bytes, where the read is sieved:
/// the reshuffle left to Spools (`choice` is [`Reshuffle::Auto`]), runs shorter than
/// [`SIEVE_MAX_RUN`] on average (the opening's counts), every rank of `comm` on one
/// host, and `layout` an array whose windows are slabs or planned by rows. The same
/// answer on every rank (from what every rank agreed on or knows alike: not from a
/// rank's own options that the opening does not compare, such as checksums); not
/// collective.
pub(super) fn windows(
    comm: &Communicator,
    opening: &Opening,
    layout: &Layout,
    total: u64,
    choice: Reshuffle,
) -> Option<Rounds> {
    let short = opening.runs > 0 && opening.bytes / opening.runs < SIEVE_MAX_RUN;
    let hosts = comm.hosts();
    let one_host = hosts.windows(2).all(|w| w[0] == w[1]);
    if choice != Reshuffle::Auto || !short || !one_host || total == 0 {
        return None;
    }
    if !matches!(layout, Layout::Array(_)) {
        return None;
    }
    let chunk = opening.buffer.clamp(1, SIEVE_WINDOW);
    let full = Rounds::new(total, chunk, 1);
    if rounds::slabs_fit(layout, &full) || rounds::windows_fit(layout, &full) {
        return Some(full);
    }
    let moved = Rounds::new(total, rounds::slab_chunk(layout, chunk, 1, 1, total), 1);
    rounds::slabs_fit(layout, &moved).then_some(moved)
}

/// Reads this rank's share `data` of `layout` from `f` (at `path`, the dataset from byte
/// `off`), window by window of `w` ([`windows`]): each window that holds runs of this
/// rank is read whole, checked against the checksums where `verify` asks (every block
/// this rank reads), and its runs copied out. Not collective (`comm` names this rank
/// and the ranks that read). `stats` says a sieved read, of `comm`'s every rank, in
/// `w`'s windows, with the copies' counts (as `ExchangeStats::local` and
/// `ExchangeStats::runs`).
///
/// # Errors
/// [`FileError`]: a read failed or came short (the file changed under the call), or a
/// window could not be planned.
pub(super) fn read(
    (f, path, off): (&File, &Path, u64),
    layout: &Layout,
    comm: &Communicator,
    data: &mut [u8],
    w: &Rounds,
    (verify, stats): (&Verify<'_>, &mut FileStats),
) -> Result<(), FileError> {
    stats.reshuffled = false;
    stats.sieved = true;
    stats.aggregators = comm.size();
    stats.rounds = w.count();
    let copied = &mut stats.exchange;
    let me = u64::from(comm.rank());
    if me >= layout.units() || data.is_empty() {
        return Ok(());
    }
    let mut buf: Vec<u8> = Vec::new();
    for r in 0..w.count() {
        let (lo, hi) = w.window(r);
        let io = w.io_layout(r)?;
        let (plan, dst) = window_plan(layout, &io, (lo, hi), w.count() == 1, me, data)?;
        if plan.runs(0, me)?.next().is_none() {
            continue;
        }
        buf.resize((hi - lo) as usize, 0);
        sys::read_at(f, path, &mut buf, off + lo)?;
        verify.check([(lo, &buf[..])])?;
        copy_local(&plan, 0, &buf, me, dst, copied)?;
    }
    Ok(())
}

/// The plan from window `[lo, hi)` of the file, as `io`'s one unit, to this rank's
/// storage, and the part of `data` its destination offsets count from.
fn window_plan<'d>(
    layout: &Layout,
    io: &Layout,
    (lo, hi): (u64, u64),
    whole: bool,
    me: u64,
    data: &'d mut [u8],
) -> Result<(Plan, &'d mut [u8]), FileError> {
    if whole {
        return Ok((Plan::new(io, layout)?, data));
    }
    if let Layout::Array(a) = layout {
        if let Some(slab) = a.slab(lo, hi) {
            let (a0, a1) = slab.local_range(me)?;
            let dst = usize::try_from(a0)
                .ok()
                .zip(usize::try_from(a1).ok())
                .and_then(|(a0, a1)| data.get_mut(a0..a1))
                .ok_or(FileError::Options(
                    "the local storage is shorter than the layout's share",
                ))?;
            return Ok((Plan::new(io, &Layout::Array(slab.layout().clone()))?, dst));
        }
    }
    match io {
        Layout::Stripe(s) => Plan::window(layout, lo, s).map(|p| (p.reversed(), data)),
        _ => None,
    }
    .ok_or(FileError::Options(
        "a window of a sieved read is neither a slab nor planned by rows",
    ))
}
