//! Canonical parallel files: one ordinary file holding the canonical byte stream,
//! optionally behind a `.npy` header.

use std::path::{Path, PathBuf};

use spools_map::Layout;
use spools_msg::Communicator;

use crate::error::FileError;
use crate::file::one_file::{OneFileFormat, Prepared, StreamAt};

use crate::file::options::{Commit, FileStats, ReadOptions, WriteOptions};
use crate::file::parallel_format::{not_mine, Found, Look, ParallelFormat};
use crate::file::rounds::{self, RoundSink, RoundSource, Rounds};
use crate::file::sieve;
use crate::file::steps::{
    agree_on_outcome, check_share, open, read_args, write_args, Asks, Opening,
};
use crate::file::sums::{self, Pieces, Verify};
use crate::file::sys;

/// Plain canonical bytes as a one-file format: nothing before or after the stream. Any
/// file is one (detection falls back to it when no other format claims a file).
#[derive(Debug)]
pub(crate) struct RawFile;

impl OneFileFormat for RawFile {
    fn name(&self) -> &str {
        "canonical"
    }

    fn inspect(
        &self,
        _path: &Path,
        _head: &[u8],
        len: u64,
        _layout: Option<&Layout>,
    ) -> Result<Option<StreamAt>, FileError> {
        Ok(Some(StreamAt {
            offset: 0,
            bytes: len,
        }))
    }

    fn prepare(
        &self,
        _tmp: &Path,
        _layout: &Layout,
        _in_place: bool,
    ) -> Result<Prepared, FileError> {
        Ok(Prepared::Header(Vec::new()))
    }
}

/// A one-file format ([`OneFileFormat`]) as a [`ParallelFormat`]: this engine writes and
/// reads it, the format says what lies around the stream.
#[derive(Debug)]
pub(super) struct OneFileStorage<'a>(pub(super) &'a dyn OneFileFormat);

impl ParallelFormat for OneFileStorage<'_> {
    fn inspect(&self, look: &Look<'_>) -> Result<Option<Found>, FileError> {
        let Some(head) = look.head else {
            return Ok(None);
        };
        let at = self.0.inspect(look.path, head, look.len, look.layout)?;
        Ok(at.map(|at| Found::Plain {
            offset: at.offset,
            bytes: at.bytes,
        }))
    }

    fn write(
        &self,
        comm: &Communicator,
        path: &Path,
        data: &[u8],
        layout: &Layout,
        opts: &WriteOptions,
    ) -> Result<FileStats, FileError> {
        write(comm, path, data, layout, opts, self.0)
    }

    fn read(
        &self,
        comm: &Communicator,
        path: &Path,
        found: &Found,
        data: &mut [u8],
        layout: &Layout,
        opts: &ReadOptions,
    ) -> Result<FileStats, FileError> {
        match *found {
            Found::Plain { offset, bytes } => read(comm, path, data, layout, opts, offset, bytes),
            _ => Err(not_mine(path)),
        }
    }
}

/// File domains of aggregators are multiples of this many bytes (file-system friendly).
pub(super) const DOMAIN_ALIGN: u64 = 1 << 20;

/// The rounds of `layout`'s `total`-byte stream over at most `comm.size()` aggregators:
/// each aggregator's file domain is a multiple of `align` bytes, taken at most the opening's
/// collective buffer per round (moved to make a vector's windows slabs where that is near:
/// [`rounds::slab_chunk`]; less where the windows are no slabs of `layout` and not
/// planned by rows:
/// [`rounds::cap`], from the run totals the opening counted),
/// rounded up to whole `grain`s (a verified read's checksum blocks: each block then lies
/// whole in one aggregator's part and is checked from the bytes delivered, never read
/// again). Not collective: every rank computes the same rounds.
pub(super) fn io_rounds(
    comm: &Communicator,
    opening: &Opening,
    layout: &Layout,
    total: u64,
    (align, grain): (u64, u64),
) -> Rounds {
    let per = total.div_ceil(u64::from(comm.size().max(1)));
    let domain = per.div_ceil(align).max(1) * align;
    let aggs = total.div_ceil(domain).max(1) as u32;
    // Parts of whole `grain`s (at most the domain, itself a multiple of `align`).
    let whole = |chunk: u64| (chunk.div_ceil(grain.max(1)) * grain.max(1)).min(domain);
    let chunk = whole(domain.min(opening.buffer));
    let full = Rounds::new(total, chunk, aggs);
    if rounds::slabs_fit(layout, &full) || rounds::windows_fit(layout, &full) {
        return full;
    }
    let moved = Rounds::new(
        total,
        rounds::slab_chunk(layout, chunk, grain, aggs, domain),
        aggs,
    );
    if rounds::slabs_fit(layout, &moved) {
        return moved;
    }
    let chunk = rounds::cap(
        total,
        aggs,
        domain.min(opening.buffer),
        opening.runs,
        opening.bytes,
    );
    Rounds::new(total, whole(chunk), aggs)
}

