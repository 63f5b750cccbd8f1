//! Sieved reads of the one-file formats whose dataset is one contiguous stream
//! (canonical, `.npy`, and MPI-IO's whole-array reads through `read_from`): where a
//! collective read's runs are short and every rank runs on one host, every rank copies
//! its runs out of the windows of the file that hold them, one window at a time (checked
//! against the checksums where the call asks), as strided progressions (ROMIO's *data
//! sieving*, applied to a collective read). No rank aggregates and no run is exchanged,
//! where the exchange would move every short run through an aggregator and the shared
//! memory twice. From [`SHARED_MIN`] bytes and two ranks the windows are shared
//! ([`Shared`]): each is read from the host's page cache once, by the ranks in turn, into
//! shared memory that every rank copies its runs out of (one allgather, one allreduce per
//! round of windows and a barrier tie the ranks together); below, or where the shared
//! memory cannot be had, each rank reads the windows that hold its runs itself (at most
//! the ranks' count times the file), and no rank waits for another.
//!
//! A window is planned as one round of the collective buffer is ([`rounds`]): a slab of
//! the array where windows start at whole periods of its slowest dimension, else by rows
//! (`Plan::window`, arrays of two or more dimensions); a layout whose windows are
//! neither is not read sieved.

use std::fs::File;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use spools_exchange::{copy_local, ExchangeStats};
use spools_heap::{HeapRef, HeapSegment, PeerBytes};
use spools_map::{Layout, Plan};
use spools_msg::{Communicator, Op};

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

/// A sieved read of at least this many bytes shares its windows between the ranks
/// ([`Shared`]): each window is read from the page cache once on the host, into a
/// segment of the job's heap, and every rank copies its runs out of it, where each rank
/// read every window itself (the ranks' count times the file: with 4 ranks on 2 cores
/// the kernel's copies were most of a read). Sharing costs three collective steps or
/// more (an allgather, an allreduce per round, a barrier) and, at a process's first
/// shared read, making and mapping the segments, which the rank then keeps for the job.
/// Measured against private reads (`bench/results/io/2026-12-01-sieve-shared-2core.txt`):
/// 0.5 to 0.7 of their time at 32 MiB and 4 ranks (five shapes), 0.77 at 1 MiB and 4
/// ranks, 0.95 at 1 MiB and 2 ranks, 0.93 to 0.95 at 256 KiB, where a read's own fixed
/// costs are most of it: below 1 MiB the gain is too small to keep a segment for.
const SHARED_MIN: u64 = 1 << 20;

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
/// `off`; `None` where this rank could not open the file: the caller holds that error),
/// window by window of `w` ([`windows`]), each window that holds runs of this rank
/// checked against the checksums where `verify` asks (every block this rank copies
/// from) and its runs copied out. Where the group has two ranks or more and the dataset
/// is at least [`SHARED_MIN`] bytes, the ranks share the windows ([`Shared`]: each
/// window read once on the host); otherwise, or where the shared memory cannot be had,
/// every rank reads every window that holds its runs ([`read_private`]). `stats` says a
/// sieved read, of `comm`'s every rank, in `w`'s windows, with the copies' counts (as
/// `ExchangeStats::local` and `ExchangeStats::runs`).
///
/// Collective over `comm` where the windows are shared (the same choice on every rank,
/// from the agreed windows and group), so every rank calls it, whatever its own state.
/// A rank whose own read or check failed returns its error. Reading privately, the
/// others go on; sharing, a window that could not be read stops every rank at that
/// round (a failed check stops only the rank that made it). The caller's agreement on
/// the outcome then fails the call on every rank.
///
/// # Errors
/// [`FileError`]: a read failed or came short (the file changed under the call), a
/// window could not be planned, a block failed its check, or a collective step failed.
pub(super) fn read(
    (f, path, off): (Option<&File>, &Path, u64),
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
    let src = Source {
        f,
        path,
        off,
        layout,
        comm,
        w,
        verify,
    };
    if comm.size() >= 2 && w.total >= SHARED_MIN {
        let Some(shared) = Shared::set_up(comm, w, f.is_some())? else {
            return read_private(&src, data, copied);
        };
        if let Some(got) = shared.read(&src, data, &mut *copied)? {
            stats.sieve_shared = true;
            return got;
        }
    }
    read_private(&src, data, copied)
}

