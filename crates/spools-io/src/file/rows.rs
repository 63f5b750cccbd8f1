//! Stripe rows of a striped file, without I/O: which block of which unit holds what, how
//! an aggregator turns its rows of the byte stream into unit chunks (data, parity and
//! per-block CRC32C), and how chunks read back are verified, rebuilt from parity, and
//! turned into the byte stream again.

use std::path::PathBuf;

use spools_map::Layout;

use crate::error::FileError;
use spools_exchange::crc::{copy_crc, xor_into, STEP};

/// RAID level of a striped file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raid {
    /// Striping without redundancy.
    Raid0,
    /// Striping with rotating parity (left-symmetric).
    Raid5,
}

/// Each unit's chunk of a striped file, and the CRC32C of each of its blocks (one per
/// row where the unit has a block).
pub type UnitChunks = (Vec<Vec<u8>>, Vec<Vec<u32>>);

/// Turns a whole striped byte stream into its unit files' contents and their blocks'
/// CRC32C (per unit, per row), as the aggregators of a striped write do: the in-memory
/// hot path of a RAID-0 or RAID-5 write, for benchmarks and tools.
///
/// `None` when `layout` is not a sized `stripe(...)` or `raid5(...)` layout or `stream`
/// is not as long as its size.
pub fn stripe_chunks(layout: &Layout, stream: &[u8]) -> Option<UnitChunks> {
    let g = Geometry::new(layout)?;
    (stream.len() as u64 == g.size).then(|| g.build(0, g.rows(), stream))
}

/// The shape of a striped byte stream.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    pub(crate) raid: Raid,
    pub(crate) unit: u64,
    pub(crate) count: u64,
    pub(crate) size: u64,
    layout: Layout,
}

/// What one block (one unit, one row) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Block {
    /// `len` bytes of the stream from global offset `global`.
    Data { global: u64, len: u64 },
    /// The row's parity, `len` bytes.
    Parity { len: u64 },
    /// Nothing (past the end of the stream).
    Absent,
}

impl Block {
    pub(crate) fn len(&self) -> u64 {
        match *self {
            Block::Data { len, .. } | Block::Parity { len } => len,
            Block::Absent => 0,
        }
    }
}

/// A block found bad while reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The unit file is missing or too short.
    Missing,
    /// The block failed its checksum.
    Corrupt,
}

/// One unit's chunk read back: its bytes from the first row's offset on (`None` when the
/// file could not be opened at all; possibly shorter than asked when the file is short).
pub(crate) type Chunk = Option<Vec<u8>>;

impl Geometry {
    /// The geometry of a sized stripe or RAID-5 layout.
    pub(crate) fn new(layout: &Layout) -> Option<Geometry> {
        let (raid, unit, count, size) = match layout {
            Layout::Stripe(s) => (Raid::Raid0, s.unit(), s.count(), s.size()?),
            Layout::Raid5(s) => (Raid::Raid5, s.unit(), s.count(), s.size()?),
            _ => return None,
        };
        Some(Geometry {
            raid,
            unit,
            count,
            size,
            layout: layout.clone(),
        })
    }

    /// Units holding data in each row.
    pub(crate) fn data_units(&self) -> u64 {
        match self.raid {
            Raid::Raid0 => self.count,
            Raid::Raid5 => self.count - 1,
        }
    }

    /// Stream bytes in a full row.
    pub(crate) fn row_bytes(&self) -> u64 {
        self.unit * self.data_units()
    }

    /// Rows in the file.
    pub(crate) fn rows(&self) -> u64 {
        self.size.div_ceil(self.row_bytes())
    }

    /// Bytes of unit `u`'s file.
    pub(crate) fn unit_len(&self, u: u64) -> u64 {
        self.layout.local_bytes(u).unwrap_or(0)
    }

    /// Blocks of unit `u` (its last may be short).
    pub(crate) fn unit_blocks(&self, u: u64) -> u64 {
        self.unit_len(u).div_ceil(self.unit)
    }

    /// What block `(r, u)` holds.
    pub(crate) fn block(&self, r: u64, u: u64) -> Block {
        let idx = match self.raid {
            Raid::Raid0 => u,
            Raid::Raid5 => {
                let pu = self.count - 1 - r % self.count;
                if u == pu {
                    let first = r * self.row_bytes();
                    return Block::Parity {
                        len: self.unit.min(self.size.saturating_sub(first)),
                    };
                }
                (u + self.count - pu - 1) % self.count
            }
        };
        let global = (r * self.data_units() + idx) * self.unit;
        if global >= self.size {
            Block::Absent
        } else {
            Block::Data {
                global,
                len: self.unit.min(self.size - global),
            }
        }
    }

    /// Unit `u`'s local byte range covering rows `[r0, r1)`.
    pub(crate) fn chunk_range(&self, u: u64, r0: u64, r1: u64) -> (u64, u64) {
        let len = self.unit_len(u);
        let a = (r0 * self.unit).min(len);
        let b = (r1 * self.unit).min(len);
        (a, b)
    }

