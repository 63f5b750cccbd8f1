//! The collectives' state machines over the simulated shared memory: every collective
//! gives the right result at every rank count and root, on every topology, with ranks
//! arriving at different times; the cost model's bounds (a critical path of O(log P) line
//! transfers for the trees, today's flat shape linear, and the scan's chain linear in
//! every shape) hold up to 256 ranks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_coll::sim::{measure, run, Cost};
use spools_coll::{scan_rounds, Coll, Shape, Topology, Tree, SCAN_DOUBLING_MIN};

const COLLS: [Coll; 6] = [
    Coll::Barrier,
    Coll::Bcast,
    Coll::Reduce,
    Coll::Allreduce,
    Coll::Scan,
    Coll::ScanDoubling,
];

fn topologies(p: usize) -> Vec<(&'static str, Topology)> {
    vec![
        ("flat", Topology::flat(p)),
        ("2 sockets", Topology::sockets(p, 2)),
        (
            "L3 groups of 8, 4 to a socket",
            Topology::l3_groups(p, 8, 4),
        ),
        (
            "L3 groups of 3, 2 to a socket",
            Topology::l3_groups(p, 3, 2),
        ),
    ]
}

fn shapes(t: &Topology, root: usize) -> Vec<(String, Shape)> {
    let mut v = vec![("flat".to_string(), Shape::flat(root))];
    for k in [2, 3, 4, 8] {
        v.push((format!("tree radix {k}"), Shape::tree(t, root, k)));
    }
    v.push((
        "k-nomial radix 2, no topology".into(),
        Shape::Tree(Tree::knomial(t.ranks(), root, 2)),
    ));
    v
}

/// A deterministic spread of arrival times (0..97 time units).
fn offset(r: usize, s: u64) -> u64 {
    (r as u64 * 7919 + s * 104_729) % 97
}

fn input(r: usize, s: u64) -> u64 {
    s * 1_000_003 + r as u64 * 31 + 5
}

/// Checks every call of a run of `coll` on `t` over `shape` rooted at `root`.
fn check(t: &Topology, shape: &Shape, root: usize, coll: Coll, what: &str) {
    let n = t.ranks();
    let calls = 11;
    for cost in [Cost::Transfers, Cost::Nanos] {
        let runs = run(t, shape, coll, cost, calls, &offset, &input)
            .unwrap_or_else(|d| panic!("{what}: {coll:?} deadlocked: {d:?}"));
        assert_eq!(runs.len(), calls as usize);
        for (i, c) in runs.iter().enumerate() {
            let s = i as u64 + 1;
            let sum = (0..n).fold(0u64, |a, r| a.wrapping_add(input(r, s)));
            for r in 0..n {
                let want = match coll {
                    Coll::Barrier => 0,
                    Coll::Bcast => input(root, s),
                    Coll::Reduce if r == root => sum,
                    Coll::Reduce => 0,
                    Coll::Allreduce => sum,
                    Coll::Scan | Coll::ScanDoubling => {
                        (0..=r).fold(0u64, |a, q| a.wrapping_add(input(q, s)))
                    }
                };
                assert_eq!(c.results[r], want, "{what}: {coll:?} call {s} rank {r}");
                assert!(c.finishes[r] >= c.starts[r]);
            }
            // No rank leaves a barrier or an allreduce before the last one arrived.
            if matches!(coll, Coll::Barrier | Coll::Allreduce) {
                let last = c.starts.iter().max().copied().unwrap_or(0);
                for r in 0..n {
                    assert!(
                        c.finishes[r] >= last,
                        "{what}: rank {r} left call {s} at {} before rank arrivals ended at {last}",
                        c.finishes[r]
                    );
                }
            }
        }
    }
}

