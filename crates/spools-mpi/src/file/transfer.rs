//! One access of a file, now ([`access_now`]): where it starts ([`Place`]), which way
//! the bytes go ([`Dir`]), and for a collective one the group's choice of path (each
//! rank on its own runs, or two phases through aggregators).

use std::sync::{Arc, PoisonError};

use crate::abi::*;
use crate::datatype::{buffer, bytes_of, committed, count as ccount, pack, unpack, TypeObj};
use crate::env::error::MpiError;
use crate::file::layout::{self, Whole};
use crate::file::place::{Dir, Place};
use crate::file::twophase::{self, Part};
use crate::file::view::Runs;
use crate::file::{io, FileObj, View};
use crate::p2p::request::status_with;

/// One access: `count` elements of `dt` at `buf`, read or written at `place`; with
/// `coll`, a collective call: every rank first says whether it can go on and what it
/// touches ([`twophase::decide`]), the group then takes one path (each rank on its own
/// runs, or two phases through aggregators), and every rank agrees on the outcome. The
/// status counts the bytes moved (short at the end of the file for a read).
///
/// # Safety
/// `buf` holds `count` elements of `dt` (writable for a read).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn access_now(
    f: &FileObj,
    buf: *mut u8,
    count: MPI_Count,
    dt: MPI_Datatype,
    place: Place,
    dir: Dir,
    coll: bool,
    call: &'static str,
) -> Result<MPI_Status, MpiError> {
    let ordered = matches!(place, Place::Ordered);
    let mut prep = prepare(
        f,
        buf as usize,
        count,
        dt,
        place,
        dir,
        coll && !ordered,
        call,
    )
    .and_then(|mut p| {
        // SAFETY: the caller's contract.
        unsafe { p.convert(buf, call) }?;
        Ok(p)
    });
    if !coll && !ordered {
        // SAFETY: the caller's contract.
        return unsafe { perform(f, buf, &prep?, None, call) };
    }
    // A collective access of at most one run of this rank's own (its runs listed: no
    // whole array) moves it now, before the group decides. Its outcome rides in the
    // decision's records, and where every rank moved its run so and the group's path is
    // each rank's own runs, that one step is the whole call: every rank saw every rank's
    // outcome there, so no agreement follows (a 64-byte `MPI_File_read_at_all` takes one
    // collective step, as ROMIO's does). Where the group goes in two phases instead, the
    // bytes move again: a read leaves the file as it was, and a write's aggregators write
    // the same bytes at the same offsets (an access that overlaps another rank's is
    // undefined outside atomic mode, which never takes two phases). Where another rank
    // cannot go on, the runs already written stay, as they do where a rank's write
    // fails in the direct path.
    let early = match &prep {
        Ok(p) if !ordered && early_access(p.runs.len() as u64, p.whole.is_some()) => {
            // SAFETY: the caller's contract.
            Some(unsafe { perform(f, buf, p, None, call) })
        }
        _ => None,
    };
    let hints = twophase::hints(f, dir == Dir::Write);
    let summary = |p: &Prep| {
        let mut s = Part::of(&p.runs, p.etypes, hints);
        if let Some(w) = &p.whole {
            // Its runs are not listed: what it moves is its bytes.
            s.key = w.key();
            s.bytes = p.bytes as u64;
            s.boxed.clone_from(&w.boxed);
        }
        s
    };
    let mine = match &early {
        Some(Err(e)) => Err(e),
        _ => prep.as_ref().map(summary),
    };
    let mut parts = twophase::decide(f, mine, call);
    // Whether every rank moved its run early: judged from this first decision, whose
    // parts are what each rank judged its own access by (a second one below lists the
    // runs of ranks that did not, which may then look alike).
    let all_early = parts
        .as_ref()
        .is_ok_and(|ps| ps.iter().all(|p| early_access(p.runs, p.key != 0)));
    // Not every rank accesses the same whole array: the ranks that skipped listing their
    // runs list them, and the group decides again (every rank sees the same parts, so
    // every rank takes this step or none).
    let retry = parts.as_ref().is_ok_and(|ps| {
        ps.iter().any(|p| p.key != 0) && whole_layout(prep.as_ref().ok(), ps).is_none()
    });
    if retry {
        if let Ok(p) = prep.as_mut() {
            p.list_runs();
        }
        parts = twophase::decide(f, prep.as_ref().map(summary), call);
    }
    // Each rank on its own runs: the ones that moved their run early are done.
    let own_runs = parts.as_ref().is_ok_and(|ps| {
        whole_layout(prep.as_ref().ok(), ps).is_none() && !twophase::two_phase(f, ps)
    });
    let r = match (prep, parts, early) {
        (_, _, Some(Err(e))) => Err(e),
        // Every rank saw every outcome in the decision.
        (Ok(_), Ok(_), Some(Ok(st))) if own_runs && all_early => return Ok(st),
        (Ok(_), Ok(_), Some(Ok(st))) if own_runs => Ok(st),
        (Ok(mut p), Ok(parts), _) => {
            let placed = if ordered {
                p.order(f, &parts, call)
            } else {
                Ok(())
            };
            // SAFETY: the caller's contract.
            placed.and_then(|()| unsafe { perform(f, buf, &p, Some(&parts), call) })
        }
        (Err(e), _, _) | (_, Err(e), _) => Err(e),
    };
    f.agree(r, call)
}

