//! Collective accesses in two phases (SCI-MPICH's and ROMIO's collective buffering, the
//! iWarp paper's reshuffle into an I/O distribution): when the group's runs are short,
//! the data first move between ranks so that each aggregator holds one contiguous
//! domain of the file, which it then writes (or reads) with one call per covered
//! segment instead of one per run.
//!
//! Every collective access starts with [`decide`], one allgather in which every rank
//! says whether it can go on and how many runs and bytes it has where; all ranks then
//! take the same path. The planning ([`domains`], [`Groups`], [`Cover`], and the
//! rounds of `rounds.rs`) is pure.

use smallvec::SmallVec;
use spools::Op;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::file::outcome::{Told, MAX_MESSAGE};
use crate::file::rounds::{round_bytes, Rounds};
use crate::file::view::FileRun;
use crate::file::{io, FileObj};

/// A collective access whose runs average this many bytes or more is done by each rank
/// on its own runs; below, in two phases.
pub(crate) const DIRECT_MIN_RUN: u64 = 16 * 1024;

/// Aggregator domains are aligned to this (a page; `striping_unit` overrides).
const ALIGN: u64 = 4096;

/// What a rank says in [`decide`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) runs: u64,
    pub(crate) bytes: u64,
    /// First and last-plus-one byte of the file it touches (0, 0 when none).
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    /// For `*_ordered`: its etypes.
    pub(crate) etypes: u64,
    /// Its `romio_cb_*` hint for this access: 0 none, 1 enable, 2 disable; its
    /// `cb_nodes` and `striping_unit` hints (0: none). Rank 0's decide for the group, so
    /// that hints differing between ranks cannot split it.
    pub(crate) cb: u64,
    pub(crate) nodes: u64,
    pub(crate) unit: u64,
    /// Its `cb_buffer_size` hint (0: none): the most bytes of a domain an aggregator
    /// holds in one round ([`round_bytes`]; rank 0's decides).
    pub(crate) buffer: u64,
    /// The fingerprint of the whole array it accesses ([`Whole::key`]), 0 for none.
    ///
    /// [`Whole::key`]: crate::file::layout::Whole::key
    pub(crate) key: u64,
    /// For a whole array made of the ranks' subarrays: its box, the start and size of
    /// each dimension (empty otherwise; at most [`MAX_BOX`] numbers).
    pub(crate) boxed: Vec<u64>,
}

/// The most numbers a [`Part`]'s box carries (32 dimensions).
pub(crate) const MAX_BOX: usize = 64;

impl Part {
    /// The summary of `runs`.
    pub(crate) fn of(runs: &[FileRun], etypes: u64, [cb, nodes, unit, buffer]: Hints) -> Part {
        let bytes = runs.iter().map(|r| r.1 as u64).sum();
        let lo = runs.iter().map(|r| r.0).min().unwrap_or(0);
        let hi = runs.iter().map(|r| r.0 + r.1 as u64).max().unwrap_or(0);
        Part {
            runs: runs.len() as u64,
            bytes,
            lo,
            hi,
            etypes,
            cb,
            nodes,
            unit,
            buffer,
            key: 0,
            boxed: Vec::new(),
        }
    }

    /// Its ten numbers, as [`decide`] sends them (`hi` as its distance from `lo`: a
    /// short number).
    fn numbers(&self) -> [u64; 10] {
        [
            self.runs,
            self.bytes,
            self.lo,
            self.hi.wrapping_sub(self.lo),
            self.etypes,
            self.cb,
            self.nodes,
            self.unit,
            self.buffer,
            self.key,
        ]
    }

    /// Its record in [`decide`]'s first step and the bytes that follow in a second
    /// step, if any: its numbers in the record and its box after it where they fit
    /// there (tag [`SHORT`]; a small access's do), else ([`LONG`]) all of it after.
    fn record(&self) -> ([u8; RECORD], Vec<u8>) {
        let mut nums = SmallVec::<[u8; 128]>::new();
        self.numbers()
            .iter()
            .for_each(|&x| put_varint(&mut nums, x));
        let boxed = self.boxed.iter().flat_map(|x| x.to_le_bytes());
        let mut rec = [0u8; RECORD];
        let mut tail = SmallVec::<[u8; MAX_VARINT]>::new();
        put_varint(&mut tail, 8 * self.boxed.len() as u64);
        if 1 + nums.len() + tail.len() <= RECORD {
            rec[0] = SHORT;
            rec[1..1 + nums.len()].copy_from_slice(&nums);
            rec[1 + nums.len()..1 + nums.len() + tail.len()].copy_from_slice(&tail);
            (rec, boxed.collect())
        } else {
            let extra: Vec<u8> = nums.iter().copied().chain(boxed).collect();
            (record_of(LONG, extra.len()), extra)
        }
    }

