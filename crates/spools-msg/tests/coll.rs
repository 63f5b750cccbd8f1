//! Every collective, blocking and non-blocking, with real processes, against a
//! one-process reference: each rank computes every rank's input itself and checks the
//! result element by element. Rank counts 1 to 9 (oversubscribed beyond 2), over shared
//! memory, over TCP, and across two "hosts" (`SPOOLS_HOST_ID`), which takes the
//! hierarchical algorithms and mixes shared memory with TCP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{Communicator, Op};
use spools_testkit::{assert_ok, checked, e, launch, rank_main};

/// Input element `i` of rank `r` (integers: sums are exact and order-free).
fn val(r: u32, i: usize) -> i64 {
    (r as i64 + 1) * 1_000_003 + (i as i64 * 7919) % 10_007 - 5000
}

fn input(r: u32, len: usize) -> Vec<i64> {
    (0..len).map(|i| val(r, i)).collect()
}

/// An associative, non-commutative operator: composition of affine maps x -> m·x + c
/// (mod 2^32), packed as (c << 32) | m. `f(a, b)` applies a, then b.
fn affine(a: u64, b: u64) -> u64 {
    let (m1, c1) = (a as u32, (a >> 32) as u32);
    let (m2, c2) = (b as u32, (b >> 32) as u32);
    let m = m2.wrapping_mul(m1);
    let c = m2.wrapping_mul(c1).wrapping_add(c2);
    (u64::from(c) << 32) | u64::from(m)
}

fn affine_input(r: u32, len: usize) -> Vec<u64> {
    (0..len)
        .map(|i| (u64::from(r * 31 + i as u32 + 1) << 32) | u64::from(2 * (r + i as u32) + 3))
        .collect()
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// Element-wise reduction over ranks `0..upto` of `f(r)` with `op`, in rank order.
fn fold<T: Copy>(upto: u32, f: impl Fn(u32) -> Vec<T>, op: impl Fn(T, T) -> T) -> Vec<T> {
    let mut acc = f(0);
    for r in 1..upto {
        let x = f(r);
        for (a, b) in acc.iter_mut().zip(x) {
            *a = op(*a, b);
        }
    }
    acc
}

const LENS: [usize; 5] = [1, 3, 1000, 5000, 20_000];

fn reductions(c: &Communicator) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let user = Op::user(affine, false);
    for &len in &LENS {
        let mine = input(me, len);
        let sum = fold(n, |r| input(r, len), i64::wrapping_add);
        let min = fold(n, |r| input(r, len), i64::min);
        let max = fold(n, |r| input(r, len), i64::max);
        let mut out = vec![0i64; len];
        e(c.allreduce(&mine, &mut out, &Op::Sum))?;
        check(out == sum, || format!("allreduce sum of {len}"))?;
        e(c.allreduce(&mine, &mut out, &Op::Min))?;
        check(out == min, || format!("allreduce min of {len}"))?;
        e(c.allreduce(&mine, &mut out, &Op::Max))?;
        check(out == max, || format!("allreduce max of {len}"))?;
        let fm: Vec<f64> = mine.iter().map(|&x| x as f64 * 0.5).collect();
        let mut fo = vec![0.0f64; len];
        e(c.allreduce(&fm, &mut fo, &Op::Max))?;
        check(
            fo.iter().zip(&max).all(|(a, &b)| *a == b as f64 * 0.5),
            || format!("allreduce f64 max of {len}"),
        )?;
        let small: Vec<i32> = (0..len)
            .map(|i| (i % 3) as i32 + me as i32 % 2 + 1)
            .collect();
        let prod = fold(
            n,
            |r| {
                (0..len)
                    .map(|i| (i % 3) as i32 + r as i32 % 2 + 1)
                    .collect()
            },
            i32::wrapping_mul,
        );
        let mut po = vec![0i32; len];
        e(c.allreduce(&small, &mut po, &Op::Prod))?;
        check(po == prod, || format!("allreduce prod of {len}"))?;
        let aff = fold(n, |r| affine_input(r, len), affine);
        let mut ao = vec![0u64; len];
        e(c.allreduce(&affine_input(me, len), &mut ao, &user))?;
        check(ao == aff, || format!("allreduce non-commutative of {len}"))?;
        for root in [0, n - 1, n / 2] {
            let mut ro = vec![0i64; len];
            e(c.reduce(&mine, &mut ro, &Op::Sum, root))?;
            if me == root {
                check(ro == sum, || format!("reduce to {root} of {len}"))?;
            }
            let mut ao = vec![0u64; len];
            e(c.reduce(&affine_input(me, len), &mut ao, &user, root))?;
            if me == root {
                check(ao == aff, || {
                    format!("non-commutative reduce to {root} of {len}")
                })?;
            }
        }
        let scan = fold(me + 1, |r| input(r, len), i64::wrapping_add);
        e(c.scan(&mine, &mut out, &Op::Sum))?;
        check(out == scan, || format!("scan of {len}"))?;
        let ascan = fold(me + 1, |r| affine_input(r, len), affine);
        e(c.scan(&affine_input(me, len), &mut ao, &user))?;
        check(ao == ascan, || format!("non-commutative scan of {len}"))?;
        // reduce_scatter with blocks of different sizes.
        let counts: Vec<usize> = (0..n as usize)
            .map(|r| (len / n as usize) + r % 3)
            .collect();
        let total: usize = counts.iter().sum();
        let start: usize = counts[..me as usize].iter().sum();
        let full = fold(n, |r| input(r, total), i64::wrapping_add);
        let mut rs = vec![0i64; counts[me as usize]];
        e(c.reduce_scatter(&input(me, total), &mut rs, &counts, &Op::Sum))?;
        check(rs == full[start..start + counts[me as usize]], || {
            format!("reduce_scatter of {total}")
        })?;
        let afull = fold(n, |r| affine_input(r, total), affine);
        let mut ars = vec![0u64; counts[me as usize]];
        e(c.reduce_scatter(&affine_input(me, total), &mut ars, &counts, &user))?;
        check(ars == afull[start..start + counts[me as usize]], || {
            format!("non-commutative reduce_scatter of {total}")
        })?;
    }
    Ok(())
}

