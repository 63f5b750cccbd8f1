//! Striped parallel files (RAID-0, RAID-5): aggregators own whole stripe rows, compute
//! parity and block checksums, and write every unit's part of their rows at once; a new
//! version commits by replacing the manifest.

use std::path::{Path, PathBuf};

use spools_map::Layout;
use spools_msg::Communicator;

use super::manifest::{
    check_unit_path, looks_like_manifest, unit_entries, Manifest, MANIFEST_FORMAT,
};
use super::parallel_format::{not_mine, Found, Look, ParallelFormat};
use super::rounds::{self, Rounds};
use super::rows::Geometry;
use super::store::{RowReader, RowWriter, Store};
use crate::error::{FileError, FormatDefect};
use crate::file::options::{FileStats, ReadOptions, Reshuffle, Striping, WriteOptions};
use crate::file::steps::{
    agree_on_args, agree_on_outcome, check_share, read_args, sum, write_args,
};
use crate::file::sys;

/// Stripe rows per aggregator, and aggregators, for `ranks` ranks.
pub(super) fn split_rows(geo: &Geometry, ranks: u32) -> (u64, u32) {
    let rows = geo.rows().max(1);
    let per = rows.div_ceil(u64::from(ranks.max(1)));
    (per, rows.div_ceil(per) as u32)
}

/// The rounds over whole stripe rows of a file written from (read into) `layout`: at most
/// `buffer` bytes (less where the windows are no slabs of `layout`:
/// [`rounds::capped_buffer`]), but at least one row and at most its `per`
/// rows, per aggregator and round. Returns the rounds and the rows per aggregator and
/// round. Collective.
fn row_rounds(
    comm: &Communicator,
    layout: &Layout,
    geo: &Geometry,
    (per, aggs): (u64, u32),
    buffer: u64,
) -> Result<(Rounds, u64), FileError> {
    let row = geo.row_bytes().max(1);
    let rows = |buffer: u64| (buffer / row).clamp(1, per.max(1));
    let k = rows((per * row).min(buffer));
    let full = Rounds::new(geo.size, k * row, aggs);
    if rounds::slabs_fit(layout, &full) || rounds::windows_fit(layout, &full) {
        return Ok((full, k));
    }
    // Windows of a vector made slabs where a multiple of them is near
    // (rounds::slab_chunk), within the aggregator's rows.
    let moved = rounds::slab_chunk(layout, k * row, row, aggs, per.max(1) * row) / row;
    if moved <= per.max(1) {
        let rounds = Rounds::new(geo.size, moved * row, aggs);
        if rounds::slabs_fit(layout, &rounds) {
            return Ok((rounds, moved));
        }
    }
    let buffer = rounds::capped_buffer(comm, layout, geo.size, aggs, (per * row).min(buffer))?;
    let k = rows(buffer);
    Ok((Rounds::new(geo.size, k * row, aggs), k))
}

