//! Reading and writing the unit chunks of a striped file's rows: directly (every
//! aggregator opens the unit files) or through each unit's owner rank (node-local mode,
//! where unit `u` is touched only by rank `u % N`).

use std::path::PathBuf;

use spools_msg::{wait_all, Communicator};

use super::rounds::{RoundSink, RoundSource};
use super::rows::{Chunk, Damage, Geometry};
use super::sys;
use crate::error::FileError;

/// Tag of chunks shipped to or from their owner rank.
const TAG_CHUNK: i32 = 0x0e_0002;

/// Who stores the units, and how the rows are split among aggregators.
pub(super) struct Store<'a> {
    pub(super) comm: &'a Communicator,
    pub(super) geo: &'a Geometry,
    pub(super) paths: &'a [PathBuf],
    pub(super) node_local: bool,
    /// Rows per aggregator.
    pub(super) rows_per: u64,
    /// Number of aggregators (ranks `0..aggs`).
    pub(super) aggs: u32,
    /// The first row of the current round (aggregator `a` holds `rows_per` rows from
    /// `base_row + a * rows_per`).
    pub(super) base_row: u64,
}

impl Store<'_> {
    /// Rows `[r0, r1)` of aggregator `a`.
    pub(super) fn rows_of(&self, a: u32) -> (u64, u64) {
        let rows = self.geo.rows();
        let r0 = (self.base_row + u64::from(a) * self.rows_per).min(rows);
        (r0, (r0 + self.rows_per).min(rows))
    }

    pub(super) fn owner(&self, u: u64) -> u32 {
        (u % u64::from(self.comm.size())) as u32
    }

    fn range(&self, u: u64, a: u32) -> (u64, u64) {
        let (r0, r1) = self.rows_of(a);
        self.geo.chunk_range(u, r0, r1)
    }

    fn path(&self, u: u64) -> &std::path::Path {
        &self.paths[u as usize]
    }

    /// Opens for the new version ([`sys::create_unit`]: reused in place, or created
    /// exclusively; never through a symlink) the unit files this rank
    /// owns (in node-local mode) or, for shared storage, the units `u` with
    /// `u % N == rank`.
    pub(super) fn prepare(&self) -> Result<(), FileError> {
        let me = self.comm.rank();
        for u in (0..self.geo.count).filter(|&u| self.owner(u) == me) {
            sys::create_unit(self.path(u), self.geo.unit_len(u))?;
        }
        Ok(())
    }

    /// Syncs the unit directories of the unit files this rank made in
    /// [`Store::prepare`] (and those between them and the manifest's at `manifest`;
    /// the manifest's own too in node-local mode, where a host's copy of it holds units
    /// no manifest replacement syncs), so their names are durable before the manifest
    /// names them.
    pub(super) fn sync_dirs(&self, manifest: &std::path::Path) -> Result<(), FileError> {
        let me = self.comm.rank();
        let mine = (0..self.geo.count).filter(|&u| self.owner(u) == me);
        sys::sync_unit_dirs(manifest, mine.map(|u| self.path(u)), !self.node_local)
    }

    /// Removes the unit files this rank owns (those [`Store::prepare`] creates), after a
    /// failed write: they belong to no committed version.
    pub(super) fn discard(&self) {
        let me = self.comm.rank();
        for u in (0..self.geo.count).filter(|&u| self.owner(u) == me) {
            let _ = std::fs::remove_file(self.path(u));
        }
    }

    /// Writes this aggregator's chunks (one per unit, for its rows) through the unit
    /// files kept open in `units` (synced once, after the last round). Collective.
    pub(super) fn put(&self, chunks: Vec<Vec<u8>>, units: &mut OpenUnits) -> Result<(), FileError> {
        let me = self.comm.rank();
        if !self.node_local {
            for (u, c) in chunks.iter().enumerate() {
                if !c.is_empty() {
                    let p = self.path(u as u64);
                    let f = units.get(u as u64, p)?;
                    // Always synced before the commit: writeback starts as it goes.
                    sys::write_parts_at(f, p, &[c], self.range(u as u64, me).0, true)?;
                }
            }
            return Ok(());
        }
        let mut sends = Vec::new();
        let mut mine: Vec<(u64, Vec<u8>)> = Vec::new();
        for (u, c) in chunks.into_iter().enumerate() {
            let u = u as u64;
            if c.is_empty() {
                continue;
            }
            let o = self.owner(u);
            if o == me {
                mine.push((u, c));
            } else {
                sends.push(self.comm.isend(c, o, TAG_CHUNK)?);
            }
        }
        let mut result = Ok(());
        for u in (0..self.geo.count).filter(|&u| self.owner(u) == me) {
            let p = self.path(u);
            let f = match units.get(u, p) {
                Ok(f) => Some(f),
                Err(e) => {
                    result = result.and(Err(e));
                    None
                }
            };
            // Every chunk is received even after a failure, so no aggregator waits.
            for a in 0..self.aggs {
                let (lo, hi) = self.range(u, a);
                if lo == hi {
                    continue;
                }
                let data = if a == me {
                    match mine.iter_mut().find(|(v, _)| *v == u) {
                        Some((_, c)) => std::mem::take(c),
                        None => Vec::new(),
                    }
                } else {
                    let mut buf = vec![0u8; (hi - lo) as usize];
                    self.comm.recv(&mut buf, a, TAG_CHUNK)?;
                    buf
                };
                if let (Some(f), true) = (&f, result.is_ok()) {
                    result = sys::write_parts_at(f, p, &[&data], lo, true);
                }
            }
        }
        wait_all(sends)?;
        result
    }

    /// Reads this aggregator's chunks (one per unit, for its rows); a unit that cannot be
    /// read is `None` (or short). Collective.
    pub(super) fn get(&self) -> Result<Vec<Chunk>, FileError> {
        let me = self.comm.rank();
        let read = |u: u64, lo: u64, hi: u64| -> Chunk {
            let p = self.path(u);
            let f = sys::open_unit_read(p).ok()?;
            sys::read_upto(&f, p, (hi - lo) as usize, lo).ok()
        };
        if !self.node_local {
            return Ok((0..self.geo.count)
                .map(|u| {
                    let (lo, hi) = self.range(u, me);
                    if me < self.aggs && lo < hi {
                        read(u, lo, hi)
                    } else {
                        Some(Vec::new())
                    }
                })
                .collect());
        }
        // Owners serve every aggregator's rows of their units: a status byte (1 = could
        // not be read), then the bytes.
        let mut sends = Vec::new();
        let mut mine: Vec<(u64, Chunk)> = Vec::new();
        for u in (0..self.geo.count).filter(|&u| self.owner(u) == me) {
            for a in 0..self.aggs {
                let (lo, hi) = self.range(u, a);
                if lo == hi {
                    continue;
                }
                let c = read(u, lo, hi);
                if a == me {
                    mine.push((u, c));
                } else {
                    let mut msg = vec![u8::from(c.is_none())];
                    msg.extend_from_slice(c.as_deref().unwrap_or_default());
                    sends.push(self.comm.isend(msg, a, TAG_CHUNK)?);
                }
            }
        }
        let mut out = Vec::with_capacity(self.geo.count as usize);
        for u in 0..self.geo.count {
            let (lo, hi) = self.range(u, me);
            if me >= self.aggs || lo == hi {
                out.push(Some(Vec::new()));
                continue;
            }
            let o = self.owner(u);
            if o == me {
                out.push(
                    mine.iter_mut()
                        .find(|(v, _)| *v == u)
                        .and_then(|(_, c)| c.take()),
                );
            } else {
                let (msg, _) = self.comm.recv_vec(o, TAG_CHUNK)?;
                out.push(match msg.split_first() {
                    Some((0, rest)) => Some(rest.to_vec()),
                    _ => None,
                });
            }
        }
        wait_all(sends)?;
        Ok(out)
    }
}

