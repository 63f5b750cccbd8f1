//! A commit's work on the unit files: parity and block checksums of the rows that
//! changed, each rank its share, the units made durable, the manifest replaced last;
//! and what an empty stream or a set kept open after its commit needs.

use std::path::Path;

use spools_exchange::crc::xor_into;
use spools_map::Layout;
use spools_msg::Communicator;

use super::io::read_full;
use super::next::{changed_rows, is_changed, Base, Next};
use crate::error::FileError;
use crate::file::manifest::{unit_entries, Manifest, MANIFEST_FORMAT};
use crate::file::rows::{Block, Geometry};
use crate::file::steps::agree_on_outcome;
use crate::file::striped::split_rows;
use crate::file::sys;

/// The environment variable that makes rank 0 abort at a named point of a commit, for the
/// tests that kill a commit half-way (`before-manifest`: every unit file of the new
/// version written and durable, the manifest not yet replaced).
pub const CRASH_AT: &str = "SPOOLS_TEST_CRASH_AT";

/// The parity, checksums, durable units and manifest of a commit of `size` bytes of
/// the set at `path` with `layout` (collective).
pub(super) fn rows(
    comm: &Communicator,
    path: &Path,
    layout: &Layout,
    next: &Next,
    size: u64,
) -> Result<(), FileError> {
    let geo = layout
        .with_size(size)
        .map_err(FileError::from)
        .and_then(|l| {
            Geometry::new(&l).ok_or(FileError::Options(
                "a striped set needs a stripe(...) or raid5(...) layout",
            ))
        });
    let geo = agree_on_outcome(comm, path, geo)?;
    let (per, aggs) = split_rows(&geo, comm.size());
    let me = u64::from(comm.rank());
    let changed = changed_rows(comm, next, size, geo.row_bytes())?;
    let mut crcs = Vec::new();
    let (lo, hi) = if me < u64::from(aggs) {
        ((me * per).min(geo.rows()), ((me + 1) * per).min(geo.rows()))
    } else {
        (0, 0)
    };
    let parity = changed
        .iter()
        .flat_map(|&(a, b)| a.max(lo)..b.min(hi))
        .try_for_each(|r| row_parity(&geo, next, r, &mut crcs));
    agree_on_outcome(comm, path, parity)?;
    // Each unit cut to its length and made durable by one rank, with its name where it
    // lies in a unit directory of its own (the manifest's directory is synced when the
    // manifest is replaced).
    let mine = || (0..geo.count).filter(|u| u % u64::from(comm.size()) == me);
    let durable = mine()
        .try_for_each(|u| {
            let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
            sys::resize(f, p, geo.unit_len(u))?;
            sys::sync(f, p)
        })
        .and_then(|()| {
            let units = mine().map(|u| next.paths[u as usize].as_path());
            sys::sync_unit_dirs(path, units, true)
        });
    agree_on_outcome(comm, path, durable)?;
    let all = comm.allgather_bytes(&crcs)?;
    if comm.rank() == 0 && std::env::var(CRASH_AT).is_ok_and(|v| v == "before-manifest") {
        std::process::abort();
    }
    let written = if comm.rank() == 0 {
        let before = std::fs::read(path)
            .ok()
            .and_then(|t| Manifest::parse(path, &t).ok());
        let mut per_unit: Vec<Vec<u32>> = vec![Vec::new(); geo.count as usize];
        let mut it = all.iter().flat_map(|b| {
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        });
        let kept = next.base.as_ref().map(|b| &b.crcs);
        for r in 0..geo.rows() {
            let fresh = is_changed(&changed, r);
            for (u, list) in per_unit.iter_mut().enumerate() {
                if geo.block(r, u as u64).len() == 0 {
                    continue;
                }
                let crc = match kept {
                    Some(k) if !fresh => k.get(u).and_then(|c| c.get(r as usize)).copied(),
                    _ => it.next(),
                };
                list.extend(crc);
            }
        }
        let m = Manifest {
            format: MANIFEST_FORMAT.into(),
            version: next.version,
            slot: next.version % 2,
            size,
            layout: layout.to_string(),
            dataset: format!("u8[{size}] block on {}", comm.size()),
            node_local: false,
            units: unit_entries(&next.names, &per_unit, &geo, |_| None),
        };
        m.save(path).map(|()| {
            // The version before is named by nothing now: its unit files go (a
            // reader holding them open keeps them until it closes), so a set at rest
            // holds one version, whatever layout it had.
            for p in before.iter().flat_map(|m| m.unit_paths(path)) {
                if !next.paths.contains(&p) {
                    let _ = std::fs::remove_file(p);
                }
            }
        })
    } else {
        Ok(())
    };
    agree_on_outcome(comm, path, written)
}

