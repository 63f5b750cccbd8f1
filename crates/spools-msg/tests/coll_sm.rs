//! Collectives of small messages through shared memory (`coll_sm_limit`), with real
//! processes: results against a one-process reference for 1 to 9 ranks (oversubscribed
//! beyond 2), sizes on both sides of the limit, several communicators used in turn, runs
//! long enough for the sequence numbers to wrap, across "hosts" (`SPOOLS_HOST_ID`); the
//! path taken (each rank counts the collectives that went through the segment, against
//! the documented choice); and a rank killed while the others wait in such a collective:
//! they fail with an error naming it, the job ends, nothing hangs. And that a segment's
//! name is gone from /dev/shm once every member mapped it. Non-blocking collectives in
//! flight together, with a blocking one behind them, waited for out of order: barrier,
//! bcast, reduce, allreduce, scatter, gather, allgather, alltoall, reduce-scatter and scan go through a segment of their
//! own where every member is on one host, the others through the messages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spools::{Communicator, Op};
use spools_testkit::{
    checked, e, launch, rank_main, shm_leftovers, signal_file, tempdir, wait_for_file,
};

mod common;
use common::{affine, affine_input, check, fold, run_ranks};

fn val(r: u32, i: usize, salt: u64) -> i64 {
    (i64::from(r) + 1) * 1_000_003 + ((i as i64 * 7919 + salt as i64) % 10_007) - 5000
}

fn input(r: u32, len: usize, salt: u64) -> Vec<i64> {
    (0..len).map(|i| val(r, i, salt)).collect()
}

/// The run's shape as the ranks see it: hosts played (`SPOOLS_TEST_HOSTS`), the limit.
struct Shape {
    hosts: u32,
    limit: usize,
    /// Whether scans go as a chain of messages (`coll_sm_scan = "messages"`, the
    /// creator's), not through the segment.
    scan_msgs: bool,
}

impl Shape {
    fn read() -> Shape {
        let hosts = std::env::var("SPOOLS_TEST_HOSTS").map_or(1, |h| h.parse().unwrap());
        if hosts > 1 {
            let rank: u32 = std::env::var("SPOOLS_RANK").unwrap().parse().unwrap();
            std::env::set_var("SPOOLS_HOST_ID", format!("h{}", rank % hosts));
        }
        let limit = std::env::var("SPOOLS_COLL_SM_LIMIT").map_or(4096, |l| l.parse().unwrap());
        // `auto` sends scans to the messages where the ranks outnumber the CPUs at the
        // moment the segment is made (the load of this machine decides): the runs that
        // count the path name the way.
        if std::env::var_os("SPOOLS_COLL_SM_SCAN").is_none() {
            std::env::set_var("SPOOLS_COLL_SM_SCAN", "chain");
        }
        // With `SPOOLS_TEST_SCAN_MIXED`, the creator's (rank 0's) setting holds.
        let way = std::env::var("SPOOLS_TEST_SCAN_MIXED")
            .or_else(|_| std::env::var("SPOOLS_COLL_SM_SCAN"))
            .unwrap_or_default();
        Shape {
            hosts,
            limit,
            scan_msgs: way == "messages",
        }
    }
}

/// Collective kinds, for the expected path.
#[derive(Clone, Copy, PartialEq)]
enum K {
    Barrier,
    Bcast,
    Reduce,
    Allreduce {
        commutative: bool,
    },
    /// Gather, scatter, allgather, alltoall: within one host only, like reduce.
    Moves,
    /// Scan and exscan: likewise, unless they go as a chain of messages.
    Scan,
    /// Gatherv, scatterv, alltoallv: within one host only, whatever the lengths (what
    /// does not fit goes by messages beside the segment).
    Varied,
}

/// Counts the collectives that should go through the segment (docs/configuration.md,
/// `coll_sm_limit`): up to the limit, with at least 2 members of the communicator on this
/// host; across hosts not reduce, nor allreduce with a non-commutative operator.
struct Expect<'a> {
    c: &'a Communicator,
    shape: &'a Shape,
    count: u32,
}

impl Expect<'_> {
    fn host(&self, r: u32) -> u32 {
        self.c.job_rank(r).unwrap() % self.shape.hosts
    }

    fn note(&mut self, k: K, bytes: usize) {
        let n = self.c.size();
        let mine = self.host(self.c.rank());
        let local = (0..n).filter(|&r| self.host(r) == mine).count();
        let several_hosts = (0..n).any(|r| self.host(r) != mine);
        let bytes = if k == K::Varied { 0 } else { bytes };
        let fits = self.shape.limit > 0 && bytes <= self.shape.limit && local >= 2;
        let kind_ok = match k {
            K::Barrier | K::Bcast => true,
            K::Reduce | K::Moves | K::Varied => !several_hosts,
            K::Scan => !several_hosts && !self.shape.scan_msgs,
            K::Allreduce { commutative } => commutative || !several_hosts,
        };
        if fits && kind_ok {
            self.count += 1;
        }
    }

    fn verify(&self) -> Result<(), String> {
        let got = self.c.shared_memory_collectives();
        check(got == self.count, || {
            format!(
                "rank {} of {}: {got} collectives through shared memory, {} expected",
                self.c.rank(),
                self.c.size(),
                self.count
            )
        })
    }
}

/// Element counts of i64 around the default limit (512 elements = 4 KiB) and a small one.
const LENS: [usize; 6] = [0, 1, 7, 511, 512, 513];