impl Store<'_> {
    /// Points the store at round `r` (rounds of `rows_per` rows per aggregator).
    fn at_round(&mut self, r: u64) {
        self.base_row = r * u64::from(self.aggs) * self.rows_per;
    }

    /// This rank's rows in the current round, when it has any.
    fn my_rows(&self) -> Option<(u64, u64)> {
        let me = self.comm.rank();
        let (r0, r1) = self.rows_of(me);
        (me < self.aggs && r0 < r1).then_some((r0, r1))
    }
}

/// The unit files a writer opened, kept open across the rounds (one open per unit, not
/// per round) and synced once, after the last round.
#[derive(Default)]
pub(super) struct OpenUnits(Vec<(u64, std::fs::File)>);

impl OpenUnits {
    /// Unit `u`'s file at `p`, opened for writing on first use.
    fn get(&mut self, u: u64, p: &std::path::Path) -> Result<&std::fs::File, FileError> {
        let at = match self.0.iter().position(|(v, _)| *v == u) {
            Some(i) => i,
            None => {
                self.0.push((u, sys::open_unit_write(p)?));
                self.0.len() - 1
            }
        };
        Ok(&self.0[at].1)
    }

    /// Syncs every unit file written (the data is always durable before the manifest
    /// names it).
    pub(super) fn sync(&self, store: &Store<'_>) -> Result<(), FileError> {
        for (u, f) in &self.0 {
            sys::sync(f, store.path(*u))?;
        }
        Ok(())
    }
}