    /// The part a rank's `record` and the bytes after it (`extra`) say, if they are a
    /// part's (untrusted bytes: `None` for anything else).
    fn from_record(rec: &[u8], extra: &[u8]) -> Option<Part> {
        if rec.len() != RECORD || extra_len(rec)? != extra.len() {
            return None;
        }
        let (mut at, nums_in) = match rec[0] {
            SHORT => (1, rec),
            LONG => (0, extra),
            _ => return None,
        };
        let mut nums = [0u64; 10];
        for x in &mut nums {
            *x = get_varint(nums_in, &mut at)?;
        }
        let boxed = if rec[0] == SHORT { extra } else { &extra[at..] };
        if boxed.len() % 8 != 0 || boxed.len() / 8 > MAX_BOX {
            return None;
        }
        let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
        let [runs, bytes, lo, span, etypes, cb, nodes, unit, buffer, key] = nums;
        Some(Part {
            runs,
            bytes,
            lo,
            hi: lo.wrapping_add(span),
            etypes,
            cb,
            nodes,
            unit,
            buffer,
            key,
            boxed: boxed.chunks(8).map(word).collect(),
        })
    }
}

/// Bytes of a rank's record in [`decide`]'s first step: a tag ([`SHORT`], [`LONG`] or
/// [`FAILED`]) and numbers in LEB128. At most a short message's payload, so that a
/// small access's step is one short message per peer.
const RECORD: usize = 24;

/// A record's tags: a part whose numbers are in the record (its box, if any, follows
/// in a second step; the record's last number is the box's length); a part whose
/// numbers and box follow; a rank that cannot go on, whose error follows. The record of
/// the last two holds the length of what follows.
const SHORT: u8 = 0;
const LONG: u8 = 2;
const FAILED: u8 = 1;

/// Bytes of a `u64` in LEB128, at most.
const MAX_VARINT: usize = 10;

/// A record of tag `tag` saying that `len` bytes follow it.
fn record_of(tag: u8, len: usize) -> [u8; RECORD] {
    let mut rec = [0u8; RECORD];
    rec[0] = tag;
    let mut n = SmallVec::<[u8; MAX_VARINT]>::new();
    put_varint(&mut n, len as u64);
    rec[1..1 + n.len()].copy_from_slice(&n);
    rec
}

/// Appends `x` in LEB128 (seven bits a byte, low first).
fn put_varint(out: &mut impl Extend<u8>, mut x: u64) {
    loop {
        let low = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            out.extend([low]);
            return;
        }
        out.extend([low | 0x80]);
    }
}

/// The LEB128 number at `*at` in `b` (moving `*at` past it), if whole and at most 64
/// bits.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        x |= bits << shift;
        if byte & 0x80 == 0 {
            return Some(x);
        }
    }
    None
}

/// Every rank's [`Part`] of one collective access, in rank order ([`decide`]); on the
/// stack for up to 4 ranks.
pub(crate) type Parts = SmallVec<[Part; 4]>;

/// The length a record says follows it (`None` for a record that says nothing that
/// parses).
fn extra_len(rec: &[u8]) -> Option<usize> {
    let mut at = 1;
    match *rec.first()? {
        SHORT => {
            for _ in 0..10 {
                get_varint(rec, &mut at)?;
            }
        }
        LONG | FAILED => {}
        _ => return None,
    }
    usize::try_from(get_varint(rec, &mut at)?).ok()
}

/// The first step of every collective access: every rank's [`Part`], or from a rank
/// that cannot go on its error (its class and message, [`Told`]; the group then stops).
/// One allgather of fixed records of 24 bytes, and a second step (an allgather of
/// bytes) only where a rank has more to say: a part's box, numbers too long for its
/// record, an error.
///
/// # Errors
/// The error of the first rank that cannot go on, in its class (this rank's own error
/// is the caller's to report).
pub(crate) fn decide(
    f: &FileObj,
    mine: Result<Part, &MpiError>,
    call: &'static str,
) -> Result<Parts, MpiError> {
    let (rec, extra) = match &mine {
        Ok(p) => p.record(),
        Err(e) => {
            let told = Told::of(e).encode(MAX_MESSAGE);
            (record_of(FAILED, told.len()), told)
        }
    };
    let n = f.comm.size() as usize;
    // On the stack up to 42 ranks (as the parts are up to 4): no allocation per call.
    let mut all: SmallVec<[u8; 1024]> = smallvec::smallvec![0u8; RECORD * n];
    f.comm.allgather(&rec, &mut all[..])?;
    // Every rank sees every record: all take the second step, or none (a record that
    // does not parse takes it too, and is then no part).
    let extras = if all.chunks(RECORD).any(|r| extra_len(r) != Some(0)) {
        Some(f.comm.allgather_bytes(&extra)?)
    } else {
        None
    };
    all.chunks(RECORD)
        .enumerate()
        .map(|(r, rec)| {
            let extra = extras.as_ref().map_or(&[][..], |e| &e[r][..]);
            Part::from_record(rec, extra).ok_or_else(|| Told::decode(extra).error(r as u32, call))
        })
        .collect()
}

/// A rank's hints for [`Part::of`]: `romio_cb_write` (or `romio_cb_read`), `cb_nodes`,
/// `striping_unit`, `cb_buffer_size` (0 where absent).
pub(crate) type Hints = [u64; 4];

/// This rank's [`Hints`].
pub(crate) fn hints(f: &FileObj, write: bool) -> Hints {
    let mut cached = f
        .cb_hints
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cached.get_or_insert_with(|| [look_up(f, false), look_up(f, true)])[usize::from(write)]
}

