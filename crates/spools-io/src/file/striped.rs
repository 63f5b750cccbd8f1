//! Striped parallel files (RAID-0, RAID-5): aggregators own whole stripe rows, compute
//! parity and block checksums, and write every unit's part of their rows at once; a new
//! version commits by replacing the manifest.

use std::path::{Path, PathBuf};

use spools_map::{Layout, Plan, StripeLayout};
use spools_msg::Communicator;

use super::manifest::{hex, Manifest, UnitEntry, MANIFEST_FORMAT};
use super::rows::Geometry;
use super::store::Store;
use super::{
    agree, check_share, integrity, sum, sys, FileStats, ReadOptions, Reshuffle, Striping,
    WriteOptions,
};
use crate::error::FileError;
use crate::redistribute::redistribute_plan;
use crate::share;

/// Stripe rows per aggregator, and aggregators, for `ranks` ranks.
fn split_rows(geo: &Geometry, ranks: u32) -> (u64, u32) {
    let rows = geo.rows().max(1);
    let per = rows.div_ceil(u64::from(ranks.max(1)));
    (per, rows.div_ceil(per) as u32)
}

/// The I/O distribution: aggregator `a` holds the stream bytes of its rows.
fn io_layout(geo: &Geometry, per: u64, aggs: u32) -> Result<Layout, FileError> {
    Ok(Layout::Stripe(StripeLayout::new(
        per * geo.row_bytes(),
        u64::from(aggs),
        Some(geo.size),
    )?))
}

/// Unit file names of a slot.
fn unit_paths(path: &Path, s: &Striping, slot: u64) -> Vec<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let count = match &s.layout {
        Layout::Stripe(l) => l.count(),
        Layout::Raid5(l) => l.count(),
        _ => 0,
    };
    (0..count)
        .map(|u| {
            let f = format!("{name}.u{u}.s{slot}");
            match s.dirs.get(u as usize % s.dirs.len().max(1)) {
                Some(d) => d.join(f).to_string_lossy().into_owned(),
                None => f,
            }
        })
        .collect()
}

/// The version after the current one at `path` (1 when there is none or it is unreadable).
fn next_version(path: &Path) -> u64 {
    std::fs::read(path)
        .ok()
        .and_then(|t| Manifest::parse(path, &t).ok())
        .map_or(1, |m| m.version + 1)
}

