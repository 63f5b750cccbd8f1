//! Collective accesses in two phases (SCI-MPICH's and ROMIO's collective buffering, the
//! iWarp paper's reshuffle into an I/O distribution): when the group's runs are short,
//! the data first move between ranks so that each aggregator holds one contiguous
//! domain of the file, which it then writes (or reads) with one call per covered
//! segment instead of one per run.
//!
//! Every collective access starts with [`decide`], one allgather in which every rank
//! says whether it can go on and how many runs and bytes it has where; all ranks then
//! take the same path. The planning ([`domains`], [`cut`], [`segments`]) is pure.

use std::collections::HashMap;

use crate::abi::*;
use crate::error::MpiError;
use crate::file::view::FileRun;
use crate::file::{io, FileObj};

/// A collective access whose runs average this many bytes or more is done by each rank
/// on its own runs; below, in two phases.
pub(crate) const DIRECT_MIN_RUN: u64 = 16 * 1024;

/// Aggregator domains are aligned to this (a page; `striping_unit` overrides).
const ALIGN: u64 = 4096;

/// What a rank says in [`decide`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) runs: u64,
    pub(crate) bytes: u64,
    /// First and last-plus-one byte of the file it touches (0, 0 when none).
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    /// For `*_ordered`: its etypes.
    pub(crate) etypes: u64,
    /// Its `romio_cb_*` hint for this access: 0 none, 1 enable, 2 disable (rank 0's
    /// decides for the group, so that hints differing between ranks cannot split it).
    pub(crate) cb: u64,
}

impl Part {
    /// The summary of `runs`.
    pub(crate) fn of(runs: &[FileRun], etypes: u64, cb: u64) -> Part {
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
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = vec![0u8];
        for x in [
            self.runs,
            self.bytes,
            self.lo,
            self.hi,
            self.etypes,
            self.cb,
        ] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    fn decode(b: &[u8]) -> Option<Part> {
        if b.len() != 49 || b[0] != 0 {
            return None;
        }
        let at =
            |i: usize| u64::from_le_bytes(b[1 + 8 * i..9 + 8 * i].try_into().unwrap_or_default());
        Some(Part {
            runs: at(0),
            bytes: at(1),
            lo: at(2),
            hi: at(3),
            etypes: at(4),
            cb: at(5),
        })
    }
}

/// The first step of every collective access: every rank's [`Part`] (`None` from a
/// rank that cannot go on; the group then stops).
///
/// # Errors
/// `MPI_ERR_IO` naming the first rank that cannot go on (this rank's own error is the
/// caller's to report).
pub(crate) fn decide(
    f: &FileObj,
    mine: Option<Part>,
    call: &'static str,
) -> Result<Vec<Part>, MpiError> {
    let msg = match &mine {
        Some(p) => p.encode(),
        None => vec![1u8],
    };
    let all = f.comm.allgather_bytes(&msg)?;
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            Part::decode(b).ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_IO,
                    format!("{call}: rank {r} of the file's group failed in this collective call"),
                )
            })
        })
        .collect()
}

/// This rank's `romio_cb_write` (or `romio_cb_read`) hint, for [`Part::cb`].
pub(crate) fn cb_hint(f: &FileObj, write: bool) -> u64 {
    let key = if write {
        "romio_cb_write"
    } else {
        "romio_cb_read"
    };
    match hint(f, key).as_deref() {
        Some("enable") => 1,
        Some("disable") => 2,
        _ => 0,
    }
}

/// Whether the group's access goes in two phases (the same answer on every rank: it
/// reads only what every rank said). Never in atomic mode, where each rank's access
/// must land whole (an aggregator's domains would interleave overlapping accesses).
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
    runs > 0 && bytes / runs < DIRECT_MIN_RUN && parts.len() > 1
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

/// `runs` cut at the domains' bounds: for each piece, (domain, file offset, length,
/// position in the data).
pub(crate) fn cut(runs: &[FileRun], doms: &[(u64, u64)]) -> Vec<(usize, u64, usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    for &(off, len) in runs {
        let (mut o, end) = (off, off + len as u64);
        while o < end {
            // Domains are sorted and cover [lo, hi): the first whose end is past `o`.
            let d = doms.partition_point(|&(_, e)| e <= o).min(doms.len() - 1);
            let take = (end.min(doms[d].1.max(o + 1)) - o) as usize;
            out.push((d, o, take, at + (o - off) as usize));
            o += take as u64;
        }
        at += len;
    }
    out
}