/// Gather, scatter, allgather, alltoall, scans and reduce-scatter of `len` elements per
/// rank, against the reference (the segment takes a scatter, an alltoall and a
/// reduce-scatter by all their bytes, `len` times the ranks and more).
fn moves(c: &Communicator, x: &mut Expect<'_>, len: usize) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let b = len * 8;
    let all: Vec<i64> = (0..n).flat_map(|r| input(r, len, 3)).collect();
    for root in [0, n - 1, n / 2] {
        let mut g = vec![-1i64; if me == root { len * nu } else { 0 }];
        e(c.gather(&input(me, len, 3), &mut g, root))?;
        x.note(K::Moves, b);
        check(me != root || g == all, || {
            format!("gather to {root} of {len}")
        })?;
        let whole = if me == root { all.clone() } else { Vec::new() };
        let mut part = vec![-1i64; len];
        e(c.scatter(&whole, &mut part, root))?;
        x.note(K::Moves, b * nu);
        check(part == input(me, len, 3), || {
            format!("scatter from {root} of {len}")
        })?;
    }
    let mut ag = vec![-1i64; len * nu];
    e(c.allgather(&input(me, len, 3), &mut ag))?;
    x.note(K::Moves, b);
    check(ag == all, || format!("allgather of {len}"))?;
    // Block j of rank i: input(i, len, j).
    let send: Vec<i64> = (0..n).flat_map(|j| input(me, len, u64::from(j))).collect();
    let mut got = vec![-1i64; len * nu];
    e(c.alltoall(&send, &mut got))?;
    x.note(K::Moves, b * nu);
    let want: Vec<i64> = (0..n).flat_map(|i| input(i, len, u64::from(me))).collect();
    check(got == want, || format!("alltoall of {len}"))?;
    varied(c, x, len)?;
    // Inclusive scans, one commutative, one not (in rank order).
    let mut sc = vec![0i64; len];
    e(c.scan(&input(me, len, 5), &mut sc, &Op::Sum))?;
    x.note(K::Scan, b);
    let want = fold(me + 1, |r| input(r, len, 5), i64::wrapping_add);
    check(sc == want, || format!("scan of {len}"))?;
    let mut ac = vec![0u64; len];
    e(c.scan(&affine_input(me, len), &mut ac, &Op::user(affine, false)))?;
    x.note(K::Scan, b);
    let want = fold(me + 1, |r| affine_input(r, len), affine);
    check(ac == want, || format!("non-commutative scan of {len}"))?;
    // Exclusive scans: rank 0's buffer stays as it was.
    let mut ex = vec![7u64; len];
    e(c.exscan(&affine_input(me, len), &mut ex, &Op::user(affine, false)))?;
    x.note(K::Scan, b);
    let want = if me == 0 {
        vec![7u64; len]
    } else {
        fold(me, |r| affine_input(r, len), affine)
    };
    check(ex == want, || format!("non-commutative exscan of {len}"))?;
    let mut es = vec![-3i64; len];
    e(c.exscan(&input(me, len, 6), &mut es, &Op::Sum))?;
    x.note(K::Scan, b);
    let want = if me == 0 {
        vec![-3i64; len]
    } else {
        fold(me, |r| input(r, len, 6), i64::wrapping_add)
    };
    check(es == want, || format!("exscan of {len}"))?;
    // Reduce-scatters, blocks of len and len + 1 (the segment takes them by all their
    // bytes), one commutative, one not.
    let counts: Vec<usize> = (0..nu).map(|r| len + r % 2).collect();
    let total: usize = counts.iter().sum();
    let from: usize = counts[..me as usize].iter().sum();
    let mine = from..from + counts[me as usize];
    let mut rs = vec![0i64; counts[me as usize]];
    e(c.reduce_scatter(&input(me, total, 7), &mut rs, &counts, &Op::Sum))?;
    x.note(K::Moves, total * 8);
    let want = fold(
        n,
        |r| input(r, total, 7)[mine.clone()].to_vec(),
        i64::wrapping_add,
    );
    check(rs == want, || format!("reduce_scatter of {counts:?}"))?;
    let mut ra = vec![0u64; counts[me as usize]];
    let user = Op::user(affine, false);
    e(c.reduce_scatter(&affine_input(me, total), &mut ra, &counts, &user))?;
    x.note(K::Moves, total * 8);
    let want = fold(n, |r| affine_input(r, total)[mine.clone()].to_vec(), affine);
    check(ra == want, || {
        format!("non-commutative reduce_scatter of {counts:?}")
    })?;
    // A slice function that is not commutative gets whole contributions, never blocks
    // (`Op::UserSlice`: it may need every element, as a matrix product does).
    let parts = Arc::new(AtomicBool::new(false));
    let seen = parts.clone();
    let whole = Op::user_slice(
        move |acc: &mut [i64], other: &[i64], _lower: bool| {
            if acc.len() != total || other.len() != total {
                seen.store(true, Ordering::Relaxed);
            }
            for (a, b) in acc.iter_mut().zip(other) {
                *a = a.wrapping_add(*b);
            }
        },
        false,
    );
    let mut rw = vec![0i64; counts[me as usize]];
    e(c.reduce_scatter(&input(me, total, 8), &mut rw, &counts, &whole))?;
    x.note(K::Moves, total * 8);
    let want = fold(
        n,
        |r| input(r, total, 8)[mine.clone()].to_vec(),
        i64::wrapping_add,
    );
    check(rw == want && !parts.load(Ordering::Relaxed), || {
        format!("reduce_scatter of {counts:?} by a non-commutative slice function")
    })
}

/// Gatherv, scatterv and alltoallv around `len` elements, against the reference: counts
/// that differ by rank (zero among them), so that around the limit some parts, blocks
/// and packages ride the segment and the others go by messages beside it.
fn varied(c: &Communicator, x: &mut Expect<'_>, len: usize) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let cnt = |r: u32| (len + r as usize % 3).saturating_sub(1);
    let counts: Vec<usize> = (0..n).map(cnt).collect();
    let all: Vec<i64> = (0..n).flat_map(|r| input(r, cnt(r), 4)).collect();
    for root in [0, n - 1] {
        let mut g = vec![-1i64; if me == root { all.len() } else { 0 }];
        e(c.gatherv(&input(me, cnt(me), 4), &mut g, &counts, root))?;
        x.note(K::Varied, 0);
        check(me != root || g == all, || {
            format!("gatherv of {counts:?} to {root}")
        })?;
        let whole = if me == root { all.clone() } else { Vec::new() };
        let mut part = vec![-1i64; cnt(me)];
        e(c.scatterv(&whole, &counts, &mut part, root))?;
        x.note(K::Varied, 0);
        check(part == input(me, cnt(me), 4), || {
            format!("scatterv of {counts:?} from {root}")
        })?;
    }
    // Rank i sends rank j (i + j) % 3 elements, and odd ranks `len` more: an odd rank's
    // package outgrows the limit first.
    let count = |i: u32, j: u32| ((i + j) % 3) as usize + if i % 2 == 1 { len } else { 0 };
    let sc: Vec<usize> = (0..n).map(|j| count(me, j)).collect();
    let rc: Vec<usize> = (0..n).map(|i| count(i, me)).collect();
    let send: Vec<i64> = (0..n)
        .flat_map(|j| input(me, count(me, j), u64::from(j) + 10))
        .collect();
    let want: Vec<i64> = (0..n)
        .flat_map(|i| input(i, count(i, me), u64::from(me) + 10))
        .collect();
    let mut got = vec![-1i64; want.len()];
    e(c.alltoallv(&send, &sc, &mut got, &rc))?;
    x.note(K::Varied, 0);
    check(got == want, || format!("alltoallv of {sc:?} around {len}"))?;
    // The non-blocking forms, all three in flight at once and waited for in reverse
    // order (a part past the slot goes by messages after the step on the segment).
    // Through the segment of the non-blocking collectives wherever the blocking forms
    // went through their own (which set that one up).
    let before = x.count;
    x.note(K::Varied, 0);
    let nb_expected = 3 * (x.count - before);
    x.count = before;
    let nb_before = c.nonblocking_shared_memory_collectives();
    let root = n - 1;
    let gat = e(c.igatherv(input(me, cnt(me), 4), &counts, 0))?;
    let whole = if me == root { all.clone() } else { Vec::new() };
    let sca = e(c.iscatterv(whole, &counts, root))?;
    let a2a = e(c.ialltoallv(send, &sc, &rc))?;
    let got = e(a2a.wait())?;
    check(got == want, || format!("ialltoallv of {sc:?} around {len}"))?;
    let part = e(sca.wait())?;
    check(part == input(me, cnt(me), 4), || {
        format!("iscatterv of {counts:?} from {root}")
    })?;
    let g = e(gat.wait())?;
    check(if me == 0 { g == all } else { g.is_empty() }, || {
        format!("igatherv of {counts:?} to 0")
    })?;
    let nb = c.nonblocking_shared_memory_collectives() - nb_before;
    check(nb == nb_expected, || {
        format!("rank {me} of {n}: {nb} non-blocking v collectives through shared memory, {nb_expected} expected")
    })
}