/// The aggregator's side of a canonical file's rounds: its parts written to (read from)
/// the file at the stream's offset `off`, the file opened at the first part.
pub(super) struct FileSink<'a> {
    pub(super) path: &'a Path,
    pub(super) off: u64,
    /// Open the (temporary) file for writing rather than reading.
    pub(super) write: bool,
    /// The file, once open (or given open).
    pub(super) file: Option<std::fs::File>,
    /// Writing durably: start writeback as the parts are written
    /// ([`sys::write_parts_at`]).
    pub(super) flush: bool,
    /// Writing with checksums: the pieces written, for the sidecar.
    pub(super) pieces: Option<&'a mut Pieces>,
    /// Reading: verification of what was read against the sidecar.
    pub(super) verify: Option<&'a Verify<'a>>,
}

impl FileSink<'_> {
    fn file(&mut self) -> Result<&std::fs::File, FileError> {
        if self.file.is_none() {
            self.file = Some(if self.write {
                sys::open_target(self.path)?
            } else {
                sys::open_read(self.path)?
            });
        }
        self.file.as_ref().ok_or(FileError::Options("no file"))
    }

    /// Syncs the file, when this rank wrote any part.
    pub(super) fn sync(&self) -> Result<(), FileError> {
        match &self.file {
            Some(f) => sys::sync(f, self.path),
            None => Ok(()),
        }
    }
}

impl RoundSink for FileSink<'_> {
    // The one place where an aggregator holds a round's bytes of a file range before it
    // writes them (and below, after it read them).
    fn put(&mut self, _r: u64, at: u64, bytes: &[u8]) -> Result<(), FileError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let (path, off) = (self.path, self.off);
        let flush = self.flush;
        sys::write_parts_at(self.file()?, path, &[bytes], off + at, flush)?;
        if let Some(p) = self.pieces.as_deref_mut() {
            p.add(at, bytes);
        }
        Ok(())
    }
}

impl RoundSource for FileSink<'_> {
    fn get(&mut self, _r: u64, at: u64, bytes: &mut [u8]) -> Result<(), FileError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let (path, off) = (self.path, self.off);
        sys::read_at(self.file()?, path, bytes, off + at)?;
        match self.verify {
            Some(v) => v.check([(at, &bytes[..])]),
            None => Ok(()),
        }
    }
}

/// Writes a canonical (or `.npy`) file, committed as [`WriteOptions::commit`] says.
///
/// [`Commit::Replace`] (default): the ranks write a temporary file next to `path`
/// (`.NAME.spools-tmp.PID.NONCE`, created exclusively by rank 0), and rank 0 renames it
/// over `path` once every rank has written (and, with `sync`, synced) its part. A write
/// that fails on any rank (a full disk, a dead peer) removes the temporary file, so
/// nothing at `path` ever looks like a complete file that is not one. An existing file at
/// `path` is *replaced* (a new inode, given the old file's permission bits), never written
/// in place: a failed or interrupted write leaves the previous contents intact, and a
/// reader sees the old or the new dataset, never a mix. The price: the old and the new
/// data need room on the file system at the same time until the rename, and hard links to
/// the old file keep the old data (a symlink at `path` is replaced, not written through).
///
/// [`Commit::InPlace`]: rank 0 opens `path` (creating it, following a symlink, refusing
/// anything but a regular file), removes the checksum sidecar, sizes the file to the
/// dataset and writes the header; every rank then writes its part into that file, and the
/// sidecar is written last.
pub(super) fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    fmt: &dyn OneFileFormat,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    let share = check_share(
        comm,
        layout,
        data.len(),
        crate::Side::Source,
        opts.declined.as_ref(),
    );
    let asks = Asks {
        reshuffle: opts.reshuffle,
        coll_buffer: opts.coll_buffer,
        checksums: Some(opts.checksums),
        commit: Some(opts.commit),
    };
    // Every rank must pass the same layout and format.
    let ((), opening) = open(comm, path, share, layout, &asks, write_args(layout, opts))?;
    let replace = opts.commit == Commit::Replace;
    let (made, temp, ready) = if comm.rank() == 0 {
        prepare(path, fmt, layout, total, opts)
    } else {
        (PathBuf::new(), false, Ok(0))
    };
    // Rank 0 tells the file the ranks write and where the stream starts in it.
    let (target, off) = match super::steps::announce_at(comm, path, &made, ready) {
        Ok(t) => t,
        Err(e) => {
            if temp {
                discard(comm, &made);
            }
            return Err(e);
        }
    };
    let res = write_to(
        comm,
        path,
        &target,
        data,
        layout,
        opts,
        (fmt, off),
        total,
        &opening,
    );
    if res.is_err() && replace {
        discard(comm, &target);
    }
    res
}

