//! Where the bytes of a striped stream lie in its unit files, whatever its length: the
//! arithmetic every access of a set open in place does (sans-IO).

use spools_map::Layout;

use crate::file::rows::Raid;

/// Where the bytes of a striped stream lie, whatever the stream's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Map {
    pub(super) raid: Raid,
    pub(super) unit: u64,
    pub(super) count: u64,
}

impl Map {
    pub(super) fn of(layout: &Layout) -> Option<Map> {
        let (raid, unit, count) = match layout {
            Layout::Stripe(s) => (Raid::Raid0, s.unit(), s.count()),
            Layout::Raid5(s) => (Raid::Raid5, s.unit(), s.count()),
            _ => return None,
        };
        let m = Map { raid, unit, count };
        (unit > 0 && m.data_units() > 0).then_some(m)
    }

    pub(super) fn data_units(&self) -> u64 {
        match self.raid {
            Raid::Raid0 => self.count,
            Raid::Raid5 => self.count.saturating_sub(1),
        }
    }

    pub(super) fn row_bytes(&self) -> u64 {
        self.unit * self.data_units()
    }

    /// Which data block of row `r` unit `u` holds (`None`: the row's parity).
    pub(super) fn index(&self, r: u64, u: u64) -> Option<u64> {
        match self.raid {
            Raid::Raid0 => Some(u),
            Raid::Raid5 => {
                let pu = self.count - 1 - r % self.count;
                (u != pu).then(|| (u + self.count - pu - 1) % self.count)
            }
        }
    }

    /// The unit holding stream byte `off`, the byte's offset in it, and the bytes of its
    /// block from there on.
    pub(super) fn locate(&self, off: u64) -> (u64, u64, u64) {
        let rb = self.row_bytes();
        let (r, in_row) = (off / rb, off % rb);
        let (idx, w) = (in_row / self.unit, in_row % self.unit);
        let u = match self.raid {
            Raid::Raid0 => idx,
            Raid::Raid5 => (self.count - r % self.count + idx) % self.count,
        };
        (u, r * self.unit + w, self.unit - w)
    }

    /// One past the last stream byte that a file of `len` bytes for unit `u` holds (0
    /// for none): parity blocks are stepped over.
    pub(super) fn end_from(&self, u: u64, len: u64) -> u64 {
        let mut x = len;
        while x > 0 {
            let r = (x - 1) / self.unit;
            match self.index(r, u) {
                Some(i) => return r * self.row_bytes() + i * self.unit + (x - 1) % self.unit + 1,
                None => x = r * self.unit,
            }
        }
        0
    }

    /// The length of unit `u`'s file that holds exactly its data of a stream of `size`
    /// bytes (a parity block after its last data block is not kept).
    pub(super) fn unit_end(&self, u: u64, size: u64) -> u64 {
        if size == 0 {
            return 0;
        }
        let last = (size - 1) / self.row_bytes();
        // The last row holds data of `u`, or the row before does, or (RAID-5, `u` the
        // parity of that one) the row before that: all rows before the last are full.
        for r in (0..=last).rev().take(3) {
            if let Some(i) = self.index(r, u) {
                let start = r * self.row_bytes() + i * self.unit;
                if start < size {
                    return r * self.unit + (size - start).min(self.unit);
                }
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::rows::{Block, Geometry};

    fn map(spec: &str) -> Map {
        let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
        Map::of(&l).unwrap_or_else(|| unreachable!())
    }

    /// `locate`, `end_from` and `unit_end` agree with the sized geometry of the striped
    /// writer for every byte of streams of many lengths.
    #[test]
    fn the_map_agrees_with_the_geometry_of_every_length() {
        for spec in [
            "raid5(unit=4B,count=3)",
            "raid5(unit=3B,count=4)",
            "stripe(unit=5B,count=2)",
            "raid5(unit=2B,count=2)",
        ] {
            let m = map(spec);
            for size in 1..80u64 {
                let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
                let g = Geometry::new(&l.with_size(size).unwrap_or_else(|e| unreachable!("{e}")))
                    .unwrap_or_else(|| unreachable!());
                let mut ends = vec![0u64; m.count as usize];
                for off in 0..size {
                    let (u, local, room) = m.locate(off);
                    let r = local / m.unit;
                    match g.block(r, u) {
                        Block::Data { global, len } => {
                            assert!(global <= off && off < global + len, "{spec} {size} {off}");
                            assert_eq!(off - global, local % m.unit);
                            assert_eq!(room, m.unit - local % m.unit);
                        }
                        b => panic!("{spec} size {size}: byte {off} in {b:?}"),
                    }
                    ends[u as usize] = ends[u as usize].max(local + 1);
                }
                for u in 0..m.count {
                    assert_eq!(
                        m.unit_end(u, size),
                        ends[u as usize],
                        "{spec} {size} unit {u}"
                    );
                    assert!(m.end_from(u, ends[u as usize]) <= size);
                    // A committed unit file (its trailing parity block kept) tells no more.
                    assert!(
                        m.end_from(u, g.unit_len(u)) <= size,
                        "{spec} {size} unit {u}"
                    );
                }
                let (u, local, _) = m.locate(size - 1);
                assert_eq!(m.end_from(u, local + 1), size);
                assert_eq!(
                    (0..m.count).map(|u| m.end_from(u, g.unit_len(u))).max(),
                    Some(size)
                );
            }
        }
    }
}