/// Whether a collective access of `runs` runs (of a whole array: `whole`, its runs not
/// listed) moves them before the group decides (see [`access_now`]): the same answer
/// from a rank's own access as from its part in the decision.
fn early_access(runs: u64, whole: bool) -> bool {
    runs <= 1 && !whole
}

/// The layout of the whole array the group moves, when every rank said the same one
/// and their parts make it (the same answer on every rank: when the keys agree, every
/// rank holds an equal [`Whole`]).
fn whole_layout(p: Option<&Prep>, parts: &[Part]) -> Option<spools_map::Layout> {
    if !layout::agreed(parts) {
        return None;
    }
    p?.whole.as_ref()?.layout(parts)
}

/// An access checked and placed, before any byte moves.
struct Prep {
    t: Arc<TypeObj>,
    n: usize,
    bytes: usize,
    view: Arc<View>,
    dir: Dir,
    place: Place,
    /// Where it starts, in etypes of the view.
    start: u64,
    etypes: u64,
    runs: Runs,
    /// The whole array a collective access moves through the exchange engine (its runs
    /// not listed), when it is one ([`Whole::of`]).
    whole: Option<Whole>,
    /// Whether the access moves the individual pointer (by what moved, once done; the
    /// pointer is not held across the access, which may wait for the group).
    own: bool,
    /// A write's data packed and converted to `external32` ([`Prep::convert`]), before
    /// the group decides: a value that does not convert fails this rank's part of the
    /// decision, so the group stops together instead of waiting for it in an exchange.
    converted: Option<Vec<u8>>,
}

/// Checks an access of `count` elements of `dt` at `buf` and places it (the shared
/// pointer moves here for `*_shared`; `*_ordered` is placed by [`Prep::order`]). A
/// collective access (`coll`) of one whole array ([`Whole::of`]; not in atomic mode)
/// leaves its runs unlisted.
fn prepare(
    f: &FileObj,
    buf: usize,
    count: MPI_Count,
    dt: MPI_Datatype,
    place: Place,
    dir: Dir,
    coll: bool,
    call: &'static str,
) -> Result<Prep, MpiError> {
    f.may(dir == Dir::Read, call)?;
    let t = committed(dt, call)?;
    let n = ccount(count, call)?;
    let bytes = bytes_of(n, &t, call)?;
    buffer(buf, n, &t, call, "buf")?;
    let view = f.view();
    let es = view.etype.size as u64;
    if bytes as u64 % es != 0 {
        return Err(MpiError::invalid(
            MPI_ERR_TYPE,
            format!("{call}: {bytes} bytes are not whole etypes of {es} bytes"),
        ));
    }
    let etypes = bytes as u64 / es;
    let sequential = f.amode & MPI_MODE_SEQUENTIAL != 0;
    if sequential && matches!(place, Place::At(_) | Place::Own) {
        return Err(MpiError::invalid(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("{call}: a file opened with MPI_MODE_SEQUENTIAL is accessed through the shared pointer only"),
        ));
    }
    let own = matches!(place, Place::Own);
    let start = match place {
        Place::At(off) => u64::try_from(off).map_err(|_| {
            MpiError::invalid(MPI_ERR_ARG, format!("{call}: offset {off} is negative"))
        })?,
        Place::Own => *f.pos.lock().unwrap_or_else(PoisonError::into_inner),
        Place::Shared => f.shared_pointer(call)?.fetch_add(etypes),
        Place::Ordered => {
            f.shared_pointer(call)?;
            0
        }
    };
    let atomic = f.atomic.load(std::sync::atomic::Ordering::Relaxed);
    // A striped set (raid.rs) is no one file for the array engine: its runs' path.
    let whole = if coll
        && !atomic
        && f.file.plain().is_some()
        && matches!(place, Place::At(_) | Place::Own)
    {
        let group = (f.comm.rank(), f.comm.size());
        Whole::of(&view, start * es, bytes as u64, group).map(|mut w| {
            // A read takes this path only where the file holds the whole array (a short
            // read is the runs' path's to count): its length, looked up only here.
            if dir == Dir::Read {
                w.file_len = Some(f.file.len(call, &f.path).unwrap_or(0));
            }
            w
        })
    } else {
        None
    };
    let runs = if matches!(place, Place::Ordered) || whole.is_some() {
        Runs::new()
    } else {
        view.runs(start * es, bytes as u64)
    };
    Ok(Prep {
        t,
        n,
        bytes,
        view,
        dir,
        place,
        start,
        etypes,
        runs,
        whole,
        own,
        converted: None,
    })
}