/// Rank 0 makes the file the ranks write, through the format's `prepare` step: a new
/// temporary file (the format's header at its start, then room for the `total`-byte
/// stream; or the file the format made itself), or `path` itself (resolved) to write in
/// place. Returns its path (empty when nothing was made), whether it is a temporary file
/// (removed again on failure, also one the format began to make and could not finish),
/// and the stream's offset in it.
fn prepare(
    path: &Path,
    fmt: &dyn OneFileFormat,
    layout: &Layout,
    total: u64,
    opts: &WriteOptions,
) -> (PathBuf, bool, Result<u64, FileError>) {
    let in_place = opts.commit == Commit::InPlace;
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let tmp = sys::temp_name(path, nonce);
    match fmt.prepare(&tmp, layout, in_place) {
        Err(e) => (tmp, true, Err(e)),
        Ok(Prepared::Made { .. }) if in_place => (
            tmp,
            true,
            Err(FileError::Options(
                "this format makes a new file of its own; Commit::InPlace does not apply",
            )),
        ),
        Ok(Prepared::Made { offset }) => (tmp, true, Ok(offset)),
        Ok(Prepared::Header(header)) => {
            let off = header.len() as u64;
            let (made, ready) = make(path, &tmp, &header, off + total, opts);
            (made, !in_place, ready.map(|()| off))
        }
    }
}

/// Rank 0 makes the file the ranks write, `len` bytes long with `header` at its start:
/// the new temporary file `tmp`, or `path` itself (resolved) to write in place. Returns
/// its path (empty when nothing was made) and whether it is ready.
fn make(
    path: &Path,
    tmp: &Path,
    header: &[u8],
    len: u64,
    opts: &WriteOptions,
) -> (PathBuf, Result<(), FileError>) {
    let write_header = |f: &std::fs::File, at: &Path| {
        if header.is_empty() {
            return Ok(());
        }
        sys::write_at(f, at, header, 0)?;
        if opts.sync {
            sys::sync(f, at)?;
        }
        Ok(())
    };
    match opts.commit {
        Commit::Replace => {
            let ready = sys::create_temp(tmp, path, len).and_then(|f| write_header(&f, tmp));
            (tmp.to_path_buf(), ready)
        }
        // The file is opened (and checked) first; then the old sidecar goes, before the
        // file is touched: from here on the file may hold old and new bytes mixed until
        // the new sidecar is written.
        Commit::InPlace => {
            let fresh = std::fs::symlink_metadata(path).is_err();
            let opened = sys::open_in_place(path).and_then(|(f, real)| {
                let removed = sums::remove(path)?;
                let resized = sys::resize(&f, &real, len)?;
                write_header(&f, &real)?;
                // Durable: a new length, a removed sidecar and a new name are made durable
                // before the first byte of data (an overwrite of the same size with no
                // sidecar has nothing to sync here).
                if opts.sync && resized && header.is_empty() {
                    sys::sync(&f, &real)?;
                }
                if opts.sync && (fresh || removed) {
                    sys::sync_dir(path)?;
                }
                Ok(real)
            });
            match opened {
                Ok(real) => (real, Ok(())),
                Err(e) => (PathBuf::new(), Err(e)),
            }
        }
    }
}

