//! The collectives of an intercommunicator laid over a communicator ([`spools::Sides`]),
//! with real processes: barrier, broadcast, reduce, allreduce, gather, scatter,
//! allgather and reduce-scatter between two groups of every shape (one rank against
//! the rest, evens against odds, halves, thirds), from every root of both groups,
//! on the world and on a communicator in reverse order, each group's result checked
//! against the other group's inputs folded in rank order (a non-commutative operator
//! among them); short and rendezvous lengths; 2 to 7 ranks (oversubscribed beyond 2),
//! over TCP, across two played hosts and with the progress thread; flat (every member
//! with every member of the other group) and through the groups' leaders. A barrier that
//! returns before the other group entered would be seen (files written before entering),
//! and groups whose lengths differ fail on every rank, none hangs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use spools::{Communicator, InterRoot, Op, Sides};
use spools_testkit::{checked, e, rank_main};

mod common;
use common::{affine, affine_input, check, run_ranks, Says};

/// Whether rank `r` of `n` is in group A of shape `shape` (B is the rest; both are
/// never empty for `n >= 2`).
fn in_a(shape: usize, r: u32, n: u32) -> bool {
    match shape {
        0 => r == 0,
        1 => r % 2 == 0,
        2 => r >= n / 2,
        _ => r % 3 == 1,
    }
}

/// The two groups of `c` in shape `shape` as (A, B).
fn groups(c: &Communicator, shape: usize) -> (Vec<u32>, Vec<u32>) {
    (0..c.size()).partition(|&r| in_a(shape, r, c.size()))
}

/// The input of member `i` of group `g` (0: A, 1: B) for call `k`.
fn input(g: usize, i: usize, k: usize, len: usize) -> Vec<i64> {
    (0..len)
        .map(|j| {
            (g as i64 * 100 + i as i64 + 1) * 1_000_003 + ((j * 7919 + k * 31) % 10_007) as i64
        })
        .collect()
}

/// The element-wise sum of the inputs of every member of a group of `size`.
fn sum_of(g: usize, size: usize, k: usize, len: usize) -> Vec<i64> {
    let mut acc = vec![0i64; len];
    for i in 0..size {
        for (a, b) in acc.iter_mut().zip(input(g, i, k, len)) {
            *a += b;
        }
    }
    acc
}

/// The affine maps of every member of a group of `size` composed in rank order.
fn composed(g: usize, size: usize, len: usize) -> Vec<u64> {
    let mut acc = affine_input(g as u32 * 100, len);
    for i in 1..size {
        for (a, b) in acc
            .iter_mut()
            .zip(affine_input(g as u32 * 100 + i as u32, len))
        {
            *a = affine(*a, b);
        }
    }
    acc
}

