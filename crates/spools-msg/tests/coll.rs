//! Every collective, blocking and non-blocking, with real processes, against a
//! one-process reference: each rank computes every rank's input itself and checks the
//! result element by element. Rank counts 1 to 9 (oversubscribed beyond 2), over shared
//! memory, over TCP, and across two "hosts" (`SPOOLS_HOST_ID`), which takes the
//! hierarchical algorithms and mixes shared memory with TCP. Then what a reference cannot
//! show: that barriers hold every rank until the last arrives (decided by files the ranks
//! write), and that across hosts the three-phase path is taken (what each rank sent to
//! other hosts, against the documented algorithms' closed forms).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{Communicator, Op};
use std::path::Path;
use std::time::{Duration, Instant};

use spools_testkit::{
    assert_ok, checked, e, launch, rank_main, signal_file, tempdir, wait_for_file,
};

mod common;
use common::{affine, affine_input, check, fold, run_ranks};

/// Input element `i` of rank `r` (integers: sums are exact and order-free).
fn val(r: u32, i: usize) -> i64 {
    (r as i64 + 1) * 1_000_003 + (i as i64 * 7919) % 10_007 - 5000
}

fn input(r: u32, len: usize) -> Vec<i64> {
    (0..len).map(|i| val(r, i)).collect()
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
    // The other algorithms, outstanding together: ring allreduce (160 kB), pairwise
    // alltoall (400 B per pair), a non-commutative reduce to a root other than 0, a
    // gather to the last rank.
    let big = e(c.iallreduce(input(me, 20_000), Op::Sum))?;
    let cell = |i: u32, j: u32, k: u32| i * 1_000_000 + j * 1000 + k;
    let pairs = e(c.ialltoall(
        (0..n)
            .flat_map(|j| (0..100).map(move |k| cell(me, j, k)))
            .collect(),
    ))?;
    let root = n / 2;
    let user = Op::user(affine, false);
    let nc = e(c.ireduce(affine_input(me, 7), user, root))?;
    let last = e(c.igather(vec![me, me + 1], n - 1))?;
    check(
        e(big.wait())? == fold(n, |r| input(r, 20_000), i64::wrapping_add),
        || "iallreduce of 20000".into(),
    )?;
    check(
        e(pairs.wait())?
            == (0..n)
                .flat_map(|i| (0..100).map(move |k| cell(i, me, k)))
                .collect::<Vec<_>>(),
        || "ialltoall of 100 per pair".into(),
    )?;
    let r = e(nc.wait())?;
    if me == root {
        check(r == fold(n, |r| affine_input(r, 7), affine), || {
            format!("non-commutative ireduce to {root}")
        })?;
    }
    let g = e(last.wait())?;
    if me == n - 1 {
        check(
            g == (0..n).flat_map(|r| [r, r + 1]).collect::<Vec<_>>(),
            || "igather to the last rank".into(),
        )?;
    }
    Ok(())
}

/// With `SPOOLS_TEST_HOSTS=H`, this rank plays host `rank % H` (`SPOOLS_HOST_ID`), so
/// that neighbouring ranks are on different hosts; returns H (1 without it).
fn play_hosts() -> u32 {
    let (Ok(h), Ok(r)) = (
        std::env::var("SPOOLS_TEST_HOSTS"),
        std::env::var("SPOOLS_RANK"),
    ) else {
        return 1;
    };
    let hosts: u32 = h.parse().unwrap();
    let rank: u32 = r.parse().unwrap();
    std::env::set_var("SPOOLS_HOST_ID", format!("h{}", rank % hosts));
    hosts
}