#[test]
fn every_collective_is_right_at_1_to_20_ranks_on_every_shape() {
    for n in 1..=20 {
        for (tname, t) in topologies(n) {
            for root in [0, n / 2, n - 1] {
                for (sname, shape) in shapes(&t, root) {
                    for coll in COLLS {
                        check(
                            &t,
                            &shape,
                            root,
                            coll,
                            &format!("{n} ranks, {tname}, {sname}, root {root}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_collective_is_right_at_64_100_and_256_ranks() {
    for n in [64, 100, 256] {
        for (tname, t) in topologies(n) {
            for root in [0, n / 3] {
                for (sname, shape) in shapes(&t, root).into_iter().skip(1).step_by(2) {
                    for coll in COLLS {
                        check(
                            &t,
                            &shape,
                            root,
                            coll,
                            &format!("{n} ranks, {tname}, {sname}, root {root}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_bcast_of_64_ranks_on_2_sockets_takes_at_most_2_log_p_transfers_where_flat_takes_63() {
    let t = Topology::sockets(64, 2);
    let tree = measure(&t, Shape::tree(&t, 0, 4), Coll::Bcast, Cost::Transfers);
    let flat = measure(&t, Shape::flat(0), Coll::Bcast, Cost::Transfers);
    assert!(tree.critical <= 12.0, "tree: {tree:?}");
    assert!(flat.critical >= 63.0, "flat: {flat:?}");
}

/// The trees' critical path is O(log P) line transfers for every small collective, on
/// every topology, up to 256 ranks (one phase: 2 log2 P + 2; barrier and allreduce are
/// two); today's flat shape is at least linear, its total transfers quadratic (up to 64
/// ranks).
#[test]
fn trees_are_logarithmic_where_the_flat_shape_is_linear() {
    for n in [2, 4, 8, 16, 32, 64, 128, 256] {
        let log = (n as f64).log2();
        for (tname, t) in topologies(n) {
            for coll in COLLS
                .into_iter()
                .filter(|&c| !matches!(c, Coll::Scan | Coll::ScanDoubling))
            {
                let phases = match coll {
                    Coll::Barrier | Coll::Allreduce => 2.0,
                    _ => 1.0,
                };
                let tree = measure(&t, Shape::tree(&t, 0, 4), coll, Cost::Transfers);
                assert!(
                    tree.critical <= phases * (2.0 * log + 2.0),
                    "{n} ranks, {tname}, {coll:?}: {tree:?}"
                );
                // The flat shape's quadratic cost makes 256 ranks slow to simulate.
                if (4..=64).contains(&n) {
                    let flat = measure(&t, Shape::flat(0), coll, Cost::Transfers);
                    assert!(
                        flat.critical >= (n - 1) as f64,
                        "{n}, {tname}, {coll:?}: {flat:?}"
                    );
                    assert!(
                        flat.transfers >= (n * n / 2) as f64,
                        "{n}, {tname}, {coll:?}: {flat:?}"
                    );
                    assert!(
                        tree.transfers <= 5.0 * n as f64,
                        "{n}, {tname}, {coll:?}: {tree:?}"
                    );
                }
            }
        }
    }
}

/// The scan by recursive doubling is logarithmic in every shape: `ceil(log2 P)` rounds
/// of at most 4.5 transfers each on the critical path (the store that takes the line back
/// from last round's reader, this round's reader's load, which often comes early and
/// loads again, a credit look about once in [`spools_coll::CELLS`] rounds) and at most
/// `3 P` per round in all, on every topology up to 256 ranks. And the engine's choice
/// between it and the chain ([`SCAN_DOUBLING_MIN`]) is the model's: from that many ranks
/// doubling's critical path is shorter in transfers and never longer in nanoseconds, on
/// every topology; below it, longer in nanoseconds on some (2 sockets).
#[test]
fn the_doubling_scan_is_logarithmic_and_chosen_where_the_model_prefers_it() {
    for n in [2, 3, 4, 5, 8, 12, 16, 32, 64, 128, 256] {
        let rounds = f64::from(scan_rounds(n));
        let mut longer = Vec::new();
        for (tname, t) in topologies(n) {
            let doubling = measure(&t, Shape::flat(0), Coll::ScanDoubling, Cost::Transfers);
            let tree = measure(
                &t,
                Shape::tree(&t, 0, 4),
                Coll::ScanDoubling,
                Cost::Transfers,
            );
            assert_eq!(
                doubling, tree,
                "{n} ranks, {tname}: the same whatever the shape"
            );
            assert!(
                doubling.critical <= 4.5 * rounds,
                "{n} ranks, {tname}: {doubling:?}"
            );
            assert!(
                doubling.transfers <= 3.0 * rounds * n as f64,
                "{n} ranks, {tname}: {doubling:?}"
            );
            let chain = measure(&t, Shape::flat(0), Coll::Scan, Cost::Transfers);
            if n >= SCAN_DOUBLING_MIN {
                assert!(
                    doubling.critical < chain.critical,
                    "{n} ranks, {tname}: doubling {doubling:?}, chain {chain:?}"
                );
            }
            let doubling = measure(&t, Shape::flat(0), Coll::ScanDoubling, Cost::Nanos);
            let chain = measure(&t, Shape::flat(0), Coll::Scan, Cost::Nanos);
            if doubling.critical > chain.critical {
                longer.push(format!("{tname}: {doubling:?} vs {chain:?}"));
            }
        }
        if n >= SCAN_DOUBLING_MIN {
            assert!(longer.is_empty(), "{n} ranks: doubling longer: {longer:?}");
        } else {
            assert!(!longer.is_empty(), "{n} ranks: doubling never longer");
        }
    }
}

/// Ranks sharing a cache talk first: on 2 sockets a topology-aware tree crosses between
/// sockets once, where a k-nomial tree over rank numbers does it at several levels, and
/// the model (weighed by distance) prefers it.
#[test]
fn topology_aware_trees_beat_plain_ones_across_sockets() {
    for n in [16, 64, 256] {
        let t = Topology::l3_groups(n, 8, 2);
        for coll in COLLS {
            let aware = measure(&t, Shape::tree(&t, 0, 2), coll, Cost::Nanos);
            let plain = measure(&t, Shape::Tree(Tree::knomial(n, 0, 2)), coll, Cost::Nanos);
            assert!(
                aware.critical <= plain.critical,
                "{n} {coll:?}: {aware:?} vs {plain:?}"
            );
        }
    }
}

/// The scan is the engine's chain in every shape, and its critical path is linear: each
/// hop costs the right neighbour's load of the left one's line and the store that
/// invalidates it again, and a credit look about once in [`spools_coll::CELLS`] calls
/// (2.25 (P - 1) transfers when every rank arrives at once; the chain is the whole cost,
/// so total and critical path agree), on every topology up to 256 ranks. From 8 ranks it
/// is the one small collective whose critical path the model finds longer than an
/// allreduce over a tree (at 16 ranks 33.8 transfers against 12 to 16), as the 16-core
/// measurements found scans of 8 bytes behind the peers' (docs/benchmarks.md).
#[test]
fn the_scan_chain_is_linear_in_every_shape() {
    for n in [2, 4, 8, 16, 32, 64, 128, 256] {
        for (tname, t) in topologies(n) {
            let chain = measure(&t, Shape::tree(&t, 0, 4), Coll::Scan, Cost::Transfers);
            // The same chain whatever the shape.
            for other in [Shape::tree(&t, 0, 2), Shape::flat(0)] {
                let m = measure(&t, other, Coll::Scan, Cost::Transfers);
                assert_eq!(m, chain, "{n} ranks, {tname}");
            }
            let hops = (n - 1) as f64;
            assert!(
                chain.critical >= 2.0 * hops && chain.critical <= 2.5 * hops,
                "{n} ranks, {tname}: {chain:?}"
            );
            assert!(
                chain.transfers <= 2.5 * hops,
                "{n} ranks, {tname}: {chain:?}"
            );
            let all = measure(&t, Shape::tree(&t, 0, 4), Coll::Allreduce, Cost::Transfers);
            if n >= 8 {
                assert!(
                    chain.critical > all.critical,
                    "{n} ranks, {tname}: scan {chain:?}, allreduce {all:?}"
                );
            }
        }
    }
}
