//! Runs as progressions: deterministic cases where the runs are short and equally spaced
//! (block -> cyclic(1), the worst case of a redistribution), checked against the runs one
//! by one, and held to one progression per column.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_map::{Layout, Plan, PlanPath, Run, Strided};

fn l(spec: &str) -> Layout {
    spec.parse().expect("valid spec")
}

fn expand(ps: &[Strided]) -> Vec<Run> {
    ps.iter()
        .flat_map(|p| p.runs().collect::<Vec<_>>())
        .collect()
}

/// Every peer of every unit, sends and receives: the progressions expand to the runs, and
/// there are at most `most` progressions per peer.
fn check(from: &str, to: &str, most: usize) -> Plan {
    let plan = Plan::new(&l(from), &l(to)).unwrap();
    for s in 0..plan.src().units() {
        let sends = plan.sends(s).unwrap();
        let receives = plan.receives(s.min(plan.dst().units() - 1)).unwrap();
        for peer in sends.peers.iter().chain(&receives.peers) {
            let ps: Vec<Strided> = peer.strided().collect();
            let runs: Vec<Run> = peer.runs().collect();
            assert_eq!(expand(&ps), runs, "{from} -> {to}, peer {}", peer.peer);
            assert!(
                ps.len() <= most,
                "{from} -> {to}: {} progressions for {} runs",
                ps.len(),
                runs.len()
            );
        }
    }
    plan
}

#[test]
fn block_to_cyclic_columns_are_one_progression_each() {
    // 4 ranks: 128 elements of each 512-element column go from every source to every
    // destination, 32 bytes apart at the source and adjacent at the destination (rows
    // 515, 519, ... of source 1 are rows 128, 129, ... of destination 3).
    let plan = check(
        "f64[2048,64] block,* on 4x1 order=F",
        "f64[2048,64] cyclic,* on 4x1 order=F",
        64,
    );
    assert_eq!(plan.path(), PlanPath::Dimensions);
    let first = plan.runs(1, 3).unwrap().strided().next().unwrap();
    assert_eq!(
        first,
        Strided {
            src: 24,
            dst: 128 * 8,
            len: 8,
            count: 128,
            src_stride: 32,
            dst_stride: 8
        }
    );
    // 8 ranks: 64 elements per column, which the plan keeps as an explicit list.
    check(
        "f64[2048,64] block,* on 8x1 order=F",
        "f64[2048,64] cyclic,* on 8x1 order=F",
        64,
    );
    // and back, and in C order (a column is then the slow dimension)
    check(
        "f64[2048,64] cyclic,* on 4x1 order=F",
        "f64[2048,64] block,* on 4x1 order=F",
        64,
    );
    check(
        "f64[64,2048] *,block on 1x4",
        "f64[64,2048] *,cyclic on 1x4",
        64,
    );
}

#[test]
fn one_dimension_and_byte_streams_are_one_progression() {
    check("f64[100000] block on 3", "f64[100000] cyclic on 5", 2);
    let plan = check("f32[30000] block on 3", "stripe(unit=4B,count=7)", 2);
    assert_eq!(plan.path(), PlanPath::ByteStream);
}

#[test]
fn elements_scattered_inside_a_segment_are_one_progression() {
    // Transpose-like: the innermost source dimension is not contiguous at the
    // destination, so each element of a segment is a run, at a constant stride.
    let plan = check(
        "f32[64,64] block,* on 2x1",
        "f32[64,64] *,block on 1x2 order=F",
        64,
    );
    let ps: Vec<Strided> = plan.runs(0, 1).unwrap().strided().collect();
    assert_eq!(ps.len(), 32);
    assert!(ps.iter().all(|p| p.count == 32 && p.len == 4), "{ps:?}");
}

#[test]
fn chaining_progressions_merge_like_the_runs() {
    // Whole rows move: each progression of elements chains into one run per rank.
    check("f64[64,64] block,* on 4x1", "f64[64,64] block,* on 2x1", 1);
    check("u8[1000] cyclic(3) on 3", "u8[1000] cyclic(3) on 3", 1);
    // Runs taken one by one first, then the rest as progressions.
    let plan = Plan::new(
        &l("f64[2048,16] block,* on 4x1 order=F"),
        &l("f64[2048,16] cyclic,* on 4x1 order=F"),
    )
    .unwrap();
    let all: Vec<Run> = plan.runs(2, 1).unwrap().collect();
    for skip in [0, 1, 127, 128, 129, 1000] {
        let mut runs = plan.runs(2, 1).unwrap();
        runs.by_ref().take(skip).for_each(drop);
        let rest: Vec<Strided> = runs.strided().collect();
        assert_eq!(expand(&rest), all[skip..], "after {skip}");
    }
}
