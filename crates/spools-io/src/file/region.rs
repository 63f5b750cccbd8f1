//! A dataset's canonical byte stream written into (read from) a region of a file that is
//! already open, in place: the collective accesses of MPI-IO, whose file is the program's
//! own (opened before, holding other data around the region, never replaced).
//!
//! The same two paths as a canonical file ([`canonical`](super::canonical)): each rank on
//! its own runs when they are long, else the reshuffle into the aggregators' domains in
//! rounds of at most one collective buffer each; but no header, no sidecar, no commit and
//! no size change beyond what the writes extend.

use std::fs::File;
use std::path::Path;

use spools_map::Layout;
use spools_msg::Communicator;

use crate::error::FileError;
use crate::file::canonical::{io_rounds, read_own, write_own, FileSink, DOMAIN_ALIGN};
use crate::file::options::{Commit, FileStats, Format, ReadOptions, WriteOptions};
use crate::file::rounds;
use crate::file::sieve;
use crate::file::steps::{agree_on_outcome, check_share, open, Asks};
use crate::file::sums::{Pieces, Verify};
use spools_exchange::Digest;

/// Refuses what a region does not do: another format, checksums, an atomic replacement.
fn plain(format: &Format, checksums: bool) -> Result<(), FileError> {
    if !matches!(format, Format::Canonical) {
        return Err(FileError::Options(
            "a region of an open file holds the canonical byte stream only",
        ));
    }
    if checksums {
        return Err(FileError::Options(
            "a region of an open file carries no checksum sidecar",
        ));
    }
    Ok(())
}

/// Writes the dataset distributed as `layout` (this rank holds unit `rank`, its local
/// storage in `data`) into the open file `file` (this rank's handle of `path`, open for
/// writing) at byte offset `base`, in place. Collective over `comm`.
///
/// `opts.sync`, `reshuffle`, `integrity` and `coll_buffer` apply as for
/// [`write`](crate::file::write()); the format must be canonical, without checksums, and
/// the commit is always in place.
///
/// ```
/// use spools_io::file::{self, ReadOptions, WriteOptions};
/// let world = spools::init()?;
/// # let dir = spools_testkit::tempdir("doc-region"); // removed when dropped
/// let path = dir.join("a.bin");
/// std::fs::write(&path, [9u8; 4])?; // a header the region leaves alone
/// let f = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
/// let layout: spools_map::Layout = "u8[6] block on 1".parse()?;
/// let comm = world.communicator();
/// file::write_into(comm, &f, &path, 4, &[1, 2, 3, 4, 5, 6], &layout, &WriteOptions::default())?;
/// assert_eq!(std::fs::read(&path)?, [9, 9, 9, 9, 1, 2, 3, 4, 5, 6]);
/// let mut back = [0u8; 6];
/// file::read_from(comm, &f, &path, 4, &mut back, &layout, &ReadOptions::default())?;
/// assert_eq!(back, [1, 2, 3, 4, 5, 6]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`FileError`]: options this does not do, a layout with more units than ranks, a short
/// `data`, a write that fails (a full disk), a dead peer; an error on any rank fails the
/// call on every rank.
pub fn write_into(
    comm: &Communicator,
    file: &File,
    path: &Path,
    base: u64,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    let local = plain(&opts.format, opts.checksums).and_then(|()| {
        check_share(
            comm,
            layout,
            data.len(),
            crate::Side::Source,
            opts.declined.as_ref(),
        )
    });
    let asks = Asks {
        reshuffle: opts.reshuffle,
        coll_buffer: opts.coll_buffer,
        checksums: Some(false),
        commit: Some(Commit::InPlace),
    };
    let ((), opening) = open(
        comm,
        path,
        local,
        layout,
        &asks,
        Digest::of(&(layout, base)),
    )?;
    let reshuffle = opening.reshuffle(opts.reshuffle);
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let mut pieces = Pieces::new(false);
    let res = if reshuffle {
        let plan = io_rounds(comm, &opening, layout, total, (DOMAIN_ALIGN, 1));
        stats.aggregators = plan.aggs;
        stats.rounds = plan.count();
        let mut sink = FileSink {
            path,
            off: base,
            write: true,
            flush: opts.sync,
            // A handle that cannot be duplicated is opened again by its path.
            file: file.try_clone().ok(),
            pieces: None,
            verify: None,
        };
        let (x, wrote) = rounds::write(comm, &plan, layout, data, opts.integrity, &mut sink)?;
        stats.exchange = x;
        wrote.and_then(|()| if opts.sync { sink.sync() } else { Ok(()) })
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        write_own(
            file,
            path,
            layout,
            comm.rank(),
            data,
            base,
            opts.sync,
            &mut pieces,
        )
    };
    agree_on_outcome(comm, path, res)?;
    Ok(stats)
}

/// Reads the dataset distributed as `layout` from the open file `file` (this rank's
/// handle of `path`) at byte offset `base` into `data`. Collective over `comm`; the file
/// must hold the whole region (a short file is an error, never zeros).
///
/// `opts.reshuffle`, `integrity` and `coll_buffer` apply as for
/// [`read`](crate::file::read()); checksums are refused (a region has no sidecar).
///
/// # Errors
/// As [`write_into`], and [`FileError::SizeMismatch`] when the file ends before the
/// region does.
pub fn read_from(
    comm: &Communicator,
    file: &File,
    path: &Path,
    base: u64,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    let local = plain(&Format::Canonical, opts.checksums)
        .and_then(|()| {
            check_share(
                comm,
                layout,
                data.len(),
                crate::Side::Destination,
                opts.declined.as_ref(),
            )
        })
        .and_then(|()| {
            let len = file
                .metadata()
                .map_err(|e| FileError::io("inspect", path, e))?
                .len();
            if len < base.saturating_add(total) {
                return Err(FileError::SizeMismatch {
                    path: path.to_path_buf(),
                    file: len.saturating_sub(base),
                    layout: total,
                });
            }
            Ok(())
        });
    let asks = Asks {
        reshuffle: opts.reshuffle,
        coll_buffer: opts.coll_buffer,
        checksums: None,
        commit: None,
    };
    let ((), opening) = open(
        comm,
        path,
        local,
        layout,
        &asks,
        Digest::of(&(layout, base)),
    )?;
    let reshuffle = opening.reshuffle(opts.reshuffle);
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let verify = Verify::new(false, path, base, total);
    let sieve = if reshuffle {
        sieve::windows(comm, &opening, layout, total, opts.reshuffle)
    } else {
        None
    };
    let res = if let Some(w) = sieve {
        sieve::read(
            (Some(file), path, base),
            layout,
            comm,
            data,
            &w,
            (&verify, &mut stats),
        )
    } else if reshuffle {
        let plan = io_rounds(comm, &opening, layout, total, (DOMAIN_ALIGN, 1));
        stats.aggregators = plan.aggs;
        stats.rounds = plan.count();
        let mut sink = FileSink {
            path,
            off: base,
            write: false,
            flush: false,
            file: file.try_clone().ok(),
            pieces: None,
            verify: Some(&verify),
        };
        // A failed read still takes part in the exchanges, so that no rank waits for it.
        let (x, got) = rounds::read(comm, &plan, layout, data, opts.integrity, &mut sink)?;
        stats.exchange = x;
        got
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        read_own(file, path, layout, comm.rank(), data, base, &verify)
    };
    agree_on_outcome(comm, path, res)?;
    Ok(stats)
}
