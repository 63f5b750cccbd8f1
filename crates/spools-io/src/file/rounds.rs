//! Collective file I/O in bounded rounds: the aggregators' file domains are covered in
//! rounds of at most one *collective buffer* per aggregator, so that writing or reading a
//! file takes O(buffer + runs) memory per rank whatever the file's size.
//!
//! Round `r` covers the window `[r·A·c, (r+1)·A·c)` of the dataset's byte stream (`A`
//! aggregators, `c` bytes each per round): aggregator `a` holds its part
//! `[r·A·c + a·c, r·A·c + (a+1)·c)`, so the round's I/O distribution is
//! `stripe(unit=c, count=A)` over the window. A round is one exchange between the caller's
//! layout *restricted to the window* and that distribution, then each aggregator's write of
//! its part (for a read: the reads, then the exchange). Where the windows start at whole
//! periods of an array's slowest dimension ([`slabs_fit`]: a vector or a cyclic(1)
//! distribution, whatever the round size), the restriction is a *slab*, the same
//! distribution of a smaller array held in one range of each rank's storage, and the
//! exchange moves its runs as strided progressions; otherwise it is an irregular layout of
//! the window's runs, built with [`Layout::locate`], and rounds are cut small enough for
//! it ([`cap`]). A file that fits one round is exchanged straight from (into) the caller's
//! layout, as before rounds existed.
//!
//! Each aggregator's part of a round goes through one place, the [`RoundSink`] given to
//! [`write`] and [`read`]: that is where the bytes of a stream range are in hand, before
//! they are written and after they are read (the hook for block checksums).

use spools_map::{IrregularLayout, Layout, Plan, StripeLayout};
use spools_msg::{Communicator, Op};

use crate::error::FileError;
use crate::file::steps::integrity;
use spools_exchange::redistribute_plan;
use spools_exchange::ExchangeStats;

/// A rank's handling of its part of each round: the bytes of the stream range starting
/// at `at` (offsets in the dataset's byte stream). Called on every rank in every round
/// (with no bytes where the rank has no part), so a sink may be collective; a sink that
/// failed is still called in the later rounds (and should then take part in its
/// collective steps only).
pub(super) trait RoundSink {
    /// Stores the bytes `bytes` of round `r`, stream offset `at`.
    ///
    /// # Errors
    /// [`FileError`]: the storage failed; the rounds go on (so no rank waits) and the
    /// first error is the outcome.
    fn put(&mut self, r: u64, at: u64, bytes: &[u8]) -> Result<(), FileError>;
}

/// The reading counterpart of [`RoundSink`], called the same way.
pub(super) trait RoundSource {
    /// Fills `bytes` with round `r`'s stream range starting at `at`.
    ///
    /// # Errors
    /// [`FileError`]: the storage failed; the rounds go on with what `bytes` holds.
    fn get(&mut self, r: u64, at: u64, bytes: &mut [u8]) -> Result<(), FileError>;
}

/// The round structure of one collective operation (identical on every rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rounds {
    /// Dataset bytes.
    pub(super) total: u64,
    /// Bytes of each aggregator's part of a round.
    pub(super) chunk: u64,
    /// Aggregators (ranks `0..aggs`).
    pub(super) aggs: u32,
}

impl Rounds {
    /// Rounds over `total` bytes with `aggs` aggregators taking `chunk` bytes each.
    pub(super) fn new(total: u64, chunk: u64, aggs: u32) -> Rounds {
        Rounds {
            total,
            chunk: chunk.max(1),
            aggs: aggs.max(1),
        }
    }

    /// Bytes of one full round.
    pub(super) fn span(&self) -> u64 {
        self.chunk * u64::from(self.aggs)
    }

    /// Number of rounds (at least 1).
    pub(super) fn count(&self) -> u64 {
        self.total.div_ceil(self.span()).max(1)
    }

    /// The stream window `[lo, hi)` of round `r`.
    pub(super) fn window(&self, r: u64) -> (u64, u64) {
        let lo = (r * self.span()).min(self.total);
        (lo, (lo + self.span()).min(self.total))
    }