/// Rank 0 removes the temporary file of a failed write.
fn discard(comm: &Communicator, tmp: &Path) {
    if comm.rank() == 0 && !tmp.as_os_str().is_empty() {
        let _ = std::fs::remove_file(tmp);
    }
}

/// The collective part of [`write()`] after rank 0 prepared `target` (the temporary file,
/// or the file itself when writing in place).
#[allow(clippy::too_many_arguments)]
fn write_to(
    comm: &Communicator,
    path: &Path,
    target: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    (fmt, off): (&dyn OneFileFormat, u64),
    total: u64,
    opening: &Opening,
) -> Result<FileStats, FileError> {
    let reshuffle = opening.reshuffle(opts.reshuffle);
    let me = comm.rank();
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let mut pieces = Pieces::new(opts.checksums);
    let res = if reshuffle {
        let plan = io_rounds(comm, opening, layout, total, (DOMAIN_ALIGN, 1));
        stats.aggregators = plan.aggs;
        stats.rounds = plan.count();
        let mut sink = FileSink {
            path: target,
            off,
            write: true,
            flush: opts.sync,
            file: None,
            pieces: Some(&mut pieces),
            verify: None,
        };
        let (x, wrote) = rounds::write(comm, &plan, layout, data, opts.integrity, &mut sink)?;
        stats.exchange = x;
        wrote.and_then(|()| if opts.sync { sink.sync() } else { Ok(()) })
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        sys::open_target(target)
            .and_then(|f| write_own(&f, target, layout, me, data, off, opts.sync, &mut pieces))
    };
    agree_on_outcome(comm, path, res)?;
    let all = if opts.checksums {
        sums::gather(comm, &pieces)?
    } else {
        Vec::new()
    };
    // Rank 0 commits: the format's end of the file, the checksum sidecar, the rename.
    let committed = if me == 0 {
        let at = StreamAt {
            offset: off,
            bytes: total,
        };
        fmt.commit(target, layout, at)
            .and_then(|wrote| match wrote && opts.sync {
                true => sys::open_target(target).and_then(|f| sys::sync(&f, target)),
                false => Ok(()),
            })
            .and_then(|()| sums::sidecar(path, &all, off, total))
            .and_then(|s| sums::commit(path, s.as_ref()))
            .and_then(|()| match opts.commit {
                Commit::Replace => sys::commit(target, path, opts.sync),
                Commit::InPlace => Ok(()),
            })
    } else {
        Ok(())
    };
    agree_on_outcome(comm, path, committed)?;
    Ok(stats)
}

/// Each rank writes its own runs where they belong, in the open `f` (at `path`).
#[allow(clippy::too_many_arguments)]
pub(super) fn write_own(
    f: &std::fs::File,
    path: &Path,
    layout: &Layout,
    me: u32,
    data: &[u8],
    off: u64,
    sync: bool,
    pieces: &mut Pieces,
) -> Result<(), FileError> {
    if u64::from(me) >= layout.units() || layout.local_bytes(u64::from(me))? == 0 {
        return Ok(());
    }
    let runs = file_order(layout, me)?;
    for batch in adjacent(&runs) {
        let parts: Vec<&[u8]> = batch
            .iter()
            .map(|e| &data[e.local as usize..(e.local + e.len) as usize])
            .collect();
        sys::write_parts_at(f, path, &parts, off + batch[0].global, sync)?;
        for (e, part) in batch.iter().zip(&parts) {
            pieces.add(e.global, part);
        }
    }
    if sync {
        sys::sync(f, path)?;
    }
    Ok(())
}