/// [`hints`] from the file's info now.
fn look_up(f: &FileObj, write: bool) -> Hints {
    let key = if write {
        "romio_cb_write"
    } else {
        "romio_cb_read"
    };
    let cb = match hint(f, key).as_deref() {
        Some("enable") => 1,
        Some("disable") => 2,
        _ => 0,
    };
    let num = |k: &str| hint(f, k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    [
        cb,
        num("cb_nodes"),
        num("striping_unit"),
        num("cb_buffer_size"),
    ]
}

/// Whether the group's access goes in two phases (the same answer on every rank: it
/// reads only what every rank said). Never in atomic mode, where each rank's access
/// must land whole (an aggregator's domains would interleave overlapping accesses), nor
/// where no rank has more than one run: each rank then moves its bytes in one call, the
/// fewest there can be, where two phases would add an exchange (a 64-byte
/// `MPI_File_read_at_all` at 2 ranks took 7.4 µs so, ROMIO 1.2).
pub(crate) fn two_phase(f: &FileObj, parts: &[Part]) -> bool {
    if f.atomic.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    match parts.first().map(|p| p.cb) {
        Some(1) => return parts.iter().any(|p| p.bytes > 0),
        Some(2) => return false,
        _ => {}
    }
    let runs: u64 = parts.iter().map(|p| p.runs).sum();
    let bytes: u64 = parts.iter().map(|p| p.bytes).sum();
    let one_each = parts.iter().all(|p| p.runs <= 1);
    runs > 0 && bytes / runs < DIRECT_MIN_RUN && parts.len() > 1 && !one_each
}

/// The value of hint `key` on this rank.
pub(crate) fn hint(f: &FileObj, key: &str) -> Option<String> {
    f.info
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// The aggregators (ranks) and their domains of `[lo, hi)`: `n` equal parts aligned to
/// `align`, the last ending at `hi`. Empty domains are dropped.
pub(crate) fn domains(lo: u64, hi: u64, n: u64, align: u64) -> Vec<(u64, u64)> {
    if hi <= lo || n == 0 {
        return Vec::new();
    }
    let per = (hi - lo).div_ceil(n).div_ceil(align.max(1)) * align.max(1);
    (0..n)
        .map(|i| (lo + i * per, (lo + (i + 1) * per).min(hi)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// Pieces `(file offset, length)` sent to one aggregator, in increasing offset order,
/// compressed into strided groups `(offset, length, gap, count)`: piece `i` of a group is
/// at `offset + i * gap`. A cyclic(1) view's pieces in a domain are one group, where a
/// list would hold one entry per element.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Groups {
    pub(crate) list: Vec<[u64; 4]>,
}

impl Groups {
    /// Adds the next piece (after every piece added before it).
    pub(crate) fn push(&mut self, o: u64, l: u64) {
        if let Some(g) = self.list.last_mut() {
            if g[1] == l {
                if g[3] == 1 && o > g[0] {
                    g[2] = o - g[0];
                    g[3] = 2;
                    return;
                }
                if g[3] > 1 && o == g[0] + g[2] * g[3] {
                    g[3] += 1;
                    return;
                }
            }
        }
        self.list.push([o, l, 0, 1]);
    }

    /// Every piece, in order.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.list
            .iter()
            .flat_map(|g| (0..g[3]).map(move |i| (g[0] + i * g[2], g[1])))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.list.len() as u64).to_le_bytes());
        for g in &self.list {
            for x in g {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }

    /// The groups at the start of `b`, and where what follows them starts.
    fn decode(b: &[u8]) -> Option<(Groups, usize)> {
        let n = usize::try_from(u64_at(b, 0)?).ok()?;
        let end = n.checked_mul(32)?.checked_add(8)?;
        if end > b.len() {
            return None;
        }
        let list = (0..n)
            .map(|i| {
                let w = |k: usize| u64_at(b, 8 + 32 * i + 8 * k);
                Some([w(0)?, w(1)?, w(2)?, w(3)?])
            })
            .collect::<Option<Vec<_>>>()?;
        Some((Groups { list }, end))
    }
}

/// Which bytes of a domain some piece covers: one bit per byte.
pub(crate) struct Cover {
    bits: Vec<u64>,
}

impl Cover {
    pub(crate) fn new(len: usize) -> Cover {
        Cover {
            bits: vec![0; len.div_ceil(64)],
        }
    }

    /// Marks bytes `[a, b)`.
    pub(crate) fn set(&mut self, a: usize, b: usize) {
        let (mut a, b) = (a, b.min(self.bits.len() * 64));
        while a < b {
            let (w, bit) = (a / 64, a % 64);
            let n = (64 - bit).min(b - a);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            self.bits[w] |= mask;
            a += n;
        }
    }

    /// The covered segments `(start, length)`, in order.
    pub(crate) fn segments(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        let mut open: Option<usize> = None;
        for (w, &word) in self.bits.iter().enumerate() {
            if (word == u64::MAX && open.is_some()) || (word == 0 && open.is_none()) {
                continue;
            }
            for bit in 0..64 {
                let at = w * 64 + bit;
                match (word >> bit & 1 == 1, open) {
                    (true, None) => open = Some(at),
                    (false, Some(s)) => {
                        out.push((s, at - s));
                        open = None;
                    }
                    _ => {}
                }
            }
        }
        if let Some(s) = open {
            out.push((s, self.bits.len() * 64 - s));
        }
        out
    }
}

/// What the domains are aligned to: rank 0's `striping_unit`, else [`ALIGN`].
fn alignment(parts: &[Part]) -> u64 {
    parts
        .first()
        .map(|p| p.unit)
        .filter(|&n| n > 0)
        .unwrap_or(ALIGN)
}

/// The bytes of a domain a round moves: from rank 0's `cb_buffer_size` ([`round_bytes`]).
fn round_size(parts: &[Part]) -> u64 {
    round_bytes(parts.first().map_or(0, |p| p.buffer))
}

/// The aggregators: `count` ranks spread over the group, and the domains they own.
fn plan(parts: &[Part]) -> (Vec<u32>, Vec<(u64, u64)>) {
    let size = parts.len() as u64;
    let first = parts.first().cloned().unwrap_or_default();
    let want = Some(first.nodes)
        .filter(|&n| n > 0)
        .unwrap_or(size)
        .min(size);
    let align = alignment(parts);
    let lo = parts
        .iter()
        .filter(|p| p.bytes > 0)
        .map(|p| p.lo)
        .min()
        .unwrap_or(0);
    let hi = parts
        .iter()
        .filter(|p| p.bytes > 0)
        .map(|p| p.hi)
        .max()
        .unwrap_or(0);
    let doms = domains(lo, hi, want, align);
    let aggs = (0..doms.len() as u64)
        .map(|i| (i * size / doms.len() as u64) as u32)
        .collect();
    (aggs, doms)
}

/// Checks that every piece of `g` lies in `[lo, hi)` and is well formed (a length, a
/// count, a gap no shorter than the length): the bytes of its pieces and the span
/// `(first, end)` they cover, or `None` (a malformed list from a peer).
pub(crate) fn checked(g: &Groups, lo: u64, hi: u64) -> Option<(u64, u64, u64)> {
    let (mut bytes, mut first, mut end) = (0u64, u64::MAX, 0u64);
    for p in &g.list {
        let [o, l, gap, count] = *p;
        if l == 0 || count == 0 || (count > 1 && gap < l) || o < lo {
            return None;
        }
        let last = gap.checked_mul(count - 1)?.checked_add(o)?.checked_add(l)?;
        if last > hi {
            return None;
        }
        bytes = bytes.checked_add(l.checked_mul(count)?)?;
        first = first.min(o);
        end = end.max(last);
    }
    Some((bytes, first, end))
}

/// Whether a span is too sparse for one buffer: the pieces are then written or read one
/// group at a time (memory bounded by what moves, not by how far apart it lies).
fn sparse(span: u64, bytes: u64) -> bool {
    span > bytes.saturating_mul(4).saturating_add(16 << 20)
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i..i.checked_add(8)?)?
        .try_into()
        .ok()
        .map(u64::from_le_bytes)
}

/// Exchanges `blocks` (one per destination rank) for what every rank sends here.
fn exchange(f: &FileObj, blocks: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, MpiError> {
    let n = f.comm.size() as usize;
    let lens: Vec<u64> = blocks.iter().map(|b| b.len() as u64).collect();
    let mut theirs = vec![0u64; n];
    f.comm.alltoall(&lens, &mut theirs)?;
    let sends: Vec<(u32, Vec<u8>)> = blocks
        .into_iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(r, b)| (r as u32, b))
        .collect();
    let recvs: Vec<(u32, usize)> = theirs
        .iter()
        .enumerate()
        .filter(|(_, &l)| l > 0)
        .map(|(r, &l)| (r as u32, l as usize))
        .collect();
    let from: Vec<u32> = recvs.iter().map(|r| r.0).collect();
    let got = f.comm.iexchange(sends, recvs)?.wait()?;
    let mut out = vec![Vec::new(); n];
    for (r, b) in from.into_iter().zip(got) {
        out[r as usize] = b;
    }
    Ok(out)
}

fn malformed(call: &'static str) -> MpiError {
    MpiError::invalid(
        MPI_ERR_INTERN,
        format!("{call}: a malformed piece list from a peer"),
    )
}

/// The group's next round of an access in two phases, once this one is done: `false`
/// where no domain has bytes left (the same answer on every rank); else the chunks of
/// the next round, from one allreduce of where each domain's next touched byte is.
fn next_round(f: &FileObj, r: &mut Rounds<'_>) -> Result<bool, MpiError> {
    if !r.more() {
        return Ok(false);
    }
    let mine = r.next_starts();
    let mut starts = vec![0u64; mine.len()];
    f.comm.allreduce(&mine, &mut starts, &Op::Min)?;
    Ok(r.advance(&starts))
}

/// The aggregator of each domain and this rank's domain, if it aggregates one.
fn roles(f: &FileObj, parts: &[Part]) -> (Vec<u32>, Vec<(u64, u64)>, Option<usize>) {
    let (aggs, doms) = plan(parts);
    let me = f.comm.rank();
    let mine = aggs.iter().position(|&a| a == me);
    (aggs, doms, mine)
}

/// A collective write in two phases: `data` (this rank's runs' bytes, in order) goes to
/// the aggregators, each of which places the pieces of its domain in one buffer and
/// writes every covered segment with one call. The domains move in rounds of at most
/// `cb_buffer_size` bytes each ([`Rounds`]). A rank whose part fails (a write, a
/// malformed list) still takes part in every round's exchange, with nothing, so that no
/// rank waits for it; its error is its outcome.
///
/// # Errors
/// A peer failing, or this aggregator's write (its class: a full disk is
/// `MPI_ERR_NO_SPACE`).
pub(crate) fn write(
    f: &FileObj,
    parts: &[Part],
    runs: &[FileRun],
    data: &[u8],
    call: &'static str,
) -> Result<(), MpiError> {
    let (aggs, doms, mine) = roles(f, parts);
    let n = f.comm.size() as usize;
    let mut rounds = Rounds::new(runs, &doms, round_size(parts), alignment(parts));
    let mut failed: Option<MpiError> = None;
    loop {
        let mut blocks: Vec<Vec<u8>> = vec![Vec::new(); n];
        if failed.is_none() && !doms.is_empty() {
            // Per domain: its groups, then the bytes of its pieces in order.
            let mut groups: Vec<Groups> = vec![Groups::default(); doms.len()];
            let mut bytes: Vec<Vec<u8>> = vec![Vec::new(); doms.len()];
            rounds.cut(|d, o, l, at| {
                groups[d].push(o, l as u64);
                bytes[d].extend_from_slice(&data[at..at + l]);
            });
            for (d, (g, b)) in groups.iter().zip(bytes).enumerate() {
                if g.list.is_empty() {
                    continue;
                }
                let out = &mut blocks[aggs[d] as usize];
                g.encode(out);
                out.extend_from_slice(&b);
            }
        }
        let got = exchange(f, blocks)?;
        if failed.is_none() {
            let chunk = mine.and_then(|d| rounds.chunk(d));
            if let Err(e) = write_chunk(f, chunk, &got, call) {
                failed = Some(e);
            }
        }
        if !next_round(f, &mut rounds)? {
            break;
        }
    }
    failed.map_or(Ok(()), Err)
}

/// An aggregator's part of one round of a write: the pieces `got` from every rank,
/// which must lie in its chunk `[lo, hi)` of the round, placed in one buffer and written
/// segment by segment (or, far apart, group by group).
fn write_chunk(
    f: &FileObj,
    chunk: Option<(u64, u64)>,
    got: &[Vec<u8>],
    call: &'static str,
) -> Result<(), MpiError> {
    let mine: Vec<(Groups, usize, &Vec<u8>)> = got
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| {
            Groups::decode(b)
                .map(|(g, at)| (g, at, b))
                .ok_or_else(|| malformed(call))
        })
        .collect::<Result<_, _>>()?;
    let Some((lo, hi)) = chunk else {
        // Pieces sent here although this rank aggregates nothing this round: the
        // group's plans differ (they never should); refuse rather than drop them.
        return if mine.is_empty() {
            Ok(())
        } else {
            Err(malformed(call))
        };
    };
    // Every list checked against this chunk first: (bytes, first, end) of each.
    let mut spans = Vec::with_capacity(mine.len());
    for (g, at, b) in &mine {
        let c = checked(g, lo, hi).ok_or_else(|| malformed(call))?;
        if usize::try_from(c.0).ok() != Some(b.len() - at) {
            return Err(malformed(call));
        }
        spans.push(c);
    }
    let bytes: u64 = spans.iter().map(|c| c.0).sum();
    let first = spans.iter().map(|c| c.1).min().unwrap_or(0);
    let end = spans.iter().map(|c| c.2).max().unwrap_or(0);
    if bytes == 0 {
        return Ok(());
    }
    if sparse(end - first, bytes) {
        // Far apart: each group's pieces written as they are.
        for (g, at, b) in &mine {
            let mut at = *at;
            for p in &g.list {
                let [o, l, gap, count] = *p;
                let (l, n) = (l as usize, count as usize);
                if gap == l as u64 {
                    io::write(f, &[(o, l * n)], &b[at..at + l * n], call)?;
                    at += l * n;
                    continue;
                }
                for k in 0..count {
                    io::write(f, &[(o + k * gap, l)], &b[at..at + l], call)?;
                    at += l;
                }
            }
        }
        return Ok(());
    }
    let span = (end - first) as usize;
    let mut buf = Vec::new();
    buf.try_reserve_exact(span).map_err(|_| {
        MpiError::invalid(
            MPI_ERR_NO_MEM,
            format!("{call}: no memory for an aggregator's {span} bytes"),
        )
    })?;
    buf.resize(span, 0u8);
    let mut cover = Cover::new(span);
    for (g, at, b) in &mine {
        let mut at = *at;
        for (o, l) in g.pieces() {
            let (s, l) = ((o - first) as usize, l as usize);
            buf[s..s + l].copy_from_slice(&b[at..at + l]);
            cover.set(s, s + l);
            at += l;
        }
    }
    for (s, l) in cover.segments() {
        io::write(f, &[(first + s as u64, l)], &buf[s..s + l], call)?;
    }
    Ok(())
}

/// A collective read in two phases: this rank's pieces are asked of the aggregators,
/// each of which reads the span its chunk's pieces cover with one call (data sieving)
/// and sends the pieces back, with where the file ended if the read was short; the
/// bytes land in `out` in run order. The domains move in rounds of at most
/// `cb_buffer_size` bytes each ([`Rounds`]); a rank whose part fails still takes part in
/// every round's exchanges. The count: bytes before the first piece the end of the file
/// cut short.
///
/// # Errors
/// A peer failing, or this aggregator's read.
pub(crate) fn read(
    f: &FileObj,
    parts: &[Part],
    runs: &[FileRun],
    out: &mut [u8],
    call: &'static str,
) -> Result<usize, MpiError> {
    let (aggs, doms, mine) = roles(f, parts);
    let n = f.comm.size() as usize;
    let mut rounds = Rounds::new(runs, &doms, round_size(parts), alignment(parts));
    let mut failed: Option<MpiError> = None;
    let mut short = usize::MAX;
    loop {
        let mut asks: Vec<Vec<u8>> = vec![Vec::new(); n];
        if failed.is_none() && !doms.is_empty() {
            let mut groups: Vec<Groups> = vec![Groups::default(); doms.len()];
            rounds.cut(|d, o, l, _| groups[d].push(o, l as u64));
            for (d, g) in groups.iter().enumerate() {
                if !g.list.is_empty() {
                    g.encode(&mut asks[aggs[d] as usize]);
                }
            }
        }
        let asked = exchange(f, asks)?;
        // Served even after this rank failed: a rank that asks it gets its bytes, or
        // where the file ended, rather than nothing (which it would take for a
        // malformed answer, reporting that instead of this rank's error).
        let chunk = mine.and_then(|d| rounds.chunk(d));
        let (replies, e) = serve_chunk(f, chunk, &asked, call);
        if let Some(e) = e {
            failed.get_or_insert(e);
        }
        let answers = exchange(f, replies)?;
        if failed.is_none() {
            match place(&rounds, &aggs, &answers, out) {
                Some(s) => short = short.min(s),
                None => failed = Some(malformed(call)),
            }
        }
        if !next_round(f, &mut rounds)? {
            break;
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(short.min(out.len()))
}

/// An aggregator's part of one round of a read: the replies to the pieces `asked` by
/// every rank, which must lie in its chunk of the round, each starting with where the
/// file ended (`u64::MAX`: past every piece). A malformed list is answered with
/// nothing, a read the file system fails with zeros and the span's start as where the
/// file ended (every rank still takes part in the replies' exchange); the error is this
/// rank's outcome, which the group then agrees on.
fn serve_chunk(
    f: &FileObj,
    chunk: Option<(u64, u64)>,
    asked: &[Vec<u8>],
    call: &'static str,
) -> (Vec<Vec<u8>>, Option<MpiError>) {
    let n = asked.len();
    let mut failed: Option<MpiError> = None;
    let mut replies: Vec<Vec<u8>> = vec![Vec::new(); n];
    let lists: Vec<Option<Groups>> = asked
        .iter()
        .map(|b| {
            if b.is_empty() {
                Some(Groups::default())
            } else {
                Groups::decode(b).map(|g| g.0)
            }
        })
        .collect();
    if lists.iter().any(Option::is_none) {
        failed = Some(malformed(call));
    }
    // Every list checked against this rank's chunk (pieces asked of a rank that
    // aggregates nothing this round, or outside its chunk, are malformed).
    let mut spans: Vec<Option<(u64, u64, u64)>> = vec![None; n];
    for (r, g) in lists.iter().enumerate() {
        let Some(g) = g.as_ref().filter(|g| !g.list.is_empty()) else {
            continue;
        };
        match chunk.and_then(|(lo, hi)| checked(g, lo, hi)) {
            Some(c) => spans[r] = Some(c),
            None => {
                failed.get_or_insert_with(|| malformed(call));
            }
        }
    }
    let bytes: u64 = spans.iter().flatten().map(|c| c.0).sum();
    let lo = spans.iter().flatten().map(|c| c.1).min().unwrap_or(0);
    let hi = spans.iter().flatten().map(|c| c.2).max().unwrap_or(0);
    if failed.is_none() && bytes > 0 && sparse(hi - lo, bytes) {
        // Far apart: each group's pieces read as they are, up to the end of the file.
        for (r, g) in lists.iter().enumerate() {
            let Some(g) = g.as_ref().filter(|_| spans[r].is_some()) else {
                continue;
            };
            let reply = &mut replies[r];
            reply.extend_from_slice(&u64::MAX.to_le_bytes());
            let mut eof = u64::MAX;
            for (o, l) in g.pieces() {
                let at = reply.len();
                reply.resize(at + l as usize, 0);
                match io::read(f, &[(o, l as usize)], &mut reply[at..], call) {
                    Ok(got) if (got as u64) < l => eof = eof.min(o + got as u64),
                    Ok(_) => {}
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            reply[..8].copy_from_slice(&eof.to_le_bytes());
        }
    } else if failed.is_none() && bytes > 0 {
        let span = (hi - lo) as usize;
        let mut buf = vec![0u8; span];
        let got = match io::read(f, &[(lo, span)], &mut buf, call) {
            Ok(n) => n,
            Err(e) => {
                failed = Some(e);
                0
            }
        };
        let eof = if got < span {
            lo + got as u64
        } else {
            u64::MAX
        };
        for (r, g) in lists.iter().enumerate() {
            let Some(g) = g.as_ref().filter(|_| spans[r].is_some()) else {
                continue;
            };
            let reply = &mut replies[r];
            reply.extend_from_slice(&eof.to_le_bytes());
            for (o, l) in g.pieces() {
                let s = (o - lo) as usize;
                reply.extend_from_slice(&buf[s..s + l as usize]);
            }
        }
    }
    (replies, failed)
}

/// Places one round's `answers` (one per aggregator) into `out`, cut again in the same
/// order as the asks: the position of the first byte the end of the file cut short
/// (`usize::MAX` for none), or `None` for an answer that does not hold what was asked.
fn place(rounds: &Rounds<'_>, aggs: &[u32], answers: &[Vec<u8>], out: &mut [u8]) -> Option<usize> {
    let mut cursor: Vec<usize> = vec![8; answers.len()];
    let mut short = usize::MAX;
    let mut bad = false;
    rounds.cut(|d, o, l, pos| {
        let a = aggs[d] as usize;
        let b = &answers[a];
        let at = cursor[a];
        match (u64_at(b, 0), b.get(at..at + l)) {
            (Some(eof), Some(bytes)) => {
                out[pos..pos + l].copy_from_slice(bytes);
                if o + l as u64 > eof {
                    short = short.min(pos + eof.saturating_sub(o) as usize);
                }
            }
            _ => bad = true,
        }
        cursor[a] = at + l;
    });
    (!bad).then_some(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_cover_the_range_aligned_and_in_order() {
        assert_eq!(domains(0, 10000, 2, 4096), vec![(0, 8192), (8192, 10000)]);
        assert_eq!(domains(100, 200, 4, 4096), vec![(100, 200)]);
        assert!(domains(5, 5, 3, 4096).is_empty());
        for (lo, hi, n) in [(0u64, 1u64 << 20, 3u64), (7, 99_999, 4), (4096, 4097, 2)] {
            let d = domains(lo, hi, n, 4096);
            assert_eq!(d.first().map(|x| x.0), Some(lo));
            assert_eq!(d.last().map(|x| x.1), Some(hi));
            assert!(d.windows(2).all(|w| w[0].1 == w[1].0) && d.len() as u64 <= n);
        }
    }

    #[test]
    fn runs_cut_at_domain_bounds_keep_every_byte_once_in_order() {
        let doms = domains(0, 100, 3, 8);
        let runs = vec![(0u64, 10usize), (30, 50), (95, 5)];
        let mut pieces = Vec::new();
        let rounds = Rounds::new(&runs, &doms, 1 << 20, 8);
        rounds.cut(|d, o, l, pos| pieces.push((d, o, l, pos)));
        let mut at = 0usize;
        for &(d, o, l, pos) in &pieces {
            assert!(o >= doms[d].0 && o + l as u64 <= doms[d].1, "{pieces:?}");
            assert_eq!(pos, at);
            at += l;
        }
        assert_eq!(at, 65);
        let bytes: Vec<u64> = pieces
            .iter()
            .flat_map(|&(_, o, l, _)| o..o + l as u64)
            .collect();
        let want: Vec<u64> = runs.iter().flat_map(|&(o, l)| o..o + l as u64).collect();
        assert_eq!(bytes, want);
    }

    #[test]
    fn strided_pieces_compress_to_groups_and_expand_back() {
        // cyclic(1) of 4-byte elements over 3 ranks: one group.
        let mut g = Groups::default();
        let pieces: Vec<(u64, u64)> = (0..1000u64).map(|i| (4 + 12 * i, 4)).collect();
        for &(o, l) in &pieces {
            g.push(o, l);
        }
        assert_eq!(g.list, vec![[4, 4, 12, 1000]]);
        assert_eq!(g.pieces().collect::<Vec<_>>(), pieces);
        // Irregular pieces stay exact.
        let mut g = Groups::default();
        let odd = [
            (0u64, 4u64),
            (8, 4),
            (20, 4),
            (24, 8),
            (40, 8),
            (56, 8),
            (57, 1),
        ];
        for &(o, l) in &odd {
            g.push(o, l);
        }
        assert_eq!(g.pieces().collect::<Vec<_>>(), odd.to_vec());
        let mut wire = Vec::new();
        g.encode(&mut wire);
        wire.extend_from_slice(b"tail");
        let (back, at) = Groups::decode(&wire).expect("decodes");
        assert_eq!((back, &wire[at..]), (g, &b"tail"[..]));
        assert!(Groups::decode(&wire[..20]).is_none());
        assert!(Groups::decode(&[0xff; 8]).is_none());
    }

    #[test]
    fn piece_lists_outside_the_domain_or_malformed_are_refused() {
        let g = |list: Vec<[u64; 4]>| Groups { list };
        assert_eq!(
            checked(&g(vec![[100, 4, 12, 10]]), 100, 300),
            Some((40, 100, 212))
        );
        assert_eq!(checked(&g(vec![[100, 4, 12, 10]]), 101, 300), None); // before the domain
        assert_eq!(checked(&g(vec![[100, 4, 12, 10]]), 100, 211), None); // past its end
        assert_eq!(checked(&g(vec![[100, 0, 12, 10]]), 0, 999), None); // empty pieces
        assert_eq!(checked(&g(vec![[100, 4, 2, 10]]), 0, 999), None); // overlapping
        assert_eq!(checked(&g(vec![[100, 4, 0, u64::MAX]]), 0, 999), None);
        assert_eq!(
            checked(&g(vec![[u64::MAX - 2, 4, 8, 2]]), 0, u64::MAX),
            None
        ); // overflow
        assert!(!sparse(1 << 20, 1 << 20) && sparse(1 << 40, 8));
    }

    #[test]
    fn cover_gives_the_covered_segments() {
        let mut c = Cover::new(300);
        for (a, b) in [
            (0, 4),
            (4, 8),
            (70, 200),
            (199, 201),
            (250, 251),
            (299, 300),
        ] {
            c.set(a, b);
        }
        assert_eq!(c.segments(), vec![(0, 8), (70, 131), (250, 1), (299, 1)]);
        let mut full = Cover::new(128);
        full.set(0, 128);
        assert_eq!(full.segments(), vec![(0, 128)]);
    }

    #[test]
    fn a_failed_rank_is_not_a_part() {
        let p = Part {
            runs: 3,
            bytes: 12,
            lo: 4,
            hi: 40,
            etypes: 3,
            cb: 2,
            nodes: 4,
            unit: 65536,
            buffer: 1 << 20,
            key: 77,
            boxed: Vec::new(),
        };
        // A small access's numbers fit its record: nothing follows.
        let (rec, extra) = p.record();
        assert_eq!((rec[0], extra.len(), extra_len(&rec)), (SHORT, 0, Some(0)));
        assert_eq!(Part::from_record(&rec, &[]), Some(p.clone()));
        let boxed = Part {
            boxed: vec![0, 5, 10, 7],
            ..p.clone()
        };
        let (rec, extra) = boxed.record();
        assert_eq!((rec[0], extra.len()), (SHORT, 32));
        assert_eq!(Part::from_record(&rec, &extra), Some(boxed.clone()));
        // Numbers too long for the record (a whole array's key, far offsets) follow it.
        let far = Part {
            lo: u64::MAX - 3,
            hi: 2,
            key: u64::MAX,
            ..boxed.clone()
        };
        let (long, far_extra) = far.record();
        assert_eq!(long[0], LONG);
        assert_eq!(extra_len(&long), Some(far_extra.len()));
        assert_eq!(Part::from_record(&long, &far_extra), Some(far));
        // A box that is not the length the record says, an error's record, a short one,
        // numbers cut short, a tag unknown.
        assert_eq!(Part::from_record(&rec, &extra[..24]), None);
        assert_eq!(Part::from_record(&p.record().0, &extra), None);
        assert_eq!(
            Part::from_record(&long, &far_extra[..far_extra.len() - 8]),
            None
        );
        let n = far_extra.len() - 32;
        assert_eq!(
            Part::from_record(&record_of(LONG, n - 1), &far_extra[..n - 1]),
            None
        );
        let failed = record_of(FAILED, 0);
        assert_eq!(Part::from_record(&failed, &[]), None);
        assert_eq!(Part::from_record(&[0; RECORD - 1], &[]), None);
        let mut odd = p.record().0;
        odd[0] = 9;
        assert_eq!(
            (extra_len(&odd), Part::from_record(&odd, &[])),
            (None, None)
        );
        let too_many = 8 * (MAX_BOX + 1);
        let huge = Part {
            boxed: vec![1; MAX_BOX + 1],
            ..p
        };
        let (rec, extra) = huge.record();
        assert_eq!(extra.len(), too_many);
        assert_eq!(Part::from_record(&rec, &extra), None);
    }

    /// Random parts round-trip through their records, and random bytes as a record (the
    /// decoder of what other ranks send) give `None` or a part, never a panic
    /// (deterministic: a fixed-seed generator).
    #[test]
    fn records_round_trip_and_random_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            // Numbers of every width: shifted right by a random amount.
            let mut num = || next() >> (next() % 64);
            let p = Part {
                runs: num(),
                bytes: num(),
                lo: num(),
                hi: num(),
                etypes: num(),
                cb: num() % 3,
                nodes: num(),
                unit: num(),
                buffer: num(),
                key: num(),
                boxed: (0..next() % 5).map(|_| next()).collect(),
            };
            let (rec, extra) = p.record();
            assert_eq!(extra_len(&rec), Some(extra.len()));
            assert_eq!(Part::from_record(&rec, &extra), Some(p));
            let mut junk = [0u8; RECORD];
            junk.iter_mut().for_each(|b| *b = next() as u8);
            junk[0] %= 4;
            let tail: Vec<u8> = (0..next() % 64).map(|_| next() as u8).collect();
            let _ = extra_len(&junk);
            let _ = Part::from_record(&junk, &tail);
        }
    }

    /// LEB128 numbers round-trip at every width; one longer than 64 bits, or cut short,
    /// is refused.
    #[test]
    fn varints_round_trip_and_refuse_overlong_ones() {
        for x in [
            0,
            1,
            127,
            128,
            300,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, x);
            let mut at = 0;
            assert_eq!((get_varint(&b, &mut at), at), (Some(x), b.len()), "{x}");
            assert_eq!(get_varint(&b[..b.len() - 1], &mut 0), None, "{x}");
        }
        assert_eq!(get_varint(&[0xff; 10], &mut 0), None);
        assert_eq!(
            get_varint(
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
                &mut 0
            ),
            None
        );
        assert_eq!(get_varint(&[0x80; 11], &mut 0), None);
    }
}