    /// The stream range of aggregator `a` in round `r` (empty for a non-aggregator).
    pub(super) fn part(&self, r: u64, a: u32) -> (u64, u64) {
        if a >= self.aggs {
            return (0, 0);
        }
        let (lo, hi) = self.window(r);
        let s = (lo + u64::from(a) * self.chunk).min(hi);
        (s, (s + self.chunk).min(hi))
    }

    /// The I/O distribution of round `r`'s window.
    pub(super) fn io_layout(&self, r: u64) -> Result<Layout, FileError> {
        let (lo, hi) = self.window(r);
        Ok(Layout::Stripe(StripeLayout::new(
            self.chunk,
            u64::from(self.aggs),
            Some((hi - lo).max(1)),
        )?))
    }
}

/// The most runs of the caller's layout one round's window may hold: a round's window is
/// described run by run (about 100 bytes each over the ranks' views), so layouts of short
/// runs go in smaller rounds.
const MAX_WINDOW_RUNS: u64 = 1 << 17;

/// `buffer` per aggregator, or less where `layout`'s runs are so short that a window of
/// `aggs` such buffers would hold more than [`MAX_WINDOW_RUNS`] runs (never below 4 KiB).
/// Identical on every rank; collective when the file takes more than one round.
///
/// # Errors
/// [`FileError`]: the reduction failed (a dead peer).
pub(super) fn capped_buffer(
    comm: &Communicator,
    layout: &Layout,
    total: u64,
    aggs: u32,
    buffer: u64,
) -> Result<u64, FileError> {
    if total <= buffer.saturating_mul(u64::from(aggs.max(1))) {
        return Ok(buffer);
    }
    let (runs, bytes) = crate::file::steps::run_totals(comm, layout)?;
    Ok(cap(total, aggs, buffer, runs, bytes))
}

/// [`capped_buffer`] from run totals already known (`runs`, `bytes` of the layout over
/// the ranks): not collective.
pub(super) fn cap(total: u64, aggs: u32, buffer: u64, runs: u64, bytes: u64) -> u64 {
    if total <= buffer.saturating_mul(u64::from(aggs.max(1))) {
        return buffer;
    }
    let mean = bytes.checked_div(runs).unwrap_or(bytes).max(1);
    let most = (MAX_WINDOW_RUNS.saturating_mul(mean) / u64::from(aggs.max(1))).max(4096);
    buffer.min(most)
}

/// Whether every window of `rounds` is a slab of `layout` (an array whose windows start
/// at whole periods of its slowest storage dimension, [`ArrayLayout::slab`]): each round
/// is then the caller's own distribution of a smaller array, exchanged from (into) one
/// contiguous range of each rank's storage, so its cost does not grow with the runs of a
/// window and rounds need not be cut small for short runs ([`cap`]). Not collective.
///
/// [`ArrayLayout::slab`]: spools_map::ArrayLayout::slab
pub(super) fn slabs_fit(layout: &Layout, rounds: &Rounds) -> bool {
    if rounds.count() == 1 {
        return true;
    }
    match layout {
        Layout::Array(a) => {
            let p = a.slab_period();
            p > 0 && p < u64::MAX && rounds.span() % p == 0
        }
        _ => false,
    }
}

/// Bytes every aggregator's part of a round should be a multiple of for `layout`'s windows
/// to be slabs ([`slabs_fit`]) with `aggs` aggregators: what an array's slab period
/// needs of one part; 1 for other layouts.
fn slab_grain(layout: &Layout, aggs: u32) -> u64 {
    match layout {
        Layout::Array(a) => match a.slab_period() {
            0 | u64::MAX => 1,
            p => p / gcd(p, u64::from(aggs.max(1))),
        },
        _ => 1,
    }
}

