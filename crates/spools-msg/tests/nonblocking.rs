//! Non-blocking collectives as schedules, with real processes: many outstanding at once
//! on several communicators (world, a dup, a split), of every kind (the v forms with
//! per-rank counts, zeros among them, and the exclusive scan too), mixed with blocking
//! collectives, waited in an order other than the call order, each result checked
//! against the blocking collective's on the same input; a request dropped without a
//! wait; rank counts 1 to 9 (oversubscribed beyond 2), with and without the progress
//! thread. Then what only schedules give: no thread per call (the process's threads are
//! counted around 100 outstanding calls), a rank that never calls into Spools while its
//! collective is in flight does not stop its partners when the progress thread runs
//! (decided by files, never by the clock), and mismatched lengths (and v counts) come
//! back as errors from `wait`, not as a hang. And that blocking and non-blocking collectives are
//! ordered apart (MPI 4.1, 6.12: they never match each other): one rank starts a
//! non-blocking collective before a barrier (or another blocking collective) that the
//! others finish before they start it, as mpi4py's `testIAgree` does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use spools::{Communicator, Op};
use spools_testkit::{
    assert_ok, checked, e, launch, rank_main, signal_file, tempdir, wait_for_file,
};

mod common;
use common::{affine, affine_input, check, run_ranks, Says};

/// Input element `i` of rank `r` for call `k` (integers: sums are exact).
fn input(r: u32, k: usize, len: usize) -> Vec<i64> {
    (0..len)
        .map(|i| (i64::from(r) + 1) * 1_000_003 + ((i * 7919 + k * 31) % 10_007) as i64 - 5000)
        .collect()
}

/// The threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// A pending non-blocking call and the blocking call that must give the same result.
type Pending<'a> = (
    String,
    Box<dyn FnOnce() -> Result<Vec<i64>, String> + 'a>,
    Box<dyn FnOnce() -> Result<Vec<i64>, String> + 'a>,
);

