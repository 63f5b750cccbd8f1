//! Collective steps both file formats share: agreeing on an outcome, checking a rank's
//! buffer, deciding whether to reshuffle, sums over the ranks.

use std::path::Path;

use spools_map::Layout;
use spools_msg::{Communicator, Op};

use crate::error::Told;
use crate::error::{ExchangeError, FileError, Side};
use crate::file::options::{Commit, Reshuffle, WriteOptions, DIRECT_MIN_RUN};
use spools_exchange::{Digest, ExchangeOptions};

/// The collective end of an operation: every rank learns whether any failed. This rank's
/// own error wins; otherwise the first failing rank is named.
pub(crate) fn agree_on_outcome<T>(
    comm: &Communicator,
    path: &Path,
    local: Result<T, FileError>,
) -> Result<T, FileError> {
    spools_exchange::collective::agree(comm, local, |rank, cause| FileError::Remote {
        rank,
        path: path.to_path_buf(),
        cause,
    })
}

/// The collective opening of a file operation that needs nothing else of [`open`] (a
/// striped file's, a Zarr array's): every rank learns whether any rank's own checks
/// failed (`local`), and whether every rank passed the same arguments (`args`, this
/// rank's [`Digest`] of them: [`write_args`], [`read_args`]), before anything is touched.
/// It is [`open`]'s one allgather, so that ranks that pass formats of different families
/// (one a `.npy` file, another a striped one) meet in the same collective and fail alike
/// instead of waiting in different ones.
///
/// # Errors
/// As [`open`].
pub(crate) fn agree_on_args<T>(
    comm: &Communicator,
    path: &Path,
    local: Result<T, FileError>,
    layout: &Layout,
    args: Digest,
) -> Result<T, FileError> {
    let asks = Asks {
        reshuffle: Reshuffle::Never,
        coll_buffer: None,
        checksums: None,
        commit: None,
    };
    open(comm, path, local, layout, &asks, args).map(|(v, _)| v)
}

/// What every rank of a write must pass alike: the layout and the format (with its
/// options: a striping, chunks, a dataset's name).
pub(crate) fn write_args(layout: &Layout, opts: &WriteOptions) -> Digest {
    Digest::of(&(layout, format!("{:?}", opts.format)))
}

/// What every rank of a read must pass alike: the layout.
pub(crate) fn read_args(layout: &Layout) -> Digest {
    Digest::of(layout)
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

/// The runs and bytes of `layout` over all ranks (those that hold a unit). Collective.
pub(crate) fn run_totals(comm: &Communicator, layout: &Layout) -> Result<(u64, u64), FileError> {
    let (runs, bytes) = own_run_totals(layout, comm.rank())?;
    let mut out = [0u64; 2];
    comm.allreduce(&[runs, bytes], &mut out, &Op::Sum)?;
    Ok((out[0], out[1]))
}

/// Runs of a share counted one by one before the rest are estimated ([`own_run_totals`]).
const COUNTED_RUNS: u64 = 1 << 14;

/// The runs and bytes of rank `me`'s share of `layout` (none beyond its units).
///
/// Up to [`COUNTED_RUNS`] runs are counted; a share with more is estimated from their mean
/// length (`bytes / mean`, rounded up), since walking millions of 4-byte runs only to
/// learn that they are short cost more than the I/O it decides on (a cyclic(1) file of
/// 8 MiB: 90 % of the write). The layouts' runs repeat (rows of an array's blocks, a
/// stripe's units), so the first ones stand for the rest; the count only chooses whether
/// to reshuffle and how many runs a round may hold, never where bytes go.
fn own_run_totals(layout: &Layout, me: u32) -> Result<(u64, u64), FileError> {
    let me = u64::from(me);
    if me >= layout.units() {
        return Ok((0, 0));
    }
    let total = layout.local_bytes(me)?;
    let (runs, bytes) = layout
        .extents(me)?
        .take(COUNTED_RUNS as usize)
        .fold((0u64, 0u64), |(n, b), e| (n + 1, b + e.len));
    if runs < COUNTED_RUNS || bytes >= total || bytes == 0 {
        return Ok((runs, total));
    }
    Ok((total.div_ceil(bytes.div_ceil(runs)).max(runs), total))
}

/// Checks that `data` holds this rank's share of `layout`, which must fit the ranks
/// (`side`: the source for a write, the destination for a read), unless a binding
/// declined this rank's part (`declined`).
pub(crate) fn check_share(
    comm: &Communicator,
    layout: &Layout,
    len: usize,
    side: Side,
    declined: Option<&crate::Cause>,
) -> Result<(), FileError> {
    if let Some(cause) = declined {
        return Err(FileError::Declined(cause.clone()));
    }
    spools_exchange::collective::fit_ranks(layout, comm.size(), side)?;
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

/// What the ranks learn from one another as a collective file operation opens
/// ([`open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Opening {
    /// Runs of the layout over the ranks (0 when not counted).
    pub(crate) runs: u64,
    /// Bytes of those runs.
    pub(crate) bytes: u64,
    /// The collective buffer per aggregator: the smallest choice over the ranks, never
    /// below the configuration's minimum (as [`rounds::buffer_size`]).
    ///
    /// [`rounds::buffer_size`]: crate::file::rounds::buffer_size
    pub(crate) buffer: u64,
}

impl Opening {
    /// Whether to reshuffle: with [`Reshuffle::Auto`], when the counted runs are shorter
    /// than [`DIRECT_MIN_RUN`] on average.
    pub(crate) fn reshuffle(&self, choice: Reshuffle) -> bool {
        match choice {
            Reshuffle::Always => true,
            Reshuffle::Never => false,
            Reshuffle::Auto => self.runs > 0 && self.bytes / self.runs < DIRECT_MIN_RUN,
        }
    }
}

/// What a rank asks of a collective file operation, which every rank must ask alike
/// ([`open`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asks {
    /// Whether to reshuffle.
    pub(crate) reshuffle: Reshuffle,
    /// The collective buffer asked for (`None`: the configuration's).
    pub(crate) coll_buffer: Option<usize>,
    /// Checksums (`None`: no question, as for a read).
    pub(crate) checksums: Option<bool>,
    /// How a write commits (`None`: no question).
    pub(crate) commit: Option<Commit>,
}