/// Each rank reads its own runs from the open `f` (at `path`).
pub(super) fn read_own(
    f: &std::fs::File,
    path: &Path,
    layout: &Layout,
    me: u32,
    data: &mut [u8],
    off: u64,
    verify: &Verify,
) -> Result<(), FileError> {
    if u64::from(me) >= layout.units() || layout.local_bytes(u64::from(me))? == 0 {
        return Ok(());
    }
    let runs = file_order(layout, me)?;
    for batch in adjacent(&runs) {
        // The runs of a batch are disjoint parts of `data`: split them off in local order.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_unstable_by_key(|&i| batch[i].local);
        let mut slots: Vec<Option<&mut [u8]>> = (0..batch.len()).map(|_| None).collect();
        let mut rest: &mut [u8] = data;
        let mut at = 0u64;
        for i in order {
            let e = batch[i];
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((e.local - at) as usize);
            let (part, tail) = tail.split_at_mut(e.len as usize);
            slots[i] = Some(part);
            rest = tail;
            at = e.local + e.len;
        }
        let mut parts: Vec<&mut [u8]> = slots.into_iter().flatten().collect();
        sys::read_vectored_at(f, path, &mut parts, off + batch[0].global)?;
    }
    let parts = layout.extents(u64::from(me))?;
    verify.check(parts.map(|e| {
        (
            e.global,
            &data[e.local as usize..(e.local + e.len) as usize],
        )
    }))?;
    verify.finish()
}

/// This rank's runs of `layout`, in file order.
fn file_order(layout: &Layout, me: u32) -> Result<Vec<spools_map::Extent>, FileError> {
    let mut runs: Vec<spools_map::Extent> = layout.extents(u64::from(me))?.collect();
    runs.sort_unstable_by_key(|e| e.global);
    Ok(runs)
}

/// Batches of runs (in file order) that lie back to back in the file, at most
/// [`sys::IOV_MAX`] each: one `pwritev`/`preadv` per batch.
fn adjacent(runs: &[spools_map::Extent]) -> impl Iterator<Item = &[spools_map::Extent]> {
    let mut rest = runs;
    std::iter::from_fn(move || {
        let first = rest.first()?;
        let mut end = first.global + first.len;
        let mut n = 1;
        while n < rest.len().min(sys::IOV_MAX) && rest[n].global == end {
            end += rest[n].len;
            n += 1;
        }
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        Some(batch)
    })
}

pub(super) fn read(
    comm: &Communicator,
    path: &Path,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
    offset: u64,
    bytes: u64,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    // A layout of another size fails on every rank (it is this rank's error, told to the
    // others as the call opens), never on this rank alone.
    let share = if bytes == total || opts.declined.is_some() {
        check_share(
            comm,
            layout,
            data.len(),
            crate::Side::Destination,
            opts.declined.as_ref(),
        )
    } else {
        Err(FileError::SizeMismatch {
            path: path.to_path_buf(),
            file: bytes,
            layout: total,
        })
    };
    let asks = Asks {
        reshuffle: opts.reshuffle,
        coll_buffer: opts.coll_buffer,
        checksums: None,
        commit: None,
    };
    let ((), opening) = open(comm, path, share, layout, &asks, read_args(layout))?;
    let reshuffle = opening.reshuffle(opts.reshuffle);
    let me = comm.rank();
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let verify = Verify::new(opts.checksums, path, offset, bytes);
    let sieve = if reshuffle {
        sieve::windows(comm, &opening, layout, total, opts.reshuffle)
    } else {
        None
    };
    let res = if let Some(w) = sieve {
        // Every rank takes part, whether it could open the file or not: the windows
        // may be shared.
        let f = sys::open_read(path);
        let got = sieve::read(
            (f.as_ref().ok(), path, offset),
            layout,
            comm,
            data,
            &w,
            (&verify, &mut stats),
        );
        f.and(got).and_then(|()| verify.finish())
    } else if reshuffle {
        let grain = if opts.checksums { sums::SUMS_BLOCK } else { 1 };
        let plan = io_rounds(comm, &opening, layout, total, (DOMAIN_ALIGN, grain));
        stats.aggregators = plan.aggs;
        stats.rounds = plan.count();
        let mut sink = FileSink {
            path,
            off: offset,
            write: false,
            flush: false,
            file: None,
            pieces: None,
            verify: Some(&verify),
        };
        // A failed read still takes part in the exchanges (with whatever its part buffer
        // holds), so that no rank waits for it; the agreement below then fails the call
        // everywhere (the caller's buffer then holds no promised bytes).
        let (x, got) = rounds::read(comm, &plan, layout, data, opts.integrity, &mut sink)?;
        stats.exchange = x;
        got.and_then(|()| verify.finish())
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        sys::open_read(path).and_then(|f| read_own(&f, path, layout, me, data, offset, &verify))
    };
    agree_on_outcome(comm, path, res)?;
    Ok(stats)
}