/// A striped file's writer in rounds: each round's rows become unit chunks (with parity
/// and block checksums) stored through the [`Store`].
pub(super) struct RowWriter<'a> {
    pub(super) store: Store<'a>,
    /// The block checksums of this rank's rows, round after round, unit after unit.
    pub(super) crcs: Vec<u8>,
    /// The unit files written so far.
    pub(super) units: OpenUnits,
}

impl RowWriter<'_> {
    /// Syncs the unit files this rank wrote; called after the last round.
    pub(super) fn sync(&self) -> Result<(), FileError> {
        self.units.sync(&self.store)
    }
}

impl RoundSink for RowWriter<'_> {
    // Where an aggregator holds a round's stream bytes of its rows before they are
    // striped and written.
    fn put(&mut self, r: u64, _at: u64, bytes: &[u8]) -> Result<(), FileError> {
        self.store.at_round(r);
        let geo = self.store.geo;
        let chunks = match self.store.my_rows() {
            Some((r0, r1)) => {
                let (chunks, crcs) = geo.build(r0, r1, bytes);
                self.crcs
                    .extend(crcs.iter().flatten().flat_map(|x| x.to_le_bytes()));
                chunks
            }
            None => (0..geo.count).map(|_| Vec::new()).collect(),
        };
        // Synced once after the last round (`RowWriter::sync`), before the manifest
        // names the data.
        self.store.put(chunks, &mut self.units)
    }
}

/// A striped file's reader in rounds: each round's unit chunks fetched through the
/// [`Store`], checked against the manifest's block checksums and assembled.
pub(super) struct RowReader<'a> {
    pub(super) store: Store<'a>,
    /// The manifest's block checksums, per unit and row.
    pub(super) crcs: &'a [Vec<u32>],
    /// The blocks rebuilt from parity: `(unit, local offset, damage)`.
    pub(super) rebuilt: Vec<(u64, u64, Damage)>,
}

impl RoundSource for RowReader<'_> {
    fn get(&mut self, r: u64, _at: u64, bytes: &mut [u8]) -> Result<(), FileError> {
        self.store.at_round(r);
        let chunks = self.store.get()?;
        if let Some(rows) = self.store.my_rows() {
            let got = self.store.geo.assemble(
                rows,
                &chunks,
                self.crcs,
                self.store.paths,
                bytes,
                false,
            )?;
            self.rebuilt.extend(got);
        }
        Ok(())
    }
}