impl Asks {
    /// The choices as words: reshuffle, checksums, commit (the same on every rank, or the
    /// ranks take different paths).
    fn words(&self) -> [u64; 3] {
        let reshuffle = match self.reshuffle {
            Reshuffle::Auto => 0,
            Reshuffle::Always => 1,
            Reshuffle::Never => 2,
        };
        let commit = match self.commit {
            None => 0,
            Some(Commit::Replace) => 1,
            Some(Commit::InPlace) => 2,
        };
        [reshuffle, self.checksums.map_or(2, u64::from), commit]
    }
}

/// Opens a collective file operation with ONE collective (an allgather of nine words per
/// rank) where it took one per question: whether every rank's own checks passed (`local`:
/// this rank's error wins, else the first failing rank is named, as in
/// [`agree_on_outcome`]); the runs and bytes of `layout` over the ranks (counted unless
/// the ranks never reshuffle); the collective buffer (the smallest asked for, as
/// [`rounds::buffer_size`](crate::file::rounds::buffer_size)); and that every rank asks the
/// same [`Asks`] (reshuffle, checksums, commit), since the ranks would otherwise take
/// different paths and wait for one another for ever; and that every rank passed the same
/// arguments (`args`, this rank's [`Digest`] of its layout, format or base offset), since
/// different layouts would move bytes to the wrong places. A disagreement is an error on
/// every rank alike, before anything is touched.
///
/// # Errors
/// This rank's `local` error, [`FileError::Remote`] naming the first rank that failed,
/// [`FileError::Format`] ([`SumsDefect::Disagree`](crate::file::SumsDefect)) for ranks
/// that disagree on checksums, [`FileError::Options`] for other choices they disagree on,
/// messaging failures.
pub(crate) fn open<T>(
    comm: &Communicator,
    path: &Path,
    local: Result<T, FileError>,
    layout: &Layout,
    asks: &Asks,
    args: Digest,
) -> Result<(T, Opening), FileError> {
    let count = asks.reshuffle != Reshuffle::Never;
    let local = local.and_then(|v| {
        if count {
            own_run_totals(layout, comm.rank()).map(|c| (v, c))
        } else {
            Ok((v, (0, 0)))
        }
    });
    let (runs, bytes) = local.as_ref().map_or((0, 0), |&(_, c)| c);
    let buffer = asked_buffer(comm, asks.coll_buffer);
    let flag = match &local {
        Ok(_) => u64::MAX,
        Err(_) => u64::from(comm.rank()),
    };
    let [r, c, m] = asks.words();
    // A declined part has no arguments to compare ([MAX, MAX]).
    let [d, not_d] = match &local {
        Err(FileError::Declined(_)) => [u64::MAX; 2],
        _ => [args.0, !args.0],
    };
    let mine = [flag, runs, bytes, buffer, r, c, m, d, not_d];
    let mut all = vec![0u64; mine.len() * comm.size() as usize];
    let gathered = comm.allgather(&mine, &mut all);
    if let Err(e) = gathered {
        // This rank's own error wins.
        local?;
        return Err(e.into());
    }
    let rows: Vec<&[u64]> = all.chunks_exact(mine.len()).collect();
    // Arguments that differ are every rank's error, before any rank's own (which they may
    // have caused).
    let digests: Vec<[u64; 2]> = rows.iter().map(|r| [r[7], r[8]]).collect();
    let (first, ranks) = spools_exchange::collective::differing_of(&digests);
    if !ranks.is_empty() {
        return Err(ExchangeError::ArgumentsDiffer {
            ranks,
            first,
            what: "layouts or formats",
        }
        .into());
    }
    let first = rows.iter().map(|r| r[0]).min().unwrap_or(u64::MAX);
    if first != u64::MAX {
        // The first failing rank tells the others why.
        let told = match &local {
            Err(e) if u64::from(comm.rank()) == first => Told::cause(e).encode(),
            _ => Vec::new(),
        };
        let heard = comm.bcast_bytes(first as u32, &told);
        local?;
        return Err(FileError::Remote {
            rank: first as u32,
            path: path.to_path_buf(),
            cause: crate::Cause::decode(&heard?),
        });
    }
    let differ = |k: usize| rows.iter().any(|r| r[k] != rows[0][k]);
    if differ(5) {
        return Err(FileError::Format {
            path: path.to_path_buf(),
            defect: crate::error::FormatDefect::Sums(crate::file::SumsDefect::Disagree),
        });
    }
    if differ(4) {
        return Err(FileError::Options(
            "the ranks asked for different reshuffle choices",
        ));
    }
    if differ(6) {
        return Err(FileError::Options(
            "the ranks asked for different commits (in place and atomic replacement)",
        ));
    }
    let (v, _) = local?;
    let opening = Opening {
        runs: rows.iter().map(|r| r[1]).sum(),
        bytes: rows.iter().map(|r| r[2]).sum(),
        buffer: rows.iter().map(|r| r[3]).min().unwrap_or(buffer).max(1),
    };
    Ok((v, opening))
}