/// Every collective once between the groups of `shape` on `c`, from every root, flat up
/// to `pairs` pairs of members (0: through the leaders at every size).
fn round(c: &Communicator, shape: usize, pairs: usize, k: &mut usize) -> Result<(), String> {
    let (a, b) = groups(c, shape);
    let mine = usize::from(!a.contains(&c.rank()));
    let (local, remote) = if mine == 0 { (a, b) } else { (b, a) };
    let (nl, nr) = (local.len(), remote.len());
    let me = local.iter().position(|&r| r == c.rank()).unwrap();
    let theirs = 1 - mine;
    let sides = e(Sides::new(c, local, remote))?.flat_up_to(pairs);
    let at = |what: &str, k: usize| {
        format!("shape {shape}/{pairs} call {k} {what} (group {mine}, member {me})")
    };
    for len in [0usize, 3, 9000] {
        *k += 1;
        let k = *k;
        // Allreduce: the other group's sum, and its maps composed in its rank order.
        let got = e(e(c.inter_iallreduce(&sides, input(mine, me, k, len), Op::Sum))?.wait())?;
        check(got == sum_of(theirs, nr, k, len), || at("allreduce", k))?;
        let maps = affine_input(mine as u32 * 100 + me as u32, len);
        let user = Op::user(affine, false);
        let got = e(e(c.inter_iallreduce(&sides, maps, user))?.wait())?;
        check(got == composed(theirs, nr, len), || {
            at("allreduce (affine)", k)
        })?;
        // Allgather: blocks whose length differs between the groups.
        let (lm, lt) = (len + mine, len + theirs);
        let got = e(e(c.inter_iallgather(&sides, input(mine, me, k, lm), lt))?.wait())?;
        let want: Vec<i64> = (0..nr).flat_map(|i| input(theirs, i, k, lt)).collect();
        check(got == want, || at("allgather", k))?;
        // Reduce-scatter: this group's counts, the same total on both sides.
        let total = 2 * nl * nr + len;
        let counts: Vec<usize> = (0..nl)
            .map(|i| {
                if i + 1 == nl {
                    total - 2 * nr * (nl - 1)
                } else {
                    2 * nr
                }
            })
            .collect();
        let buf = input(mine, me, k, total);
        let req = e(c.inter_ireduce_scatter(&sides, buf, counts.clone(), Op::Sum))?;
        let got = e(req.wait())?;
        let from: usize = counts[..me].iter().sum();
        let want = sum_of(theirs, nr, k, total)[from..from + counts[me]].to_vec();
        check(got == want, || at("reduce_scatter", k))?;
        // Rooted collectives from every member of both groups.
        for root_group in 0..2 {
            let size = if root_group == mine { nl } else { nr };
            for root in 0..size {
                let who = if root_group != mine {
                    InterRoot::There(root as u32)
                } else if root == me {
                    InterRoot::Here
                } else {
                    InterRoot::Bystander
                };
                let at = |what: &str| at(&format!("{what} from {root_group}.{root}"), k);
                // Bcast: the root's input to every member of the other group.
                let buf = match who {
                    InterRoot::Here => input(mine, me, k, len),
                    _ => vec![0; len],
                };
                let got = e(e(c.inter_ibcast(&sides, buf, who))?.wait())?;
                if let InterRoot::There(_) = who {
                    check(got == input(theirs, root, k, len), || at("bcast"))?;
                }
                // Reduce: the other group's fold at the root.
                let buf = match who {
                    InterRoot::There(_) => affine_input(mine as u32 * 100 + me as u32, len),
                    _ => vec![0; len],
                };
                let got = e(e(c.inter_ireduce(&sides, buf, Op::user(affine, false), who))?.wait())?;
                if who == InterRoot::Here {
                    check(got == composed(theirs, nr, len), || at("reduce"))?;
                }
                // Gather: the other group's blocks at the root.
                let send = match who {
                    InterRoot::There(_) => input(mine, me, k, len),
                    _ => Vec::new(),
                };
                let got = e(e(c.inter_igather(&sides, send, len, who))?.wait())?;
                if who == InterRoot::Here {
                    let want: Vec<i64> = (0..nr).flat_map(|i| input(theirs, i, k, len)).collect();
                    check(got == want, || at("gather"))?;
                }
                // Scatter: block i of the root's to the other group's member i.
                let send = match who {
                    InterRoot::Here => (0..nr).flat_map(|i| input(mine, i, k, len)).collect(),
                    _ => Vec::new(),
                };
                let got = e(e(c.inter_iscatter(&sides, send, len, who))?.wait())?;
                if let InterRoot::There(_) = who {
                    check(got == input(theirs, me, k, len), || at("scatter"))?;
                }
            }
        }
    }
    Ok(())
}

/// A barrier between the groups: each member writes a file before it enters, and once
/// out finds the other group's every file.
fn barrier(
    c: &Communicator,
    (shape, pairs): (usize, usize),
    dir: &std::path::Path,
    k: usize,
) -> Result<(), String> {
    let (a, b) = groups(c, shape);
    let me = c.rank();
    let (local, remote) = if a.contains(&me) { (a, b) } else { (b, a) };
    let name = |r: u32| dir.join(format!("in-{k}-{shape}-{r}"));
    std::fs::write(name(me), b"").map_err(|x| x.to_string())?;
    let sides = e(Sides::new(c, local, remote.clone()))?.flat_up_to(pairs);
    e(e(c.inter_ibarrier(&sides))?.wait())?;
    for r in remote {
        check(name(r).exists(), || {
            format!("shape {shape}: out before rank {r} entered")
        })?;
    }
    Ok(())
}

fn role() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    // With `SPOOLS_TEST_HOSTS=H`, this rank plays host `rank % H`.
    if let Ok(h) = std::env::var("SPOOLS_TEST_HOSTS") {
        let hosts: u32 = h.parse().unwrap();
        let r: u32 = std::env::var("SPOOLS_RANK").unwrap().parse().unwrap();
        std::env::set_var("SPOOLS_HOST_ID", format!("h{}", r % hosts));
    }
    let w = e(spools::init())?;
    checked(&w, |w| {
        let n = w.size();
        let rev = e(w.split(Some(0), (n - w.rank()) as i32))?.unwrap();
        let mut k = 0;
        for (ci, c) in [w, &rev].into_iter().enumerate() {
            for shape in 0..4 {
                for pairs in [0, usize::MAX] {
                    round(c, shape, pairs, &mut k)?;
                    barrier(c, (shape, pairs), &dir.join(format!("c{ci}")), k)?;
                }
            }
        }
        // Groups whose lengths differ: every rank fails, and the communicator still works.
        let (a, b) = groups(w, 1);
        let in_a = a.contains(&w.rank());
        let (local, remote) = if in_a { (a, b) } else { (b, a) };
        for pairs in [0, usize::MAX] {
            let sides = e(Sides::new(w, local.clone(), remote.clone()))?.flat_up_to(pairs);
            let len = 4 + usize::from(in_a);
            let got = e(w.inter_iallreduce(&sides, vec![1u64; len], Op::Sum))?.wait();
            check(got.is_err(), || format!("lengths that differ gave {got:?}"))?;
            let got = e(e(w.inter_iallreduce(&sides, vec![1u64; 2], Op::Sum))?.wait())?;
            let others = u64::from(w.size()) - sides.local().len() as u64;
            check(got == [others, others], || {
                format!("allreduce after: {got:?}")
            })?;
        }
        verdict_on_a_view(w)
    });
    println!("intercomm ok rank {}", w.rank());
    e(w.finalize())
}

