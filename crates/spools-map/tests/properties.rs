//! Property tests: every layout and every plan against the independent model in `common`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use common::{array_model, bits_model, scatter, stream_model, Model, RDist};
use proptest::prelude::*;
use spools_map::{Layout, Plan, Run, StridedRuns};

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn parse(m: &Model) -> Layout {
    let spec = m.spec();
    spec.parse()
        .unwrap_or_else(|e| panic!("model spec {spec:?} does not parse: {e}"))
}

/// Extents, locate, local sizes and printing of one layout against the model.
fn check_layout(m: &Model) -> Result<(), TestCaseError> {
    let l = parse(m);
    prop_assert_eq!(l.units(), m.units());
    prop_assert_eq!(l.total_bytes(), Some(m.total()));
    let back: Layout = l.to_string().parse().map_err(fail)?;
    prop_assert_eq!(&back, &l, "round trip of {}", l);
    let map = m.map();
    let mut per_unit = vec![0u64; m.units() as usize];
    let mut max_local = vec![0u64; m.units() as usize];
    for &(u, loc) in &map {
        per_unit[u as usize] += 1;
        max_local[u as usize] = max_local[u as usize].max(loc + 1);
    }
    for u in 0..m.units() {
        let ext: Vec<_> = l.extents(u).map_err(fail)?.collect();
        let mut bytes = 0;
        for w in ext.windows(2) {
            prop_assert!(
                w[0].local + w[0].len <= w[1].local,
                "extents out of local order: {:?}",
                w
            );
            let mergeable =
                w[0].local + w[0].len == w[1].local && w[0].global + w[0].len == w[1].global;
            prop_assert!(!mergeable, "extents not maximal: {:?}", w);
        }
        for e in &ext {
            prop_assert!(e.len > 0);
            for i in 0..e.len {
                prop_assert_eq!(
                    map[(e.global + i) as usize],
                    (u, e.local + i),
                    "{} unit {} extent {:?}",
                    l,
                    u,
                    e
                );
            }
            bytes += e.len;
        }
        prop_assert_eq!(
            bytes,
            per_unit[u as usize],
            "{} unit {} holds the wrong number of bytes",
            l,
            u
        );
        prop_assert!(l.local_bytes(u).map_err(fail)? >= max_local[u as usize]);
    }
    for g in 0..m.total() {
        let at = l
            .locate(g)
            .ok_or_else(|| TestCaseError::fail("locate gave None"))?;
        prop_assert_eq!((at.unit, at.local), map[g as usize], "{} locate({})", l, g);
        prop_assert!(at.len >= 1 && g + at.len <= m.total());
        for i in 1..at.len {
            prop_assert_eq!(
                map[(g + i) as usize],
                (at.unit, at.local + i),
                "{} locate({}) len {}",
                l,
                g,
                at.len
            );
        }
    }
    prop_assert!(l.locate(m.total()).is_none());
    prop_assert!(l.extents(m.units()).is_err());
    Ok(())
}

fn check_sorted_minimal(runs: &[Run], by_src: bool) -> Result<(), TestCaseError> {
    for w in runs.windows(2) {
        let (a, b) = if by_src {
            (w[0].src, w[1].src)
        } else {
            (w[0].dst, w[1].dst)
        };
        prop_assert!(a + w[0].len <= b, "runs out of order: {:?}", w);
        let mergeable = w[0].src + w[0].len == w[1].src && w[0].dst + w[0].len == w[1].dst;
        prop_assert!(!mergeable, "runs not minimal: {:?}", w);
    }
    Ok(())
}

