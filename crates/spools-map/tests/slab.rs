//! Slabs of arrays (`ArrayLayout::slab`): every byte of a slab is, in the slab's own
//! layout, where the whole array's layout puts it, shifted by the unit's local start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_map::{ArrayLayout, Layout};

fn array(spec: &str) -> ArrayLayout {
    match spec.parse::<Layout>().unwrap() {
        Layout::Array(a) => a,
        other => panic!("{other} is not an array"),
    }
}

/// Checks every element of the slab `[lo, hi)` of `a` against `locate` of the whole array.
fn check(a: &ArrayLayout, lo: u64, hi: u64) {
    let whole = Layout::Array(a.clone());
    let slab = a
        .slab(lo, hi)
        .unwrap_or_else(|| panic!("{whole}: no slab {lo}..{hi}"));
    let part = Layout::Array(slab.layout().clone());
    assert_eq!(part.total_bytes(), Some(hi - lo), "{whole} {lo}..{hi}");
    let e = a.dtype().size();
    for g in (lo..hi).step_by(e as usize) {
        let w = whole.locate(g).unwrap();
        let p = part.locate(g - lo).unwrap();
        let (start, end) = slab.local_range(w.unit).unwrap();
        assert_eq!(p.unit, w.unit, "{whole} {lo}..{hi} byte {g}");
        assert_eq!(start + p.local, w.local, "{whole} {lo}..{hi} byte {g}");
        assert!(w.local < end, "{whole} {lo}..{hi} byte {g}");
    }
    for u in 0..whole.units() {
        let (start, end) = slab.local_range(u).unwrap();
        assert_eq!(
            end - start,
            part.local_bytes(u).unwrap(),
            "{whole} unit {u}"
        );
        assert!(end <= whole.local_bytes(u).unwrap(), "{whole} unit {u}");
    }
}

#[test]
fn slabs_at_whole_periods_are_the_same_distribution() {
    for spec in [
        "i64[1000] cyclic on 2",
        "i32[1001] cyclic on 3",
        "u8[97] cyclic(4) on 5",
        "f64[24,7] cyclic,* on 4x1",
        "f32[30,12] cyclic(2),cyclic(5) on 3x2",
        "i16[9,10,4] cyclic,block,cyclic(3) on 2x2x2",
        "f64[12,30] cyclic(5),cyclic(2) on 2x3 order=F",
        "i64[40] block on 1",
        "u8[16,16] *,cyclic on 1x4",
    ] {
        let a = array(spec);
        let period = a.slab_period();
        let total = a.total_bytes();
        // Windows of 1, 2 and 3 periods, and the rest to the end.
        for len in [period, 2 * period, 3 * period] {
            let mut lo = 0;
            while lo < total {
                let hi = (lo + len).min(total);
                check(&a, lo, hi);
                lo = hi;
            }
        }
    }
}

#[test]
fn ranges_that_are_no_slab_are_refused() {
    let a = array("i64[1000] cyclic on 2");
    assert!(a.slab(8, 160).is_none(), "starts mid-period");
    assert!(a.slab(16, 20).is_none(), "ends mid-element");
    assert!(a.slab(16, 16).is_none(), "empty");
    assert!(a.slab(0, 8008).is_none(), "past the end");
    let b = array("f64[24,7] block,* on 4x1");
    // block: one period is the whole array, so only slabs from 0.
    assert!(b.slab(0, 56).is_some());
    assert!(b.slab(56, 112).is_none());
    assert_eq!(b.slab_period(), 24 * 56);
}