/// Every collective of this kind at every length, against the reference.
fn sizes(c: &Communicator, x: &mut Expect<'_>) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let user = Op::user(affine, false);
    for &len in LENS.iter().chain(&[8, 9]) {
        moves(c, x, len)?;
        let b = len * 8;
        let mine = input(me, len, 1);
        let sum = fold(n, |r| input(r, len, 1), i64::wrapping_add);
        let mut out = vec![0i64; len];
        e(c.allreduce(&mine, &mut out, &Op::Sum))?;
        x.note(K::Allreduce { commutative: true }, b);
        check(out == sum, || format!("allreduce sum of {len}"))?;
        let max = fold(n, |r| input(r, len, 1), i64::max);
        e(c.allreduce(&mine, &mut out, &Op::Max))?;
        x.note(K::Allreduce { commutative: true }, b);
        check(out == max, || format!("allreduce max of {len}"))?;
        let aff = fold(n, |r| affine_input(r, len), affine);
        let mut ao = vec![0u64; len];
        e(c.allreduce(&affine_input(me, len), &mut ao, &user))?;
        x.note(K::Allreduce { commutative: false }, b);
        check(ao == aff, || format!("allreduce non-commutative of {len}"))?;
        for root in [0, n - 1, n / 2] {
            let mut ro = vec![0i64; len];
            e(c.reduce(&mine, &mut ro, &Op::Sum, root))?;
            x.note(K::Reduce, b);
            if me == root {
                check(ro == sum, || format!("reduce to {root} of {len}"))?;
            }
            let mut ao = vec![0u64; len];
            e(c.reduce(&affine_input(me, len), &mut ao, &user, root))?;
            x.note(K::Reduce, b);
            if me == root {
                check(ao == aff, || {
                    format!("non-commutative reduce to {root} of {len}")
                })?;
            }
            let mut bo = if me == root {
                input(root, len, 2)
            } else {
                vec![-1; len]
            };
            e(c.bcast(&mut bo, root))?;
            x.note(K::Bcast, b);
            check(bo == input(root, len, 2), || {
                format!("bcast from {root} of {len}")
            })?;
        }
        // Byte broadcasts just below, at and above the limit.
        for blen in [
            x.shape.limit.saturating_sub(1),
            x.shape.limit,
            x.shape.limit + 1,
        ] {
            let want: Vec<u8> = (0..blen).map(|i| (i * 13 + 5) as u8).collect();
            let mut got = if me == n - 1 {
                want.clone()
            } else {
                vec![0; blen]
            };
            e(c.bcast(&mut got, n - 1))?;
            x.note(K::Bcast, blen);
            check(got == want, || format!("byte bcast of {blen}"))?;
        }
        e(c.barrier())?;
        x.note(K::Barrier, 0);
    }
    x.verify()
}