/// `chunk` moved to a multiple of both `slab_grain(layout, aggs)` and `grain` where one is
/// near, so that the windows of rounds with `aggs` aggregators are slabs (a vector's
/// windows otherwise go run by run: an array of more dimensions plans any window by
/// rows, [`windows_fit`]): up where that adds at most 1/16 (the collective buffer is a
/// target, not a hard cap, at that margin) and stays within `most`, else down, and
/// unchanged where even one such multiple exceeds `chunk`. Not collective.
pub(super) fn slab_chunk(layout: &Layout, chunk: u64, grain: u64, aggs: u32, most: u64) -> u64 {
    let p = slab_grain(layout, aggs);
    let g = grain.max(1);
    if chunk % p == 0 && chunk % g == 0 {
        return chunk;
    }
    let Some(q) = (p / gcd(p, g)).checked_mul(g).filter(|&q| q <= chunk) else {
        return chunk;
    };
    let up = chunk.div_ceil(q) * q;
    if up - chunk <= chunk / 16 && up <= most {
        up
    } else {
        chunk / q * q
    }
}

/// Greatest common divisor.
pub(super) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The collective buffer per aggregator: the per-call choice, else the configuration's
/// `coll_buffer`, the smallest over the ranks (so that every rank cuts the same rounds),
/// never below the configuration's minimum (4 KiB: a per-call `Some(1)` would make one
/// round per byte).
///
/// # Errors
/// [`FileError`]: the reduction failed (a dead peer).
pub(super) fn buffer_size(comm: &Communicator, choice: Option<usize>) -> Result<u64, FileError> {
    let mine = super::steps::asked_buffer(comm, choice);
    let mut out = [0u64];
    comm.allreduce(&[mine], &mut out, &Op::Min)?;
    Ok(out[0].max(1))
}

/// The caller's layout restricted to the window `[lo, hi)`: an irregular layout of the
/// window's runs (offsets relative to `lo`), and where this rank's runs of it lie in its
/// local storage.
struct Window {
    layout: Layout,
    /// This rank's runs in window order: `(local offset, len)`, merged.
    mine: Vec<(u64, u64)>,
}

impl Window {
    fn new(layout: &Layout, me: u32, lo: u64, hi: u64) -> Result<Window, FileError> {
        let units = layout.units() as usize;
        let e = layout.elem_size().max(1);
        let elem = if lo % e == 0 && hi % e == 0 { e } else { 1 };
        // Per unit: (start, len) in bytes relative to lo, and the local end of the last.
        let mut lists: Vec<Vec<(u64, u64)>> = vec![Vec::new(); units];
        let mut last_local: Vec<u64> = vec![u64::MAX; units];
        let mut mine: Vec<(u64, u64)> = Vec::new();
        let mut g = lo;
        while g < hi {
            let loc = layout.locate(g).ok_or(FileError::Options(
                "the layout does not cover the dataset's byte stream",
            ))?;
            let n = loc.len.max(1).min(hi - g);
            let u = loc.unit as usize;
            let list = lists.get_mut(u).ok_or(FileError::Options(
                "the layout names a unit past its unit count",
            ))?;
            let contiguous = last_local[u] == loc.local;
            match list.last_mut() {
                Some(last) if contiguous && last.0 + last.1 == g - lo => last.1 += n,
                _ => list.push((g - lo, n)),
            }
            last_local[u] = loc.local + n;
            if loc.unit == u64::from(me) {
                match mine.last_mut() {
                    Some(m) if m.0 + m.1 == loc.local => m.1 += n,
                    _ => mine.push((loc.local, n)),
                }
            }
            g += n;
        }
        let lists = lists
            .into_iter()
            .map(|l| l.into_iter().map(|(s, n)| (s / elem, n / elem)).collect())
            .collect();
        let layout = Layout::Irregular(IrregularLayout::new(elem, (hi - lo) / elem, lists)?);
        Ok(Window { layout, mine })
    }

    /// This rank's runs as one contiguous local range, when they are one.
    fn contiguous(&self) -> Option<(usize, usize)> {
        match self.mine.as_slice() {
            [] => Some((0, 0)),
            [(l, n)] => Some((*l as usize, (*l + *n) as usize)),
            _ => None,
        }
    }
}