    /// Stream bytes covered by rows `[r0, r1)`.
    pub(crate) fn stream_range(&self, r0: u64, r1: u64) -> (u64, u64) {
        let rb = self.row_bytes();
        ((r0 * rb).min(self.size), (r1 * rb).min(self.size))
    }

    /// The unit holding row `r`'s parity block (RAID-5, when the row has one).
    fn parity_unit(&self, r: u64) -> Option<u64> {
        let pu = match self.raid {
            Raid::Raid0 => return None,
            Raid::Raid5 => self.count - 1 - r % self.count,
        };
        matches!(self.block(r, pu), Block::Parity { .. }).then_some(pu)
    }

    /// Turns stream bytes of rows `[r0, r1)` into one chunk per unit (data and parity),
    /// with the CRC32C of every block (per unit, per row).
    ///
    /// One pass over the stream: a row is handled in cache-sized steps ([`STEP`]); each
    /// step of each data block is appended to its chunk and checksummed, and copied into
    /// (the row's first data block) or XORed into (the others, word-wide) the same step of
    /// the row's parity, which stays in the cache until it is checksummed in turn. Chunks
    /// are appended to, never zeroed first.
    pub(crate) fn build(&self, r0: u64, r1: u64, stream: &[u8]) -> UnitChunks {
        let base = self.stream_range(r0, r1).0;
        let mut chunks: Vec<Vec<u8>> = (0..self.count)
            .map(|u| {
                let (a, b) = self.chunk_range(u, r0, r1);
                Vec::with_capacity((b - a) as usize)
            })
            .collect();
        let mut crcs: Vec<Vec<u32>> =
            vec![Vec::with_capacity((r1 - r0) as usize); self.count as usize];
        let mut sums = vec![0u32; self.count as usize];
        // The row's data blocks in stream order: (unit, offset in `stream`, length).
        let mut data: Vec<(usize, usize, usize)> = Vec::with_capacity(self.count as usize);
        for r in r0..r1 {
            data.clear();
            data.extend((0..self.count).filter_map(|u| match self.block(r, u) {
                Block::Data { global, len } => {
                    Some((u as usize, (global - base) as usize, len as usize))
                }
                _ => None,
            }));
            data.sort_unstable_by_key(|d| d.1);
            // The first data block is the row's longest, as long as its parity.
            let width = data.first().map_or(0, |d| d.2);
            let pu = self.parity_unit(r).map(|u| u as usize);
            // The parity chunk is taken out while the data chunks are written.
            let mut parity = pu.map(|pu| std::mem::take(&mut chunks[pu]));
            sums.fill(0);
            for step in (0..width).step_by(STEP) {
                let pat = parity.as_ref().map_or(0, Vec::len);
                for (i, &(u, from, len)) in data.iter().enumerate() {
                    let end = (step + STEP).min(len);
                    if step >= end {
                        continue;
                    }
                    let src = &stream[from + step..from + end];
                    let dst = &mut chunks[u];
                    let at = dst.len();
                    dst.extend_from_slice(src);
                    sums[u] = crc32c::crc32c_append(sums[u], &dst[at..]);
                    match parity.as_mut() {
                        Some(p) if i == 0 => p.extend_from_slice(src),
                        Some(p) => xor_into(&mut p[pat..pat + src.len()], src),
                        None => {}
                    }
                }
                if let (Some(pu), Some(p)) = (pu, &parity) {
                    sums[pu] = crc32c::crc32c_append(sums[pu], &p[pat..]);
                }
            }
            if let (Some(pu), Some(p)) = (pu, parity) {
                chunks[pu] = p;
            }
            for u in 0..self.count {
                if self.block(r, u).len() > 0 {
                    crcs[u as usize].push(sums[u as usize]);
                }
            }
        }
        (chunks, crcs)
    }