/// `rounds` rounds of small collectives on each of `comms` in turn (the sequence numbers
/// wrap after a few hundred), each round's values different.
fn many(comms: &mut [Expect<'_>], rounds: u64) -> Result<(), String> {
    for round in 0..rounds {
        for x in comms.iter_mut() {
            let c = x.c;
            let (me, n) = (c.rank(), c.size());
            let mut out = [0i64; 2];
            e(c.allreduce(&[val(me, 0, round), 1], &mut out, &Op::Sum))?;
            x.note(K::Allreduce { commutative: true }, 16);
            let sum: i64 = (0..n).map(|r| val(r, 0, round)).sum();
            check(out == [sum, i64::from(n)], || {
                format!("round {round}: allreduce")
            })?;
            let root = (round % u64::from(n)) as u32;
            let mut b = [if me == root { round } else { u64::MAX }; 3];
            e(c.bcast(&mut b, root))?;
            x.note(K::Bcast, 24);
            check(b == [round; 3], || {
                format!("round {round}: bcast from {root}")
            })?;
            // Reduces back to back, to a root that changes: contributors return once
            // posted and run ahead of the root; small parts ride in the flag lines,
            // larger ones in the data slots, in turn.
            for k in 0..3u64 {
                let root = ((round + k) % u64::from(n)) as u32;
                let len = if (round + k) % 2 == 0 { 1 } else { 3 };
                let mine: Vec<i64> = (0..len).map(|i| val(me, 3 + i, round + k)).collect();
                let mut ro = vec![0i64; len];
                e(c.reduce(&mine, &mut ro, &Op::Sum, root))?;
                x.note(K::Reduce, len * 8);
                let want: Vec<i64> = (0..len)
                    .map(|i| (0..n).map(|r| val(r, 3 + i, round + k)).sum())
                    .collect();
                check(me != root || ro == want, || {
                    format!("round {round}: reduce {k} to {root} gave {ro:?}, want {want:?}")
                })?;
                // Gathers likewise (contributors return once posted), and a scatter.
                let all: Vec<i64> = (0..n).flat_map(|r| input(r, len, round + k)).collect();
                let mut g = vec![0i64; if me == root { all.len() } else { 0 }];
                e(c.gather(&input(me, len, round + k), &mut g, root))?;
                x.note(K::Moves, len * 8);
                check(me != root || g == all, || {
                    format!("round {round}: gather {k} to {root} gave {g:?}, want {all:?}")
                })?;
                // Gathervs likewise, parts of len and len + 1 elements by rank.
                let cnt = |r: u32| len + r as usize % 2;
                let counts: Vec<usize> = (0..n).map(cnt).collect();
                let vall: Vec<i64> = (0..n).flat_map(|r| input(r, cnt(r), round + k)).collect();
                let mut vg = vec![0i64; if me == root { vall.len() } else { 0 }];
                e(c.gatherv(&input(me, cnt(me), round + k), &mut vg, &counts, root))?;
                x.note(K::Varied, 0);
                check(me != root || vg == vall, || {
                    format!("round {round}: gatherv {k} to {root} gave {vg:?}, want {vall:?}")
                })?;
                if k == 1 {
                    let whole = if me == root { all } else { Vec::new() };
                    let mut part = vec![0i64; len];
                    e(c.scatter(&whole, &mut part, root))?;
                    x.note(K::Moves, len * 8 * n as usize);
                    check(part == input(me, len, round + k), || {
                        format!("round {round}: scatter from {root} gave {part:?}")
                    })?;
                }
            }
            scans(x, round)?;
            if round % 3 == 0 {
                e(c.barrier())?;
                x.note(K::Barrier, 0);
            }
        }
    }
    for x in comms.iter() {
        x.verify()?;
    }
    Ok(())
}

/// Round `round` of scans back to back on `x`'s communicator, inclusive and exclusive in
/// turn, non-commutative, parts of 8 and 16 bytes (inline) and 24 (in the slots). Among
/// few members a chain (member 0 waits for nobody and the others run up to two scans
/// behind their left neighbour), among many recursive doubling (a sequence number per
/// round).
fn scans(x: &mut Expect<'_>, round: u64) -> Result<(), String> {
    let c = x.c;
    let me = c.rank();
    for k in 0..4u64 {
        let len = [1, 2, 3][((round + k) % 3) as usize];
        let salt = u32::try_from((round * 4 + k) % 1000).unwrap();
        let part = |r: u32| affine_input(r * 1000 + salt, len);
        let mut out = vec![9u64; len];
        if k % 2 == 0 {
            e(c.scan(&part(me), &mut out, &Op::user(affine, false)))?;
        } else {
            e(c.exscan(&part(me), &mut out, &Op::user(affine, false)))?;
        }
        x.note(K::Scan, len * 8);
        let want = match (k % 2, me) {
            (0, _) => fold(me + 1, part, affine),
            (_, 0) => vec![9u64; len],
            _ => fold(me, part, affine),
        };
        check(out == want, || {
            format!("round {round}: scan {k} gave {out:?}, want {want:?}")
        })?;
    }
    Ok(())
}

/// `rounds` rounds of non-blocking collectives in flight together (every kind), with a blocking one
/// started behind them, waited for out of order. The blocking one goes through the
/// segment within one host; the non-blocking barrier, bcast, reduce, allreduce, scatter,
/// gather, allgather, alltoall, reduce-scatter and scan through the segment of the non-blocking collectives where
/// every member is on this host (it was set up with the blocking one's, before these),
/// the others through the messages.
fn outstanding(x: &mut Expect<'_>, rounds: u64) -> Result<(), String> {
    let c = x.c;
    let (me, n) = (c.rank(), c.size());
    let one_host = (0..n).all(|r| x.host(r) == x.host(0));
    let nb_before = c.nonblocking_shared_memory_collectives();
    // Barrier, bcast (24 bytes), reduce, allreduce, gather, allgather (16 bytes), scan
    // (16 bytes), and alltoall, scatter and reduce-scatter (8 bytes for each rank: the
    // whole buffer counts).
    let whole = u32::from(8 * n as usize <= x.shape.limit);
    let nb_expected = if n >= 2 && one_host && x.shape.limit >= 24 {
        (7 - u32::from(x.shape.scan_msgs) + 3 * whole) * rounds as u32
    } else {
        0
    };
    for round in 0..rounds {
        let root = (round % u64::from(n)) as u32;
        let ar = e(c.iallreduce(vec![val(me, 0, round), 1], Op::Sum))?;
        let bc = e(c.ibcast(vec![if me == root { round } else { u64::MAX }; 3], root))?;
        let bar = e(c.ibarrier())?;
        let mut blocking = [0i64];
        e(c.allreduce(&[val(me, 2, round)], &mut blocking, &Op::Sum))?;
        let rd = e(c.ireduce(vec![val(me, 1, round)], Op::Sum, root))?;
        let ig = e(c.igather(vec![val(me, 3, round)], root))?;
        let parts: Vec<i64> = (0..n).map(|r| val(r, 4, round)).collect();
        let is = e(c.iscatter(if me == root { parts } else { Vec::new() }, 1, root))?;
        let ag = e(c.iallgather(vec![val(me, 5, round), -7]))?;
        let blocks: Vec<i64> = (0..n).map(|r| val(me, 6 + r as usize, round)).collect();
        let at = e(c.ialltoall(blocks))?;
        let sc = e(c.iscan(affine_input(me, 2), Op::user(affine, false)))?;
        let counts = vec![1; n as usize];
        let rs = e(c.ireduce_scatter(
            affine_input(me + 7, n as usize),
            counts,
            Op::user(affine, false),
        ))?;
        let got_ag = e(ag.wait())?;
        let got_is = e(is.wait())?;
        let got_ig = e(ig.wait())?;
        let got_rd = e(rd.wait())?;
        e(bar.wait())?;
        let got_bc = e(bc.wait())?;
        let got_ar = e(ar.wait())?;
        let got_at = e(at.wait())?;
        let got_rs = e(rs.wait())?;
        let got_sc = e(sc.wait())?;
        let sum = |k: usize| (0..n).map(|r| val(r, k, round)).sum::<i64>();
        check(got_ar == [sum(0), i64::from(n)], || {
            format!("round {round}: iallreduce gave {got_ar:?}")
        })?;
        check(got_bc == [round; 3], || {
            format!("round {round}: ibcast from {root} gave {got_bc:?}")
        })?;
        check(blocking == [sum(2)], || {
            format!("round {round}: allreduce behind three in flight gave {blocking:?}")
        })?;
        check(me != root || got_rd == [sum(1)], || {
            format!("round {round}: ireduce to {root} gave {got_rd:?}")
        })?;
        let gathered: Vec<i64> = (0..n).map(|r| val(r, 3, round)).collect();
        check(me != root || got_ig == gathered, || {
            format!("round {round}: igather to {root} gave {got_ig:?}")
        })?;
        check(got_is == [val(me, 4, round)], || {
            format!("round {round}: iscatter from {root} gave {got_is:?}")
        })?;
        let all: Vec<i64> = (0..n).flat_map(|r| [val(r, 5, round), -7]).collect();
        check(got_ag == all, || {
            format!("round {round}: iallgather gave {got_ag:?}")
        })?;
        let mine: Vec<i64> = (0..n).map(|r| val(r, 6 + me as usize, round)).collect();
        check(got_at == mine, || {
            format!("round {round}: ialltoall gave {got_at:?}")
        })?;
        let scanned = fold(me + 1, |r| affine_input(r, 2), affine);
        check(got_sc == scanned, || {
            format!("round {round}: iscan gave {got_sc:?}")
        })?;
        let m = me as usize;
        let block = fold(
            n,
            |r| affine_input(r + 7, n as usize)[m..=m].to_vec(),
            affine,
        );
        check(got_rs == block, || {
            format!("round {round}: ireduce_scatter gave {got_rs:?}")
        })?;
        x.note(K::Allreduce { commutative: true }, 8);
    }
    let nb = c.nonblocking_shared_memory_collectives() - nb_before;
    check(nb == nb_expected, || {
        format!(
            "rank {me} of {n}: {nb} non-blocking collectives through shared memory, {nb_expected} expected"
        )
    })?;
    x.verify()
}

fn sm_role() -> Result<(), String> {
    let shape = Shape::read();
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank();
        let d = e(w.dup())?;
        // Two siblings (they share a context, and a host): the odd ranks and the even
        // ones, renumbered in reverse; each gets a segment of its own.
        let sub = e(w.split(Some(me % 2), -(me as i32)))?;
        // The split's allgather runs through the messages, so counts start now.
        let mut xw = Expect {
            c: w,
            shape: &shape,
            count: 0,
        };
        xw.count = w.shared_memory_collectives();
        sizes(w, &mut xw)?;
        // Every member mapped the world's segment: its name is gone already.
        let left = shm_leftovers(&format!("{:016x}", w.job()));
        check(left.is_empty(), || {
            format!("rank {me}: /dev/shm still holds {left:?}")
        })?;
        let mut comms = vec![
            xw,
            Expect {
                c: &d,
                shape: &shape,
                count: 0,
            },
        ];
        if let Some(s) = &sub {
            comms.push(Expect {
                c: s,
                shape: &shape,
                count: 0,
            });
        }
        many(&mut comms, 150)?;
        for x in comms.iter_mut() {
            outstanding(x, 40)?;
        }
        // The sequence numbers start 256 below the wrap: with 3 or more ranks on this host
        // the world's went past it.
        if w.size() >= 3 && shape.hosts == 1 && shape.limit >= 24 {
            check(comms[0].count > 256, || {
                format!("only {} collectives through shared memory", comms[0].count)
            })?;
        }
        if let Some(s) = &sub {
            let mut xs = Expect {
                c: s,
                shape: &shape,
                count: s.shared_memory_collectives(),
            };
            sizes(s, &mut xs)?;
        }
        Ok(())
    });
    println!("sm ok rank {}", w.rank());
    e(w.finalize())
}