/// Unit file names of a slot, relative to the manifest's directory: unit `u` goes to
/// `dirs[u % dirs.len()]`, where a relative directory is relative to the manifest's
/// directory and an absolute one must lie inside it (a manifest names only plain relative
/// paths; to put units on other disks, link the disks' directories into the manifest's
/// directory).
pub(super) fn unit_paths(path: &Path, s: &Striping, slot: u64) -> Result<Vec<String>, FileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let count = match &s.layout {
        Layout::Stripe(l) => l.count(),
        Layout::Raid5(l) => l.count(),
        _ => 0,
    };
    let base = std::path::absolute(sys::dir_of(path))
        .map_err(|e| FileError::io("resolve the directory of", path, e))?;
    let mut rel_dirs = Vec::with_capacity(s.dirs.len());
    for (i, d) in s.dirs.iter().enumerate() {
        let rel = if d.is_absolute() {
            d.strip_prefix(&base).map(Path::to_path_buf).map_err(|_| {
                FileError::UnsafePath {
                    path: path.to_path_buf(),
                    unit: i as u64,
                    unit_path: d.display().to_string(),
                    why: "unit directories must be inside the manifest's directory (link other disks' directories there)",
                }
            })?
        } else {
            d.clone()
        };
        rel_dirs.push(rel);
    }
    (0..count)
        .map(|u| {
            let f = format!("{name}.u{u}.s{slot}");
            let p = match rel_dirs.get(u as usize % rel_dirs.len().max(1)) {
                Some(d) if !d.as_os_str().is_empty() => d.join(f).to_string_lossy().into_owned(),
                _ => f,
            };
            check_unit_path(&p).map_err(|why| FileError::UnsafePath {
                path: path.to_path_buf(),
                unit: u,
                unit_path: p.clone(),
                why,
            })?;
            Ok(p)
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

/// Striped files (RAID-0 / RAID-5 unit files and a manifest) as a [`ParallelFormat`]:
/// written with `striping`, and read (`None`: the manifest says how they are striped).
#[derive(Debug)]
pub(super) struct StripedFiles<'a>(pub(super) Option<&'a Striping>);

impl ParallelFormat for StripedFiles<'_> {
    fn inspect(&self, look: &Look<'_>) -> Result<Option<Found>, FileError> {
        let path = look.path;
        match look.head {
            Some(head) if looks_like_manifest(head) && look.len < MANIFEST_MAX => {
                let text = std::fs::read(path).map_err(|e| FileError::io("read", path, e))?;
                if let Some(layout) = look.layout {
                    check_dataset(path, &Manifest::parse(path, &text)?, layout)?;
                }
                Ok(Some(Found::Manifest(text)))
            }
            _ => Ok(None),
        }
    }

    fn write(
        &self,
        comm: &Communicator,
        path: &Path,
        data: &[u8],
        layout: &Layout,
        opts: &WriteOptions,
    ) -> Result<FileStats, FileError> {
        match self.0 {
            Some(s) => write(comm, path, data, layout, opts, s),
            None => Err(FileError::Options(
                "a striped file is written with its striping",
            )),
        }
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
        match found {
            Found::Manifest(text) => {
                let m = Manifest::parse(path, text)?;
                read(comm, path, data, layout, opts, &m)
            }
            _ => Err(not_mine(path)),
        }
    }
}

/// A manifest is read whole only below this size (a larger file is no manifest).
const MANIFEST_MAX: u64 = 256 << 20;

/// The element type and shape of an array layout (`None` for a byte stream, which
/// carries no element type).
fn dataset_of(l: &Layout) -> Option<(spools_map::DType, &[u64])> {
    match l {
        Layout::Array(a) => Some((a.dtype(), a.shape())),
        _ => None,
    }
}

/// Checks that a striped file's recorded dataset (the layout it was written from) has the
/// element type and shape of the reader's `layout`, when both are arrays.
///
/// # Errors
/// [`FileError::DatasetMismatch`].
fn check_dataset(path: &Path, m: &Manifest, layout: &Layout) -> Result<(), FileError> {
    let written: Layout = m.dataset.parse().map_err(|e| FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::Dataset {
            spec: m.dataset.clone(),
            source: e,
        },
    })?;
    // A dataset of another size is reported as such by the read itself.
    if layout.total_bytes() != Some(m.size) {
        return Ok(());
    }
    match (dataset_of(&written), dataset_of(layout)) {
        (Some(w), Some(r)) if w != r => Err(FileError::DatasetMismatch {
            path: path.to_path_buf(),
            file: format!("{}{:?}", w.0, w.1),
            layout: format!("{}{:?}", r.0, r.1),
        }),
        _ => Ok(()),
    }
}

/// The geometry of a striped write of `total` bytes, or why `s` cannot store them.
fn check_striping(s: &Striping, total: u64, reshuffle: Reshuffle) -> Result<Geometry, FileError> {
    if reshuffle == Reshuffle::Never {
        return Err(FileError::Options(
            "striped files are always written through aggregators; reshuffle=never applies to canonical files",
        ));
    }
    if let Some(size) = s.layout.total_bytes().filter(|&n| n != total) {
        return Err(FileError::StripeSize {
            layout: s.layout.to_string(),
            size,
            dataset: total,
        });
    }
    let stream = s.layout.with_size(total)?;
    Geometry::new(&stream).ok_or(FileError::Options(
        "a striped file needs a stripe(...) or raid5(...) layout",
    ))
}