    /// Verifies the chunks read back for rows `[r0, r1)` against the manifest's block
    /// checksums, rebuilds a lost block of a RAID-5 row from the others, and writes the
    /// stream bytes of the rows into `out`. Returns the blocks rebuilt, as
    /// `(unit, local offset, damage)`.
    ///
    /// With `check_parity`, a healthy RAID-5 row must also XOR to zero.
    pub(crate) fn assemble(
        &self,
        (r0, r1): (u64, u64),
        chunks: &[Chunk],
        crcs: &[Vec<u32>],
        paths: &[PathBuf],
        out: &mut [u8],
        check_parity: bool,
    ) -> Result<Vec<(u64, u64, Damage)>, FileError> {
        let base = self.stream_range(r0, r1).0;
        let mut rebuilt = Vec::new();
        let path = |u: u64| paths.get(u as usize).cloned().unwrap_or_default();
        for r in r0..r1 {
            let at = ((r - r0) * self.unit) as usize;
            let mut bad: Vec<(u64, Damage)> = Vec::new();
            // One pass per block: a data block is copied into `out` while it is
            // checksummed (a bad one is overwritten below), the parity only checksummed.
            for u in 0..self.count {
                let block = self.block(r, u);
                let len = block.len() as usize;
                if len == 0 {
                    continue;
                }
                let Some(b) = block_bytes(chunks, u, at, len) else {
                    bad.push((u, Damage::Missing));
                    continue;
                };
                let crc = match block {
                    Block::Data { global, .. } => {
                        let o = (global - base) as usize;
                        copy_crc(&mut out[o..o + len], b, 0)
                    }
                    _ => spools_exchange::crc32c(b),
                };
                let want = crcs.get(u as usize).and_then(|c| c.get(r as usize));
                if want != Some(&crc) {
                    bad.push((u, Damage::Corrupt));
                }
            }
            let lost = match (self.raid, bad.as_slice()) {
                (_, []) => None,
                (Raid::Raid5, [one]) => Some(*one),
                (Raid::Raid0, [(u, d), ..]) => {
                    let offset = r * self.unit;
                    return Err(match d {
                        Damage::Missing => FileError::MissingUnit {
                            unit: *u,
                            path: path(*u),
                            offset,
                        },
                        Damage::Corrupt => FileError::Corrupt {
                            unit: *u,
                            path: path(*u),
                            offset,
                        },
                    });
                }
                (Raid::Raid5, many) => {
                    return Err(FileError::Unrecoverable {
                        row: r,
                        units: many.iter().map(|b| b.0).collect(),
                    })
                }
            };
            if let Some((lu, damage)) = lost {
                // A lost data block is rebuilt in place in `out` (a lost parity block
                // needs nothing: the data is all there).
                if let Block::Data { global, len } = self.block(r, lu) {
                    let o = (global - base) as usize;
                    self.xor_row(r, Some(lu), chunks, at, &mut out[o..o + len as usize]);
                }
                rebuilt.push((lu, r * self.unit, damage));
            } else if check_parity && self.raid == Raid::Raid5 {
                let pu = self.count - 1 - r % self.count;
                let mut p = vec![0u8; self.block(r, pu).len() as usize];
                self.xor_row(r, None, chunks, at, &mut p);
                if p.iter().any(|&x| x != 0) {
                    return Err(FileError::Corrupt {
                        unit: pu,
                        path: path(pu),
                        offset: r * self.unit,
                    });
                }
            }
        }
        Ok(rebuilt)
    }

    /// The rebuilt contents of block `(r, u)` of a RAID-5 file from the other blocks of
    /// its row (for repair).
    pub(crate) fn rebuild_block(&self, r: u64, u: u64, chunks: &[Chunk], at: usize) -> Vec<u8> {
        let mut p = vec![0u8; self.block(r, u).len() as usize];
        self.xor_row(r, Some(u), chunks, at, &mut p);
        p
    }

    /// Sets `acc` to the XOR of the blocks of row `r` (each zero-padded or cut to
    /// `acc`'s length) but unit `skip`'s, word by word: the rebuilt block `skip`, or with
    /// no unit skipped, zeros for a consistent row.
    fn xor_row(&self, r: u64, skip: Option<u64>, chunks: &[Chunk], at: usize, acc: &mut [u8]) {
        acc.fill(0);
        for v in (0..self.count).filter(|&v| Some(v) != skip) {
            let len = self.block(r, v).len() as usize;
            if let Some(b) = block_bytes(chunks, v, at, len) {
                let n = len.min(acc.len());
                xor_into(&mut acc[..n], &b[..n]);
            }
        }
    }
}