fn run(n: u32, env: &[(&str, &str)]) {
    run_ranks("small_collectives_through_shared_memory", "sm ok", n, env);
}

/// Results equal the reference, and the path is the documented one, for 1 to 9 ranks,
/// scans by recursive doubling at 5 and 9 and by messages at 4, a smaller limit, shared
/// memory off, and across 2 and 3 hosts.
#[test]
fn small_collectives_through_shared_memory() {
    rank_main(|_| sm_role());
    for n in 1..=9 {
        run(n, &[]);
    }
    run(4, &[("SPOOLS_COLL_SM_LIMIT", "64")]);
    run(5, &[("SPOOLS_COLL_SM_SCAN", "doubling")]);
    run(9, &[("SPOOLS_COLL_SM_SCAN", "doubling")]);
    run(4, &[("SPOOLS_COLL_SM_SCAN", "messages")]);
    // Light fences where the ranks outnumber the CPUs (`auto` keeps them off there): the
    // members that sleep pay the heavy fence, the others' release stores must wake them.
    run(5, &[("SPOOLS_COLL_SM_FENCES", "light")]);
    run(3, &[("SPOOLS_COLL_SM_LIMIT", "0")]);
    run(5, &[("SPOOLS_TEST_HOSTS", "2")]);
    run(7, &[("SPOOLS_TEST_HOSTS", "3")]);
}

/// Scans by recursive doubling (from 16 members with a CPU each, or as set: a power of
/// two and not) or as a chain of messages, with the rest of the non-blocking collectives
/// in flight around non-blocking scans. With `SPOOLS_TEST_SCAN_MIXED=WAY`, rank 0 (the
/// segment's creator) asks for WAY and the others for the chain: the creator decides for
/// all.
fn doubling_role() -> Result<(), String> {
    if let Ok(creators) = std::env::var("SPOOLS_TEST_SCAN_MIXED") {
        let rank: u32 = std::env::var("SPOOLS_RANK").unwrap().parse().unwrap();
        let mine = if rank == 0 {
            creators.as_str()
        } else {
            "chain"
        };
        std::env::set_var("SPOOLS_COLL_SM_SCAN", mine);
    }
    let shape = Shape::read();
    let w = e(spools::init())?;
    checked(&w, |w| {
        let mut x = Expect {
            c: w,
            shape: &shape,
            count: w.shared_memory_collectives(),
        };
        // The segment is set up by the first collective that may use it, a scan too,
        // which then goes through it: a barrier first, so that every scan goes the way
        // its creator chose.
        e(w.barrier())?;
        x.note(K::Barrier, 0);
        for round in 0..40 {
            scans(&mut x, round)?;
        }
        outstanding(&mut x, 6)?;
        x.verify()
    });
    println!("doubling ok rank {}", w.rank());
    e(w.finalize())
}