fn coll_role() -> Result<(), String> {
    play_hosts();
    let w = e(spools::init())?;
    checked(&w, |w| {
        if std::env::var("SPOOLS_OFI_PROVIDER").is_ok() && w.ofi().is_none() {
            return Err("SPOOLS_OFI_PROVIDER is set but no libfabric transport".into());
        }
        reductions(w)?;
        data_movement(w)?;
        nonblocking(w)?;
        // The same in a sub-communicator of the odd ranks, renumbered in reverse.
        let me = w.rank();
        if let Some(sub) = e(w.split(if me % 2 == 1 { Some(1) } else { None }, -(me as i32)))? {
            data_movement(&sub)?;
        }
        let d = e(w.dup())?;
        nonblocking(&d)?;
        // Through the messages alone (no segment: a file's first collectives, or a
        // communicator across hosts), where allgathers of small blocks go all at once.
        let m = e(w.dup())?;
        m.defer_shared_memory(1 << 22);
        data_movement(&m)
    });
    println!("coll ok rank {}", w.rank());
    e(w.finalize())
}

fn run(n: u32, env: &[(&str, &str)]) {
    run_ranks("collectives_against_a_reference", "coll ok", n, env);
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
    // Over libfabric: every rank through one provider, and between two simulated hosts
    // (shared memory within each) through the network provider.
    for p in spools_testkit::ofi_providers() {
        run(
            4,
            &[("SPOOLS_TRANSPORT", "ofi"), ("SPOOLS_OFI_PROVIDER", p)],
        );
    }
    if let Some(p) = spools_testkit::ofi_between_hosts() {
        run(5, &[("SPOOLS_TEST_HOSTS", "2"), ("SPOOLS_OFI_PROVIDER", p)]);
    }
}

/// The communicators of one `split` share a context: ranks of one that finalise after
/// their collectives do not block the other's later collectives (they once failed with
/// `PeerFinalized` naming a rank that was never a member).
fn siblings_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    let first_half = me < w.size() / 2;
    let sub = e(w.split(Some(u32::from(!first_half)), 0))?.ok_or("no sub-communicator")?;
    e(sub.barrier())?;
    if !first_half {
        // Wait until every rank of the other half announced that it finalises, then
        // run more collectives than they did on the shared context.
        let health = w.worker().bootstrap().state();
        let others: Vec<u32> = (0..w.size() / 2).collect();
        e(w.worker()
            .wait_for(|| others.iter().all(|&r| health.is_finalizing(r))))?;
        for _ in 0..3 {
            e(sub.barrier())?;
            let mut total = [0u64];
            e(sub.allreduce(&[1u64], &mut total, &Op::Sum))?;
            check(total[0] == u64::from(sub.size()), || {
                "allreduce".to_string()
            })?;
        }
    }
    println!("siblings ok rank {me}");
    e(w.finalize())
}

#[test]
fn sibling_communicators_finalise_apart() {
    rank_main(|_| siblings_role());
    run_ranks(
        "sibling_communicators_finalise_apart",
        "siblings ok",
        4,
        &[],
    );
    run_ranks(
        "sibling_communicators_finalise_apart",
        "siblings ok",
        5,
        &[],
    );
}

/// Rounds of a dissemination barrier among `n`: ceil(log2 n).
fn rounds(n: u64) -> u64 {
    u64::from(n.next_power_of_two().trailing_zeros())
}

/// Cross-host traffic of an allreduce of `bytes` (`len` elements) among `h` host leaders,
/// as docs/messaging.md describes it: recursive doubling up to 64 KiB (the members past
/// a power of two fold into a neighbour first and get the result back), ring
/// reduce-scatter plus ring allgather beyond. (messages, bytes) summed over the leaders.
fn leaders_allreduce(h: u64, len: u64, bytes: u64) -> (u64, u64) {
    if h < 2 {
        return (0, 0);
    }
    if bytes <= 64 << 10 || len < h {
        let pof2 = 1 << (63 - h.leading_zeros());
        let msgs = 2 * (h - pof2) + pof2 * u64::from(pof2.trailing_zeros());
        (msgs, msgs * bytes)
    } else {
        (2 * h * (h - 1), 2 * (h - 1) * bytes)
    }
}