/// What a sieved read reads and how: the file (`None` where this rank could not open
/// it), its path and the dataset's first byte, the layout, the group, the windows, and
/// the checks.
struct Source<'a> {
    f: Option<&'a File>,
    path: &'a Path,
    off: u64,
    layout: &'a Layout,
    comm: &'a Communicator,
    w: &'a Rounds,
    verify: &'a Verify<'a>,
}

impl Source<'_> {
    /// The plan of window `r` to this rank's share, and the part of `data` it writes;
    /// `None` where the window holds no run of this rank.
    fn own_runs<'d>(
        &self,
        r: u64,
        data: &'d mut [u8],
    ) -> Result<Option<(Plan, &'d mut [u8])>, FileError> {
        let me = u64::from(self.comm.rank());
        let w = self.w;
        let io = w.io_layout(r)?;
        let (plan, dst) = window_plan(self.layout, &io, w.window(r), w.count() == 1, me, data)?;
        if plan.runs(0, me)?.next().is_none() {
            return Ok(None);
        }
        Ok(Some((plan, dst)))
    }

    /// Copies this rank's runs out of window `r` (its bytes `bytes`), checking them
    /// first where the call asks; nothing where the window holds no run of this rank.
    fn copy_out(
        &self,
        r: u64,
        bytes: &[u8],
        data: &mut [u8],
        copied: &mut ExchangeStats,
    ) -> Result<(), FileError> {
        match self.own_runs(r, data)? {
            Some(planned) => self.copy_planned(r, bytes, planned, copied),
            None => Ok(()),
        }
    }

    /// [`Source::copy_out`] with the window's plan made ([`Source::own_runs`]).
    fn copy_planned(
        &self,
        r: u64,
        bytes: &[u8],
        (plan, dst): (Plan, &mut [u8]),
        copied: &mut ExchangeStats,
    ) -> Result<(), FileError> {
        self.verify.check([(self.w.window(r).0, bytes)])?;
        copy_local(&plan, 0, bytes, u64::from(self.comm.rank()), dst, copied)?;
        Ok(())
    }
}

/// [`read`] where every rank reads every window that holds its runs. Not collective.
fn read_private(
    src: &Source<'_>,
    data: &mut [u8],
    copied: &mut ExchangeStats,
) -> Result<(), FileError> {
    let Some(f) = src.f else {
        return Ok(());
    };
    if u64::from(src.comm.rank()) >= src.layout.units() || data.is_empty() {
        return Ok(());
    }
    let mut buf: Vec<u8> = Vec::new();
    for r in 0..src.w.count() {
        let Some(planned) = src.own_runs(r, data)? else {
            continue;
        };
        let (lo, hi) = src.w.window(r);
        buf.resize((hi - lo) as usize, 0);
        sys::read_at(f, src.path, &mut buf, src.off + lo)?;
        src.copy_planned(r, &buf, planned, copied)?;
    }
    Ok(())
}

/// This process's segment of shared windows ([`Shared`]), with the job it belongs to:
/// kept from the process's first shared sieved read until it leaves that job
/// ([`release_shared_windows`]), so that the other ranks of the host map it once (their
/// heaps keep it mapped) and no read pays for creating, sizing and mapping segments
/// (which made a 32 MiB read at 4 ranks slower than reading every window privately).
/// A read that needs a larger one, or is another job's, replaces it.
static WINDOWS: Mutex<Option<(u64, HeapSegment)>> = Mutex::new(None);

/// Frees this process's segment of shared windows where it is `job`'s (its name leaves
/// `/dev/shm`): when the process leaves that job. Every shared read of the job has ended
/// on every rank by then (each ends in a barrier); a peer that still maps the segment
/// keeps a valid mapping.
///
/// ```
/// spools_io::file::release_shared_windows(7);
/// ```
pub fn release_shared_windows(job: u64) {
    let mut g = WINDOWS.lock().unwrap_or_else(PoisonError::into_inner);
    if matches!(g.as_ref(), Some((j, _)) if *j == job) {
        g.take();
    }
}

