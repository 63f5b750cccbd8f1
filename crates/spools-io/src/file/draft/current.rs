//! A set opened read-only: its current version, every block verified as it is read (a
//! damaged one rebuilt from parity), in batches of rows.

use std::fs::File;
use std::path::PathBuf;

use super::io::BATCH;
use crate::error::FileError;
use crate::file::rows::{Chunk, Geometry};
use crate::file::sys;

/// A set opened read-only: its current version, verified as it is read.
#[derive(Debug)]
pub(super) struct Current {
    pub(super) geo: Geometry,
    pub(super) paths: Vec<PathBuf>,
    pub(super) crcs: Vec<Vec<u32>>,
    pub(super) files: Vec<Option<File>>,
    /// The manifest, held for the advisory lock of atomic mode.
    pub(super) lock: File,
}

impl Current {
    /// Reads the rows `[r0, r1)` verified (a damaged block rebuilt from parity) into
    /// `out` (their stream bytes). Returns the blocks rebuilt.
    pub(super) fn rows(&self, r0: u64, r1: u64, out: &mut [u8]) -> Result<usize, FileError> {
        let chunks = self.chunks(r0, r1);
        let rebuilt = self
            .geo
            .assemble((r0, r1), &chunks, &self.crcs, &self.paths, out, false)?;
        Ok(rebuilt.len())
    }

    /// Each unit's bytes of rows `[r0, r1)` as its file holds them (`None`: no file).
    pub(super) fn chunks(&self, r0: u64, r1: u64) -> Vec<Chunk> {
        (0..self.geo.count)
            .map(|u| {
                let (lo, hi) = self.geo.chunk_range(u, r0, r1);
                let f = self.files[u as usize].as_ref()?;
                sys::read_upto(f, &self.paths[u as usize], (hi - lo) as usize, lo).ok()
            })
            .collect()
    }

    /// Reads `[off, off + out.len())` verified, in batches of rows of at most
    /// [`BATCH`] bytes (one batch in memory at a time).
    pub(super) fn read_at(&self, out: &mut [u8], off: u64) -> Result<usize, FileError> {
        let end = (off.saturating_add(out.len() as u64)).min(self.geo.size);
        if off >= end {
            return Ok(0);
        }
        let rb = self.geo.row_bytes();
        let step = (BATCH / rb).max(1);
        let mut rows = Vec::new();
        let mut r = off / rb;
        while r * rb < end {
            let r1 = (r + step).min(end.div_ceil(rb));
            let (a, b) = self.geo.stream_range(r, r1);
            rows.resize((b - a) as usize, 0);
            self.rows(r, r1, &mut rows)?;
            let (lo, hi) = (a.max(off), b.min(end));
            out[(lo - off) as usize..(hi - off) as usize]
                .copy_from_slice(&rows[(lo - a) as usize..(hi - a) as usize]);
            r = r1;
        }
        Ok((end - off) as usize)
    }
}