/// Starts one non-blocking collective of kind `kind` (call number `k`) on `c`; returns
/// how to wait for it and how to compute the same with the blocking collective.
fn start<'a>(c: &'a Communicator, kind: usize, k: usize) -> Result<Pending<'a>, String> {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let len = [1, 3, 24, 200, 3000, 20_000][k % 6];
    let mine = input(me, k, len);
    let root = (k as u32) % n;
    let i64s = |v: Vec<u64>| v.into_iter().map(|x| x as i64).collect::<Vec<i64>>();
    // Blocks of per-rank counts: some empty, some long.
    let varied = |i: usize| [0, len, 1, len / 2 + 3][(i + k) % 4];
    Ok(match kind % 16 {
        0 => {
            let r = e(c.iallreduce(mine.clone(), Op::Sum))?;
            (
                format!("iallreduce of {len}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; mine.len()];
                    e(c.allreduce(&mine, &mut out, &Op::Sum))?;
                    Ok(out)
                }),
            )
        }
        1 => {
            let r = e(c.ibcast(
                if me == root {
                    mine.clone()
                } else {
                    vec![7; len]
                },
                root,
            ))?;
            (
                format!("ibcast of {len} from {root}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut b = if me == root { mine } else { vec![9; len] };
                    e(c.bcast(&mut b, root))?;
                    Ok(b)
                }),
            )
        }
        2 => {
            let r = e(c.iallgather(mine.clone()))?;
            (
                format!("iallgather of {len}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; len * nu];
                    e(c.allgather(&mine, &mut out))?;
                    Ok(out)
                }),
            )
        }
        3 => {
            let r = e(c.ibarrier())?;
            (
                "ibarrier".into(),
                Box::new(move || e(r.wait()).map(|()| Vec::new())),
                Box::new(move || e(c.barrier()).map(|()| Vec::new())),
            )
        }
        4 => {
            let r = e(c.iscan(mine.clone(), Op::Max))?;
            (
                format!("iscan of {len}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; len];
                    e(c.scan(&mine, &mut out, &Op::Max))?;
                    Ok(out)
                }),
            )
        }
        5 => {
            let send = input(me, k, 5 * nu);
            let r = e(c.ialltoall(send.clone()))?;
            (
                "ialltoall of 5 per pair".into(),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; send.len()];
                    e(c.alltoall(&send, &mut out))?;
                    Ok(out)
                }),
            )
        }
        6 => {
            let r = e(c.ireduce(mine.clone(), Op::Sum, root))?;
            (
                format!("ireduce of {len} to {root}"),
                Box::new(move || e(r.wait()).map(|v| if me == root { v } else { Vec::new() })),
                Box::new(move || {
                    let mut out = vec![0; if me == root { len } else { 0 }];
                    e(c.reduce(&mine, &mut out, &Op::Sum, root))?;
                    Ok(out)
                }),
            )
        }
        7 => {
            let r = e(c.igather(mine.clone(), root))?;
            (
                format!("igather of {len} to {root}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; if me == root { len * nu } else { 0 }];
                    e(c.gather(&mine, &mut out, root))?;
                    Ok(out)
                }),
            )
        }
        8 => {
            let send = if me == root {
                input(me, k, 4 * nu)
            } else {
                Vec::new()
            };
            let r = e(c.iscatter(send.clone(), 4, root))?;
            (
                format!("iscatter of 4 from {root}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; 4];
                    e(c.scatter(&send, &mut out, root))?;
                    Ok(out)
                }),
            )
        }
        9 => {
            let counts: Vec<usize> = (0..nu).map(|i| 1 + (i + k) % 3).collect();
            let send = input(me, k, counts.iter().sum());
            let r = e(c.ireduce_scatter(send.clone(), counts.clone(), Op::Sum))?;
            (
                "ireduce_scatter".into(),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; counts[me as usize]];
                    e(c.reduce_scatter(&send, &mut out, &counts, &Op::Sum))?;
                    Ok(out)
                }),
            )
        }
        10 => {
            // A non-commutative operator: rank order must be kept.
            let user = Op::user(affine, false);
            let a = affine_input(me, 1 + k % 40);
            let r = e(c.iallreduce(a.clone(), user.clone()))?;
            (
                "non-commutative iallreduce".into(),
                Box::new(move || e(r.wait()).map(i64s)),
                Box::new(move || {
                    let mut out = vec![0; a.len()];
                    e(c.allreduce(&a, &mut out, &user))?;
                    Ok(i64s(out))
                }),
            )
        }
        11 => {
            let counts: Vec<usize> = (0..nu).map(varied).collect();
            let send = input(me, k, counts[me as usize]);
            let r = e(c.igatherv(send.clone(), &counts, root))?;
            (
                format!("igatherv of {counts:?} to {root}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let whole = if me == root { counts.iter().sum() } else { 0 };
                    let mut out = vec![0; whole];
                    e(c.gatherv(&send, &mut out, &counts, root))?;
                    Ok(out)
                }),
            )
        }
        12 => {
            let counts: Vec<usize> = (0..nu).map(varied).collect();
            let send = if me == root {
                input(me, k, counts.iter().sum())
            } else {
                Vec::new()
            };
            let r = e(c.iscatterv(send.clone(), &counts, root))?;
            (
                format!("iscatterv of {counts:?} from {root}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; counts[me as usize]];
                    e(c.scatterv(&send, &counts, &mut out, root))?;
                    Ok(out)
                }),
            )
        }
        13 => {
            let counts: Vec<usize> = (0..nu).map(varied).collect();
            let send = input(me, k, counts[me as usize]);
            let r = e(c.iallgatherv(send.clone(), &counts))?;
            (
                format!("iallgatherv of {counts:?}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; counts.iter().sum()];
                    e(c.allgatherv(&send, &mut out, &counts))?;
                    Ok(out)
                }),
            )
        }
        14 => {
            // Rank i sends rank j a block of varied(i + j) elements.
            let sc: Vec<usize> = (0..nu).map(|j| varied(me as usize + j)).collect();
            let rc: Vec<usize> = (0..nu).map(|i| varied(i + me as usize)).collect();
            let send = input(me, k, sc.iter().sum());
            let r = e(c.ialltoallv(send.clone(), &sc, &rc))?;
            (
                format!("ialltoallv of {sc:?}"),
                Box::new(move || e(r.wait())),
                Box::new(move || {
                    let mut out = vec![0; rc.iter().sum()];
                    e(c.alltoallv(&send, &sc, &mut out, &rc))?;
                    Ok(out)
                }),
            )
        }
        _ => {
            // An exclusive scan with a non-commutative operator (rank 0 gets its own
            // part back, and the blocking one leaves it as it was).
            let user = Op::user(affine, false);
            let a = affine_input(me, 1 + k % 40);
            let r = e(c.iexscan(a.clone(), user.clone()))?;
            (
                "non-commutative iexscan".into(),
                Box::new(move || e(r.wait()).map(i64s)),
                Box::new(move || {
                    let mut out = a.clone();
                    e(c.exscan(&a, &mut out, &user))?;
                    Ok(i64s(out))
                }),
            )
        }
    })
}