/// Groups over a view that puts each side's remote group first, as an MPI
/// intercommunicator's does (the two sides order the members differently): an allreduce
/// whose operator carries a verdict (the last world rank says it failed) ends on every
/// rank, and every rank hears of that one rank, named as a rank of its own view.
fn verdict_on_a_view(w: &Communicator) -> Result<(), String> {
    let (a, b) = groups(w, 1);
    let me = w.rank();
    let (local, remote) = if a.contains(&me) { (a, b) } else { (b, a) };
    let (l, r) = (local.len() as u32, remote.len() as u32);
    let view = e(e(w.dup())?.view(remote.iter().chain(&local).copied().collect()))?;
    let sides = e(Sides::new(&view, (r..r + l).collect(), (0..r).collect()))?;
    let last = w.size() - 1;
    let says = std::sync::Arc::new(Says {
        bad: me == last,
        agreed: std::sync::Mutex::new(None),
    });
    let op = Op::Sum.with_verdict(says.clone());
    let got = e(e(view.inter_iallreduce(&sides, vec![1u64], op))?.wait())?;
    check(got == [u64::from(r)], || {
        format!("allreduce on the view: {got:?}")
    })?;
    // The last world rank as a rank of this view: its place in remote-then-local.
    let want = remote
        .iter()
        .chain(&local)
        .position(|&x| x == last)
        .unwrap() as u32;
    let agreed = says.agreed.lock().unwrap().clone();
    check(agreed == Some(vec![want]), || {
        format!("rank {me}: the verdict agreed {agreed:?}, not [{want}]")
    })
}

fn run(n: u32, env: &[(&str, &str)]) {
    let dir = spools_testkit::tempdir("intercomm");
    for c in ["c0", "c1"] {
        std::fs::create_dir_all(dir.join(c)).unwrap();
    }
    let mut env = env.to_vec();
    env.push(("SPOOLS_TEST_DIR", dir.to_str().unwrap()));
    run_ranks("intercommunicator_collectives", "intercomm ok", n, &env);
}

#[test]
fn intercommunicator_collectives() {
    rank_main(|_| role());
    for n in 2..=7 {
        run(n, &[]);
    }
    run(4, &[("SPOOLS_TRANSPORT", "tcp")]);
    run(5, &[("SPOOLS_TEST_HOSTS", "2")]);
    run(3, &[("SPOOLS_PROGRESS_THREAD", "1")]);
}

/// Groups that are not two halves of the communicator are refused, and so are groups
/// used on another communicator than theirs.
#[test]
fn sides_must_split_the_communicator() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, |w| {
            let me = w.rank();
            let other = 1 - me;
            check(Sides::new(w, vec![me], vec![other]).is_ok(), || {
                "halves refused".into()
            })?;
            for (l, r) in [
                (vec![me], vec![]),
                (vec![other], vec![me]),
                (vec![me, other], vec![other]),
                (vec![me], vec![2]),
            ] {
                check(Sides::new(w, l.clone(), r.clone()).is_err(), || {
                    format!("{l:?} / {r:?} taken")
                })?;
            }
            // Groups of the world on a communicator of this rank alone: refused, no panic.
            let halves = e(Sides::new(w, vec![me], vec![other]))?;
            let alone = e(w.split(Some(me), 0))?.unwrap();
            check(alone.inter_ibarrier(&halves).is_err(), || {
                "groups of another communicator taken".into()
            })?;
            check(
                alone
                    .inter_ibcast(&halves, vec![1u8], InterRoot::There(0))
                    .is_err(),
                || "groups of another communicator taken by a bcast".into(),
            )?;
            Ok(())
        });
        println!("sides ok rank {}", w.rank());
        e(w.finalize())
    });
    run_ranks("sides_must_split_the_communicator", "sides ok", 2, &[]);
}