/// The windows of a sieved read shared by the ranks of one host: each rank's segment of
/// the job's heap ([`WINDOWS`]) holds two windows, and every rank maps every other's.
///
/// In round `k` rank `r` reads window `k * P + r` into its slot `k % 2`; one allreduce
/// then tells every rank that every window of the round is in (or which rank's read
/// failed: then every rank stops there), and each rank copies its runs out of the
/// round's windows, from the owners' slots. A rank writes a slot again two rounds later,
/// after the next round's allreduce, which no rank joins before it has copied out of
/// this round's windows: no window is overwritten while a rank reads it. A barrier ends
/// the read, so that no rank still reads a segment when its owner's next read (perhaps
/// in another group) writes it.
struct Shared {
    /// This rank's segment (two slots of a window each, one where there is one round),
    /// held for the read: a second thread's read meanwhile reads privately.
    own: MutexGuard<'static, Option<(u64, HeapSegment)>>,
    /// The other ranks' segments, mapped (by rank; `None` for this one).
    peers: Vec<Option<PeerBytes>>,
    /// Bytes of a slot (the largest window).
    slot: usize,
}

impl Shared {
    /// Takes this rank's segment (made or enlarged where needed) and learns every
    /// rank's (one allgather), then maps the other ranks' segments. `None`, on every
    /// rank alike, where a rank could not have its segment (no shared memory, another
    /// thread of its process reading) or open the file: the windows are then read
    /// privately. A segment another rank could not map is found in [`Shared::read`]'s
    /// first round. Collective.
    ///
    /// # Errors
    /// The allgather failed (a rank died).
    fn set_up(comm: &Communicator, w: &Rounds, opened: bool) -> Result<Option<Shared>, FileError> {
        let p = u64::from(comm.size());
        let slot = w.chunk.min(w.total);
        let slots = w.count().div_ceil(p).min(2);
        let len = usize::try_from(slot * slots).ok().filter(|_| opened);
        let own = len.and_then(|len| own_segment(comm, len));
        const REC: usize = 1 + HeapRef::WIRE_BYTES;
        let mut mine = [0u8; REC];
        if let Some(Some((_, seg))) = own.as_deref() {
            mine[0] = 1;
            let at = HeapRef {
                name: seg.name(),
                offset: 0,
            };
            mine[1..].copy_from_slice(&at.to_bytes());
        }
        let mut all = vec![0u8; REC * comm.size() as usize];
        comm.allgather(&mine, &mut all)?;
        let (Some(own), Some(len), true) = (own, len, all.chunks(REC).all(|r| r[0] == 1)) else {
            return Ok(None);
        };
        let peers = all
            .chunks(REC)
            .enumerate()
            .map(|(r, rec)| {
                if r == comm.rank() as usize {
                    return None;
                }
                let at = HeapRef::from_bytes(&rec[1..]).ok()?;
                comm.heaps().bytes(&at, len).ok()
            })
            .collect();
        Ok(Some(Shared {
            own,
            peers,
            slot: slot as usize,
        }))
    }

    /// The first byte of this rank's segment.
    fn own_data(&self) -> *mut u8 {
        match self.own.as_ref() {
            Some((_, seg)) => seg.data(),
            None => std::ptr::null_mut(),
        }
    }

    /// The shared rounds of [`read`]: `Ok(None)`, on every rank alike, where a rank
    /// could not map another's segment (the caller then reads privately), else this
    /// rank's own outcome. Collective.
    ///
    /// # Errors
    /// A collective step (an allreduce, the closing barrier) failed: a rank died.
    fn read(
        mut self,
        src: &Source<'_>,
        data: &mut [u8],
        copied: &mut ExchangeStats,
    ) -> Result<Option<Result<(), FileError>>, FileError> {
        let got = self.rounds(src, data, copied);
        if got.is_err() {
            // A collective step failed here (a rank died), perhaps not on every rank:
            // another may still read this rank's slots, so they are never written
            // again (the segment goes; a later read makes a new one).
            *self.own = None;
        }
        got
    }

