//! The nCUBE paper's mapping functions (section 4): a 16x16 matrix of 4-byte floats in
//! Fortran order (index bits 0-1: byte, 2-5: row, 6-9: column) mapped by rows, columns and
//! blocks onto four processing elements, with inversion and composition (Figure 16).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_map::{BitPerm, Layout, Plan, Run};

fn l(spec: &str) -> Layout {
    spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"))
}

const CASES: [(&str, &str); 3] = [
    // rows: the top two bits of the row number pick the PE (Figure 18)
    ("bits(n=10,unit=[5,4])", "f32[16,16] block,* on 4x1 order=F"),
    // columns: the top two bits of the column number
    ("bits(n=10,unit=[9,8])", "f32[16,16] *,block on 1x4 order=F"),
    // blocks: the top bit of the row and of the column (Figure 19)
    (
        "bits(n=10,unit=[5,9])",
        "f32[16,16] block,block on 2x2 order=F",
    ),
];

#[test]
fn bit_maps_equal_the_array_distributions() {
    for (bits, array) in CASES {
        let (b, a) = (l(bits), l(array));
        assert_eq!(b.units(), a.units());
        for g in 0..1024 {
            let (x, y) = (b.locate(g).unwrap(), a.locate(g).unwrap());
            assert_eq!(
                (x.unit, x.local),
                (y.unit, y.local),
                "{bits} vs {array} at byte {g}"
            );
        }
        for u in 0..4 {
            assert!(
                b.extents(u).unwrap().eq(a.extents(u).unwrap()),
                "{bits} vs {array}, unit {u}"
            );
        }
    }
}

#[test]
fn inversion_and_composition() {
    let Layout::Bits(rows) = l(CASES[0].0) else {
        unreachable!()
    };
    let Layout::Bits(cols) = l(CASES[1].0) else {
        unreachable!()
    };
    let m1 = rows.perm();
    // inversion reflects the permutation: composing with it gives the identity
    assert_eq!(m1.then(&m1.inverse()).unwrap(), BitPerm::identity(10));
    assert_eq!(m1.inverse().then(m1).unwrap(), BitPerm::identity(10));
    // M1^-1 o M2 takes a rows word (unit << 8 | local) to a columns word
    let comp = rows.composite(&cols).unwrap();
    for g in 0..1024u64 {
        assert_eq!(comp.apply(m1.apply(g)), cols.perm().apply(g));
    }
    // byte and low row bits stay in place: runs of 2^4 bytes, four floats of one column
    assert_eq!(comp.fixed_low_bits(), 4);
    let plan = Plan::new(&l(CASES[0].0), &l(CASES[1].0)).unwrap();
    let mut count = 0;
    for s in 0..4 {
        for peer in plan.sends(s).unwrap().peers {
            for Run { src, dst, len } in peer.runs() {
                assert_eq!(len, 16);
                for i in 0..len {
                    assert_eq!(comp.apply(s << 8 | (src + i)), peer.peer << 8 | (dst + i));
                }
                count += 1;
            }
        }
    }
    assert_eq!(count, 64);
    // the plan agrees with the one between the equivalent arrays
    let arrays = Plan::new(&l(CASES[0].1), &l(CASES[1].1)).unwrap();
    for s in 0..4 {
        for d in 0..4 {
            assert!(plan.runs(s, d).unwrap().eq(arrays.runs(s, d).unwrap()));
        }
    }
}