/// Many calls outstanding on `comms` at once, interleaved, with blocking collectives
/// between them and a dropped request; waited in a scrambled order; then the blocking
/// versions, in call order, must give the same results.
fn many_outstanding(comms: &[&Communicator]) -> Result<(), String> {
    let mut pending = Vec::new();
    for k in 0..40 {
        let c = comms[k % comms.len()];
        pending.push(start(c, k, k)?);
        if k % 9 == 4 {
            // A blocking collective while others are in flight.
            let mut out = [0i64];
            e(c.allreduce(&[1], &mut out, &Op::Sum))?;
            check(out[0] == i64::from(c.size()), || {
                format!("blocking allreduce among {k} outstanding")
            })?;
        }
        if k % 13 == 6 {
            // Dropped without a wait: it still finishes, the others do not hang.
            drop(e(c.iallreduce(vec![1u32; 100], Op::Sum))?);
        }
    }
    // Waited in a scrambled order (a fixed permutation: 17 is prime to 40).
    let total = pending.len();
    let mut waits = Vec::new();
    let mut blockings = Vec::new();
    for (what, wait, blocking) in pending {
        waits.push(Some((what, wait)));
        blockings.push(blocking);
    }
    let mut results: Vec<Option<(String, Vec<i64>)>> = vec![None; total];
    for j in 0..total {
        let i = (j * 17 + 5) % total;
        let (what, wait) = waits[i].take().unwrap();
        let got = wait().map_err(|m| format!("{what}: {m}"))?;
        results[i] = Some((what, got));
    }
    // The blocking versions, in the same order on every rank.
    for (i, blocking) in blockings.into_iter().enumerate() {
        let want = blocking()?;
        let (what, got) = results[i].take().unwrap();
        check(got == want, || {
            format!("call {i}, {what}: {got:?} against the blocking {want:?}")
        })?;
    }
    Ok(())
}

fn many_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank();
        let d = e(w.dup())?;
        let half = e(w.split(Some(me % 2), -(me as i32)))?.unwrap();
        many_outstanding(&[w, &d, &half])?;
        // No thread per call: 100 outstanding calls, then all waited.
        let before = threads();
        let mut reqs = Vec::new();
        for k in 0..100u64 {
            let c = [w, &d, &half][k as usize % 3];
            reqs.push((c.size(), e(c.iallreduce(vec![k, 1], Op::Sum))?));
        }
        let during = threads();
        for (k, (n, r)) in reqs.into_iter().enumerate().rev() {
            let got = e(r.wait())?;
            check(got == [k as u64 * u64::from(n), u64::from(n)], || {
                format!("outstanding iallreduce {k}: {got:?}")
            })?;
        }
        check(during <= before, || {
            format!("{before} threads before 100 outstanding calls, {during} with them")
        })
    });
    println!("nonblocking ok rank {}", w.rank());
    e(w.finalize())
}

fn run(n: u32, env: &[(&str, &str)]) {
    run_ranks(
        "many_outstanding_on_several_communicators",
        "nonblocking ok",
        n,
        env,
    );
}

/// A request can be handed to another thread and shared (as the thread-based one could).
#[test]
fn requests_are_send_and_sync() {
    use std::marker::PhantomData;
    fn send_sync<T: Send + Sync>(_: PhantomData<T>) -> bool {
        true
    }
    let one: PhantomData<spools::CollRequest<Vec<u64>>> = PhantomData;
    let unit: PhantomData<spools::CollRequest<()>> = PhantomData;
    assert!(send_sync(one) && send_sync(unit));
}