    /// [`Shared::read`]'s rounds and its closing barrier.
    ///
    /// # Errors
    /// As [`Shared::read`].
    fn rounds(
        &self,
        src: &Source<'_>,
        data: &mut [u8],
        copied: &mut ExchangeStats,
    ) -> Result<Option<Result<(), FileError>>, FileError> {
        let (comm, w, layout) = (src.comm, src.w, src.layout);
        let p = u64::from(comm.size());
        let me = comm.rank();
        let mapped = self
            .peers
            .iter()
            .enumerate()
            .all(|(r, b)| r == me as usize || b.is_some());
        let copies = u64::from(me) < layout.units() && !data.is_empty();
        let mut local: Result<(), FileError> = Ok(());
        for k in 0..w.count().div_ceil(p) {
            let at = (k % 2) as usize * self.slot;
            let own_window = k * p + u64::from(me);
            let mut failed = false;
            if let (Some(f), true, true) = (src.f, own_window < w.count(), mapped) {
                let (lo, hi) = w.window(own_window);
                // SAFETY: the slot `[at, at + slot)` lies in this rank's segment (two
                // slots where there are two rounds or more, one otherwise, and `k % 2`
                // is 0 with one round; every window is at most a slot). No rank reads
                // it now: its last contents (round k - 2, or the last read's) were read
                // before the readers joined round k - 1's allreduce (or the last read's
                // barrier), which this rank has passed, and its new ones are read only
                // after this round's allreduce.
                let buf = unsafe {
                    std::slice::from_raw_parts_mut(self.own_data().add(at), (hi - lo) as usize)
                };
                if let Err(e) = sys::read_at(f, src.path, buf, src.off + lo) {
                    failed = true;
                    local = local.and(Err(e));
                }
            }
            let flags = [if failed { me } else { u32::MAX }, u32::from(mapped)];
            let mut agreed = [0u32; 2];
            comm.allreduce(&flags, &mut agreed, &Op::Min)?;
            if agreed[1] == 0 {
                return Ok(None);
            }
            if agreed[0] != u32::MAX {
                // A window of this round is missing: every rank stops here, and the
                // agreement that follows names the rank that failed.
                break;
            }
            if !copies || local.is_err() {
                continue;
            }
            for j in 0..p {
                let r = k * p + j;
                if r >= w.count() {
                    break;
                }
                let got = self
                    .window(j as usize, at, w.window(r), me)
                    .and_then(|bytes| src.copy_out(r, bytes, data, &mut *copied));
                if let Err(e) = got {
                    local = Err(e);
                    break;
                }
            }
        }
        comm.barrier()?;
        Ok(Some(local))
    }

    /// The bytes of window `[lo, hi)`, in rank `j`'s slot at `at`.
    fn window(
        &self,
        j: usize,
        at: usize,
        (lo, hi): (u64, u64),
        me: u32,
    ) -> Result<&[u8], FileError> {
        let len = (hi - lo) as usize;
        if j == me as usize {
            // SAFETY: this rank's own slot, which it wrote before this round's allreduce
            // and does not write again before the round after next.
            return Ok(unsafe { std::slice::from_raw_parts(self.own_data().add(at), len) });
        }
        let b = self.peers[j].as_ref().ok_or(FileError::Options(
            "a shared window's segment is not mapped",
        ))?;
        if at + len > b.len() {
            return Err(FileError::Options(
                "a shared window lies outside its segment",
            ));
        }
        // SAFETY: `[at, at + len)` lies in the mapping (checked above), which `b` keeps
        // alive; its owner wrote it before this round's allreduce and writes it again
        // only after the next one, which this rank joins once it is done with the
        // slice, so nothing writes these bytes while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts(b.as_ptr().add(at), len) })
    }
}

/// This process's segment of shared windows, at least `len` bytes long and of `comm`'s
/// job (made, or made anew where the one kept is shorter or another job's), held for a
/// read; `None` where another thread holds it, or where the segment cannot be made.
fn own_segment(
    comm: &Communicator,
    len: usize,
) -> Option<MutexGuard<'static, Option<(u64, HeapSegment)>>> {
    let mut g = match WINDOWS.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    let job = comm.heaps().job();
    if !matches!(g.as_ref(), Some((j, seg)) if *j == job && seg.len() >= len) {
        // The old segment goes first (two at once would hold both in `/dev/shm`).
        g.take();
        let me = comm.job_rank(comm.rank()).ok()?;
        *g = Some((job, comm.heaps().create(me, len).ok()?));
    }
    Some(g)
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