/// The ranks play `hosts` hosts (rank r on host r % hosts, so that neighbouring ranks are
/// on different hosts and every flat algorithm crosses hosts often). Each rank measures
/// what it sends to other hosts during each collective (the engine's `cross_host_sends`
/// statistic), then the ranks compare everyone's figures with the three-phase path of
/// docs/messaging.md: only host leaders (ranks 0..hosts) send across hosts, and a
/// broadcast's data crosses to each other host exactly once. The results are checked
/// against closed forms too.
fn hierarchy_role() -> Result<(), String> {
    let hosts = play_hosts();
    let w = e(spools::init())?;
    checked(&w, |w| hierarchy(w, hosts));
    println!("hierarchy ok rank {}", w.rank());
    e(w.finalize())
}

/// What one collective is expected to send across hosts, summed over all ranks.
struct Expect {
    what: String,
    /// Only leaders send across hosts (else: the flat path, some non-leader must).
    hierarchical: bool,
    /// Total messages, when the model fixes it.
    msgs: Option<u64>,
    /// Total bytes.
    bytes: Option<u64>,
}

fn hierarchy(w: &Communicator, hosts: u32) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    let h = u64::from(hosts.min(n));
    let mut deltas: Vec<u64> = Vec::new();
    let mut expect: Vec<Expect> = Vec::new();
    let mut measure = |what: String,
                       msgs: Option<u64>,
                       bytes: Option<u64>,
                       hierarchical: bool,
                       f: &mut dyn FnMut() -> Result<(), String>|
     -> Result<(), String> {
        let before = w.cross_host_sends();
        f()?;
        let after = w.cross_host_sends();
        deltas.extend([after.0 - before.0, after.1 - before.1]);
        expect.push(Expect {
            what,
            hierarchical,
            msgs,
            bytes,
        });
        Ok(())
    };
    // Barriers: a dissemination among the leaders, nothing else crosses.
    let leaders_barrier = Some(h * rounds(h));
    measure(
        "barrier".into(),
        leaders_barrier,
        Some(0),
        true,
        &mut || e(w.barrier()),
    )?;
    measure(
        "ibarrier".into(),
        leaders_barrier,
        Some(0),
        true,
        &mut || e(e(w.ibarrier())?.wait()),
    )?;
    // Broadcasts from a leader and from a non-leader, tree and chain sizes.
    let byte = |root: u32, i: usize| (i as u32 * 7 + root * 31) as u8;
    for (len, root) in [
        (1000usize, 0u32),
        (1000, n - 1),
        (100_000, n - 1),
        (5000, n / 2),
    ] {
        let bytes = Some((h - 1) * len as u64);
        // The leaders' pipelined chain (past 16 KiB, more than 2 hosts) sends the
        // root's length ahead of the chunks, 8 bytes.
        let header = if len > 16 << 10 && h > 2 { 8 } else { 0 };
        let mut b: Vec<u8> = (0..len)
            .map(|i| if me == root { byte(root, i) } else { 0 })
            .collect();
        measure(
            format!("bcast of {len} from {root}"),
            None,
            Some((h - 1) * (len as u64 + header)),
            true,
            &mut || e(w.bcast(&mut b, root)),
        )?;
        check(
            b.iter().enumerate().all(|(i, &x)| x == byte(root, i)),
            || format!("bcast of {len} from {root}"),
        )?;
        let b: Vec<u8> = (0..len)
            .map(|i| if me == root { byte(root, i) } else { 1 })
            .collect();
        let mut got = Vec::new();
        measure(
            format!("ibcast of {len} from {root}"),
            None,
            bytes,
            true,
            &mut || {
                got = e(e(w.ibcast(b.clone(), root))?.wait())?;
                Ok(())
            },
        )?;
        check(
            got.iter().enumerate().all(|(i, &x)| x == byte(root, i)),
            || format!("ibcast of {len} from {root}"),
        )?;
    }
    // Allreduce: element i of rank r is (r + 1) * (i + 1), so the sum is
    // (i + 1) * n (n + 1) / 2.
    let tri = u64::from(n) * u64::from(n + 1) / 2;
    for len in [100usize, 20_000] {
        let mine: Vec<u64> = (0..len as u64)
            .map(|i| u64::from(me + 1) * (i + 1))
            .collect();
        let (m, b) = leaders_allreduce(h, len as u64, 8 * len as u64);
        let mut out = vec![0u64; len];
        measure(
            format!("allreduce of {len}"),
            Some(m),
            Some(b),
            true,
            &mut || e(w.allreduce(&mine, &mut out, &Op::Sum)),
        )?;
        check(
            out.iter()
                .enumerate()
                .all(|(i, &x)| x == (i as u64 + 1) * tri),
            || format!("allreduce of {len}"),
        )?;
        measure(
            format!("iallreduce of {len}"),
            Some(m),
            Some(b),
            true,
            &mut || {
                out = e(e(w.iallreduce(mine.clone(), Op::Sum))?.wait())?;
                Ok(())
            },
        )?;
        check(
            out.iter()
                .enumerate()
                .all(|(i, &x)| x == (i as u64 + 1) * tri),
            || format!("iallreduce of {len}"),
        )?;
    }
    // A non-commutative operator takes the flat path (documented): the statistic sees
    // non-leaders cross hosts.
    let user = Op::user(affine, false);
    let mut ao = vec![0u64; 50];
    measure(
        "non-commutative allreduce".into(),
        None,
        None,
        false,
        &mut || e(w.allreduce(&affine_input(me, 50), &mut ao, &user)),
    )?;
    check(ao == fold(n, |r| affine_input(r, 50), affine), || {
        "non-commutative allreduce".into()
    })?;
    // Everyone's figures, measured before this allgather.
    let k = deltas.len();
    let mut all = vec![0u64; k * n as usize];
    e(w.allgather(&deltas, &mut all))?;
    let leader = |r: usize| (r as u64) < h;
    let mut wrong = Vec::new();
    for (j, x) in expect.iter().enumerate() {
        let of = |r: usize| (all[r * k + 2 * j], all[r * k + 2 * j + 1]);
        let total = (0..n as usize).fold((0, 0), |(m, b), r| (m + of(r).0, b + of(r).1));
        let outside = (0..n as usize)
            .filter(|&r| !leader(r))
            .map(|r| of(r).0)
            .sum::<u64>();
        let figures = (0..n as usize)
            .map(|r| format!("{:?}", of(r)))
            .collect::<Vec<_>>()
            .join(" ");
        if x.hierarchical && outside != 0 {
            wrong.push(format!(
                "{}: ranks that lead no host sent across hosts",
                x.what
            ));
        }
        if !x.hierarchical && outside == 0 {
            wrong.push(format!("{}: the flat path crossed no host", x.what));
        }
        if x.msgs.is_some_and(|m| m != total.0) {
            wrong.push(format!(
                "{}: {} messages crossed hosts, want {:?}",
                x.what, total.0, x.msgs
            ));
        }
        if x.bytes.is_some_and(|b| b != total.1) {
            wrong.push(format!(
                "{}: {} bytes crossed hosts, want {:?}",
                x.what, total.1, x.bytes
            ));
        }
        if wrong.last().is_some_and(|l| l.starts_with(&x.what)) {
            wrong.push(format!("  (messages, bytes) by rank: {figures}"));
        }
    }
    check(wrong.is_empty(), || {
        format!("{n} ranks on {h} hosts:\n{}", wrong.join("\n"))
    })
}

