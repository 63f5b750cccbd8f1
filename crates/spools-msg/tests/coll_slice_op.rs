//! Reductions with a user operator on whole slices (`Op::UserSlice`), blocking and
//! non-blocking, with real processes, against a one-process reference: a non-commutative
//! operator (affine maps composed in rank order) through every reduction, and a
//! commutative one (a sum counting its calls) on a buffer long enough for the block-wise
//! algorithms. Rank counts 1 to 5 (oversubscribed beyond 2), and across two "hosts".

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spools::{Communicator, Op};
use spools_testkit::{checked, e, rank_main};

mod common;
use common::{affine, affine_input, check, fold, run_ranks};

/// The affine composition as a slice operator (`acc_is_lower`: `acc` came first).
fn affine_slices() -> Op<u64> {
    Op::user_slice(
        |acc: &mut [u64], other: &[u64], lower| {
            for (a, &b) in acc.iter_mut().zip(other) {
                *a = if lower { affine(*a, b) } else { affine(b, *a) };
            }
        },
        false,
    )
}

fn slices(c: &Communicator) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let op = affine_slices();
    for len in [1usize, 5, 3000, 20_000] {
        let mine = affine_input(me, len);
        let want = fold(n, |r| affine_input(r, len), affine);
        let mut out = vec![0u64; len];
        e(c.allreduce(&mine, &mut out, &op))?;
        check(out == want, || format!("allreduce of {len}"))?;
        for root in [0, n - 1] {
            let mut ro = vec![0u64; len];
            e(c.reduce(&mine, &mut ro, &op, root))?;
            if me == root {
                check(ro == want, || format!("reduce of {len} to {root}"))?;
            }
        }
        let mut so = vec![0u64; len];
        e(c.scan(&mine, &mut so, &op))?;
        check(so == fold(me + 1, |r| affine_input(r, len), affine), || {
            format!("scan of {len}")
        })?;
        let got = e(e(c.iallreduce(mine.clone(), op.clone()))?.wait())?;
        check(got == want, || format!("iallreduce of {len}"))?;
    }
    // Reduce-scatter: block i (i + 1 elements) to rank i.
    let counts: Vec<usize> = (1..=nu).collect();
    let total: usize = counts.iter().sum();
    let want = fold(n, |r| affine_input(r, total), affine);
    let at: usize = counts[..me as usize].iter().sum();
    let mut block = vec![0u64; counts[me as usize]];
    e(c.reduce_scatter(&affine_input(me, total), &mut block, &counts, &op))?;
    check(block[..] == want[at..at + block.len()], || {
        "reduce_scatter".into()
    })?;
    let got = e(e(c.ireduce_scatter(affine_input(me, total), counts.clone(), op.clone()))?.wait())?;
    check(got[..] == want[at..at + got.len()], || {
        "ireduce_scatter".into()
    })?;
    // A commutative slice sum on 200 kB (ring, block-wise): far fewer calls than elements.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let sum = Op::user_slice(
        move |acc: &mut [i64], other: &[i64], _| {
            seen.fetch_add(1, Ordering::Relaxed);
            for (a, &b) in acc.iter_mut().zip(other) {
                *a = a.wrapping_add(b);
            }
        },
        true,
    );
    let len = 25_000;
    let mine: Vec<i64> = (0..len).map(|i| i64::from(me) * 7 + i as i64).collect();
    let mut out = vec![0i64; len];
    e(c.allreduce(&mine, &mut out, &sum))?;
    let want: Vec<i64> = (0..len)
        .map(|i| (0..i64::from(n)).map(|r| r * 7 + i as i64).sum())
        .collect();
    check(out == want, || "commutative slice allreduce".into())?;
    let k = calls.load(Ordering::Relaxed);
    check(k <= 4 * nu, || format!("{k} calls of the slice operator"))?;
    Ok(())
}

fn slice_role() -> Result<(), String> {
    if let (Ok(h), Ok(r)) = (
        std::env::var("SPOOLS_TEST_HOSTS"),
        std::env::var("SPOOLS_RANK"),
    ) {
        let hosts: u32 = h.parse().unwrap();
        let rank: u32 = r.parse().unwrap();
        std::env::set_var("SPOOLS_HOST_ID", format!("h{}", rank % hosts));
    }
    let w = e(spools::init())?;
    checked(&w, |w| slices(w));
    println!("slice ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn slice_operators_against_a_reference() {
    rank_main(|_| slice_role());
    for n in 1..=5 {
        run_ranks("slice_operators_against_a_reference", "slice ok", n, &[]);
    }
    run_ranks(
        "slice_operators_against_a_reference",
        "slice ok",
        4,
        &[("SPOOLS_TEST_HOSTS", "2")],
    );
}