fn data_movement(c: &Communicator) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    c.barrier().map_err(|e| e.to_string())?;
    for len in [0usize, 5, 5000, (16 << 10) + 1, 100_000] {
        for root in [0, n - 1] {
            let mut b: Vec<u8> = if me == root {
                (0..len).map(|i| (i * 13 + root as usize) as u8).collect()
            } else {
                vec![0; len]
            };
            e(c.bcast(&mut b, root))?;
            check(
                b.iter()
                    .enumerate()
                    .all(|(i, &x)| x == (i * 13 + root as usize) as u8),
                || format!("bcast of {len} from {root}"),
            )?;
        }
    }
    for len in [1usize, 700, 9000] {
        let mine = input(me, len);
        let all: Vec<i64> = (0..n).flat_map(|r| input(r, len)).collect();
        let mut g = vec![0i64; len * nu];
        e(c.allgather(&mine, &mut g))?;
        check(g == all, || format!("allgather of {len}"))?;
        for root in [0, n - 1] {
            let mut g = vec![0i64; if me == root { len * nu } else { 0 }];
            e(c.gather(&mine, &mut g, root))?;
            if me == root {
                check(g == all, || format!("gather of {len} to {root}"))?;
            }
            let mut s = vec![0i64; len];
            let src = if me == root { all.clone() } else { Vec::new() };
            e(c.scatter(&src, &mut s, root))?;
            check(s == mine, || format!("scatter of {len} from {root}"))?;
        }
        // v-forms: rank r has r+1 blocks of len/4+1.
        let cnt = |r: u32| (r as usize + 1) * (len / 4 + 1);
        let counts: Vec<usize> = (0..n).map(cnt).collect();
        let vall: Vec<i64> = (0..n).flat_map(|r| input(r, cnt(r))).collect();
        let mut vg = vec![0i64; vall.len()];
        e(c.allgatherv(&input(me, cnt(me)), &mut vg, &counts))?;
        check(vg == vall, || format!("allgatherv of {len}"))?;
        let mut vg = vec![0i64; if me == 0 { vall.len() } else { 0 }];
        e(c.gatherv(&input(me, cnt(me)), &mut vg, &counts, 0))?;
        if me == 0 {
            check(vg == vall, || format!("gatherv of {len}"))?;
        }
        let mut vs = vec![0i64; cnt(me)];
        e(c.scatterv(if me == 0 { &vall } else { &[] }, &counts, &mut vs, 0))?;
        check(vs == input(me, cnt(me)), || format!("scatterv of {len}"))?;
        // alltoall: block j of rank i holds value(i, j).
        let cell = |i: u32, j: u32, k: usize| (i as i64) * 1_000_000 + (j as i64) * 1000 + k as i64;
        let send: Vec<i64> = (0..n)
            .flat_map(|j| (0..len).map(move |k| cell(me, j, k)))
            .collect();
        let want: Vec<i64> = (0..n)
            .flat_map(|i| (0..len).map(move |k| cell(i, me, k)))
            .collect();
        let mut got = vec![0i64; len * nu];
        e(c.alltoall(&send, &mut got))?;
        check(got == want, || format!("alltoall of {len}"))?;
        // alltoallv: rank i sends i+j+1 elements to rank j.
        let sc: Vec<usize> = (0..n).map(|j| (me + j) as usize % 3 + len / 100).collect();
        let rc: Vec<usize> = (0..n).map(|i| (i + me) as usize % 3 + len / 100).collect();
        let send: Vec<i64> = (0..n)
            .flat_map(|j| (0..sc[j as usize]).map(move |k| cell(me, j, k)))
            .collect();
        let want: Vec<i64> = (0..n)
            .flat_map(|i| (0..rc[i as usize]).map(move |k| cell(i, me, k)))
            .collect();
        let mut got = vec![0i64; want.len()];
        e(c.alltoallv(&send, &sc, &mut got, &rc))?;
        check(got == want, || format!("alltoallv around {len}"))?;
    }
    let all = e(c.allgather_bytes(format!("r{me}").repeat(me as usize + 1).as_bytes()))?;
    check(
        all.iter()
            .enumerate()
            .all(|(r, v)| *v == format!("r{r}").repeat(r + 1).into_bytes()),
        || "allgather_bytes".into(),
    )?;
    check(
        e(c.bcast_bytes(n - 1, b"last word"))? == b"last word",
        || "bcast_bytes".into(),
    )?;
    Ok(())
}