/// This rank's collective buffer: `choice`, else the `coll_buffer` of the configuration the
/// runtime started with, never below the configuration's minimum.
pub(super) fn asked_buffer(comm: &Communicator, choice: Option<usize>) -> u64 {
    choice
        .map_or_else(|| comm.config().coll_buffer, |b| b as u64)
        .max(spools_boot::config::COLL_BUFFER_MIN)
}

/// Rank 0 tells every rank the file it made for them to write (`made`) and where the
/// stream starts in it, or that it failed (`ready`): every rank gets the name and offset
/// or the failure ([`FileError::Remote`] naming rank 0; rank 0 its own error).
pub(super) fn announce_at(
    comm: &Communicator,
    path: &Path,
    made: &Path,
    ready: Result<u64, FileError>,
) -> Result<(std::path::PathBuf, u64), FileError> {
    use std::os::unix::ffi::OsStrExt;
    let msg = match &ready {
        Ok(off) => [
            b"+".as_slice(),
            &off.to_le_bytes(),
            made.as_os_str().as_bytes(),
        ]
        .concat(),
        Err(e) => [b"-".as_slice(), &Told::cause(e).encode()].concat(),
    };
    let got = comm.bcast_bytes(0, &msg);
    if comm.rank() == 0 {
        ready?;
    }
    let got = got?;
    match got.split_first() {
        Some((b'+', rest)) if rest.len() >= 8 => {
            let (off, name) = rest.split_at(8);
            let off = u64::from_le_bytes(off.try_into().unwrap_or_default());
            Ok((
                std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name)),
                off,
            ))
        }
        _ => Err(FileError::Remote {
            rank: 0,
            path: path.to_path_buf(),
            cause: crate::Cause::decode(got.get(1..).unwrap_or_default()),
        }),
    }
}

/// [`announce_at`] of a file without an offset.
pub(super) fn announce(
    comm: &Communicator,
    path: &Path,
    made: &Path,
    ready: Result<(), FileError>,
) -> Result<std::path::PathBuf, FileError> {
    announce_at(comm, path, made, ready.map(|()| 0)).map(|(p, _)| p)
}
