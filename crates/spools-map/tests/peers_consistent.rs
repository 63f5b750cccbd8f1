//! Every plan's per-unit peer lists agree with its runs, from both ends.

#![allow(clippy::unwrap_used)]

use spools_map::{Layout, Plan};

fn check(a: &str, b: &str) {
    let from: Layout = a.parse().unwrap();
    let to: Layout = b.parse().unwrap();
    let plan = Plan::new(&from, &to).unwrap();
    for s in 0..plan.src().units() {
        let sends: Vec<u64> = plan
            .sends(s)
            .unwrap()
            .peers
            .iter()
            .map(|p| p.peer)
            .collect();
        for d in 0..plan.dst().units() {
            let bytes: u64 = plan.runs(s, d).unwrap().map(|r| r.len).sum();
            let recv: Vec<u64> = plan
                .receives(d)
                .unwrap()
                .peers
                .iter()
                .map(|p| p.peer)
                .collect();
            assert_eq!(
                bytes > 0,
                sends.contains(&d),
                "{a} -> {b}: sends({s}) vs runs({s},{d}) = {bytes}"
            );
            assert_eq!(
                bytes > 0,
                recv.contains(&s),
                "{a} -> {b}: receives({d}) vs runs({s},{d}) = {bytes}"
            );
        }
    }
}

#[test]
fn peer_lists_match_runs() {
    check(
        "stripe(unit=1536KiB,count=3,size=4718592B)",
        "f64[768,768] cyclic(8),* on 3x1",
    );
    check(
        "stripe(unit=2MiB,count=3,size=4718592B)",
        "f64[768,768] cyclic(8),* on 3x1",
    );
    check(
        "f64[768,768] block,block on 2x2",
        "stripe(unit=2MiB,count=3,size=4718592B)",
    );
}