/// Pieces `(offset, length)` merged into the segments they cover, sorted.
pub(crate) fn segments(pieces: &mut [(u64, usize)]) -> Vec<(u64, usize)> {
    pieces.sort_unstable();
    let mut out: Vec<(u64, usize)> = Vec::new();
    for &(o, l) in pieces.iter() {
        match out.last_mut() {
            Some(s) if o <= s.0 + s.1 as u64 => {
                let end = (o + l as u64).max(s.0 + s.1 as u64);
                s.1 = (end - s.0) as usize;
            }
            _ => out.push((o, l)),
        }
    }
    out
}

/// The aggregators: `count` ranks spread over the group, and the domains they own.
fn plan(f: &FileObj, parts: &[Part]) -> (Vec<u32>, Vec<(u64, u64)>) {
    let size = parts.len() as u64;
    let want = hint(f, "cb_nodes")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(size)
        .min(size);
    let align = hint(f, "striping_unit")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ALIGN);
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

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default())
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

/// A collective write in two phases: `data` (this rank's runs' bytes, in order) goes to
/// the aggregators, each of which writes its domain's covered segments.
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
    let (aggs, doms) = plan(f, parts);
    let n = f.comm.size() as usize;
    let mut blocks: Vec<Vec<u8>> = vec![Vec::new(); n];
    if !doms.is_empty() {
        // Per aggregator: u64 count, (offset, length) pairs, then the bytes.
        let pieces = cut(runs, &doms);
        let mut per: HashMap<usize, Vec<(u64, usize, usize)>> = HashMap::new();
        for (d, o, l, at) in pieces {
            per.entry(d).or_default().push((o, l, at));
        }
        for (d, ps) in per {
            let b = &mut blocks[aggs[d] as usize];
            b.extend_from_slice(&(ps.len() as u64).to_le_bytes());
            for &(o, l, _) in &ps {
                b.extend_from_slice(&o.to_le_bytes());
                b.extend_from_slice(&(l as u64).to_le_bytes());
            }
            for &(_, l, at) in &ps {
                b.extend_from_slice(&data[at..at + l]);
            }
        }
    }
    let got = exchange(f, blocks)?;
    // This rank as an aggregator: every piece of its domain, placed, then written one
    // segment at a time.
    let mut pieces: Vec<(u64, usize)> = Vec::new();
    let mut bytes: Vec<(u64, &[u8])> = Vec::new();
    for b in &got {
        let mut at = 0usize;
        while at < b.len() {
            let k = u64_at(b, at) as usize;
            let mut dat = at + 8 + 16 * k;
            for i in 0..k {
                let o = u64_at(b, at + 8 + 16 * i);
                let l = u64_at(b, at + 16 + 16 * i) as usize;
                pieces.push((o, l));
                bytes.push((o, &b[dat..dat + l]));
                dat += l;
            }
            at = dat;
        }
    }
    if pieces.is_empty() {
        return Ok(());
    }
    let segs = segments(&mut pieces);
    bytes.sort_unstable_by_key(|p| p.0);
    let mut bi = 0usize;
    for (so, sl) in segs {
        let mut buf = vec![0u8; sl];
        while bi < bytes.len() && bytes[bi].0 < so + sl as u64 {
            let (o, b) = bytes[bi];
            let s = (o - so) as usize;
            buf[s..s + b.len()].copy_from_slice(b);
            bi += 1;
        }
        io::write(f, &[(so, sl)], &buf, call)?;
    }
    Ok(())
}