pub(super) fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    s: &Striping,
) -> Result<FileStats, FileError> {
    if opts.reshuffle == Reshuffle::Never {
        return Err(FileError::Options(
            "striped files are always written through aggregators; reshuffle=never applies to canonical files",
        ));
    }
    let total = layout.total_bytes().unwrap_or(0);
    let stream = s.layout.with_size(total)?;
    let geo = Geometry::new(&stream).ok_or(FileError::Options(
        "a striped file needs a stripe(...) or raid5(...) layout",
    ))?;
    agree(comm, path, check_share(comm, layout, data.len()))?;
    let mut v = [if comm.rank() == 0 {
        next_version(path)
    } else {
        0
    }];
    comm.bcast(&mut v, 0)?;
    let version = v[0];
    let slot = version % 2;
    let names = unit_paths(path, s, slot);
    let dir = path.parent().unwrap_or(Path::new(""));
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let (per, aggs) = split_rows(&geo, comm.size());
    let store = Store {
        comm,
        geo: &geo,
        paths: &paths,
        node_local: s.node_local,
        rows_per: per,
        aggs,
    };
    agree(comm, path, store.prepare())?;

    let io = io_layout(&geo, per, aggs)?;
    let plan = Plan::new(layout, &io)?;
    let me = comm.rank();
    let mine = me < aggs;
    let mut dom = vec![0u8; share(&io, me)? as usize];
    let xs = redistribute_plan(comm, &plan, data, &mut dom, &integrity(opts.integrity))?;
    let (r0, r1) = store.rows_of(me);
    let (chunks, crcs) = if mine {
        geo.build(r0, r1, &dom)
    } else {
        (
            (0..geo.count).map(|_| Vec::new()).collect(),
            vec![Vec::new(); geo.count as usize],
        )
    };
    drop(dom);
    // The data is always synced before the manifest names it.
    let put = store.put(chunks, true);
    agree(comm, path, put)?;

    // Rank 0 gathers the block checksums (each aggregator's rows, in row order).
    let enc: Vec<u8> = crcs
        .iter()
        .flat_map(|c| c.iter().flat_map(|x| x.to_le_bytes()))
        .collect();
    let all = comm.allgather_bytes(&enc)?;
    let committed = if me == 0 {
        let mut per_unit: Vec<Vec<u32>> = vec![Vec::new(); geo.count as usize];
        for (a, bytes) in all.iter().enumerate().take(aggs as usize) {
            let (r0, r1) = store.rows_of(a as u32);
            let mut it = bytes
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            for (u, list) in per_unit.iter_mut().enumerate() {
                let n = (r0..r1)
                    .filter(|&r| geo.block(r, u as u64).len() > 0)
                    .count();
                list.extend(it.by_ref().take(n));
            }
        }
        let m = Manifest {
            format: MANIFEST_FORMAT.into(),
            version,
            slot,
            size: total,
            layout: s.layout.to_string(),
            dataset: layout.to_string(),
            node_local: s.node_local,
            units: names
                .iter()
                .zip(&per_unit)
                .enumerate()
                .map(|(u, (n, c))| UnitEntry {
                    path: n.clone(),
                    bytes: geo.unit_len(u as u64),
                    crc32c: hex(c),
                })
                .collect(),
        };
        serde_json::to_vec_pretty(&m)
            .map_err(|e| FileError::Format {
                path: path.to_path_buf(),
                what: format!("manifest: {e}"),
            })
            .and_then(|text| sys::replace(path, &text))
    } else {
        Ok(())
    };
    agree(comm, path, committed)?;
    Ok(FileStats {
        bytes: total,
        reshuffled: true,
        aggregators: aggs,
        exchange: xs,
        rebuilt: 0,
        version,
    })
}

pub(super) fn read(
    comm: &Communicator,
    path: &Path,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
    m: &Manifest,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    if m.size != total {
        return Err(FileError::SizeMismatch {
            path: path.to_path_buf(),
            file: m.size,
            layout: total,
        });
    }
    if opts.reshuffle == Reshuffle::Never {
        return Err(FileError::Options(
            "striped files are always read through aggregators; reshuffle=never applies to canonical files",
        ));
    }
    agree(comm, path, check_share(comm, layout, data.len()))?;
    let geo = m.geometry(path)?;
    let paths = m.unit_paths(path);
    let crcs = m.crcs();
    let (per, aggs) = split_rows(&geo, comm.size());
    let store = Store {
        comm,
        geo: &geo,
        paths: &paths,
        node_local: m.node_local,
        rows_per: per,
        aggs,
    };
    let chunks = store.get()?;
    let me = comm.rank();
    let mine = me < aggs;
    let io = io_layout(&geo, per, aggs)?;
    let mut dom = vec![0u8; share(&io, me)? as usize];
    let (r0, r1) = store.rows_of(me);
    // A failed assembly still takes part in the exchange, so that no rank waits for it.
    let assembled = if mine {
        geo.assemble((r0, r1), &chunks, &crcs, &paths, &mut dom, false)
    } else {
        Ok(Vec::new())
    };
    drop(chunks);
    let plan = Plan::new(&io, layout)?;
    let xs = redistribute_plan(comm, &plan, &dom, data, &integrity(opts.integrity))?;
    let rebuilt = agree(comm, path, assembled)?;
    if !rebuilt.is_empty() {
        let mut units: Vec<u64> = rebuilt.iter().map(|r| r.0).collect();
        units.dedup();
        eprintln!(
            "spools: {}: rebuilt {} damaged block(s) of unit(s) {units:?} from parity (run `spools fsck`/`spools repair`)",
            path.display(),
            rebuilt.len()
        );
    }
    let total_rebuilt = sum(comm, rebuilt.len() as u64)?;
    Ok(FileStats {
        bytes: total,
        reshuffled: true,
        aggregators: aggs,
        exchange: xs,
        rebuilt: total_rebuilt,
        version: m.version,
    })
}