#[test]
fn many_outstanding_on_several_communicators() {
    rank_main(|_| many_role());
    for n in 1..=9 {
        run(n, &[]);
    }
    for n in [2, 3, 5, 8] {
        run(n, &[("SPOOLS_PROGRESS_THREAD", "1")]);
    }
    run(4, &[("SPOOLS_TRANSPORT", "tcp")]);
    // Scans as a chain of messages (as where ranks outnumber CPUs).
    for n in [3, 6] {
        run(n, &[("SPOOLS_COLL_SM_SCAN", "messages")]);
    }
}

/// Rank 0 starts an allreduce and then stays away from Spools until every other rank
/// has finished its own (told by files): with 4 ranks, recursive doubling's second
/// round on rank 0 starts only after its first completed, so only the progress thread
/// can have advanced it.
fn away_role() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (w.rank(), w.size());
        let limit = Duration::from_secs(60);
        let r = e(w.iallreduce(vec![u64::from(me) + 1; 8], Op::Sum))?;
        let want = vec![u64::from(n) * u64::from(n + 1) / 2; 8];
        if me == 0 {
            for p in 1..n {
                wait_for_file(&dir.join(format!("done-{p}")), limit)?;
            }
        } else {
            let got = e(r.wait())?;
            check(got == want, || format!("rank {me}: {got:?}"))?;
            signal_file(&dir.join(format!("done-{me}")), b"")?;
            return Ok(());
        }
        let got = e(r.wait())?;
        check(got == want, || format!("rank 0: {got:?}"))
    });
    println!("away ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn the_progress_thread_advances_schedules() {
    rank_main(|_| away_role());
    let dir = tempdir("nb-away");
    let o = launch(
        4,
        "the_progress_thread_advances_schedules",
        "x",
        &[
            ("SPOOLS_PROGRESS_THREAD", "1"),
            ("SPOOLS_TEST_DIR", dir.to_str().unwrap()),
        ],
    );
    assert_ok(&o);
    assert_eq!(o.stdout.matches("away ok").count(), 4, "{}", o.stdout);
}

/// Ranks that disagree on the length: each `wait` returns an error, nobody hangs, and
/// the communicator still works afterwards.
fn mismatch_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank();
        let r = e(w.iallreduce(vec![1u64; 4 + 4 * me as usize], Op::Sum))?;
        let got = r.wait();
        check(got.is_err(), || {
            format!("rank {me}: mismatched lengths gave {got:?}")
        })?;
        let b = e(w.ibcast(vec![me; 10 + me as usize], 0))?;
        let got = b.wait();
        check(me == 0 || got.is_err(), || {
            format!("rank {me}: mismatched ibcast gave {got:?}")
        })?;
        // Rank 1 takes rank 0's block for one element longer than rank 0 sends: rank 1
        // fails (rank 0 may too), through the segment and through the messages.
        for k in [2usize, 1000] {
            let counts = [k + me as usize, 5];
            let mine = vec![u64::from(me); counts[me as usize]];
            let got = e(w.iallgatherv(mine, &counts))?.wait();
            check(me == 0 || got.is_err(), || {
                format!("rank {me}: mismatched iallgatherv of {k} gave {got:?}")
            })?;
            // The root (0) counts one element less than rank 1 sends.
            let counts = [k, k + 1 - me as usize];
            let mine = vec![u64::from(me); k];
            let got = e(w.igatherv(mine, &counts, 0))?.wait();
            check(me == 1 || got.is_err(), || {
                format!("rank {me}: mismatched igatherv of {k} gave {got:?}")
            })?;
        }
        let r = e(w.iallreduce(vec![1u64; 3], Op::Sum))?;
        check(e(r.wait())? == [2, 2, 2], || {
            "allreduce after the errors".into()
        })
    });
    println!("mismatch ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn mismatched_lengths_are_errors_from_wait() {
    rank_main(|_| mismatch_role());
    let o = launch(2, "mismatched_lengths_are_errors_from_wait", "x", &[]);
    assert_ok(&o);
    assert_eq!(o.stdout.matches("mismatch ok").count(), 2, "{}", o.stdout);
}