/// The progressions of `runs`, expanded, are exactly `want`, in order; none chains inside
/// and a single run has no strides.
fn check_strided(strided: StridedRuns, want: &[Run]) -> Result<(), TestCaseError> {
    let mut got = Vec::new();
    for p in strided {
        prop_assert!(p.count >= 1, "empty progression {:?}", p);
        if p.count == 1 {
            prop_assert_eq!((p.src_stride, p.dst_stride), (0, 0), "{:?}", p);
        } else {
            prop_assert!(
                p.len != p.src_stride || p.len != p.dst_stride,
                "chains: {:?}",
                p
            );
        }
        got.extend(p.runs());
    }
    prop_assert_eq!(got, want);
    Ok(())
}

/// `Plan::window` (the array's bytes `[lo, lo + n)` onto a stripe laid over them) against
/// the model, byte by byte: every pair's runs, in both directions, and each unit's peers.
fn check_window(a: &Model, lo: u64, n: u64, unit: u64, count: u64) -> Result<(), TestCaseError> {
    let la = parse(a);
    let io = spools_map::StripeLayout::new(unit, count, Some(n)).map_err(fail)?;
    let Some(plan) = Plan::window(&la, lo, &io) else {
        let Layout::Array(x) = &la else {
            unreachable!()
        };
        prop_assert!(x.shape().len() == 1, "no window plan for {}", la);
        return Ok(());
    };
    prop_assert_eq!(plan.path(), spools_map::PlanPath::Rows);
    let map = a.map();
    let mut want: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
    for g in lo..lo + n {
        let (u, l) = map[g as usize];
        let w = g - lo;
        let (b, within) = (w / unit, w % unit);
        let d = b % count;
        want.entry((u, d))
            .or_default()
            .push((l, (b / count) * unit + within));
    }
    let back = plan.reversed();
    for u in 0..la.units() {
        let sends: Vec<u64> = plan
            .sends(u)
            .map_err(fail)?
            .peers
            .iter()
            .map(|p| p.peer)
            .collect();
        let expect: Vec<u64> = (0..count).filter(|d| want.contains_key(&(u, *d))).collect();
        prop_assert_eq!(sends, expect, "peers of array unit {}", u);
        for d in 0..count {
            let bytes = |runs: Vec<Run>, swap: bool| -> Vec<(u64, u64)> {
                runs.iter()
                    .flat_map(|r| {
                        (0..r.len).map(move |k| {
                            if swap {
                                (r.dst + k, r.src + k)
                            } else {
                                (r.src + k, r.dst + k)
                            }
                        })
                    })
                    .collect()
            };
            let got = bytes(plan.runs(u, d).map_err(fail)?.collect(), false);
            let w = want.get(&(u, d)).cloned().unwrap_or_default();
            prop_assert_eq!(&got, &w, "array unit {} -> stripe unit {}", u, d);
            let strided: Vec<Run> = plan
                .runs(u, d)
                .map_err(fail)?
                .strided()
                .flat_map(|p| p.runs().collect::<Vec<_>>())
                .collect();
            prop_assert_eq!(bytes(strided, false), w.clone());
            prop_assert_eq!(bytes(back.runs(d, u).map_err(fail)?.collect(), true), w);
        }
    }
    for d in 0..count {
        let from: Vec<u64> = back
            .sends(d)
            .map_err(fail)?
            .peers
            .iter()
            .map(|p| p.peer)
            .collect();
        let expect: Vec<u64> = (0..la.units())
            .filter(|u| want.contains_key(&(*u, d)))
            .collect();
        prop_assert_eq!(from, expect, "peers of stripe unit {}", d);
    }
    Ok(())
}

fn execute(plan: &Plan, from: &[Vec<u8>], to: &mut [Vec<u8>]) {
    for (s, buf) in from.iter().enumerate() {
        for peer in plan.sends(s as u64).expect("sends").peers {
            for r in peer.runs() {
                let (a, b, n) = (r.src as usize, r.dst as usize, r.len as usize);
                to[peer.peer as usize][b..b + n].copy_from_slice(&buf[a..a + n]);
            }
        }
    }
}