fn block_bytes(chunks: &[Chunk], u: u64, at: usize, len: usize) -> Option<&[u8]> {
    chunks.get(u as usize)?.as_ref()?.get(at..at + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(spec: &str, size: u64) -> Geometry {
        let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
        Geometry::new(&l.with_size(size).unwrap_or_else(|e| unreachable!("{e}")))
            .unwrap_or_else(|| unreachable!())
    }

    fn stream(n: u64) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + i / 251) as u8).collect()
    }

    fn roundtrip(g: &Geometry, split: u64) {
        let data = stream(g.size);
        let rows = g.rows();
        let mut chunks: Vec<Chunk> = (0..g.count).map(|_| Some(Vec::new())).collect();
        let mut crcs: Vec<Vec<u32>> = vec![Vec::new(); g.count as usize];
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + split).min(rows);
            let (a, b) = g.stream_range(r0, r1);
            let (ch, cr) = g.build(r0, r1, &data[a as usize..b as usize]);
            for u in 0..g.count as usize {
                if let Some(c) = &mut chunks[u] {
                    c.extend_from_slice(&ch[u]);
                }
                crcs[u].extend_from_slice(&cr[u]);
            }
            r0 = r1;
        }
        for u in 0..g.count {
            assert_eq!(
                chunks[u as usize].as_ref().map(Vec::len),
                Some(g.unit_len(u) as usize)
            );
            assert_eq!(crcs[u as usize].len() as u64, g.unit_blocks(u));
        }
        let paths: Vec<PathBuf> = (0..g.count)
            .map(|u| PathBuf::from(format!("u{u}")))
            .collect();
        let mut out = vec![0u8; g.size as usize];
        let rebuilt = g.assemble((0, rows), &chunks, &crcs, &paths, &mut out, true);
        assert_eq!(rebuilt.ok(), Some(vec![]));
        assert_eq!(out, data);
        // Lose each unit in turn: RAID-5 rebuilds it, RAID-0 names it.
        for lost in 0..g.count {
            let mut c = chunks.clone();
            c[lost as usize] = None;
            let mut out = vec![0u8; g.size as usize];
            let res = g.assemble((0, rows), &c, &crcs, &paths, &mut out, false);
            match g.raid {
                Raid::Raid5 => {
                    assert!(res.is_ok(), "{res:?}");
                    assert_eq!(out, data);
                }
                Raid::Raid0 => {
                    assert!(matches!(res, Err(FileError::MissingUnit { unit, .. }) if unit == lost))
                }
            }
        }
        // Flip one bit of a block in the middle of unit 1.
        let mut c = chunks.clone();
        if let Some(Some(v)) = c.get_mut(1) {
            if !v.is_empty() {
                let i = v.len() / 2;
                v[i] ^= 0x10;
                let mut out = vec![0u8; g.size as usize];
                let res = g.assemble((0, rows), &c, &crcs, &paths, &mut out, true);
                match g.raid {
                    Raid::Raid5 => {
                        let r = res.unwrap_or_else(|e| unreachable!("{e}"));
                        assert_eq!(r, vec![(1, (i as u64 / g.unit) * g.unit, Damage::Corrupt)]);
                        assert_eq!(out, data);
                    }
                    Raid::Raid0 => assert!(
                        matches!(res, Err(FileError::Corrupt { unit: 1, offset, .. }) if offset == (i as u64 / g.unit) * g.unit)
                    ),
                }
            }
        }
    }

    #[test]
    fn raid5_and_raid0_round_trip_and_survive_damage() {
        for (spec, size) in [
            ("raid5(unit=16B,count=3)", 1000),
            ("raid5(unit=16B,count=5)", 64 * 4 * 3),
            ("raid5(unit=7B,count=4)", 50),
            ("raid5(unit=64B,count=2)", 65),
            ("stripe(unit=16B,count=3)", 1000),
            ("stripe(unit=5B,count=4)", 21),
        ] {
            let g = geo(spec, size);
            for split in [1, 2, 5, 1000] {
                roundtrip(&g, split);
            }
        }
    }

    #[test]
    fn two_lost_blocks_in_a_row_are_unrecoverable() {
        let g = geo("raid5(unit=8B,count=4)", 200);
        let data = stream(200);
        let (ch, cr) = g.build(0, g.rows(), &data);
        let mut chunks: Vec<Chunk> = ch.into_iter().map(Some).collect();
        chunks[0] = None;
        chunks[2] = None;
        let mut out = vec![0u8; 200];
        let paths = vec![PathBuf::new(); 4];
        let res = g.assemble((0, g.rows()), &chunks, &cr, &paths, &mut out, false);
        assert!(
            matches!(res, Err(FileError::Unrecoverable { row: 0, ref units }) if units == &vec![0, 2])
        );
    }
}

/// `Geometry::block` checked against oracles that share no code with it: the textbook
/// picture of md's left-symmetric RAID-5, a model written from the definition, and
/// spools-map's model-tested stream layouts (`Layout::locate`, `Raid5Layout::parity`).
#[cfg(test)]
mod oracle {
    use super::*;
    use spools_map::Raid5Layout;
    use spools_testkit::Rng;

    fn geo(raid: &str, unit: u64, count: u64, size: u64) -> Geometry {
        let spec = format!("{raid}(unit={unit}B,count={count},size={size}B)");
        let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{spec}: {e}"));
        Geometry::new(&l).unwrap_or_else(|| unreachable!("{spec}"))
    }

    /// Block `(r, u)` as a letter: `P` for parity, the data block's number otherwise,
    /// `-` when absent.
    fn picture(g: &Geometry) -> Vec<Vec<String>> {
        (0..g.rows())
            .map(|r| {
                (0..g.count)
                    .map(|u| match g.block(r, u) {
                        Block::Parity { .. } => "P".to_string(),
                        Block::Data { global, .. } => (global / g.unit).to_string(),
                        Block::Absent => "-".to_string(),
                    })
                    .collect()
            })
            .collect()
    }