/// For each root: the root starts an iallreduce (and an ibarrier) and tests it before a
/// blocking barrier and an allreduce, which the others finish before they start
/// theirs; on `world`, a dup and a reordered split, with and without the progress
/// thread. A shared order would leave the root in its barrier while the others wait in
/// theirs for the iallreduce it started first.
fn order_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank();
        let d = e(w.dup())?;
        let half = e(w.split(Some(me % 2), -(me as i32)))?.unwrap();
        for c in [w, &d, &half] {
            let (me, n) = (c.rank(), c.size());
            for root in 0..n {
                let mut sum = [0u64];
                let (ar, bar) = if me == root {
                    let ar = e(c.iallreduce(vec![u64::from(me) + 1], Op::Sum))?;
                    let bar = e(c.ibarrier())?;
                    check(n == 1 || !ar.test(), || {
                        format!("root {root}: its iallreduce completed before the others started theirs")
                    })?;
                    e(c.barrier())?;
                    e(c.allreduce(&[1u64], &mut sum, &Op::Sum))?;
                    (ar, bar)
                } else {
                    e(c.barrier())?;
                    e(c.allreduce(&[1u64], &mut sum, &Op::Sum))?;
                    let ar = e(c.iallreduce(vec![u64::from(me) + 1], Op::Sum))?;
                    (ar, e(c.ibarrier())?)
                };
                let got = e(ar.wait())?;
                e(bar.wait())?;
                let want = u64::from(n) * u64::from(n + 1) / 2;
                check(got == [want] && sum == [u64::from(n)], || {
                    format!("root {root}: iallreduce {got:?} (want {want}), allreduce {sum:?}")
                })?;
            }
        }
        Ok(())
    });
    println!("order ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn nonblocking_collectives_are_ordered_apart_from_blocking_ones() {
    rank_main(|_| order_role());
    for (n, env) in [
        (1u32, vec![]),
        (2, vec![]),
        (3, vec![]),
        (5, vec![]),
        (4, vec![("SPOOLS_PROGRESS_THREAD", "1")]),
    ] {
        let o = launch(
            n,
            "nonblocking_collectives_are_ordered_apart_from_blocking_ones",
            "x",
            &env,
        );
        assert_ok(&o);
        assert_eq!(o.stdout.matches("order ok").count(), n as usize, "{o:?}");
    }
}

/// `Op::with_verdict`: every non-blocking reduction (allreduce, reduce, scan,
/// reduce-scatter; small and large) ends
/// with every rank told which ranks said they failed, before `wait` returns, and with
/// the reduction's own result unchanged.
fn verdict_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (w.rank(), w.size());
        let bad: Vec<u32> = (0..n).filter(|r| r % 3 == 1).collect();
        for len in [4usize, 20_000] {
            for kind in ["allreduce", "reduce", "scan", "reduce_scatter"] {
                let says = std::sync::Arc::new(Says {
                    bad: bad.contains(&me),
                    agreed: std::sync::Mutex::new(None),
                });
                let op = Op::Sum.with_verdict(says.clone());
                let data = vec![1u64; len * n as usize];
                let got = match kind {
                    "allreduce" => e(e(w.iallreduce(data, op))?.wait())?,
                    "reduce" => e(e(w.ireduce(data, op, 0))?.wait())?,
                    "scan" => e(e(w.iscan(data, op))?.wait())?,
                    _ => e(e(w.ireduce_scatter(data, vec![len; n as usize], op))?.wait())?,
                };
                let want = match kind {
                    "scan" => Some(u64::from(me) + 1),
                    "reduce" if me != 0 => None,
                    _ => Some(u64::from(n)),
                };
                if let Some(v) = want {
                    check(got.iter().all(|&x| x == v), || {
                        format!("{kind} {len}: rank {me} got {:?}", &got[..4])
                    })?;
                }
                let agreed = says.agreed.lock().unwrap().clone();
                check(agreed.as_ref() == Some(&bad), || {
                    format!("{kind} {len}: rank {me} was told {agreed:?}, not {bad:?}")
                })?;
            }
        }
        Ok(())
    });
    println!("verdict ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn a_verdict_ends_every_nonblocking_reduction_on_every_rank() {
    rank_main(|_| verdict_role());
    for (n, env) in [
        (1u32, vec![]),
        (2, vec![]),
        (4, vec![]),
        (5, vec![("SPOOLS_PROGRESS_THREAD", "1")]),
    ] {
        let o = launch(
            n,
            "a_verdict_ends_every_nonblocking_reduction_on_every_rank",
            "x",
            &env,
        );
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("verdict ok").count(),
            n as usize,
            "{}",
            o.stdout
        );
    }
}