/// A collective read in two phases: this rank's runs are asked of the aggregators,
/// which read their domains' requested segments and send the pieces back; the bytes
/// read land in `out` in run order. The count: bytes before the first piece cut short
/// by the end of the file.
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
    let (aggs, doms) = plan(f, parts);
    let n = f.comm.size() as usize;
    let mut asks: Vec<Vec<u8>> = vec![Vec::new(); n];
    // Per aggregator, the pieces asked, in order: (position in out, length).
    let mut mine: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    if !doms.is_empty() {
        for (d, o, l, at) in cut(runs, &doms) {
            let a = aggs[d] as usize;
            asks[a].extend_from_slice(&o.to_le_bytes());
            asks[a].extend_from_slice(&(l as u64).to_le_bytes());
            mine[a].push((at, l));
        }
    }
    let asked = exchange(f, asks)?;
    // This rank as an aggregator: the union of what was asked, read once.
    let mut pieces: Vec<(u64, usize)> = asked
        .iter()
        .flat_map(|b| {
            b.chunks_exact(16)
                .map(|c| (u64_at(c, 0), u64_at(c, 8) as usize))
        })
        .collect();
    let segs = segments(&mut pieces);
    // A read that fails is answered as empty, so that every rank still takes part in the
    // replies' exchange; the error is this rank's outcome, which the group then agrees on.
    let mut failed: Option<MpiError> = None;
    let mut held: Vec<(u64, Vec<u8>, usize)> = Vec::with_capacity(segs.len());
    for (so, sl) in segs {
        let mut buf = vec![0u8; sl];
        let got = match io::read(f, &[(so, sl)], &mut buf, call) {
            Ok(n) => n,
            Err(e) => {
                failed.get_or_insert(e);
                0
            }
        };
        held.push((so, buf, got));
    }
    // Replies: per piece asked, its valid length, then the bytes.
    let mut replies: Vec<Vec<u8>> = vec![Vec::new(); n];
    for (r, b) in asked.iter().enumerate() {
        for c in b.chunks_exact(16) {
            let (o, l) = (u64_at(c, 0), u64_at(c, 8) as usize);
            let s = held.partition_point(|h| h.0 + h.1.len() as u64 <= o);
            let (so, buf, got) = &held[s.min(held.len().saturating_sub(1))];
            let at = (o - so) as usize;
            let valid = got.saturating_sub(at).min(l);
            replies[r].extend_from_slice(&(valid as u64).to_le_bytes());
            replies[r].extend_from_slice(&buf[at..at + l]);
        }
    }
    let answers = exchange(f, replies)?;
    if let Some(e) = failed {
        return Err(e);
    }
    // Place the pieces; the count stops at the first short one (in data order).
    let mut short = usize::MAX;
    for (a, b) in answers.iter().enumerate() {
        let mut at = 0usize;
        for &(pos, l) in &mine[a] {
            let valid = u64_at(b, at) as usize;
            out[pos..pos + l].copy_from_slice(&b[at + 8..at + 8 + l]);
            if valid < l {
                short = short.min(pos + valid);
            }
            at += 8 + l;
        }
    }
    Ok(short.min(out.len()))
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
        let pieces = cut(&runs, &doms);
        let mut at = 0usize;
        for &(d, o, l, pos) in &pieces {
            assert!(o >= doms[d].0 && o + l as u64 <= doms[d].1, "{pieces:?}");
            assert_eq!(pos, at);
            at += l;
        }
        assert_eq!(at, 65);
        // Every file byte of the runs appears once.
        let bytes: Vec<u64> = pieces
            .iter()
            .flat_map(|&(_, o, l, _)| o..o + l as u64)
            .collect();
        let want: Vec<u64> = runs.iter().flat_map(|&(o, l)| o..o + l as u64).collect();
        assert_eq!(bytes, want);
    }

    #[test]
    fn pieces_merge_into_the_segments_they_cover() {
        let mut p = vec![
            (10u64, 5usize),
            (0, 4),
            (4, 6),
            (20, 1),
            (15, 2),
            (30, 10),
            (32, 3),
        ];
        assert_eq!(segments(&mut p), vec![(0, 17), (20, 1), (30, 10)]);
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
        };
        assert_eq!(Part::decode(&p.encode()), Some(p));
        assert_eq!(Part::decode(&[1]), None);
        assert_eq!(Part::decode(&[0; 48]), None);
        assert_eq!(Part::decode(&[0; 41]), None);
    }
}