/// How round `r`'s window of the caller's layout is exchanged.
enum Part {
    /// The round is the whole file: the caller's layout itself.
    Whole,
    /// The window is a slab ([`slabs_fit`]): its own array layout, and this rank's part of
    /// it as one range of its storage.
    Slab(Layout, (usize, usize)),
    /// A window of an array of two or more dimensions that is no slab: the round's plan
    /// between the caller's whole layout and the I/O distribution laid over the window
    /// (`Plan::window`, each unit's runs of one row laid over its rows).
    Rows(Plan),
    /// Any other window: an irregular layout of its runs.
    Window(Window),
}

/// Round `r`'s I/O distribution, how the window of the caller's layout it covers is
/// exchanged, and the stream offset of this rank's part, with `buf` sized to that part's
/// length: zeroed where it grows (a fresh buffer from zeroed pages, not a pass of zeros
/// over it), left as the last round left it elsewhere, since every byte of the part is
/// overwritten before it is used (a write's exchange covers the whole window; a read's
/// source fills the part or fails, and then its bytes are not used).
fn round(
    rounds: &Rounds,
    r: u64,
    layout: &Layout,
    me: u32,
    buf: &mut Vec<u8>,
) -> Result<(Layout, Part, u64), FileError> {
    let (p0, p1) = rounds.part(r, me);
    let len = (p1 - p0) as usize;
    if buf.capacity() < len {
        *buf = vec![0; len];
    } else {
        buf.resize(len, 0);
    }
    let io = rounds.io_layout(r)?;
    if rounds.count() == 1 {
        return Ok((io, Part::Whole, p0));
    }
    let (lo, hi) = rounds.window(r);
    if let Layout::Array(a) = layout {
        if let Some(slab) = a.slab(lo, hi) {
            let me = u64::from(me);
            let (a0, a1) = if me < layout.units() {
                slab.local_range(me)?
            } else {
                (0, 0)
            };
            let range = (to_usize(a0)?, to_usize(a1)?);
            return Ok((
                io,
                Part::Slab(Layout::Array(slab.layout().clone()), range),
                p0,
            ));
        }
    }
    if let Some(plan) = window_plan(layout, &io, lo) {
        return Ok((io, Part::Rows(plan), p0));
    }
    Ok((io, Part::Window(Window::new(layout, me, lo, hi)?), p0))
}

/// The plan from `layout`'s bytes from `lo` on to the round's I/O distribution `io` laid
/// over them, where `Plan::window` serves.
fn window_plan(layout: &Layout, io: &Layout, lo: u64) -> Option<Plan> {
    match io {
        Layout::Stripe(s) => Plan::window(layout, lo, s),
        _ => None,
    }
}

/// Whether every window of `rounds` over `layout` is planned without a description of
/// its runs ([`Part::Rows`]): then rounds need not be cut small for short runs. Not
/// collective.
pub(super) fn windows_fit(layout: &Layout, rounds: &Rounds) -> bool {
    rounds
        .io_layout(0)
        .ok()
        .is_some_and(|io| window_plan(layout, &io, 0).is_some())
}

/// A local offset as an index.
fn to_usize(x: u64) -> Result<usize, FileError> {
    usize::try_from(x).map_err(|_| FileError::Options("a local offset beyond the address space"))
}