    fn rows(t: &[&str]) -> Vec<Vec<String>> {
        t.iter()
            .map(|r| r.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn left_symmetric_raid5_matches_the_textbook_picture() {
        // Linux md's left-symmetric layout (the md default) over 4 and 5 disks: parity
        // moves one disk to the left every row, starting on the last; data continues on
        // the disk after the parity and wraps around.
        assert_eq!(
            picture(&geo("raid5", 4, 4, 18 * 4)),
            rows(&[
                "0 1 2 P", //
                "4 5 P 3",
                "8 P 6 7",
                "P 9 10 11",
                "12 13 14 P",
                "16 17 P 15",
            ])
        );
        assert_eq!(
            picture(&geo("raid5", 1, 5, 20)),
            rows(&[
                "0 1 2 3 P",
                "5 6 7 P 4",
                "10 11 P 8 9",
                "15 P 12 13 14",
                "P 16 17 18 19",
            ])
        );
        // Two units: the parity alternates (a mirror of each block).
        assert_eq!(
            picture(&geo("raid5", 8, 2, 30)),
            rows(&["0 P", "P 1", "2 P", "P 3"])
        );
        // RAID-0: plain round robin.
        assert_eq!(
            picture(&geo("stripe", 2, 3, 16)),
            rows(&["0 1 2", "3 4 5", "6 7 -"])
        );
        // A short stream: the last row's missing blocks are absent, the parity as long as
        // the row's longest block.
        let g = geo("raid5", 10, 4, 25);
        assert_eq!(picture(&g), rows(&["0 1 2 P"]));
        assert_eq!(g.block(0, 2), Block::Data { global: 20, len: 5 });
        assert_eq!(g.block(0, 3), Block::Parity { len: 10 });
        let g = geo("raid5", 10, 4, 45);
        assert_eq!(picture(&g), rows(&["0 1 2 P", "4 - P 3"]));
        assert_eq!(g.block(1, 2), Block::Parity { len: 10 });
        assert_eq!(g.block(1, 0), Block::Data { global: 40, len: 5 });
        let g = geo("raid5", 10, 4, 33);
        assert_eq!(picture(&g), rows(&["0 1 2 P", "- - P 3"]));
        assert_eq!(g.block(1, 2), Block::Parity { len: 3 });
    }

    /// What block `(r, u)` holds, from the definition of left-symmetric RAID-5 (and of
    /// RAID-0), written independently of `Geometry::block`.
    fn model(raid: Raid, unit: u64, k: u64, size: u64, r: u64, u: u64) -> Block {
        let (data_units, parity) = match raid {
            Raid::Raid0 => (k, None),
            Raid::Raid5 => (k - 1, Some(k - 1 - r % k)),
        };
        let row_start = r * data_units * unit;
        if parity == Some(u) {
            return if row_start < size {
                Block::Parity {
                    len: unit.min(size - row_start),
                }
            } else {
                Block::Absent
            };
        }
        // The i-th data block of the row sits i units after the parity (round robin
        // from unit 0 for RAID-0).
        let i = match parity {
            None => u,
            Some(p) => (0..k).position(|n| (p + 1 + n) % k == u).unwrap_or(0) as u64,
        };
        let global = row_start + i * unit;
        if global < size {
            Block::Data {
                global,
                len: unit.min(size - global),
            }
        } else {
            Block::Absent
        }
    }

    #[test]
    fn blocks_agree_with_the_definition_and_spools_map_over_random_geometries() {
        let mut rng = Rng(0x5eed_7a1d);
        for case in 0..600 {
            let raid = if rng.below(3) == 0 {
                Raid::Raid0
            } else {
                Raid::Raid5
            };
            let k = match raid {
                Raid::Raid0 => 1 + rng.below(7),
                Raid::Raid5 => 2 + rng.below(7),
            };
            let unit = 1 + rng.below(if case % 5 == 0 { 4096 } else { 40 });
            let rows = 1 + rng.below(12);
            let size = 1 + rng.below(unit * k * rows + 3);
            let name = if raid == Raid::Raid0 {
                "stripe"
            } else {
                "raid5"
            };
            let g = geo(name, unit, k, size);
            let what = format!("{name}(unit={unit},count={k},size={size})");
            let l = g.layout.clone();
            let r5 = (raid == Raid::Raid5)
                .then(|| Raid5Layout::new(unit, k, Some(size)).ok())
                .flatten();
            // Every stream byte is in exactly one data block, where spools-map puts it.
            let mut seen = vec![0u32; size as usize];
            let mut per_unit = vec![0u64; k as usize];
            for r in 0..g.rows() {
                for u in 0..k {
                    let b = g.block(r, u);
                    assert_eq!(
                        b,
                        model(raid, unit, k, size, r, u),
                        "{what}: block ({r}, {u})"
                    );
                    per_unit[u as usize] += b.len();
                    match b {
                        Block::Data { global, len } => {
                            for x in global..global + len {
                                seen[x as usize] += 1;
                            }
                            let at = l.locate(global).unwrap_or_else(|| unreachable!());
                            // (One RAID-0 unit holds the whole stream as one run.)
                            let one = raid == Raid::Raid0 && k == 1;
                            assert_eq!(
                                (at.unit, at.local, at.len),
                                (
                                    u,
                                    if one { global } else { r * unit },
                                    if one { size - global } else { len }
                                ),
                                "{what}: block ({r}, {u}) against spools-map"
                            );
                        }
                        Block::Parity { len } => {
                            let p = r5.as_ref().and_then(|x| x.parity(r));
                            assert_eq!(p, Some((u, r * unit, len)), "{what}: parity of row {r}");
                        }
                        Block::Absent => {}
                    }
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{what}: a byte not in exactly one block"
            );
            // Unit files hold exactly their blocks (spools-map's local sizes).
            for u in 0..k {
                assert_eq!(per_unit[u as usize], g.unit_len(u), "{what}: unit {u}");
            }
            if let Some(x) = &r5 {
                assert_eq!(x.rows(), g.rows(), "{what}");
            }
        }
    }

    // The stream ranges of rows, assembly of a window of rows and rebuilding of a block,
    // against the unit files as the definition above (`model`) lays them out.

    /// Shapes whose last row is short: a 1-byte data block (`raid5` 4/3/21: "0 1 P",
    /// "3 P 2", "P 4 5"), an absent block ("4 - P 3"), a short parity ("- - P 3"), two
    /// units (mirrors), and RAID-0 with a short last row.
    const SHAPES: [(&str, u64, u64, u64); 5] = [
        ("raid5", 4, 3, 21),
        ("raid5", 10, 4, 45),
        ("raid5", 10, 4, 33),
        ("raid5", 3, 2, 13),
        ("stripe", 4, 3, 21),
    ];

    /// The bytes of block `(r, u)` by the definition: a data block's slice of the stream;
    /// for the parity, the XOR of the row's data blocks, each zero-padded to its length.
    fn model_block(g: &Geometry, data: &[u8], r: u64, u: u64) -> Vec<u8> {
        let m = |v| model(g.raid, g.unit, g.count, g.size, r, v);
        match m(u) {
            Block::Data { global, len } => data[global as usize..(global + len) as usize].to_vec(),
            Block::Parity { len } => {
                let mut p = vec![0u8; len as usize];
                for v in 0..g.count {
                    if let Block::Data { global, len } = m(v) {
                        for i in 0..len {
                            p[i as usize] ^= data[(global + i) as usize];
                        }
                    }
                }
                p
            }
            Block::Absent => Vec::new(),
        }
    }

    /// Unit `u`'s file from row `r0` to row `r1` by the model: its blocks one after the
    /// other (only the last row has short or absent blocks, so block `(r, u)` sits at
    /// local offset `r * unit`).
    fn model_chunk(g: &Geometry, data: &[u8], u: u64, (r0, r1): (u64, u64)) -> Vec<u8> {
        (r0..r1).flat_map(|r| model_block(g, data, r, u)).collect()
    }

    /// The manifest's checksums by the model: per unit, one per row where it has a block.
    fn model_crcs(g: &Geometry, data: &[u8]) -> Vec<Vec<u32>> {
        (0..g.count)
            .map(|u| {
                (0..g.rows())
                    .map(|r| model_block(g, data, r, u))
                    .filter(|b| !b.is_empty())
                    .map(|b| spools_exchange::crc32c(&b))
                    .collect()
            })
            .collect()
    }

    /// The stream bytes rows `[r0, r1)` hold by the model: from the first byte of their
    /// first data block to the last byte of their last.
    fn model_stream(g: &Geometry, (r0, r1): (u64, u64)) -> (u64, u64) {
        let spans: Vec<(u64, u64)> = (r0..r1)
            .flat_map(|r| (0..g.count).map(move |u| (r, u)))
            .filter_map(
                |(r, u)| match model(g.raid, g.unit, g.count, g.size, r, u) {
                    Block::Data { global, len } => Some((global, global + len)),
                    _ => None,
                },
            )
            .collect();
        let a = spans.iter().map(|s| s.0).min().unwrap_or(g.size);
        let b = spans.iter().map(|s| s.1).max().unwrap_or(g.size);
        (a, b)
    }

    /// A stream whose bytes are distinct in any 256 in a row (a byte out of place shows).
    fn stream(n: u64) -> Vec<u8> {
        (0..n).map(|i| (i * 37 + 11) as u8).collect()
    }

    fn windows(rows: u64) -> impl Iterator<Item = (u64, u64)> {
        (0..rows).flat_map(move |r0| (r0 + 1..=rows).map(move |r1| (r0, r1)))
    }

    #[test]
    fn stream_ranges_of_rows_by_hand() {
        // 8 stream bytes a row, 3 rows, the last 5 bytes long.
        let g = geo("raid5", 4, 3, 21);
        assert_eq!(g.stream_range(0, 1), (0, 8));
        assert_eq!(g.stream_range(1, 2), (8, 16));
        assert_eq!(g.stream_range(1, 3), (8, 21));
        assert_eq!(g.stream_range(2, 3), (16, 21));
        assert_eq!(g.stream_range(3, 3), (21, 21));
        // 12 stream bytes a row, 2 rows.
        let g = geo("stripe", 4, 3, 21);
        assert_eq!(g.stream_range(0, 2), (0, 21));
        assert_eq!(g.stream_range(1, 2), (12, 21));
        for (raid, unit, k, size) in SHAPES {
            let g = geo(raid, unit, k, size);
            for w in windows(g.rows()) {
                assert_eq!(
                    g.stream_range(w.0, w.1),
                    model_stream(&g, w),
                    "{raid} {w:?}"
                );
            }
        }
    }

    /// RAID-5 over 3 units of 2 bytes and a 5-byte stream: row 0 is "0 1 P", row 1 is
    /// "- P 2", its data block and parity 1 byte long. The unit files and every block
    /// rebuilt from the others, worked out by hand.
    #[test]
    fn a_tiny_raid5_file_by_hand() {
        let g = geo("raid5", 2, 3, 5);
        let data = [0x01, 0x02, 0x04, 0x08, 0x10];
        let (chunks, crcs) = g.build(0, 2, &data);
        let want = [
            vec![0x01, 0x02],
            vec![0x04, 0x08, 0x10],
            vec![0x05, 0x0a, 0x10],
        ];
        assert_eq!(chunks, want);
        let crc = |b: &[u8]| spools_exchange::crc32c(b);
        assert_eq!(
            crcs,
            vec![
                vec![crc(&[0x01, 0x02])],
                vec![crc(&[0x04, 0x08]), crc(&[0x10])],
                vec![crc(&[0x05, 0x0a]), crc(&[0x10])],
            ]
        );
        // Block (r, u) and its offset `at` in the chunks: whole files, then row 1 alone.
        let whole: Vec<Chunk> = want.iter().cloned().map(Some).collect();
        let row1: Vec<Chunk> = vec![Some(vec![]), Some(vec![0x10]), Some(vec![0x10])];
        for (r, u, at, chunks, block) in [
            (0, 0, 0, &whole, vec![0x01, 0x02]),
            (0, 1, 0, &whole, vec![0x04, 0x08]),
            (0, 2, 0, &whole, vec![0x05, 0x0a]),
            (1, 0, 2, &whole, vec![]),
            (1, 1, 2, &whole, vec![0x10]),
            (1, 2, 2, &whole, vec![0x10]),
            (1, 1, 0, &row1, vec![0x10]),
            (1, 2, 0, &row1, vec![0x10]),
        ] {
            // The block's own chunk is gone, or holds garbage: neither is read.
            let mut lost = chunks.clone();
            lost[u as usize] = None;
            assert_eq!(g.rebuild_block(r, u, &lost, at), block, "({r}, {u}) lost");
            let mut bad = chunks.clone();
            if let Some(c) = &mut bad[u as usize] {
                c.iter_mut().for_each(|x| *x ^= 0xff);
            }
            assert_eq!(g.rebuild_block(r, u, &bad, at), block, "({r}, {u}) corrupt");
        }
    }

    /// Every block of every RAID-5 shape, lost or corrupt, rebuilt from the chunks of a
    /// window of rows, is the block of the model.
    #[test]
    fn rebuilt_blocks_are_the_model_s_over_every_window() {
        for (raid, unit, k, size) in SHAPES.into_iter().filter(|s| s.0 == "raid5") {
            let g = geo(raid, unit, k, size);
            let data = stream(size);
            for (r0, r1) in windows(g.rows()) {
                let chunks: Vec<Chunk> = (0..k)
                    .map(|u| Some(model_chunk(&g, &data, u, (r0, r1))))
                    .collect();
                for r in r0..r1 {
                    let at = ((r - r0) * unit) as usize;
                    for u in 0..k {
                        let want = model_block(&g, &data, r, u);
                        let what = format!("{raid}/{unit}/{k}/{size} rows {r0}..{r1} ({r}, {u})");
                        let mut lost = chunks.clone();
                        lost[u as usize] = None;
                        assert_eq!(g.rebuild_block(r, u, &lost, at), want, "{what} lost");
                        let mut bad = chunks.clone();
                        if let Some(c) = &mut bad[u as usize] {
                            c.iter_mut().for_each(|x| *x = !*x);
                        }
                        assert_eq!(g.rebuild_block(r, u, &bad, at), want, "{what} corrupt");
                    }
                }
            }
        }
    }

    /// `assemble` of every window of rows of every shape: the window's stream bytes, and
    /// with one block lost or corrupt, that block rebuilt (RAID-5) or named (RAID-0).
    #[test]
    fn assembled_windows_of_rows_over_short_last_rows() {
        for (raid, unit, k, size) in SHAPES {
            let g = geo(raid, unit, k, size);
            let data = stream(size);
            let crcs = model_crcs(&g, &data);
            let paths: Vec<PathBuf> = (0..k).map(|u| PathBuf::from(format!("u{u}"))).collect();
            for (r0, r1) in windows(g.rows()) {
                let what = format!("{raid}/{unit}/{k}/{size} rows {r0}..{r1}");
                let (a, b) = model_stream(&g, (r0, r1));
                let want = &data[a as usize..b as usize];
                let chunks: Vec<Chunk> = (0..k)
                    .map(|u| Some(model_chunk(&g, &data, u, (r0, r1))))
                    .collect();
                let run = |chunks: &[Chunk]| {
                    let mut out = vec![0u8; (b - a) as usize];
                    let res = g.assemble((r0, r1), chunks, &crcs, &paths, &mut out, true);
                    (res, out)
                };
                // `build` of the window's stream bytes makes the model's chunks and checksums.
                let (built, sums) = g.build(r0, r1, want);
                for u in 0..k as usize {
                    assert_eq!(Some(&built[u]), chunks[u].as_ref(), "{what}: unit {u}");
                    let rows = r0 as usize..r0 as usize + sums[u].len();
                    assert_eq!(crcs[u].get(rows), Some(&sums[u][..]), "{what}: unit {u}");
                }
                let (res, out) = run(&chunks);
                assert!(matches!(res, Ok(ref v) if v.is_empty()), "{what}: {res:?}");
                assert_eq!(out, want, "{what}");
                // The rows of the window where unit `u` has a block.
                let held = |u| -> Vec<u64> {
                    (r0..r1)
                        .filter(|&r| !model_block(&g, &data, r, u).is_empty())
                        .collect()
                };
                for u in 0..k {
                    let mut lost = chunks.clone();
                    lost[u as usize] = None;
                    let (res, out) = run(&lost);
                    let first = held(u).first().copied();
                    match (g.raid, first) {
                        (Raid::Raid5, _) | (Raid::Raid0, None) => {
                            let rebuilt: Vec<_> = held(u)
                                .into_iter()
                                .map(|r| (u, r * unit, Damage::Missing))
                                .collect();
                            assert!(
                                matches!(res, Ok(ref v) if *v == rebuilt),
                                "{what}: lost {u}: {res:?}"
                            );
                            assert_eq!(out, want, "{what}: lost {u}");
                        }
                        (Raid::Raid0, Some(r)) => assert!(
                            matches!(res, Err(FileError::MissingUnit { unit: x, ref path, offset })
                                if x == u && *path == paths[u as usize] && offset == r * unit),
                            "{what}: lost {u}: {res:?}"
                        ),
                    }
                    for r in held(u) {
                        let mut bad = chunks.clone();
                        if let Some(c) = &mut bad[u as usize] {
                            c[((r - r0) * unit) as usize] ^= 0x40;
                        }
                        let (res, out) = run(&bad);
                        match g.raid {
                            Raid::Raid5 => {
                                let one = vec![(u, r * unit, Damage::Corrupt)];
                                assert!(
                                    matches!(res, Ok(ref v) if *v == one),
                                    "{what}: ({r}, {u}): {res:?}"
                                );
                                assert_eq!(out, want, "{what}: ({r}, {u})");
                            }
                            Raid::Raid0 => assert!(
                                matches!(res, Err(FileError::Corrupt { unit: x, ref path, offset })
                                    if x == u && *path == paths[u as usize] && offset == r * unit),
                                "{what}: ({r}, {u}): {res:?}"
                            ),
                        }
                    }
                }
            }
        }
    }

    /// With `check_parity`, a RAID-5 row whose blocks all pass their checksums but do not
    /// XOR to zero is refused, naming the row's parity unit (left-symmetric: 2, 1, 0, 2,
    /// ...) and the row's local offset; without it, the row is read as it is.
    #[test]
    fn check_parity_names_the_parity_block_of_an_inconsistent_row() {
        let g = geo("raid5", 4, 3, 44); // 6 rows, the last 4 stream bytes long
        let data = stream(44);
        let paths: Vec<PathBuf> = (0..3).map(|u| PathBuf::from(format!("u{u}"))).collect();
        let parity_unit = [2, 1, 0, 2, 1, 0];
        for (r, pu) in parity_unit.into_iter().enumerate() {
            let r = r as u64;
            // Change a data block of row r and its checksum alike.
            let u = (pu + 1) % 3;
            let mut crcs = model_crcs(&g, &data);
            let mut chunks: Vec<Vec<u8>> =
                (0..3).map(|u| model_chunk(&g, &data, u, (0, 6))).collect();
            let c = &mut chunks[u as usize];
            c[(r * 4) as usize] ^= 1;
            crcs[u as usize][r as usize] =
                spools_exchange::crc32c(&c[(r * 4) as usize..(r * 4 + 4) as usize]);
            let chunks: Vec<Chunk> = chunks.into_iter().map(Some).collect();
            for (r0, r1) in [(0, 6), (r, r + 1)] {
                let (a, b) = model_stream(&g, (r0, r1));
                let window: Vec<Chunk> = chunks
                    .iter()
                    .map(|c| {
                        c.as_ref()
                            .map(|c| c[(r0 * 4) as usize..c.len().min((r1 * 4) as usize)].to_vec())
                    })
                    .collect();
                let mut out = vec![0u8; (b - a) as usize];
                let res = g.assemble((r0, r1), &window, &crcs, &paths, &mut out, true);
                assert!(
                    matches!(res, Err(FileError::Corrupt { unit, ref path, offset })
                        if unit == pu && *path == paths[pu as usize] && offset == r * 4),
                    "row {r}, rows {r0}..{r1}: {res:?}"
                );
                let res = g.assemble((r0, r1), &window, &crcs, &paths, &mut out, false);
                assert!(matches!(res, Ok(ref v) if v.is_empty()), "row {r}: {res:?}");
                let Block::Data { global, .. } = model(Raid::Raid5, 4, 3, 44, r, u) else {
                    unreachable!("({r}, {u}) holds data")
                };
                let mut want = data[a as usize..b as usize].to_vec();
                want[(global - a) as usize] ^= 1;
                assert_eq!(out, want, "row {r}");
            }
        }
    }
}

#[cfg(test)]
mod fused_tests;