/// Results equal the reference, and go through the segment, where scans take `log2 P`
/// rounds of posts: 2, 3, 16 and 17 members (oversubscribed: 2 cores here); through
/// neither, as a chain of messages, at 3 and 16 (as `auto` chooses on this machine
/// where the ranks outnumber its 2 CPUs); members whose settings differ (the creator's
/// holds, either way).
#[test]
fn scans_among_many_members_by_recursive_doubling() {
    rank_main(|_| doubling_role());
    let name = "scans_among_many_members_by_recursive_doubling";
    let doubling = [("SPOOLS_COLL_SM_SCAN", "doubling")];
    for n in [2, 3, 16, 17] {
        run_ranks(name, "doubling ok", n, &doubling);
    }
    for n in [3, 16] {
        run_ranks(
            name,
            "doubling ok",
            n,
            &[("SPOOLS_COLL_SM_SCAN", "messages")],
        );
    }
    for way in ["doubling", "messages"] {
        run_ranks(name, "doubling ok", 6, &[("SPOOLS_TEST_SCAN_MIXED", way)]);
    }
}

/// Rank `victim` kills itself (SIGKILL) once every other rank has said (a file) that it
/// enters collective number `at`; the others, waiting in it, must fail with an error
/// naming the victim.
fn kill_role() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let victim: u32 = std::env::var("SPOOLS_TEST_VICTIM")
        .unwrap()
        .parse()
        .unwrap();
    let what = std::env::var("SPOOLS_TEST_COLL").unwrap();
    let w = e(spools::init())?;
    let (me, n) = (w.rank(), w.size());
    let at = 20;
    for k in 0..=at {
        if k == at {
            if me == victim {
                for r in (0..n).filter(|&r| r != me) {
                    wait_for_file(&dir.join(format!("in-{r}")), Duration::from_secs(60))?;
                }
                std::process::Command::new("kill")
                    .args(["-KILL", &std::process::id().to_string()])
                    .status()
                    .map_err(|x| x.to_string())?;
                // The signal ends this process; the launcher's timeout bounds this wait.
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            signal_file(&dir.join(format!("in-{me}")), b"")?;
        }
        let r = match what.as_str() {
            "allreduce" => {
                let mut out = [0u64; 4];
                w.allreduce(&[u64::from(me); 4], &mut out, &Op::Sum)
            }
            "bcast" => {
                let mut b = [7u8; 100];
                w.bcast(&mut b, 0)
            }
            _ => w.barrier(),
        };
        if let Err(err) = r {
            println!("rank {me} {what} #{k} failed: {err}");
            std::process::exit(5);
        }
    }
    Err(format!(
        "rank {me}: collective #{at} succeeded without rank {victim}"
    ))
}

/// A rank killed while the others wait in a collective through shared memory: every
/// other rank's call fails naming it (the root waiting for contributions, members
/// waiting for the root's result), and the job ends with the victim's signal.
#[test]
fn a_rank_killed_in_a_shared_memory_collective_fails_the_others() {
    rank_main(|_| kill_role());
    for (n, victim, what) in [
        (4u32, 2u32, "allreduce"),
        (4, 0, "bcast"),
        (3, 1, "barrier"),
        (9, 0, "allreduce"),
    ] {
        let dir = tempdir("coll-sm-kill");
        let v = victim.to_string();
        let o = launch(
            n,
            "a_rank_killed_in_a_shared_memory_collective_fails_the_others",
            "x",
            &[
                ("SPOOLS_TEST_DIR", dir.path().to_str().unwrap()),
                ("SPOOLS_TEST_VICTIM", &v),
                ("SPOOLS_TEST_COLL", what),
            ],
        );
        assert_eq!(o.code(), Some(128 + 9), "{n} {what}: {o:?}");
        assert_eq!(
            o.reports(),
            [format!(
                "spools run: rank {victim} was killed by signal 9 (SIGKILL); stopping the job"
            )],
            "{n} {what}: {o:?}"
        );
        // Every rank that reports names the victim; at least one reports before the
        // launcher stops the job (it ends the others once one fails).
        let failed: Vec<&str> = o.stdout.lines().filter(|l| l.contains("failed")).collect();
        assert!(!failed.is_empty(), "{n} {what}: {o:?}");
        for l in &failed {
            assert!(
                l.contains(&format!("#20 failed: rank {victim} died")),
                "{n} {what}: {l}: {o:?}"
            );
        }
    }
}

/// A correct `alltoallv` in which one rank's counts are all equal and the others' are not:
/// `C[i][j]`, the elements rank i sends rank j, is 2 but for ranks 1 and 2 to each other
/// (5). Rank 0's own counts are uniform, which says nothing of the others': every rank
/// must take the same path (the messages), and get its blocks.
fn uneven_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let me = w.rank() as usize;
        // Sets the segment up.
        let mut out = [0u64];
        e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
        let count = |i: usize, j: usize| {
            if (i, j) == (1, 2) || (i, j) == (2, 1) {
                5
            } else {
                2
            }
        };
        let sc: Vec<usize> = (0..3).map(|j| count(me, j)).collect();
        let rc: Vec<usize> = (0..3).map(|i| count(i, me)).collect();
        let send: Vec<u64> = (0..3)
            .flat_map(|j| (0..count(me, j)).map(move |k| (100 * me + 10 * j + k) as u64))
            .collect();
        let mut got = vec![0u64; rc.iter().sum()];
        e(w.alltoallv(&send, &sc, &mut got, &rc))?;
        let want: Vec<u64> = (0..3)
            .flat_map(|i| (0..count(i, me)).map(move |k| (100 * i + 10 * me + k) as u64))
            .collect();
        check(got == want, || format!("rank {me}: alltoallv gave {got:?}"))
    });
    println!("uneven ok rank {}", w.rank());
    e(w.finalize())
}

/// `alltoallv` with one rank's counts uniform and the others' not ends, right, on every
/// rank.
#[test]
fn alltoallv_with_one_uniform_rank() {
    rank_main(|_| uneven_role());
    run_ranks("alltoallv_with_one_uniform_rank", "uneven ok", 3, &[]);
}