/// docs/messaging.md: "Across hosts, barrier, bcast and allreduce go in three phases
/// (within each host, between host leaders, back within each host), so each host's data
/// crosses the network once." Proved by what each rank sent across hosts, with 3 to 7
/// ranks on 2 and 3 hosts (non-powers of two both).
#[test]
fn hierarchical_collectives_cross_hosts_once() {
    rank_main(|_| hierarchy_role());
    for (n, hosts) in [(3u32, "2"), (4, "2"), (5, "3"), (7, "3")] {
        let o = launch(
            n,
            "hierarchical_collectives_cross_hosts_once",
            "x",
            &[("SPOOLS_TEST_HOSTS", hosts)],
        );
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("hierarchy ok").count(),
            n as usize,
            "{n} ranks on {hosts} hosts: {}",
            o.stdout
        );
    }
}

/// One round of a barrier whose last rank to arrive is `late`, decided by files the
/// ranks write (never by the clock): `late` enters only once every other rank has said
/// (file `in-R`) that it is entering, then gives them a while to leave (file `out-R`)
/// wrongly before it enters itself (that time only makes the check more or less
/// searching, it cannot change its outcome); every other rank, once out, checks that
/// `late` had entered. With the non-blocking form, the others also check that their
/// barrier is not complete before they say they entered (`late` cannot have entered
/// yet), and that it is once out.
fn barrier_round(
    c: &Communicator,
    dir: &Path,
    round: u32,
    late: u32,
    nonblocking: bool,
) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let file = |what: &str, r: u32| dir.join(format!("{round}-{what}-{r}"));
    let limit = Duration::from_secs(60);
    let enter = |c: &Communicator| -> Result<(), String> {
        if nonblocking {
            e(e(c.ibarrier())?.wait())
        } else {
            e(c.barrier())
        }
    };
    if me == late {
        for r in (0..n).filter(|&r| r != me) {
            wait_for_file(&file("in", r), limit)?;
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(100) {
            if let Some(r) = (0..n).find(|&r| file("out", r).exists()) {
                return Err(format!(
                    "round {round}: rank {r} left the barrier before rank {late} entered it"
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        signal_file(&file("in", me), b"")?;
        enter(c)?;
    } else if nonblocking {
        let r = e(c.ibarrier())?;
        check(!r.is_complete(), || {
            format!("round {round}: ibarrier complete before rank {late} entered")
        })?;
        signal_file(&file("in", me), b"")?;
        e(r.wait())?;
    } else {
        signal_file(&file("in", me), b"")?;
        enter(c)?;
    }
    signal_file(&file("out", me), b"")?;
    check(file("in", late).exists(), || {
        format!("round {round}: rank {me} left the barrier before rank {late} entered it")
    })
}

fn barrier_role() -> Result<(), String> {
    play_hosts();
    let dir = std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let w = e(spools::init())?;
    checked(&w, |w| {
        let n = w.size();
        for (i, nonblocking) in [false, true].into_iter().enumerate() {
            for late in 0..n {
                barrier_round(w, &dir, i as u32 * n + late, late, nonblocking)?;
            }
        }
        Ok(())
    });
    println!("barrier ok rank {}", w.rank());
    e(w.finalize())
}

/// Barrier and ibarrier hold every rank until the last one arrives, whichever rank is
/// last, with 2, 3 and 4 ranks, and across hosts (the three-phase path, with a last
/// rank that leads its host and one that does not).
#[test]
fn barriers_hold_every_rank_until_the_last_arrives() {
    rank_main(|_| barrier_role());
    for (n, hosts) in [(2u32, "1"), (3, "1"), (4, "1"), (4, "2"), (5, "3")] {
        let dir = tempdir("coll-barrier");
        let o = launch(
            n,
            "barriers_hold_every_rank_until_the_last_arrives",
            "x",
            &[
                ("SPOOLS_TEST_HOSTS", hosts),
                ("SPOOLS_TEST_DIR", dir.to_str().unwrap()),
            ],
        );
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("barrier ok").count(),
            n as usize,
            "{n} ranks on {hosts} hosts: {}",
            o.stdout
        );
    }
}