/// The parity and block checksums of row `r` (appended to `crcs` in unit order): each
/// data block read back (zeros past its unit file's end), the parity written.
pub(super) fn row_parity(
    geo: &Geometry,
    next: &Next,
    r: u64,
    crcs: &mut Vec<u8>,
) -> Result<(), FileError> {
    let unit = geo.unit as usize;
    let mut parity = vec![0u8; unit];
    let mut block = vec![0u8; unit];
    let mut sums = vec![None; geo.count as usize];
    let mut pu = None;
    for u in 0..geo.count {
        match geo.block(r, u) {
            Block::Data { len, .. } => {
                let len = len as usize;
                let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
                let got = read_full(f, p, &mut block[..len], r * geo.unit)?;
                block[got..len].fill(0);
                sums[u as usize] = Some(spools_exchange::crc32c(&block[..len]));
                xor_into(&mut parity[..len], &block[..len]);
            }
            Block::Parity { len } => pu = Some((u, len as usize)),
            Block::Absent => {}
        }
    }
    if let Some((u, len)) = pu {
        let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
        sys::write_at(f, p, &parity[..len], r * geo.unit)?;
        sums[u as usize] = Some(spools_exchange::crc32c(&parity[..len]));
    }
    crcs.extend(sums.into_iter().flatten().flat_map(u32::to_le_bytes));
    Ok(())
}

/// Rank 0's commit of an empty stream: an empty plain file at `path`, the unit files of
/// the set it held and of `next` removed.
pub(super) fn empty_file(path: &Path, next: &Next) -> Result<(), FileError> {
    let old = std::fs::read(path)
        .ok()
        .and_then(|t| Manifest::parse(path, &t).ok());
    sys::replace(path, &[])?;
    if let Some(m) = old {
        // Both slots' unit files (`NAME.uU.sS`).
        let other = format!(".s{}", 1 - m.slot % 2);
        for p in m.unit_paths(path) {
            let text = p.to_string_lossy().into_owned();
            if let Some(stem) = text.strip_suffix(&format!(".s{}", m.slot % 2)) {
                let _ = std::fs::remove_file(format!("{stem}{other}"));
            }
            let _ = std::fs::remove_file(p);
        }
    }
    next.discard();
    Ok(())
}

/// Copies the version just committed into `next`'s unit files (each rank the units
/// `u % ranks == rank`, in the kernel); gives it as their [`Base`].
pub(super) fn copy_units(comm: &Communicator, path: &Path, next: &Next) -> Result<Base, FileError> {
    let text = std::fs::read(path).map_err(|e| FileError::io("read", path, e))?;
    let m = Manifest::parse(path, &text)?;
    let (me, ranks) = (u64::from(comm.rank()), u64::from(comm.size()));
    for (u, src) in m.unit_paths(path).iter().enumerate() {
        if u as u64 % ranks != me {
            continue;
        }
        let (Some(mut to), Some(p)) = (
            next.files
                .get(u)
                .map(|f| f.try_clone())
                .transpose()
                .map_err(|e| FileError::io("open unit file for writing", &next.paths[u], e))?,
            next.paths.get(u),
        ) else {
            continue;
        };
        let mut from = sys::open_unit_read(src)?;
        std::io::copy(&mut from, &mut to).map_err(|e| FileError::io("copy into", p, e))?;
    }
    Ok(Base {
        size: m.size,
        crcs: m.crcs(),
    })
}