fn nonblocking(c: &Communicator) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    // Several outstanding at once, then a blocking one, then wait in another order.
    let b = e(c.ibarrier())?;
    let ar = e(c.iallreduce(input(me, 3000), Op::Sum))?;
    let bc = e(c.ibcast(
        if me == 0 {
            vec![9u16; 50_000]
        } else {
            vec![0u16; 50_000]
        },
        0,
    ))?;
    let ag = e(c.iallgather(vec![me; 10]))?;
    let mut out = [0i64; 4];
    e(c.allreduce(&input(me, 4), &mut out, &Op::Sum))?;
    check(
        out[..] == fold(n, |r| input(r, 4), i64::wrapping_add)[..],
        || "blocking among non-blocking".into(),
    )?;
    let sendv: Vec<u32> = (0..n).flat_map(|j| [me, j]).collect();
    let a2a = e(c.ialltoall(sendv))?;
    let gat = e(c.igather(vec![me * 2], 0))?;
    let sca = e(c.iscatter(
        if me == 0 {
            (0..n * 2).collect()
        } else {
            Vec::new()
        },
        2,
        0,
    ))?;
    let red = e(c.ireduce(vec![1u64; 5], Op::Sum, n - 1))?;
    let scn = e(c.iscan(vec![me as u64 + 1], Op::Sum))?;
    let counts: Vec<usize> = vec![2; nu];
    let rsc = e(c.ireduce_scatter(vec![1i32; 2 * nu], counts, Op::Sum))?;
    check(e(bc.wait())?.iter().all(|&x| x == 9), || "ibcast".into())?;
    check(
        e(ar.wait())? == fold(n, |r| input(r, 3000), i64::wrapping_add),
        || "iallreduce".into(),
    )?;
    e(b.wait())?;
    check(
        e(ag.wait())? == (0..n).flat_map(|r| [r; 10]).collect::<Vec<_>>(),
        || "iallgather".into(),
    )?;
    check(
        e(a2a.wait())? == (0..n).flat_map(|i| [i, me]).collect::<Vec<_>>(),
        || "ialltoall".into(),
    )?;
    let g = e(gat.wait())?;
    if me == 0 {
        check(g == (0..n).map(|r| r * 2).collect::<Vec<_>>(), || {
            "igather".into()
        })?;
    }
    check(e(sca.wait())? == vec![2 * me, 2 * me + 1], || {
        "iscatter".into()
    })?;
    let r = e(red.wait())?;
    if me == n - 1 {
        check(r == vec![u64::from(n); 5], || "ireduce".into())?;
    }
    check(
        e(scn.wait())? == vec![u64::from((me + 1) * (me + 2) / 2)],
        || "iscan".into(),
    )?;
    check(e(rsc.wait())? == vec![n as i32; 2], || {
        "ireduce_scatter".into()
    })?;
    Ok(())
}

fn coll_role() -> Result<(), String> {
    if let (Ok(h), Ok(r)) = (
        std::env::var("SPOOLS_TEST_HOSTS"),
        std::env::var("SPOOLS_RANK"),
    ) {
        let hosts: u32 = h.parse().unwrap();
        let rank: u32 = r.parse().unwrap();
        // Contiguous blocks of ranks per host, the last host maybe smaller.
        std::env::set_var("SPOOLS_HOST_ID", format!("h{}", rank % hosts));
    }
    let w = e(spools::init())?;
    checked(&w, |w| {
        reductions(w)?;
        data_movement(w)?;
        nonblocking(w)?;
        // The same in a sub-communicator of the odd ranks, renumbered in reverse.
        let me = w.rank();
        if let Some(sub) = e(w.split(if me % 2 == 1 { Some(1) } else { None }, -(me as i32)))? {
            data_movement(&sub)?;
        }
        let d = e(w.dup())?;
        nonblocking(&d)
    });
    println!("coll ok rank {}", w.rank());
    e(w.finalize())
}

fn run(n: u32, env: &[(&str, &str)]) {
    let o = launch(n, "collectives_against_a_reference", "x", env);
    assert_ok(&o);
    assert_eq!(
        o.stdout.matches("coll ok").count(),
        n as usize,
        "{n} {env:?}: {}",
        o.stdout
    );
}

#[test]
fn collectives_against_a_reference() {
    rank_main(|_| coll_role());
    for n in 1..=9 {
        run(n, &[]);
    }
    run(4, &[("SPOOLS_TRANSPORT", "tcp")]);
    run(5, &[("SPOOLS_TEST_HOSTS", "2")]);
    run(7, &[("SPOOLS_TEST_HOSTS", "3")]);
}