/// A correct program whose ranks once ran a collective through the messages (too long for
/// the segment: each leaves a record of it there) and, 2^23 collectives later, wait in one
/// on the segment long enough to look at the others' records (rank 0 comes late): the
/// record of long ago is not taken for one of this collective, which succeeds everywhere.
/// (The numbering is advanced by a test hook rather than by 2^23 collectives.)
fn stale_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (w.rank(), w.size());
        // Sets the segment up.
        let mut out = [0u64];
        e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
        // Through the messages on every rank, recorded on the segment.
        let mut big = vec![u8::from(me == 0); 8192];
        e(w.bcast(&mut big, 0))?;
        check(big.iter().all(|&b| b == 1), || {
            format!("rank {me}: big bcast")
        })?;
        let before = w.shared_memory_collectives();
        w.skip_collective_numbers((1 << 23) + 5);
        for round in 0..3u64 {
            if me == 0 {
                // Late: the others' waits reach their naps, where they read records.
                std::thread::sleep(Duration::from_millis(30));
            }
            let mut b = [if me == 0 { round + 7 } else { 0 }; 2];
            e(w.bcast(&mut b, 0))?;
            check(b == [round + 7; 2], || {
                format!("rank {me}: bcast {round} gave {b:?}")
            })?;
            let mut sum = [0u64];
            e(w.allreduce(&[u64::from(me) + round], &mut sum, &Op::Sum))?;
            let want = u64::from(n * (n - 1) / 2) + round * u64::from(n);
            check(sum == [want], || {
                format!("rank {me}: allreduce {round} gave {sum:?}")
            })?;
        }
        let through = w.shared_memory_collectives() - before;
        check(through == 6, || {
            format!("rank {me}: {through} collectives through the segment, want 6")
        })
    });
    println!("stale ok rank {}", w.rank());
    e(w.finalize())
}

/// Records of collectives on the messages' path from 2^23 collectives before are not taken
/// for the collective a rank waits in.
#[test]
fn a_record_of_long_ago_fails_nobody() {
    rank_main(|_| stale_role());
    run_ranks("a_record_of_long_ago_fails_nobody", "stale ok", 3, &[]);
}

/// Reduces and gathers of 8 bytes whose root comes only after its contributors finished
/// `AHEAD` of them, as many as a member's deep ring has entries less one
/// ([`spools_coll::ledger::RING`]), far more than its data slots: a contributor is done
/// once its part sits in its deep ring (`coll/sm`'s `deep_len`), which it reuses only
/// once the root read it. The contributors tell the root by a message after those,
/// which the root waits for before its first: where a contributor waited for the root
/// instead, both would wait for good (the job's time limit ends the run, and the test
/// fails). Then they go on to `TOTAL`, reusing every entry several times, and wait in
/// each reuse for the root to have read the entry (it began `AHEAD` calls behind).
/// Over 3 ranks (flat) and 9 (a tree of groups whose leaders run ahead too).
fn ahead_role() -> Result<(), String> {
    const AHEAD: u64 = spools_coll::ledger::RING as u64 - 1;
    const TOTAL: u64 = 4 * spools_coll::ledger::RING as u64 + 5;
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (w.rank(), w.size());
        // Sets the segment up.
        let mut out = [0u64];
        e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
        let before = w.shared_memory_collectives();
        let part = |k: u64, r: u32| k * 1000 + u64::from(r) + 1;
        // Reduces and, every third call, a gather: both go through the deep ring.
        let gathers = |k: u64| k % 3 == 2;
        let call = |k: u64| -> Result<(), String> {
            if me != 0 {
                if gathers(k) {
                    e(w.gather(&[part(k, me)], &mut [], 0))?;
                } else {
                    e(w.reduce(&[part(k, me)], &mut [], &Op::Sum, 0))?;
                }
                return Ok(());
            }
            if gathers(k) {
                let mut all = vec![0u64; n as usize];
                e(w.gather(&[part(k, 0)], &mut all, 0))?;
                let want: Vec<u64> = (0..n).map(|r| part(k, r)).collect();
                return check(all == want, || format!("gather {k} gave {all:?}"));
            }
            let mut sum = [0u64];
            e(w.reduce(&[part(k, 0)], &mut sum, &Op::Sum, 0))?;
            let want: u64 = (0..n).map(|r| part(k, r)).sum();
            check(sum == [want], || {
                format!("reduce {k} gave {sum:?}, want {want}")
            })
        };
        if me != 0 {
            for k in 0..AHEAD {
                call(k)?;
            }
            e(w.send(&[AHEAD], 0, 7))?;
            for k in AHEAD..TOTAL {
                call(k)?;
            }
        } else {
            for r in 1..n {
                let mut told = [0u64];
                e(w.recv(&mut told, r, 7))?;
                check(told == [AHEAD], || format!("rank {r} told {told:?}"))?;
            }
            for k in 0..TOTAL {
                call(k)?;
            }
        }
        let through = w.shared_memory_collectives() - before;
        check(u64::from(through) == TOTAL, || {
            format!("rank {me}: {through} collectives through the segment, want {TOTAL}")
        })?;
        // And the segment serves the collectives after as before.
        let mut sum = [0u64];
        e(w.allreduce(&[u64::from(me)], &mut sum, &Op::Sum))?;
        check(sum == [u64::from(n * (n - 1) / 2)], || {
            format!("rank {me}: allreduce after gave {sum:?}")
        })
    });
    println!("ahead ok rank {}", w.rank());
    e(w.finalize())
}

/// A reduce's and a gather's contributors run dozens of calls ahead of a root that has
/// not begun.
#[test]
fn reduce_contributors_run_far_ahead_of_their_root() {
    rank_main(|_| ahead_role());
    for n in [3, 9] {
        run_ranks(
            "reduce_contributors_run_far_ahead_of_their_root",
            "ahead ok",
            n,
            &[],
        );
    }
}

