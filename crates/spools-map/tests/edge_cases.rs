//! The edge cases named in the foundation issue, and clear errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_map::{Extent, Layout, LayoutError, Plan, PlanError, Run, SpecError, UnitPlan};

/// The peers of a unit's plan, in order.
fn peer_ids(part: &UnitPlan) -> Vec<u64> {
    part.peers.iter().map(|p| p.peer).collect()
}

fn l(spec: &str) -> Layout {
    spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn local_counts(layout: &Layout) -> Vec<u64> {
    (0..layout.units())
        .map(|u| layout.local_bytes(u).unwrap())
        .collect()
}

#[test]
fn block_leaves_trailing_units_short_or_empty() {
    assert_eq!(local_counts(&l("u8[9] block on 4")), vec![3, 3, 3, 0]);
    assert_eq!(local_counts(&l("u8[10] block on 4")), vec![3, 3, 3, 1]);
    assert_eq!(l("u8[9] block on 4").extents(3).unwrap().count(), 0);
}

#[test]
fn fewer_indices_than_units() {
    assert_eq!(local_counts(&l("u8[3] block on 5")), vec![1, 1, 1, 0, 0]);
    assert_eq!(local_counts(&l("u8[3] cyclic on 5")), vec![1, 1, 1, 0, 0]);
    assert_eq!(
        local_counts(&l("u8[3] cyclic(2) on 5")),
        vec![2, 1, 0, 0, 0]
    );
    let plan = Plan::new(&l("u8[3] block on 5"), &l("u8[3] cyclic(2) on 5")).unwrap();
    let s = plan.summary().unwrap();
    assert_eq!((s.bytes(0, 0), s.bytes(1, 0), s.bytes(2, 1)), (1, 1, 1));
    assert_eq!(s.total_bytes(), 3);
}

#[test]
fn block_size_must_cover_the_dimension() {
    let err = "u8[10] block(2) on 4".parse::<Layout>().unwrap_err();
    assert!(
        matches!(
            err,
            SpecError::Invalid {
                pos: 7,
                source: LayoutError::BlockTooSmall {
                    block: 2,
                    procs: 4,
                    covered: 8,
                    extent: 10,
                    ..
                }
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("column 8"), "{err}");
    // exactly covering is fine, and larger blocks leave trailing units empty
    assert_eq!(local_counts(&l("u8[10] block(3) on 4")), vec![3, 3, 3, 1]);
    assert_eq!(local_counts(&l("u8[10] block(6) on 4")), vec![6, 4, 0, 0]);
}

#[test]
fn undistributed_dimension_needs_grid_extent_one() {
    let err = "f64[4,4] *,block on 2x2".parse::<Layout>().unwrap_err();
    assert!(
        matches!(
            err,
            SpecError::Invalid {
                pos: 9,
                source: LayoutError::WholeOnGrid { dim: 0, procs: 2 }
            }
        ),
        "{err:?}"
    );
}

#[test]
fn dimensions_of_extent_one() {
    let a = l("u8[1,7,1] block,cyclic(2),* on 1x3x1");
    assert_eq!(local_counts(&a), vec![3, 2, 2]);
    let e: Vec<Extent> = a.extents(1).unwrap().collect();
    assert_eq!(
        e,
        vec![Extent {
            global: 2,
            local: 0,
            len: 2
        }]
    );
    let b = l("u8[1,7,1] *,block,block on 1x2x1 order=F");
    let plan = Plan::new(&a, &b).unwrap();
    assert_eq!(plan.summary().unwrap().total_bytes(), 7);
}

#[test]
fn non_powers_of_two_everywhere() {
    let from = l("f64[1000,1000] cyclic(2),cyclic(2) on 8x8");
    let to = l("f64[1000,1000] block,* on 8x1");
    let s = Plan::new(&from, &to).unwrap().summary().unwrap();
    assert_eq!(s.total_bytes(), 8_000_000);
    // unit (i, j) of the 8x8 grid holds rows i*2, i*2+1 (mod 16); block row r holds rows
    // 125r..125r+124: every source unit sends to every row block.
    assert!((0..64).all(|src| (0..8).all(|dst| s.bytes(src, dst) > 0)));
    // runs are pairs of elements: 2 columns wide, one row each.
    assert_eq!(s.mean_run_bytes(), 16.0);
    let odd = Plan::new(
        &l("i16[97,31] cyclic(5),block on 3x7"),
        &l("i16[97,31] block(20),cyclic(3) on 5x2 order=F"),
    )
    .unwrap();
    assert_eq!(odd.summary().unwrap().total_bytes(), 97 * 31 * 2);
}

#[test]
fn raid5_is_md_left_symmetric() {
    // md's left-symmetric table for 4 disks (D = data block, P = parity):
    //   row 0: D0  D1  D2  P
    //   row 1: D4  D5  P   D3
    //   row 2: D8  P   D6  D7
    //   row 3: P   D9  D10 D11
    let r = l("raid5(unit=1KiB,count=4,size=12KiB)");
    let disk_of = |block: u64| r.locate(block * 1024).unwrap().unit;
    let table: Vec<u64> = (0..12).map(disk_of).collect();
    assert_eq!(table, vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    let Layout::Raid5(r5) = &r else {
        unreachable!()
    };
    let parity: Vec<u64> = (0..4).map(|row| r5.parity(row).unwrap().0).collect();
    assert_eq!(parity, vec![3, 2, 1, 0]);
    assert_eq!(r.locate(3 * 1024).unwrap().local, 1024);
    assert_eq!(r.locate(9 * 1024).unwrap().local, 3 * 1024);
    // every unit holds 3 data blocks and 1 parity block
    assert_eq!(local_counts(&r), vec![4096; 4]);
}

#[test]
fn raid5_short_last_row() {
    let r = l("raid5(unit=100B,count=3,size=450)");
    let Layout::Raid5(r5) = &r else {
        unreachable!()
    };
    // blocks 0..4 (the last of 50 bytes) in rows 0, 1, 2
    assert_eq!(r5.rows(), 3);
    // row 0: D0 D1 P, row 1: D3 P D2, row 2: P(50) D4(50) -
    assert_eq!(r5.parity(2), Some((0, 200, 50)));
    assert_eq!(r5.parity(3), None);
    assert_eq!(
        r.locate(400).map(|at| (at.unit, at.local, at.len)),
        Some((1, 200, 50))
    );
    assert_eq!(local_counts(&r), vec![250, 250, 200]);
}

#[test]
fn specs_round_trip() {
    for spec in [
        "f64[1000,1000] cyclic(2),cyclic(2) on 8x8",
        "i32[2176,1152,1408] block,block,block on 2x1x1",
        "c64[5,6,7] cyclic,block(3),* on 2x2x1 order=F",
        "bytes(12)[9] block(3) on 3",
        "stripe(unit=64KiB,count=4)",
        "raid5(unit=4MiB,count=5,size=3GiB)",
        "bits(n=10,unit=[5,4])",
        "bits(n=4,unit=[],local=[0,1,2,3])",
    ] {
        assert_eq!(l(spec).to_string(), spec);
    }
    assert_eq!(l("u8[4] cyclic(1) on 2").to_string(), "u8[4] cyclic on 2");
    assert_eq!(
        l("stripe(count=2,unit=1024)").to_string(),
        "stripe(unit=1KiB,count=2)"
    );
    assert_eq!(
        l("u8[4] block on 2 order=C").to_string(),
        "u8[4] block on 2"
    );
}

#[test]
fn malformed_specs_name_position_and_expectation() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "an element type"),
        ("f65[3] block on 1", 0, "an element type"),
        ("f64[3 block on 1", 5, "',' or ']'"),
        ("f64[3]block on 1", 6, "' '"),
        ("f64[3] blok on 1", 7, "a distribution"),
        ("f64[3] block(x) on 1", 13, "a block size"),
        ("f64[3,4] block on 1x1", 14, "2 distributions"),
        ("f64[3] block on 2x2", 17, "1 grid extents"),
        ("f64[3] block,block on 2", 12, "1 distributions"),
        ("f64[3] block  on 2", 12, "',' or ' on '"),
        ("f64[3] block on 2 order=G", 24, "'C' or 'F'"),
        ("f64[3] block on 2 extra", 17, "end of spec"),
        ("f64[99999999999999999999] block on 2", 4, "fits in 64 bits"),
        ("stripe(unit=4KiB)", 16, "count=K"),
        ("stripe(unit=4KiB,unit=4KiB,count=2)", 17, "given twice"),
        ("stripe(unit=4XiB,count=2)", 13, "',' or ')'"),
        ("raid5(unit=1,count=1)", 19, "at least 2 units"),
        ("bits(n=4,unit=[4])", 15, "out of range"),
        ("bits(n=4,unit=[1,1])", 17, "listed twice"),
        ("bits(n=4,unit=[1],local=[0,2])", 24, "local=[...]"),
        ("bits(n=99999999999,unit=[])", 7, "bits(n=99999999999): n must be between 1 and 62"),
        ("bits(n=40,unit=[39,38,37,36,35,34,33,32,31,30,29,28,27,26,25,24,23,22,21,20,19,18,17,16,15,14,13,12,11,10,9,8])", 15, "too many units"),
        ("stripe(size=10B,count=2,unit=0B)", 29, "stripe unit must be at least 1 byte"),
        ("stripe(count=2,size=0B,unit=1B)", 20, "at least 1 byte"),
        ("stripe(unit=5000000TiB,count=2)", 12, "stripe unit in bytes"),
        ("u8[4611686018427387904,2] block,block on 1x1", 2, "dataset size"),
        ("u8[1,1] block,block on 4294967296x4294967296", 19, "too many units (18446744073709551615 or more)"),
        ("u8[0] block on 1", 3, "extent 0"),
        ("u8[3] block on 0", 15, "grid extent 0"),
        ("u8[3] cyclic(0) on 1", 6, "block size 0"),
        ("bytes(0)[3] block on 1", 6, "at least 1 byte"),
    ];
    for &(spec, pos, needle) in cases {
        let err = spec.parse::<Layout>().expect_err(spec);
        assert_eq!(err.position(), pos, "{spec:?}: {err}");
        assert!(
            err.to_string().contains(needle),
            "{spec:?}: {err} lacks {needle:?}"
        );
    }
}

#[test]
fn plan_errors() {
    let a = l("f64[10] block on 2");
    assert_eq!(
        Plan::new(&a, &l("f32[10] block on 2")).unwrap_err(),
        PlanError::SizeMismatch { src: 80, dst: 40 }
    );
    assert_eq!(
        Plan::new(&l("stripe(unit=1,count=2)"), &l("raid5(unit=1,count=2)")).unwrap_err(),
        PlanError::Unsized
    );
    let p = Plan::new(&a, &l("stripe(unit=16,count=3)")).unwrap();
    assert!(matches!(
        p.sends(2),
        Err(PlanError::UnitOutOfRange {
            side: "source",
            unit: 2,
            units: 2
        })
    ));
    assert!(matches!(
        p.receives(3),
        Err(PlanError::UnitOutOfRange {
            side: "destination",
            ..
        })
    ));
    assert!(matches!(
        l("stripe(unit=1,count=2)").extents(0),
        Err(LayoutError::Unsized { .. })
    ));
}

#[test]
fn irregular_layouts() {
    use spools_map::IrregularLayout;
    let irr = Layout::Irregular(
        IrregularLayout::new(4, 10, vec![vec![(0, 2), (5, 5)], vec![(2, 3)]]).unwrap(),
    );
    let plan = Plan::new(&irr, &l("i32[10] block on 2")).unwrap();
    let runs: Vec<Run> = plan.runs(0, 1).unwrap().collect();
    assert_eq!(
        runs,
        vec![Run {
            src: 8,
            dst: 0,
            len: 20
        }]
    );
    let bad = |units: Vec<Vec<(u64, u64)>>| IrregularLayout::new(1, 10, units).unwrap_err();
    assert!(matches!(
        bad(vec![vec![(0, 5)], vec![(4, 6)]]),
        LayoutError::Irregular {
            problem: "two extents overlap",
            at: 4
        }
    ));
    assert!(matches!(
        bad(vec![vec![(0, 5)], vec![(6, 4)]]),
        LayoutError::Irregular { at: 5, .. }
    ));
    assert!(matches!(
        bad(vec![vec![(5, 5), (0, 5)]]),
        LayoutError::Irregular { .. }
    ));
    assert!(matches!(
        bad(vec![vec![(0, 11)]]),
        LayoutError::Irregular { .. }
    ));
}

#[test]
fn large_symbolic_plans_stay_small() {
    let from = l("i32[2176,1152,1408] block,block,block on 2x1x1");
    for to in [
        "i32[2176,1152,1408] cyclic(16),*,* on 3x1x1",
        "stripe(unit=4MiB,count=4)",
    ] {
        let plan = Plan::new(&from, &l(to)).unwrap();
        for s in 0..2 {
            let part = plan.sends(s).unwrap();
            let mut bytes = 0;
            for peer in &part.peers {
                assert!(
                    peer.stored_bytes() < 64 << 10,
                    "{to}: {} bytes held",
                    peer.stored_bytes()
                );
                bytes += peer.runs().map(|r| r.len).sum::<u64>();
            }
            assert_eq!(bytes, 2176 * 1152 * 1408 * 4 / 2, "{to}");
        }
    }
    // 2^40 elements dealt cyclically to the same distribution: one run per unit.
    let huge = l("u8[1099511627776] cyclic on 2");
    let plan = Plan::new(&huge, &huge).unwrap();
    let runs: Vec<Run> = plan.runs(1, 1).unwrap().collect();
    assert_eq!(
        runs,
        vec![Run {
            src: 0,
            dst: 0,
            len: 1 << 39
        }]
    );
    assert_eq!(plan.runs(0, 1).unwrap().count(), 0);
}

#[test]
fn aligned_and_identical_layouts_plan_in_constant_time() {
    use spools_map::PlanPath;
    // Found by the fuzzer: a 2^46-byte bit layout planned against itself.
    let bits = l("bits(n=46,unit=[6,5])");
    let plan = Plan::new(&bits, &bits).unwrap();
    assert_eq!(plan.path(), PlanPath::BitPermutation);
    let runs: Vec<Run> = plan.runs(2, 2).unwrap().collect();
    assert_eq!(
        runs,
        vec![Run {
            src: 0,
            dst: 0,
            len: 1 << 44
        }]
    );
    assert_eq!(plan.sends(1).unwrap().peers.len(), 1);
    // Rows of exactly one stripe block, dealt like the stripes: each unit keeps its bytes.
    let rows = l("f64[1000000,512] cyclic,* on 3x1");
    let stripe = l("stripe(unit=4KiB,count=3)");
    let plan = Plan::new(&rows, &stripe).unwrap();
    assert_eq!(plan.path(), PlanPath::ByteStream);
    for s in 0..3 {
        let part = plan.sends(s).unwrap();
        assert_eq!(part.peers.len(), 1);
        let runs: Vec<Run> = part.peers[0].runs().collect();
        assert_eq!(
            runs,
            vec![Run {
                src: 0,
                dst: 0,
                len: rows.local_bytes(s).unwrap()
            }]
        );
    }
    let big = l("stripe(unit=64KiB,count=8,size=1TiB)");
    let plan = Plan::new(&big, &big).unwrap();
    assert_eq!(plan.runs(7, 7).unwrap().count(), 1);
    // 2-D blocks onto stripes of whole rows: the stripe is a distribution of the rows.
    assert_eq!(
        Plan::new(&l("u8[64,64] block,block on 2x2"), &stripe)
            .unwrap()
            .path(),
        PlanPath::Dimensions
    );
    // Stripe units that cut rows: each unit's row pattern laid over its rows.
    assert_eq!(
        Plan::new(
            &l("u8[64,64] block,block on 2x2"),
            &l("stripe(unit=100,count=3)")
        )
        .unwrap()
        .path(),
        PlanPath::Rows
    );
}

#[test]
fn many_units_cost_the_sum_of_grid_extents() {
    // 100 000 units each side: a unit finds its single peer without visiting every unit's
    // run lists, and a summary of 10^10 pairs is refused rather than attempted.
    let from = l("u8[1000000] block on 100000");
    let to = l("u8[1000000] cyclic(10) on 100000");
    let plan = Plan::new(&from, &to).unwrap();
    let part = plan.sends(5).unwrap();
    assert_eq!(peer_ids(&part), vec![5]);
    assert!(matches!(
        plan.summary(),
        Err(PlanError::SummaryTooLarge {
            src_units: 100_000,
            ..
        })
    ));
    // 4096 units on a 16x16x16 grid: peers found per dimension, in increasing order.
    let a = l("u8[64,64,64] block,block,block on 16x16x16");
    let b = l("u8[64,64,64] block(8),block(8),block(8) on 16x16x16");
    let peers: Vec<u64> = Plan::new(&a, &b)
        .unwrap()
        .sends(16 * 16 + 16 + 1)
        .map(|u| peer_ids(&u))
        .unwrap();
    // unit (1,1,1) holds indices 4..8 in each dimension: block(8) coordinate 0 holds them
    assert_eq!(peers, vec![0]);
    let c = l("u8[64,64,64] cyclic(2),cyclic(2),cyclic(2) on 2x2x2");
    let peers: Vec<u64> = Plan::new(&a, &c)
        .unwrap()
        .sends(0)
        .map(|u| peer_ids(&u))
        .unwrap();
    assert_eq!(peers, (0..8).collect::<Vec<u64>>());
}

#[test]
fn stripe_units_far_larger_than_the_data() {
    // Found by the fuzzer: raid5(unit=4444444444444444441,count=410) bound to 1 MiB
    // overflowed while sizing units whose data block lies past the end.
    for spec in [
        "raid5(unit=4444444444444444441,count=410,size=1MiB)",
        "stripe(unit=4444444444444444441,count=410,size=1MiB)",
    ] {
        let layout = l(spec);
        let sizes: Vec<u64> = (0..layout.units())
            .map(|u| layout.local_bytes(u).unwrap())
            .collect();
        assert_eq!(sizes[0], 1 << 20, "{spec}");
        assert_eq!(
            sizes.iter().sum::<u64>(),
            if spec.starts_with("raid5") {
                2 << 20
            } else {
                1 << 20
            },
            "{spec}"
        );
        assert_eq!(layout.extents(1).unwrap().count(), 0, "{spec}");
        let loc = layout.locate((1 << 20) - 1).unwrap();
        assert_eq!((loc.unit, loc.local, loc.len), (0, (1 << 20) - 1, 1));
    }
}

#[test]
fn review_findings_stay_small() {
    // A stripe on one unit is one extent, however fine its blocks.
    let one = l("stripe(unit=1B,count=1,size=1GiB)");
    let e: Vec<Extent> = one.extents(0).unwrap().collect();
    assert_eq!(
        e,
        vec![Extent {
            global: 0,
            local: 0,
            len: 1 << 30
        }]
    );
    // `cyclic` on a single coordinate owns the whole dimension contiguously.
    let whole = l("u8[100000000] cyclic on 1");
    assert_eq!(whole.locate(0).unwrap().len, 100_000_000);
    let plan = Plan::new(&l("raid5(unit=1GiB,count=3)"), &whole).unwrap();
    assert_eq!(
        plan.runs(0, 0).unwrap().collect::<Vec<_>>(),
        vec![Run {
            src: 0,
            dst: 0,
            len: 100_000_000
        }]
    );
    // Peers are found without visiting every coordinate of a 2^24-unit grid.
    let plan = Plan::new(&l("u8[1] block on 1"), &l("u8[1] block on 16777216")).unwrap();
    assert_eq!(plan.sends(0).map(|u| peer_ids(&u)).unwrap(), vec![0]);
    let plan = Plan::new(&l("u8[1] block on 1"), &l("stripe(unit=1B,count=16777216)")).unwrap();
    assert_eq!(plan.sends(0).unwrap().peers.len(), 1);
    // Cyclic rows against a byte-fine stripe: a few segments per row block, not one per byte.
    let plan = Plan::new(
        &l("f64[16,4000000] cyclic,* on 2x1"),
        &l("stripe(unit=1B,count=2)"),
    )
    .unwrap();
    let part = plan.sends(0).unwrap();
    assert_eq!(part.peers.len(), 2);
    for peer in &part.peers {
        assert!(
            peer.stored_bytes() < 64 << 10,
            "{} bytes held",
            peer.stored_bytes()
        );
        let first: Vec<Run> = peer.runs().take(3).collect();
        let d = peer.peer;
        // bytes of row 0 alternate between the two stripe units: byte i goes to unit i % 2
        assert_eq!(
            first,
            (0..3)
                .map(|k| Run {
                    src: 2 * k + d,
                    dst: k,
                    len: 1
                })
                .collect::<Vec<_>>()
        );
    }
    // Coprime cyclic distributions: the pair's pieces are found without holding every block.
    let p = 300_000u64;
    let a = l(&format!("u8[{}] cyclic on {p}", 2 * p * (p + 1)));
    let b = l(&format!("u8[{}] cyclic on {}", 2 * p * (p + 1), p + 1));
    let runs: Vec<Run> = Plan::new(&a, &b).unwrap().runs(0, 0).unwrap().collect();
    // indices that are multiples of both p and p+1 below 2p(p+1): 0 and p(p+1)
    assert_eq!(
        runs,
        vec![
            Run {
                src: 0,
                dst: 0,
                len: 1
            },
            Run {
                src: p + 1,
                dst: p,
                len: 1
            }
        ]
    );
}

#[test]
fn cyclic_row_blocks_against_fine_stripes_repeat_per_common_period() {
    // Found by the fuzzer: 2.5 GB rows dealt cyclically to 3 units, against 4 KiB stripes
    // over 3 units. The per-row chunks repeat every 1024 rows; only one such period is held.
    let rows = l("u32[2666666,626666669,1] cyclic,block,block on 3x1x1");
    let plan = Plan::new(&rows, &l("stripe(unit=4KiB,count=3)")).unwrap();
    let part = plan.sends(0).unwrap();
    assert_eq!(part.peers.len(), 3);
    for peer in &part.peers {
        assert!(
            peer.stored_bytes() < 1 << 20,
            "{} bytes held",
            peer.stored_bytes()
        );
    }
    let first: Vec<Run> = plan.runs(0, 0).unwrap().take(3).collect();
    // row 0 is global bytes 0..2506666676 on unit 0; stripe unit 0 holds global blocks 0, 3, 6
    let expect: Vec<Run> = (0..3)
        .map(|k| Run {
            src: k * 12288,
            dst: k * 4096,
            len: 4096,
        })
        .collect();
    assert_eq!(first, expect);
}

#[test]
fn plan_alignment_is_the_common_run_granule() {
    // The largest size every run offset and length is a multiple of: the common element
    // size or stripe unit, bounded by the dataset size. Values worked out by hand.
    for (from, to, want) in [
        ("f64[10] block on 2", "f64[10] cyclic on 5", 8),
        (
            "f64[512,512] block,* on 4x1",
            "stripe(unit=4KiB,count=4)",
            8,
        ),
        ("c128[6] cyclic on 2", "stripe(unit=48B,count=2)", 16),
        (
            "stripe(unit=12B,count=2,size=72B)",
            "stripe(unit=18B,count=3)",
            6,
        ),
        (
            "stripe(unit=4KiB,count=2,size=6KiB)",
            "stripe(unit=4KiB,count=3)",
            2048,
        ),
        ("u32[4] block on 2", "u8[16] block on 2", 1),
        (
            "raid5(unit=4KiB,count=3,size=24KiB)",
            "stripe(unit=6KiB,count=2)",
            2048,
        ),
    ] {
        let plan = Plan::new(&l(from), &l(to)).unwrap();
        assert_eq!(plan.alignment(), want, "{from} -> {to}");
        for s in 0..plan.src().units() {
            for peer in plan.sends(s).unwrap().peers {
                for r in peer.runs() {
                    assert_eq!(
                        (r.src % want, r.dst % want, r.len % want),
                        (0, 0, 0),
                        "{from} -> {to}: {r:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn peers_of_terabyte_blocks() {
    // 4 TiB in 1 TiB stripes on 4 units against 2 TiB stripes on 2 units: both periods are
    // 4 TiB (their product overflows 64 bits). Unit s holds TiB s, which lies in half s / 2.
    let tib = 1u64 << 40;
    let plan = Plan::new(
        &l("stripe(unit=1TiB,count=4,size=4TiB)"),
        &l("stripe(unit=2TiB,count=2)"),
    )
    .unwrap();
    for s in 0..4 {
        let part = plan.sends(s).unwrap();
        let peers = peer_ids(&part);
        assert_eq!(peers, vec![s / 2], "unit {s}");
        // one segment, held by the plan (24 bytes)
        assert_eq!(
            part.peers[0].stored_bytes(),
            std::mem::size_of::<spools_map::PeerPlan>() + 24
        );
        let runs: Vec<Run> = part.peers[0].runs().collect();
        assert_eq!(
            runs,
            vec![Run {
                src: 0,
                dst: (s % 2) * tib,
                len: tib
            }],
            "unit {s}"
        );
    }
    // Byte-fine stripes against two halves: unit 0's bytes 0, 2, 4, ... fall in both
    // halves. Found by jumping to the next half, not by stepping through 2^39 blocks.
    let plan = Plan::new(
        &l("stripe(unit=1B,count=2,size=1TiB)"),
        &l("stripe(unit=512GiB,count=2)"),
    )
    .unwrap();
    for s in 0..2 {
        let peers: Vec<u64> = plan.sends(s).map(|u| peer_ids(&u)).unwrap();
        assert_eq!(peers, vec![0, 1], "unit {s}");
    }
    let first: Vec<Run> = plan.runs(1, 1).unwrap().take(2).collect();
    // global byte 2^39 + 1 is unit 1's local byte 2^38, the second half's byte 1
    assert_eq!(
        first,
        vec![
            Run {
                src: 1 << 38,
                dst: 1,
                len: 1
            },
            Run {
                src: (1 << 38) + 1,
                dst: 3,
                len: 1
            }
        ]
    );
}

#[test]
fn sweep_plans_count_the_segments_they_hold() {
    use spools_map::{PeerPlan, PlanPath};
    // A sweep holds the source unit's own runs: for an array, per dimension, the segments
    // of its coordinate (24 bytes each); for a stripe, nothing beyond the plan itself.
    let base = std::mem::size_of::<PeerPlan>();
    let to = l("raid5(unit=4B,count=3)");
    for (from, segs) in [
        // one block of 2 in each dimension
        ("u8[4,4] block,block on 2x2", 2),
        // indices 0, 2, 4, 6 of each dimension: 4 separate pieces each
        ("u8[8,8] cyclic,cyclic on 2x2", 8),
        ("stripe(unit=4B,count=4,size=64B)", 0),
    ] {
        let plan = Plan::new(&l(from), &to).unwrap();
        assert_eq!(plan.path(), PlanPath::Sweep, "{from}");
        let part = plan.sends(0).unwrap();
        assert!(!part.peers.is_empty(), "{from}");
        for peer in part.peers {
            assert_eq!(peer.stored_bytes(), base + segs * 24, "{from}");
        }
    }
}

#[test]
fn sweeps_find_a_units_blocks_arithmetically() {
    // A source unit holding bytes 0..2^29, against 2^30 one-byte units (a stripe, or a
    // RAID-5 whose row 0 puts data byte k on disk k): unit 7 gets byte 7; unit 2^29 + 5
    // gets nothing from it, found without stepping through the 2^29 bytes in between.
    let far = (1u64 << 29) + 5;
    for (from, to) in [
        (
            "raid5(unit=512MiB,count=3,size=1GiB)",
            "stripe(unit=1B,count=1073741824)",
        ),
        (
            "stripe(unit=512MiB,count=2,size=1GiB)",
            "raid5(unit=1B,count=1073741824)",
        ),
    ] {
        let plan = Plan::new(&l(from), &l(to)).unwrap();
        assert_eq!(plan.path(), spools_map::PlanPath::Sweep, "{from}");
        assert_eq!(
            plan.runs(0, 7).unwrap().collect::<Vec<_>>(),
            vec![Run {
                src: 7,
                dst: 0,
                len: 1
            }],
            "{from} -> {to}"
        );
        assert_eq!(plan.runs(0, far).unwrap().count(), 0, "{from} -> {to}");
    }
}

#[test]
fn a_sweep_stops_looking_for_peers_once_it_has_all() {
    // The source unit holds bytes 0..2^29 in one extent; the destination deals single
    // bytes to 2 units. Both are found in the first 2 bytes; the rest is not visited.
    let plan = Plan::new(
        &l("raid5(unit=512MiB,count=3,size=1GiB)"),
        &l("stripe(unit=1B,count=2)"),
    )
    .unwrap();
    assert_eq!(plan.path(), spools_map::PlanPath::Sweep);
    let peers: Vec<u64> = plan.sends(0).map(|u| peer_ids(&u)).unwrap();
    assert_eq!(peers, vec![0, 1]);
}

#[test]
fn plan_size_binds_unsized_streams() {
    for (from, to, want) in [
        ("f64[10] block on 2", "f64[10] cyclic on 5", 80),
        (
            "stripe(unit=4KiB,count=4)",
            "f64[512,512] block,* on 4x1",
            2 << 20,
        ),
        (
            "u8[3,5,7] block,*,* on 2x1x1",
            "stripe(unit=8B,count=3)",
            105,
        ),
    ] {
        let plan = Plan::new(&l(from), &l(to)).unwrap();
        assert_eq!(plan.total_bytes(), want, "{from} -> {to}");
        assert_eq!(plan.src().total_bytes(), Some(want), "{from}");
        assert_eq!(plan.dst().total_bytes(), Some(want), "{to}");
    }
}