pub(super) fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    s: &Striping,
) -> Result<FileStats, FileError> {
    // Every rank's own checks, and that they all passed the same layout and striping, are
    // agreed on before anything is touched: a rank that failed alone would leave the
    // others waiting.
    let total = layout.total_bytes().unwrap_or(0);
    let checked = check_striping(s, total, opts.reshuffle).and_then(|geo| {
        check_share(
            comm,
            layout,
            data.len(),
            crate::Side::Source,
            opts.declined.as_ref(),
        )
        .map(|()| geo)
    });
    let geo = agree_on_args(comm, path, checked, layout, write_args(layout, opts))?;
    let mut v = [if comm.rank() == 0 {
        next_version(path)
    } else {
        0
    }];
    comm.bcast(&mut v, 0)?;
    let version = v[0];
    let slot = version % 2;
    let names = agree_on_outcome(comm, path, unit_paths(path, s, slot))?;
    let dir = path.parent().unwrap_or_else(|| Path::new(""));
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let (per, aggs) = split_rows(&geo, comm.size());
    let buffer = rounds::buffer_size(comm, opts.coll_buffer)?;
    let (plan, k) = row_rounds(comm, layout, &geo, (per, aggs), buffer)?;
    let mut writer = RowWriter {
        store: Store {
            comm,
            geo: &geo,
            paths: &paths,
            node_local: s.node_local,
            rows_per: k,
            aggs,
            base_row: 0,
        },
        crcs: Vec::new(),
        units: Default::default(),
    };
    // Whether this rank got past the data phase: until then no rank can have committed
    // (rank 0 commits only after every rank agreed that its data is written).
    let mut committing = false;
    let res = (|| -> Result<FileStats, FileError> {
        agree_on_outcome(comm, path, writer.store.prepare())?;

        let me = comm.rank();
        let (xs, put) = rounds::write(comm, &plan, layout, data, opts.integrity, &mut writer)?;
        let durable = put
            .and_then(|()| writer.sync())
            .and_then(|()| writer.store.sync_dirs(path));
        agree_on_outcome(comm, path, durable)?;
        committing = true;

        // Rank 0 gathers the block checksums (each aggregator's rows, round after round)
        // and puts them in row order.
        let all = comm.allgather_bytes(&writer.crcs)?;
        // Node-local units stay on their owner's host: the manifest says which.
        let hosts = if s.node_local {
            Some(rank_hosts(comm)?)
        } else {
            None
        };
        let committed = if me == 0 {
            let mut per_unit: Vec<Vec<u32>> = vec![Vec::new(); geo.count as usize];
            let mut its: Vec<_> = all
                .iter()
                .take(aggs as usize)
                .map(|bytes| {
                    bytes
                        .chunks_exact(4)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                })
                .collect();
            let mut store = Store {
                base_row: 0,
                ..writer.store
            };
            for r in 0..plan.count() {
                store.base_row = r * u64::from(aggs) * k;
                for (a, it) in its.iter_mut().enumerate() {
                    let (r0, r1) = store.rows_of(a as u32);
                    for (u, list) in per_unit.iter_mut().enumerate() {
                        let n = (r0..r1)
                            .filter(|&r| geo.block(r, u as u64).len() > 0)
                            .count();
                        list.extend(it.by_ref().take(n));
                    }
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
                units: unit_entries(&names, &per_unit, &geo, |u| {
                    hosts
                        .as_ref()
                        .and_then(|h| h.get(writer.store.owner(u) as usize).cloned())
                }),
            };
            m.save(path)
        } else {
            Ok(())
        };
        agree_on_outcome(comm, path, committed)?;
        Ok(FileStats {
            bytes: total,
            reshuffled: true,
            aggregators: aggs,
            exchange: xs,
            rebuilt: 0,
            version,
            rounds: plan.count(),
            sieved: false,
            sieve_shared: false,
        })
    })();
    if res.is_err() {
        // A failed write removes the unit files it created (they belong to no version),
        // with no further collective call (a peer may be gone). Failing in the data
        // phase, each rank removes its own; failing in the commit, rank 0 removes them
        // unless its manifest was renamed into place after all.
        if !committing {
            writer.store.discard();
        } else if comm.rank() == 0
            && std::fs::read(path)
                .ok()
                .and_then(|t| Manifest::parse(path, &t).ok())
                .is_none_or(|m| m.version != version)
        {
            if s.node_local {
                writer.store.discard();
            } else {
                for p in &paths {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }
    res
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
    // As a write: every rank's checks and arguments agreed on before anything is read.
    let checked = if m.size != total {
        Err(FileError::SizeMismatch {
            path: path.to_path_buf(),
            file: m.size,
            layout: total,
        })
    } else if opts.reshuffle == Reshuffle::Never {
        Err(FileError::Options(
            "striped files are always read through aggregators; reshuffle=never applies to canonical files",
        ))
    } else {
        check_share(
            comm,
            layout,
            data.len(),
            crate::Side::Destination,
            opts.declined.as_ref(),
        )
    };
    agree_on_args(comm, path, checked, layout, read_args(layout))?;
    if m.node_local && m.units.iter().any(|u| u.host.is_some()) {
        check_placement(comm, path, m)?;
    }
    let geo = m.geometry(path)?;
    let paths = m.unit_paths(path);
    let crcs = m.crcs();
    let (per, aggs) = split_rows(&geo, comm.size());
    let buffer = rounds::buffer_size(comm, opts.coll_buffer)?;
    let (plan, k) = row_rounds(comm, layout, &geo, (per, aggs), buffer)?;
    let mut reader = RowReader {
        store: Store {
            comm,
            geo: &geo,
            paths: &paths,
            node_local: m.node_local,
            rows_per: k,
            aggs,
            base_row: 0,
        },
        crcs: &crcs,
        rebuilt: Vec::new(),
    };
    // A failed assembly still takes part in the exchanges, so that no rank waits for it.
    let (xs, assembled) = rounds::read(comm, &plan, layout, data, opts.integrity, &mut reader)?;
    agree_on_outcome(comm, path, assembled)?;
    let rebuilt = reader.rebuilt;
    if !rebuilt.is_empty() {
        let mut units: Vec<u64> = rebuilt.iter().map(|r| r.0).collect();
        units.dedup();
        spools_boot::logger::warn(format_args!(
            "spools: {}: rebuilt {} damaged block(s) of unit(s) {units:?} from parity (run `spools fsck`/`spools repair`)",
            path.display(),
            rebuilt.len()
        ));
    }
    let total_rebuilt = sum(comm, rebuilt.len() as u64)?;
    Ok(FileStats {
        bytes: total,
        reshuffled: true,
        aggregators: aggs,
        exchange: xs,
        rebuilt: total_rebuilt,
        version: m.version,
        rounds: plan.count(),
        sieved: false,
        sieve_shared: false,
    })
}

/// The host label (`host_label`) of every rank of `comm`. Collective.
fn rank_hosts(comm: &Communicator) -> Result<Vec<String>, FileError> {
    Ok(comm
        .allgather_bytes(spools_boot::host::host_label().as_bytes())?
        .into_iter()
        .map(|h| String::from_utf8_lossy(&h).into_owned())
        .collect())
}

/// Checks that each node-local unit's serving rank (`unit % ranks`) runs on the host the
/// manifest says holds it. Collective; every rank reaches the same verdict.
fn check_placement(comm: &Communicator, path: &Path, m: &Manifest) -> Result<(), FileError> {
    let hosts = rank_hosts(comm)?;
    for (u, e) in m.units.iter().enumerate() {
        let rank = (u as u64 % u64::from(comm.size())) as u32;
        let rank_host = hosts.get(rank as usize).cloned().unwrap_or_default();
        if let Some(host) = e.host.as_ref().filter(|h| **h != rank_host) {
            return Err(FileError::UnitElsewhere {
                path: path.to_path_buf(),
                unit: u as u64,
                host: host.clone(),
                rank,
                rank_host,
            });
        }
    }
    Ok(())
}