/// Every invariant of a plan between two modelled layouts.
fn check_plan(src: &Model, dst: &Model) -> Result<(), TestCaseError> {
    let (ls, ld) = (parse(src), parse(dst));
    let plan = Plan::new(&ls, &ld).map_err(fail)?;
    let total = src.total();
    let smap = src.map();
    let corr = common::correspondence(src, dst);
    let dmap: Vec<(u64, u64)> = corr.iter().map(|&h| dst.place(h)).collect();
    let sinv: HashMap<(u64, u64), u64> = smap
        .iter()
        .enumerate()
        .map(|(g, &p)| (p, g as u64))
        .collect();
    let dinv: HashMap<(u64, u64), u64> = dmap
        .iter()
        .enumerate()
        .map(|(g, &p)| (p, g as u64))
        .collect();
    let mut sent = vec![0u32; total as usize];
    let mut pair_runs: HashMap<(u64, u64), Vec<Run>> = HashMap::new();
    for s in 0..src.units() {
        let part = plan.sends(s).map_err(fail)?;
        prop_assert!(part.peers.windows(2).all(|w| w[0].peer < w[1].peer));
        for peer in &part.peers {
            let d = peer.peer;
            let runs: Vec<Run> = peer.runs().collect();
            prop_assert!(!runs.is_empty(), "peer {} listed with no runs", d);
            check_sorted_minimal(&runs, true)?;
            let direct: Vec<Run> = plan.runs(s, d).map_err(fail)?.collect();
            prop_assert_eq!(&direct, &runs);
            check_strided(peer.strided(), &runs)?;
            prop_assert_eq!(peer.bytes(), runs.iter().map(|r| r.len).sum::<u64>());
            prop_assert_eq!(plan.bytes(s, d).map_err(fail)?, peer.bytes());
            // From the middle: after some runs, the rest as progressions.
            let mut part = peer.runs();
            let skip = runs.len() / 2;
            part.by_ref().take(skip).for_each(drop);
            check_strided(part.strided(), &runs[skip..])?;
            for r in &runs {
                prop_assert_eq!(
                    r.src % plan.alignment() + r.dst % plan.alignment() + r.len % plan.alignment(),
                    0
                );
                for i in 0..r.len {
                    let g = sinv.get(&(s, r.src + i)).copied();
                    let h = dinv.get(&(d, r.dst + i)).copied();
                    prop_assert!(
                        g.is_some() && g == h,
                        "{} -> {}: run {:?} byte {} moves global {:?} to {:?}",
                        ls,
                        ld,
                        r,
                        i,
                        g,
                        h
                    );
                    sent[g.unwrap_or(0) as usize] += 1;
                }
            }
            pair_runs.insert((s, d), runs);
        }
        for d in 0..dst.units() {
            if !part.peers.iter().any(|p| p.peer == d) {
                let stray = plan.runs(s, d).map_err(fail)?.next();
                prop_assert!(
                    stray.is_none(),
                    "{} -> {}: {} is not a peer of {} but has run {:?}",
                    ls,
                    ld,
                    d,
                    s,
                    stray
                );
            }
        }
    }
    prop_assert!(
        sent.iter().all(|&c| c == 1),
        "{} -> {}: not every byte sent exactly once",
        ls,
        ld
    );
    let summary = plan.summary().map_err(fail)?;
    prop_assert_eq!(summary.total_bytes(), total);
    for s in 0..src.units() {
        for d in 0..dst.units() {
            let runs = pair_runs.get(&(s, d)).map_or(&[][..], |v| v.as_slice());
            let bytes: u64 = runs.iter().map(|r| r.len).sum();
            prop_assert_eq!(
                (summary.bytes(s, d), summary.runs(s, d)),
                (bytes, runs.len() as u64),
                "summary of {} -> {} at ({}, {})",
                ls,
                ld,
                s,
                d
            );
        }
    }
    let mut received = vec![0u32; total as usize];
    for d in 0..dst.units() {
        for peer in plan.receives(d).map_err(fail)?.peers {
            let mut runs: Vec<Run> = peer.runs().collect();
            check_sorted_minimal(&runs, false)?;
            check_strided(peer.strided(), &runs)?;
            prop_assert_eq!(peer.bytes(), runs.iter().map(|r| r.len).sum::<u64>());
            for r in &runs {
                for i in 0..r.len {
                    received[dinv[&(d, r.dst + i)] as usize] += 1;
                }
            }
            let mut sends = pair_runs.remove(&(peer.peer, d)).unwrap_or_default();
            runs.sort();
            sends.sort();
            prop_assert_eq!(
                runs,
                sends,
                "receives of {} from {} differ from sends",
                d,
                peer.peer
            );
        }
    }
    prop_assert!(
        pair_runs.is_empty(),
        "sends with no matching receive: {:?}",
        pair_runs.keys()
    );
    prop_assert!(received.iter().all(|&c| c == 1));

    // Execute on real buffers, then the reverse plan, and get the original bytes back.
    let data: Vec<u8> = (0..total)
        .map(|g| (g.wrapping_mul(2654435761) >> 7) as u8)
        .collect();
    let src_bufs = scatter(src, &data);
    // `dmap` is indexed by the source's global byte, so `data[g]` must land at `dmap[g]`.
    let sized = |l: &Layout| -> Vec<Vec<u8>> {
        (0..l.units())
            .map(|u| vec![0u8; l.local_bytes(u).unwrap_or(0) as usize])
            .collect()
    };
    let mut src_full = sized(&ls);
    for (u, b) in src_bufs.iter().enumerate() {
        src_full[u][..b.len()].copy_from_slice(b);
    }
    let mut dst_bufs = sized(&ld);
    execute(&plan, &src_full, &mut dst_bufs);
    for (g, &(u, l)) in dmap.iter().enumerate() {
        prop_assert_eq!(dst_bufs[u as usize][l as usize], data[g]);
    }
    let mut back = sized(&ls);
    execute(&plan.reversed(), &dst_bufs, &mut back);
    prop_assert_eq!(back, src_full);

    Ok(())
}