impl Prep {
    /// Packs and converts a write's data for an `external32` view ([`Prep::converted`]);
    /// nothing for other accesses.
    ///
    /// # Errors
    /// `MPI_ERR_CONVERSION` for a value `external32` cannot hold, as the conversion's.
    ///
    /// # Safety
    /// `buf` holds the access's elements (the caller's contract of [`access_now`]).
    unsafe fn convert(&mut self, buf: *mut u8, call: &'static str) -> Result<(), MpiError> {
        if self.dir != Dir::Write || self.bytes == 0 || !self.view.external32() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let mut packed = unsafe { pack(buf, self.n, &self.t) };
        crate::datatype::external::convert_packed(&self.t, &mut packed, true, call)?;
        self.converted = Some(packed);
        Ok(())
    }

    /// Gives up the whole-array path: the runs listed.
    fn list_runs(&mut self) {
        if self.whole.take().is_some() {
            let es = self.view.etype.size as u64;
            self.runs = self.view.runs(self.start * es, self.bytes as u64);
        }
    }

    /// Places an ordered access: after the ranks before it, from the shared pointer,
    /// which moves past the whole group's data.
    fn order(&mut self, f: &FileObj, parts: &[Part], call: &'static str) -> Result<(), MpiError> {
        let s = f.shared_pointer(call)?;
        let me = f.comm.rank() as usize;
        let before: u64 = parts[..me].iter().map(|p| p.etypes).sum();
        let total: u64 = parts.iter().map(|p| p.etypes).sum();
        let base = if me == 0 { s.fetch_add(total) } else { 0 };
        let base = f.comm.bcast_bytes(0, &base.to_le_bytes())?;
        self.start = u64::from_le_bytes(base.as_slice().try_into().unwrap_or_default()) + before;
        let es = self.view.etype.size as u64;
        self.runs = self.view.runs(self.start * es, self.bytes as u64);
        Ok(())
    }
}

/// Moves the bytes of a prepared access: each rank its own runs, or (with the group's
/// `parts`, when they are short) in two phases.
///
/// # Safety
/// As [`access`].
unsafe fn perform(
    f: &FileObj,
    buf: *mut u8,
    p: &Prep,
    parts: Option<&[Part]>,
    call: &'static str,
) -> Result<MPI_Status, MpiError> {
    let whole = parts.and_then(|ps| Some((p.whole.as_ref()?, whole_layout(Some(p), ps)?, ps)));
    let phased = parts.filter(|ps| {
        !matches!(p.place, Place::Ordered | Place::Shared) && twophase::two_phase(f, ps)
    });
    let bytes = p.bytes;
    let moved = match p.dir {
        Dir::Write => {
            let packed;
            let data: &[u8] = if bytes == 0 {
                &[]
            } else if let Some(c) = &p.converted {
                c
            } else if p.t.contiguous() {
                // SAFETY: the caller's contract: `bytes` contiguous bytes at `buf`.
                unsafe { std::slice::from_raw_parts(buf.cast_const(), bytes) }
            } else {
                // SAFETY: the caller's contract.
                packed = unsafe { pack(buf, p.n, &p.t) };
                &packed
            };
            match (whole, phased) {
                (Some((w, l, ps)), _) => layout::write(f, w, &l, ps, data, call)?,
                (None, Some(ps)) => twophase::write(f, ps, &p.runs, data, call)?,
                (None, None) if bytes > 0 => io::write(f, &p.runs, data, call)?,
                (None, None) => {}
            }
            bytes
        }
        Dir::Read => {
            let direct = p.t.contiguous() && bytes > 0 && !p.view.external32();
            let mut temp = Vec::new();
            let out: &mut [u8] = if direct {
                // SAFETY: the caller's contract: `bytes` writable contiguous bytes.
                unsafe { std::slice::from_raw_parts_mut(buf, bytes) }
            } else {
                temp.resize(bytes, 0u8);
                &mut temp
            };
            let got = match (whole, phased) {
                (Some((w, l, ps)), _) => {
                    layout::read(f, w, &l, ps, out, call).map(|()| out.len())?
                }
                (None, Some(ps)) => twophase::read(f, ps, &p.runs, out, call)?,
                (None, None) if bytes > 0 => io::read(f, &p.runs, out, call)?,
                (None, None) => 0,
            };
            if p.view.external32() {
                crate::datatype::external::convert_packed(&p.t, &mut temp[..got], false, call)?;
            }
            if !direct && got > 0 {
                // SAFETY: the caller's contract; `got` bytes are whole or partial
                // elements of the type, which `unpack` writes as far as they go.
                unsafe { unpack(&temp[..got], buf, &p.t) };
            }
            got
        }
    };
    let es = p.view.etype.size as u64;
    if p.own {
        *f.pos.lock().unwrap_or_else(PoisonError::into_inner) = p.start + moved as u64 / es;
    }
    Ok(status_with(MPI_ANY_SOURCE, MPI_ANY_TAG, moved, false))
}