/// Writes `data` (this rank's share of `layout`) in rounds: each round's exchange, then
/// the aggregators' [`RoundSink::put`]. Collective. Returns this rank's exchange counts and
/// the outcome of its puts (the first failure; later rounds still exchange but put
/// nothing).
///
/// # Errors
/// [`FileError`]: the exchange failed (a dead peer) or a layout could not be built.
pub(super) fn write(
    comm: &Communicator,
    rounds: &Rounds,
    layout: &Layout,
    data: &[u8],
    checked: bool,
    sink: &mut dyn RoundSink,
) -> Result<(ExchangeStats, Result<(), FileError>), FileError> {
    let me = comm.rank();
    let mut stats = ExchangeStats::default();
    let mut outcome = Ok(());
    let mut buf: Vec<u8> = Vec::new();
    let mut staging: Vec<u8> = Vec::new();
    for r in 0..rounds.count() {
        let (io, part, p0) = round(rounds, r, layout, me, &mut buf)?;
        let x = if let Part::Slab(slab, (a, b)) = &part {
            let plan = Plan::new(slab, &io)?;
            let src = data.get(*a..*b).ok_or(FileError::Options(
                "the local storage is shorter than the layout's share",
            ))?;
            redistribute_plan(comm, &plan, src, &mut buf, &integrity(checked))?
        } else if let Part::Rows(plan) = &part {
            redistribute_plan(comm, plan, data, &mut buf, &integrity(checked))?
        } else if let Part::Window(w) = part {
            let plan = Plan::new(&w.layout, &io)?;
            let src: &[u8] = match w.contiguous() {
                Some((a, b)) => data.get(a..b).unwrap_or_default(),
                None => {
                    staging.clear();
                    for &(l, n) in &w.mine {
                        staging.extend_from_slice(
                            data.get(l as usize..(l + n) as usize).unwrap_or_default(),
                        );
                    }
                    &staging
                }
            };
            redistribute_plan(comm, &plan, src, &mut buf, &integrity(checked))?
        } else {
            let plan = Plan::new(layout, &io)?;
            redistribute_plan(comm, &plan, data, &mut buf, &integrity(checked))?
        };
        stats += x;
        let put = sink.put(r, p0, &buf);
        if outcome.is_ok() {
            outcome = put;
        }
    }
    Ok((stats, outcome))
}

/// Reads into `data` (this rank's share of `layout`) in rounds: the aggregators'
/// [`RoundSource::get`], then each round's exchange. Collective. Returns this rank's
/// exchange counts and the outcome of its gets (a failed get still takes part in the
/// exchange, so that no rank waits for it).
///
/// # Errors
/// [`FileError`]: the exchange failed (a dead peer) or a layout could not be built.
pub(super) fn read(
    comm: &Communicator,
    rounds: &Rounds,
    layout: &Layout,
    data: &mut [u8],
    checked: bool,
    sink: &mut dyn RoundSource,
) -> Result<(ExchangeStats, Result<(), FileError>), FileError> {
    let me = comm.rank();
    let mut stats = ExchangeStats::default();
    let mut outcome = Ok(());
    let mut buf: Vec<u8> = Vec::new();
    let mut staging: Vec<u8> = Vec::new();
    for r in 0..rounds.count() {
        let (io, part, p0) = round(rounds, r, layout, me, &mut buf)?;
        let got = sink.get(r, p0, &mut buf);
        if outcome.is_ok() {
            outcome = got;
        }
        let x = if let Part::Slab(slab, (a, b)) = &part {
            let plan = Plan::new(&io, slab)?;
            let dst = data.get_mut(*a..*b).ok_or(FileError::Options(
                "the local storage is shorter than the layout's share",
            ))?;
            redistribute_plan(comm, &plan, &buf, dst, &integrity(checked))?
        } else if let Part::Rows(plan) = &part {
            redistribute_plan(comm, &plan.reversed(), &buf, data, &integrity(checked))?
        } else if let Part::Window(w) = part {
            let plan = Plan::new(&io, &w.layout)?;
            match w.contiguous() {
                Some((a, b)) => {
                    let dst = data.get_mut(a..b).unwrap_or_default();
                    redistribute_plan(comm, &plan, &buf, dst, &integrity(checked))?
                }
                None => {
                    staging.clear();
                    staging.resize(w.mine.iter().map(|m| m.1 as usize).sum(), 0);
                    let x =
                        redistribute_plan(comm, &plan, &buf, &mut staging, &integrity(checked))?;
                    let mut at = 0usize;
                    for &(l, n) in &w.mine {
                        let n = n as usize;
                        if let Some(d) = data.get_mut(l as usize..l as usize + n) {
                            d.copy_from_slice(&staging[at..at + n]);
                        }
                        at += n;
                    }
                    x
                }
            }
        } else {
            let plan = Plan::new(&io, layout)?;
            redistribute_plan(comm, &plan, &buf, data, &integrity(checked))?
        };
        stats += x;
    }
    Ok((stats, outcome))
}
