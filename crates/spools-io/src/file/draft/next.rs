//! The unit files of the version being written: accesses through the [`Map`], the
//! stream's length from the files' lengths, and the rows each rank changed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use spools_msg::Communicator;

use super::io::read_full;
use super::map::Map;
use crate::error::FileError;
use crate::file::options::Striping;
use crate::file::steps::agree_on_outcome;
use crate::file::striped::unit_paths;
use crate::file::sys;

/// The unit files of the version being written.
#[derive(Debug)]
pub(super) struct Next {
    pub(super) version: u64,
    pub(super) names: Vec<String>,
    pub(super) paths: Vec<PathBuf>,
    pub(super) files: Vec<File>,
    /// The version the unit files were copied from whole (data and parity), when it
    /// has the same layout: its rows that no rank changed keep their parity and
    /// checksums at the commit.
    pub(super) base: Option<Base>,
    /// The stripe rows this rank changed since the copy, `[from, to)` (`to` may be
    /// `u64::MAX`: every row from `from` on).
    pub(super) dirty: Mutex<Vec<(u64, u64)>>,
}

/// What a commit takes over from the version its unit files were copied from.
#[derive(Debug)]
pub(super) struct Base {
    pub(super) size: u64,
    pub(super) crcs: Vec<Vec<u32>>,
}

impl Next {
    /// Makes (rank 0, anew: a reader of the files there keeps them) and opens (every
    /// rank) the unit files of `version`; removes them again when a rank fails.
    /// Collective.
    pub(super) fn create(
        comm: &Communicator,
        path: &Path,
        striping: &Striping,
        version: u64,
    ) -> Result<Next, FileError> {
        let names = agree_on_outcome(comm, path, unit_paths(path, striping, version % 2))?;
        let dir = path.parent().unwrap_or_else(|| Path::new(""));
        let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        let made = if comm.rank() == 0 {
            paths
                .iter()
                .try_for_each(|p| sys::create_unit_anew(p).map(drop))
        } else {
            Ok(())
        };
        let undo = |e: FileError| {
            if comm.rank() == 0 {
                for p in &paths {
                    let _ = std::fs::remove_file(p);
                }
            }
            e
        };
        agree_on_outcome(comm, path, made).map_err(undo)?;
        let files = paths
            .iter()
            .map(|p| sys::open_unit_read_write(p))
            .collect::<Result<Vec<_>, _>>();
        let files = agree_on_outcome(comm, path, files).map_err(undo)?;
        Ok(Next {
            version,
            names,
            paths,
            files,
            base: None,
            dirty: Mutex::new(Vec::new()),
        })
    }

    /// Notes stripe rows `[from, to)` as changed.
    pub(super) fn touch(&self, from: u64, to: u64) {
        let mut d = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        match d.last_mut() {
            Some(last) if last.0 <= from && from <= last.1 => last.1 = last.1.max(to),
            _ => d.push((from, to)),
        }
        if d.len() > MAX_RANGES {
            *d = coarsen(std::mem::take(&mut *d));
        }
    }

    /// The stream's length as the unit files tell it.
    pub(super) fn len(&self, map: &Map) -> Result<u64, FileError> {
        let mut end = 0;
        for (u, (f, p)) in self.files.iter().zip(&self.paths).enumerate() {
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            end = end.max(map.end_from(u as u64, len));
        }
        Ok(end)
    }

    pub(super) fn write_at(&self, map: &Map, data: &[u8], off: u64) -> Result<(), FileError> {
        if !data.is_empty() {
            let rb = map.row_bytes();
            self.touch(off / rb, (off + data.len() as u64 - 1) / rb + 1);
        }
        self.put(map, data, off)
    }

    /// Writes `data` at stream offset `off` (rows not noted as changed).
    pub(super) fn put(&self, map: &Map, data: &[u8], off: u64) -> Result<(), FileError> {
        let mut at = 0usize;
        while at < data.len() {
            let (u, local, room) = map.locate(off + at as u64);
            let n = room.min((data.len() - at) as u64) as usize;
            let u = u as usize;
            sys::write_at(&self.files[u], &self.paths[u], &data[at..at + n], local)?;
            at += n;
        }
        Ok(())
    }

    pub(super) fn read_at(&self, map: &Map, out: &mut [u8], off: u64) -> Result<usize, FileError> {
        let mut at = 0usize;
        let mut size = None;
        while at < out.len() {
            let (u, local, room) = map.locate(off + at as u64);
            let n = room.min((out.len() - at) as u64) as usize;
            let u = u as usize;
            let got = read_full(&self.files[u], &self.paths[u], &mut out[at..at + n], local)?;
            if got < n {
                // Past the end of this unit file: a hole within the stream (zeros) or
                // the stream's end.
                let end = match size {
                    Some(s) => s,
                    None => *size.insert(self.len(map)?),
                };
                let here = off + (at + got) as u64;
                if here >= end {
                    return Ok(at + got);
                }
                let zeros = (end - here).min((n - got) as u64) as usize;
                out[at + got..at + got + zeros].fill(0);
                if got + zeros < n {
                    return Ok(at + got + zeros);
                }
            }
            at += n;
        }
        Ok(at)
    }

