//! The fused one-pass chunk building against the former two-pass code, and the rebuilding
//! of rows from parity with the word-wide kernels.

use std::path::PathBuf;

use spools_map::Layout;
use spools_testkit::Rng;

use super::{Block, Chunk, Damage, Geometry, Raid};
use spools_exchange::crc::{copy_crc, STEP};

fn geo(raid: &str, unit: u64, count: u64, size: u64) -> Geometry {
    let spec = format!("{raid}(unit={unit}B,count={count},size={size}B)");
    let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{spec}: {e}"));
    Geometry::new(&l).unwrap_or_else(|| unreachable!("{spec}"))
}

/// The former two-pass `build` (copy with checksums, then the parity XORed from the
/// chunks in a second pass), kept as the reference of the fused one.
fn build_two_pass(g: &Geometry, r0: u64, r1: u64, stream: &[u8]) -> super::UnitChunks {
    let base = g.stream_range(r0, r1).0;
    let mut chunks: Vec<Vec<u8>> = (0..g.count)
        .map(|u| {
            let (a, b) = g.chunk_range(u, r0, r1);
            vec![0u8; (b - a) as usize]
        })
        .collect();
    let mut crcs: Vec<Vec<u32>> = vec![Vec::new(); g.count as usize];
    for r in r0..r1 {
        let at = ((r - r0) * g.unit) as usize;
        let mut parity_unit = None;
        for u in 0..g.count {
            match g.block(r, u) {
                Block::Data { global, len } => {
                    let from = (global - base) as usize;
                    let src = &stream[from..from + len as usize];
                    let dst = &mut chunks[u as usize][at..at + len as usize];
                    crcs[u as usize].push(copy_crc(dst, src, 0));
                }
                Block::Parity { .. } => parity_unit = Some(u),
                Block::Absent => {}
            }
        }
        if let Some(pu) = parity_unit {
            let len = g.block(r, pu).len() as usize;
            let mut p = vec![0u8; len];
            for u in 0..g.count {
                if let Block::Data { len: l, .. } = g.block(r, u) {
                    for (a, b) in p.iter_mut().zip(&chunks[u as usize][at..at + l as usize]) {
                        *a ^= *b;
                    }
                }
            }
            crcs[pu as usize].push(spools_exchange::crc32c(&p));
            chunks[pu as usize][at..at + len].copy_from_slice(&p);
        }
    }
    (chunks, crcs)
}

/// The fused one-pass `build` gives the chunks and checksums of the two-pass one, on
/// random geometries (units around the step size, short last rows) and windows.
#[test]
fn fused_build_is_the_two_pass_build_on_random_geometries() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..60 {
        let raid = if i % 3 == 0 { "stripe" } else { "raid5" };
        let unit = match i % 4 {
            0 => 1 + rng.below(40),
            1 => STEP as u64 + rng.below(100) - 50,
            2 => 2 * STEP as u64 + 1,
            _ => 1 + rng.below(5000),
        };
        let k = 2 + rng.below(5);
        let rows = 1 + rng.below(6);
        let data_units = if raid == "raid5" { k - 1 } else { k };
        let size = 1 + rng.below(rows * unit * data_units);
        let g = geo(raid, unit, k, size);
        let data: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        for (r0, r1) in [(0, g.rows()), (g.rows() / 2, g.rows())] {
            let (a, b) = g.stream_range(r0, r1);
            let s = &data[a as usize..b as usize];
            assert_eq!(
                g.build(r0, r1, s),
                build_two_pass(&g, r0, r1, s),
                "{raid}/{unit}/{k}/{size} rows {r0}..{r1}"
            );
        }
    }
}

/// Chunks built by the fused code, with one unit lost or one byte of it flipped, assemble
/// into the stream (RAID-5), and a rebuilt block is the lost one.
#[test]
fn fused_chunks_rebuild_from_parity() {
    let mut rng = Rng(7);
    for (unit, k, size) in [(4096, 3, 50_000), (STEP as u64 + 3, 4, 150_001), (1, 5, 37)] {
        let g = geo("raid5", unit, k, size);
        let data: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        let (built, crcs) = g.build(0, g.rows(), &data);
        let chunks: Vec<Chunk> = built.iter().cloned().map(Some).collect();
        let paths: Vec<PathBuf> = (0..k).map(|u| PathBuf::from(format!("u{u}"))).collect();
        for u in 0..k {
            for flip in [false, true] {
                let mut c = chunks.clone();
                match &mut c[u as usize] {
                    Some(v) if flip && !v.is_empty() => v[0] ^= 1,
                    slot => *slot = None,
                }
                let mut out = vec![0u8; size as usize];
                let res = g.assemble((0, g.rows()), &c, &crcs, &paths, &mut out, true);
                let want = if flip {
                    Damage::Corrupt
                } else {
                    Damage::Missing
                };
                let res = res.unwrap_or_else(|e| unreachable!("{unit}/{k}/{size} {u}: {e}"));
                assert!(
                    res.iter().all(|b| b.0 == u && (b.2 == want || !flip)),
                    "{res:?}"
                );
                assert_eq!(out, data, "{unit}/{k}/{size}: unit {u} lost or flipped");
                let r = 0;
                assert_eq!(
                    g.rebuild_block(r, u, &c, 0),
                    built[u as usize][..g.block(r, u).len() as usize],
                    "{unit}/{k}/{size}: block (0, {u})"
                );
            }
        }
        assert!(matches!(g.block(0, k - 1), Block::Parity { .. }));
        assert_eq!(g.raid, Raid::Raid5);
    }
}