/// Two ranks, one per CPU where the machine has two: the segment's members agree whether
/// its flags go with light fences (a release store, the sleepers' heavy fence), and
/// collectives in which one rank comes late, so that the others sleep on their bells and a
/// post or publication wakes them, give the right results, the late rank changing sides.
/// Whether the fences are light depends on the kernel (`membarrier`) and on the
/// creator's look at the machine at set-up (a busy machine turns them off): the test
/// prints which it ran and asserts only the agreement and the results; a wake-up lost
/// would show as a nap's delay (2 ms), not as a failure. With `coll_sm_fences` set, 3
/// ranks on however many CPUs: `light` gives light fences wherever this process
/// registered for them (then the sleepers, common where ranks outnumber the CPUs, pay the
/// heavy fence), `locked` never.
fn fences_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (w.rank(), w.size());
        let mut out = [0u64];
        e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
        let light = w
            .shared_memory_light_fences()
            .ok_or_else(|| format!("rank {me}: no segment"))?;
        let mut views = vec![0u64; n as usize];
        e(w.allgather(&[u64::from(light)], &mut views))?;
        check(views.iter().all(|&v| v == views[0]), || {
            format!("rank {me}: the members disagree on light fences: {views:?}")
        })?;
        let forced = std::env::var("SPOOLS_COLL_SM_FENCES").unwrap_or_default();
        let can = spools_am::SharedArea::light_fences();
        check(
            match forced.as_str() {
                "light" => light == can,
                "locked" => !light,
                _ => true,
            },
            || format!("rank {me}: coll_sm_fences {forced:?} gave light {light} (can: {can})"),
        )?;
        println!("light fences {light} rank {me}");
        let nn = u64::from(n);
        for round in 0..40u64 {
            if u64::from(me) == round % nn {
                // Late: the others sleep on their bells (past their spin) and are woken.
                std::thread::sleep(Duration::from_millis(3));
            }
            let mut b = [if me == 0 { round } else { u64::MAX }];
            e(w.bcast(&mut b, 0))?;
            check(b == [round], || {
                format!("rank {me}: bcast {round} gave {b:?}")
            })?;
            let mut sum = [0u64];
            e(w.allreduce(&[round + u64::from(me)], &mut sum, &Op::Sum))?;
            check(sum == [nn * round + nn * (nn - 1) / 2], || {
                format!("rank {me}: allreduce {round} gave {sum:?}")
            })?;
            let mut red = [0u64];
            e(w.reduce(&[round * u64::from(me + 1)], &mut red, &Op::Sum, 1))?;
            if me == 1 {
                check(red == [round * nn * (nn + 1) / 2], || {
                    format!("reduce {round} gave {red:?}")
                })?;
            }
            let mut g = vec![0u64; if me == 1 { n as usize } else { 0 }];
            e(w.gather(&[round + u64::from(me)], &mut g, 1))?;
            if me == 1 {
                let want: Vec<u64> = (0..nn).map(|r| round + r).collect();
                check(g == want, || format!("gather {round} gave {g:?}"))?;
            }
        }
        Ok(())
    });
    println!("fences ok rank {}", w.rank());
    e(w.finalize())
}

/// Flags set with the fences the members agreed on wake sleeping members.
#[test]
fn members_agree_on_light_fences_and_wake_each_other() {
    rank_main(|_| fences_role());
    run_ranks(
        "members_agree_on_light_fences_and_wake_each_other",
        "fences ok",
        2,
        &[],
    );
    for fences in ["light", "locked"] {
        run_ranks(
            "members_agree_on_light_fences_and_wake_each_other",
            "fences ok",
            3,
            &[("SPOOLS_COLL_SM_FENCES", fences)],
        );
    }
}

/// A communicator whose segment is deferred by 3 collectives: the first three go through
/// the messages, the segment is set up at the fourth and serves it and the ones after;
/// results are right on both paths. Then a non-blocking allreduce (after the blocking
/// ones set the non-blocking segment up) goes through that segment.
fn defer_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let d = e(w.dup())?;
        d.defer_shared_memory(3);
        let (me, n) = (u64::from(d.rank()), u64::from(d.size()));
        for i in 0..6u64 {
            let mut out = [0u64];
            e(d.allreduce(&[i + me], &mut out, &Op::Sum))?;
            check(out == [n * i + n * (n - 1) / 2], || {
                format!("allreduce {i} gave {out:?}")
            })?;
            let want = u32::try_from(i).unwrap().saturating_sub(2);
            let got = d.shared_memory_collectives();
            check(got == want, || {
                format!(
                    "rank {me}: after allreduce {i}, {got} through shared memory, {want} expected"
                )
            })?;
        }
        let r = e(e(d.iallreduce(vec![me], Op::Sum))?.wait())?;
        check(r == [n * (n - 1) / 2], || format!("iallreduce gave {r:?}"))?;
        let nb = d.nonblocking_shared_memory_collectives();
        check(nb == 1, || {
            format!("rank {me}: {nb} non-blocking collectives through shared memory, 1 expected")
        })
    });
    println!("defer ok rank {}", w.rank());
    e(w.finalize())
}

/// `Communicator::defer_shared_memory` sets the segment up at the collective it names.
#[test]
fn a_deferred_segment_is_set_up_at_the_collective_it_names() {
    rank_main(|_| defer_role());
    for n in [2, 3] {
        run_ranks(
            "a_deferred_segment_is_set_up_at_the_collective_it_names",
            "defer ok",
            n,
            &[],
        );
    }
}

fn set_up_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        let (me, n) = (u64::from(w.rank()), u64::from(w.size()));
        // Two dups that run non-blocking collectives only: the first without a blocking
        // one, so no segment is ever set up; the second set up at once.
        let plain = e(w.dup())?;
        let set = e(w.dup())?;
        let served = e(set.set_up_shared_memory())?;
        check(served, || format!("rank {me}: no segment served"))?;
        for (name, d) in [("plain", &plain), ("set up", &set)] {
            for i in 0..4u64 {
                let r = e(e(d.iallreduce(vec![i + me], Op::Sum))?.wait())?;
                check(r == [n * i + n * (n - 1) / 2], || {
                    format!("{name}: iallreduce {i} gave {r:?}")
                })?;
                let b = e(e(d.ibcast(vec![i * 7 + me; 3], (i % n) as u32))?.wait())?;
                check(b == vec![i * 7 + i % n; 3], || {
                    format!("{name}: ibcast {i} gave {b:?}")
                })?;
            }
        }
        let (p, s) = (
            plain.nonblocking_shared_memory_collectives(),
            set.nonblocking_shared_memory_collectives(),
        );
        check(p == 0 && s == 8, || {
            format!("rank {me}: {p} and {s} non-blocking collectives through shared memory, 0 and 8 expected")
        })?;
        check(set.shared_memory_collectives() == 1, || {
            format!("rank {me}: the set-up's barrier did not go through the segment")
        })
    });
    println!("set up ok rank {}", w.rank());
    e(w.finalize())
}

/// `Communicator::set_up_shared_memory` gives a communicator that runs only
/// non-blocking collectives (a persistent collective's own) the segment that its first
/// blocking collective would have set up.
#[test]
fn a_segment_set_up_at_once_serves_the_non_blocking_collectives() {
    rank_main(|_| set_up_role());
    for n in [2, 3] {
        run_ranks(
            "a_segment_set_up_at_once_serves_the_non_blocking_collectives",
            "set up ok",
            n,
            &[],
        );
    }
}