/// Two arrays of one shape (the symbolic path), orders and grids independent.
fn same_shape_pair() -> impl Strategy<Value = (Model, Model)> {
    array_model(vec![1, 2, 4, 8, 3]).prop_flat_map(|a| {
        let Model::Array { elem, shape, .. } = a.clone() else {
            unreachable!()
        };
        let grids: Vec<_> = shape.iter().map(|_| 1u64..=4).collect();
        (Just(a), grids, any::<bool>(), Just(shape), Just(elem))
            .prop_flat_map(|(a, grid, fortran, shape, elem)| {
                let dists: Vec<_> = shape
                    .iter()
                    .zip(&grid)
                    .map(|(&n, &p)| common::dist_for(n, p))
                    .collect();
                (
                    Just(a),
                    dists,
                    Just(grid),
                    Just(fortran),
                    Just(shape),
                    Just(elem),
                )
            })
            .prop_map(|(a, dists, grid, fortran, shape, elem)| {
                (
                    a,
                    Model::Array {
                        elem,
                        shape,
                        dists,
                        grid,
                        fortran,
                    },
                )
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(160), ..ProptestConfig::default() })]

    #[test]
    fn arrays_match_the_model(m in array_model(vec![1, 2, 4, 8, 3])) {
        check_layout(&m)?;
    }

    #[test]
    fn streams_match_the_model(m in (1u64..600).prop_flat_map(stream_model)) {
        check_layout(&m)?;
    }

    #[test]
    fn bits_match_the_model(m in (1u32..=9).prop_flat_map(bits_model)) {
        check_layout(&m)?;
    }

    #[test]
    fn plans_between_arrays_of_one_shape((a, b) in same_shape_pair()) {
        check_plan(&a, &b)?;
        check_plan(&b, &a)?;
    }

    #[test]
    fn plans_from_arrays_onto_streams(
        (a, s) in array_model(vec![1, 4, 8, 3]).prop_flat_map(|a| { let t = a.total(); (Just(a), stream_model(t)) })
    ) {
        check_plan(&a, &s)?;
        check_plan(&s, &a)?;
    }

    #[test]
    fn plans_from_arrays_onto_stripes_of_whole_rows(
        (a, s) in array_model(vec![1, 4, 8, 3]).prop_flat_map(|a| {
            let t = a.total();
            let row = match &a {
                Model::Array { shape, fortran, .. } => {
                    t / if *fortran { shape[shape.len() - 1] } else { shape[0] }
                }
                _ => unreachable!(),
            };
            (Just(a), (1u64..=4, 1u64..=5).prop_map(move |(k, count)| Model::Stripe { unit: k * row, count, size: t }))
        })
    ) {
        // The stripe is seen as an array of the same shape (or both as byte streams).
        let path = Plan::new(&parse(&a), &parse(&s)).map_err(fail)?.path();
        prop_assert_ne!(path, spools_map::PlanPath::Sweep);
        check_plan(&a, &s)?;
        check_plan(&s, &a)?;
    }

    #[test]
    fn plans_from_arrays_onto_stripes_that_cut_rows(
        (a, s) in array_model(vec![1, 4, 8, 3]).prop_flat_map(|a| {
            let t = a.total();
            (Just(a), (1u64..=60, 2u64..=5).prop_map(move |(unit, count)| Model::Stripe { unit, count, size: t }))
        })
    ) {
        // Multi-dimensional arrays whose rows the stripe cuts take the row path.
        let (la, ls) = (parse(&a), parse(&s));
        let path = Plan::new(&la, &ls).map_err(fail)?.path();
        if let (Layout::Array(x), Layout::Stripe(st)) = (&la, &ls) {
            if x.shape().len() > 1 && x.stripe_as_array(st).is_none() && path != spools_map::PlanPath::ByteStream {
                prop_assert_eq!(path, spools_map::PlanPath::Rows);
            }
        }
        check_plan(&a, &s)?;
        check_plan(&s, &a)?;
    }

    #[test]
    fn windows_of_arrays_onto_stripes(
        (a, lo, n, unit, count) in array_model(vec![1, 4, 8, 3]).prop_flat_map(|a| {
            let t = a.total();
            (0..t).prop_flat_map(move |lo| (Just(lo), 1..=t - lo)).prop_flat_map(
                move |(lo, n)| (Just(a.clone()), Just(lo), Just(n), 1u64..=50, 1u64..=4),
            )
        })
    ) {
        check_window(&a, lo, n, unit, count)?;
    }

    #[test]
    fn plans_between_arrays_of_different_shapes(
        (a, b) in array_model(vec![1, 2, 4]).prop_flat_map(|a| {
            let t = a.total();
            (Just(a), (1u64..=4, any::<bool>()).prop_map(move |(p, cyc)| Model::Array {
                elem: 1,
                shape: vec![t],
                dists: vec![if cyc { RDist::Cyclic(3) } else { RDist::Block(None) }],
                grid: vec![p],
                fortran: false,
            }))
        })
    ) {
        check_plan(&a, &b)?;
    }

    #[test]
    fn plans_between_bit_layouts_and_others(
        (a, b, s) in (1u32..=8).prop_flat_map(|n| (bits_model(n), bits_model(n), stream_model(1 << n)))
    ) {
        check_plan(&a, &b)?;
        check_plan(&a, &s)?;
        let flat = Model::Array { elem: 1, shape: vec![a.total()], dists: vec![RDist::Cyclic(2)], grid: vec![3], fortran: false };
        check_plan(&flat, &a)?;
    }

    #[test]
    fn streams_to_streams((a, b) in (1u64..400).prop_flat_map(|t| (stream_model(t), stream_model(t)))) {
        check_plan(&a, &b)?;
    }
}