    pub(super) fn set_len(&self, map: &Map, size: u64) -> Result<(), FileError> {
        // Every row from the shorter end on changes (blocks cut, zeros, new lengths).
        // From the row holding the last byte kept: a cut at a whole row also cuts the
        // parity block after a unit's last data block in the row before (`unit_end`).
        let from = self.len(map)?.min(size).saturating_sub(1) / map.row_bytes();
        self.touch(from, u64::MAX);
        for (u, (f, p)) in self.files.iter().zip(&self.paths).enumerate() {
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            let want = map.unit_end(u as u64, size);
            if len > want {
                sys::resize(f, p, want)?;
            }
        }
        if size > 0 {
            let (u, local, _) = map.locate(size - 1);
            let (f, p) = (&self.files[u as usize], &self.paths[u as usize]);
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            if len <= local {
                sys::resize(f, p, local + 1)?;
            }
        }
        Ok(())
    }

    /// Removes the unit files (nothing names them).
    pub(super) fn discard(&self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The stripe rows whose parity and checksums a commit of `size` bytes computes, sorted
/// and disjoint: those any rank changed, and with no [`Base`] every row, with one every
/// row from the first that is not full in both versions on. Collective.
pub(super) fn changed_rows(
    comm: &Communicator,
    next: &Next,
    size: u64,
    row_bytes: u64,
) -> Result<Vec<(u64, u64)>, FileError> {
    let mine: Vec<u8> = next
        .dirty
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .flat_map(|&(a, b)| a.to_le_bytes().into_iter().chain(b.to_le_bytes()))
        .collect();
    let all = comm.allgather_bytes(&mine)?;
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let mut rows: Vec<(u64, u64)> = all
        .iter()
        .flat_map(|b| b.chunks_exact(16).map(|p| (word(&p[..8]), word(&p[8..]))))
        .collect();
    rows.push(match &next.base {
        Some(b) => (b.size.min(size) / row_bytes.max(1), u64::MAX),
        None => (0, u64::MAX),
    });
    Ok(merge(rows))
}

/// The most row ranges a rank notes between commits: past it, neighbouring ranges are
/// joined (rows between them counted as changed too), so that what the commit gathers
/// from every rank stays small whatever the writes.
const MAX_RANGES: usize = 4096;

/// `rows` merged, then halved by joining neighbours until at most half of
/// [`MAX_RANGES`] are left: every row of `rows` is still covered.
fn coarsen(rows: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut rows = merge(rows);
    while rows.len() > MAX_RANGES / 2 {
        rows = rows.chunks(2).map(|c| (c[0].0, c[c.len() - 1].1)).collect();
    }
    rows
}

/// Row ranges sorted and made disjoint (overlapping or touching ones joined).
fn merge(mut rows: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    rows.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(rows.len());
    for (a, b) in rows.into_iter().filter(|&(a, b)| a < b) {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// Whether row `r` is in `rows` (sorted, disjoint).
pub(super) fn is_changed(rows: &[(u64, u64)], r: u64) -> bool {
    let i = rows.partition_point(|&(a, _)| a <= r);
    i > 0 && r < rows[i - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_rows_are_merged_and_looked_up() {
        let rows = merge(vec![
            (9, 12),
            (0, 2),
            (2, 3),
            (5, 6),
            (11, 14),
            (7, 7),
            (20, u64::MAX),
        ]);
        assert_eq!(rows, vec![(0, 3), (5, 6), (9, 14), (20, u64::MAX)]);
        let inside: Vec<u64> = (0..25).filter(|&r| is_changed(&rows, r)).collect();
        assert_eq!(inside, [0, 1, 2, 5, 9, 10, 11, 12, 13, 20, 21, 22, 23, 24]);
        assert!(is_changed(&rows, u64::MAX - 1));
        assert!(!is_changed(&[], 0));
    }

    #[test]
    fn many_ranges_are_coarsened_without_losing_a_row() {
        let rows: Vec<(u64, u64)> = (0..10_000u64).map(|i| (i * 3, i * 3 + 1)).collect();
        let c = coarsen(rows.clone());
        assert!(c.len() <= MAX_RANGES / 2 && c.windows(2).all(|w| w[0].1 < w[1].0));
        assert!(rows.iter().all(|&(a, _)| is_changed(&c, a)));
    }
}
