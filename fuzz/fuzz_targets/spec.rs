//! Fuzzes the spec parser and everything a parsed layout answers: any input must give a
//! layout or a positioned error, never a panic; a layout must print back to itself; and
//! mapping and planning on it must not panic or overflow (work is bounded per input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_map::{Layout, Plan, PlanPath};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let layout = match text.parse::<Layout>() {
        Ok(l) => l,
        Err(e) => {
            assert!(e.position() <= text.len());
            let _ = e.to_string();
            return;
        }
    };
    let printed = layout.to_string();
    let again: Layout = printed.parse().expect("a printed layout parses");
    assert_eq!(again, layout, "round trip of {printed}");

    let Ok(layout) = layout.with_size(layout.total_bytes().unwrap_or(1 << 20)) else {
        return;
    };
    let total = layout.total_bytes().expect("sized");
    for g in [0, total / 3, total / 2, total - 1] {
        let at = layout.locate(g).expect("in range");
        assert!(at.unit < layout.units() && at.len >= 1);
    }
    for unit in [0, layout.units() / 2, layout.units() - 1] {
        let _ = layout.local_bytes(unit).expect("unit in range");
        if let Ok(ext) = layout.extents(unit) {
            for e in ext.take(64) {
                assert!(e.global + e.len <= total);
            }
        }
    }
    let stripe: Layout = "stripe(unit=4KiB,count=3)".parse().expect("valid");
    for other in [&layout, &stripe] {
        let plan = Plan::new(&layout, other).expect("same size");
        for run in plan.runs(0, 0).expect("units exist").take(64) {
            assert!(run.len >= 1);
        }
        // Peer discovery on the symbolic paths (a sweep's cost is the pieces it visits).
        if plan.path() != PlanPath::Sweep && other.units() <= 4096 {
            let part = plan.sends(layout.units() - 1).expect("unit exists");
            assert!(part.peers.windows(2).all(|w| w[0].peer < w[1].peer));
            for peer in part.peers.iter().take(4) {
                assert!(
                    peer.runs().next().is_some(),
                    "peer {} listed without runs",
                    peer.peer
                );
            }
        }
    }
});
