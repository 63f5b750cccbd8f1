//! Erroneous programs whose ranks pass a collective lengths on both sides of
//! `coll_sm_limit`: some ranks take the shared segment, the others the messages. Every
//! rank that waits for the others must get `MsgError::Mismatch` (never wait forever), and
//! the job must end: blocking and non-blocking broadcast, reduce, allreduce, gather and
//! scatter, blocking allgather(v), alltoall(v), gatherv, scatterv, scan and exscan, with 2 to
//! 6 ranks (oversubscribed beyond 2), scans by recursive doubling at 5 to 17, lengths past `eager_limit` too, with and without
//! the progress thread, with the disagreement at a communicator's first
//! collective (the segment is set up in it) or later, within one host and across two
//! ("hosts" played with `SPOOLS_HOST_ID`), past `eager_limit` across the two hosts (where
//! ranks' lengths choose different algorithms), the pipelined chain broadcast with a
//! member short or long by a whole chunk; and ranks whose `coll_sm_limit`s differ, which
//! all go through the messages and succeed. A rank whose part completes without waiting
//! for the others (a broadcast's root, a reduce's contributor on either path, a
//! rank that agrees with the broadcast's root) may succeed, as with messages. Afterwards
//! the communicator's collectives are not to be used (documented); a communicator made
//! before works on. And a non-blocking scan that fails on a member while a collective
//! before it is still in flight there: the collectives started after it still post and
//! end once that one finishes; and a scan member whose left neighbour failed the scan and
//! posted a later collective since: it fails, and never takes the slot's older part.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use spools::{MsgError, Op};
use spools_testkit::{e, launch, rank_main, signal_file, tempdir, wait_for_file};

/// Bytes of the two sides: under and over the default limit (4 KiB; the long side may be
/// set with `SPOOLS_TEST_LARGE`).
const SMALL: usize = 496;
const LARGE: usize = 5000;
const BCAST_SMALL: usize = 100;
const BCAST_LARGE: usize = 8000;

fn env_list(name: &str) -> Vec<u32> {
    std::env::var(name)
        .unwrap()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

/// A non-commutative operator (every step combines a lower part with a higher one).
fn ordered() -> Op<i64> {
    Op::user_slice(
        |acc: &mut [i64], other: &[i64], _| {
            for (a, b) in acc.iter_mut().zip(other) {
                *a = a.wrapping_mul(3).wrapping_add(*b);
            }
        },
        false,
    )
}

fn role() -> Result<(), String> {
    let hosts: u32 = std::env::var("SPOOLS_TEST_HOSTS").map_or(1, |h| h.parse().unwrap());
    let rank: u32 = std::env::var("SPOOLS_RANK").unwrap().parse().unwrap();
    if hosts > 1 {
        std::env::set_var("SPOOLS_HOST_ID", format!("h{}", rank % hosts));
    }
    // Each rank's own `coll_sm_limit`, when the ranks' differ.
    if let Ok(limits) = std::env::var("SPOOLS_TEST_LIMITS") {
        let limit = limits.split(',').nth(rank as usize).unwrap().to_string();
        std::env::set_var("SPOOLS_COLL_SM_LIMIT", limit);
    }
    let what = std::env::var("SPOOLS_TEST_COLL").unwrap();
    let small = env_list("SPOOLS_TEST_SMALL");
    let first = std::env::var("SPOOLS_TEST_FIRST").is_ok_and(|v| v == "1");
    let world = e(spools::init())?;
    let (me, n) = (world.rank(), world.size());
    // The communicator of the erroneous collective (fresh: its segment is not set up),
    // and one made before it, which must work on afterwards.
    let w = e(world.dup())?;
    let d = e(world.dup())?;
    if !first {
        // Sets the segment up (non-blocking collectives never do).
        let mut out = [0u64];
        e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
        if out != [u64::from(n)] {
            return Err(format!("rank {me}: warm-up allreduce gave {out:?}"));
        }
    }
    let large = std::env::var("SPOOLS_TEST_LARGE").map_or(LARGE, |l| l.parse().unwrap());
    let is_small = small.contains(&me);
    let elems = if is_small { SMALL / 8 } else { large / 8 };
    let blen = if is_small { BCAST_SMALL } else { BCAST_LARGE };
    let mine: Vec<i64> = (0..elems).map(|i| i as i64 + i64::from(me)).collect();
    let r: Result<(), MsgError> = match what.as_str() {
        "allreduce" => {
            let mut out = vec![0i64; elems];
            w.allreduce(&mine, &mut out, &Op::Sum)
        }
        "reduce" => {
            let mut out = vec![0i64; elems];
            w.reduce(&mine, &mut out, &Op::Sum, 0)
        }
        "bcast" => {
            let mut b = vec![7u8; blen];
            w.bcast(&mut b, 0)
        }
        // From rank 2: across two hosts, not its host's leader.
        "bcast2" => {
            let mut b = vec![7u8; blen];
            w.bcast(&mut b, 2)
        }
        // Past the tree (the pipelined chain, in chunks of `eager_limit`): the short
        // side is the long one less a chunk. A member that agrees with the root checks
        // what it got.
        "bcast_chain" | "bcast_tiny" => {
            let chunk = 32 << 10;
            let len = match (is_small, what.as_str()) {
                (false, _) => 3 * chunk,
                (true, "bcast_chain") => 2 * chunk,
                // As long as the chain's length header: this rank's tree parent is its
                // chain predecessor.
                (true, _) => 8,
            };
            let fill = |b: &mut [u8]| {
                b.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = (i % 251) as u8)
            };
            let mut b = vec![0u8; len];
            if me == 0 {
                fill(&mut b);
            }
            let r = w.bcast(&mut b, 0);
            let mut want = vec![0u8; len];
            fill(&mut want);
            if r.is_ok() && b != want {
                return Err(format!(
                    "rank {me}: bcast_chain returned Ok with other data"
                ));
            }
            r
        }
        // A non-commutative operator: an ordered reduce to member 0, then to the root
        // (3); and then a scatter, for the reduce-scatter.
        "reduce_nc" => {
            let mut out = vec![0i64; elems];
            w.reduce(&mine, &mut out, &ordered(), 3)
        }
        "reduce_scatter_nc" => {
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            let mut out = vec![0i64; elems];
            w.reduce_scatter(&send, &mut out, &vec![elems; n as usize], &ordered())
        }
        "allgather" => {
            let mut out = vec![0i64; elems * n as usize];
            w.allgather(&mine, &mut out)
        }
        "alltoall" => {
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            let mut out = vec![0i64; send.len()];
            w.alltoall(&send, &mut out)
        }
        "gather" => {
            let mut out = vec![0i64; if me == 0 { elems * n as usize } else { 0 }];
            w.gather(&mine, &mut out, 0)
        }
        "scatter" => {
            let send: Vec<i64> = if me == 0 {
                (0..n as usize).flat_map(|_| mine.iter().copied()).collect()
            } else {
                Vec::new()
            };
            let mut out = vec![0i64; elems];
            w.scatter(&send, &mut out, 0)
        }
        "scan" => {
            let mut out = vec![0i64; elems];
            w.scan(&mine, &mut out, &Op::Sum)
        }
        "igather" => w.igather(mine, 0).and_then(|r| r.wait()).map(|_| ()),
        "iscatter" => {
            let send: Vec<i64> = if me == 0 {
                (0..n as usize).flat_map(|_| mine.iter().copied()).collect()
            } else {
                Vec::new()
            };
            w.iscatter(send, elems, 0)
                .and_then(|r| r.wait())
                .map(|_| ())
        }
        "reduce_scatter" => {
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            let mut out = vec![0i64; elems];
            w.reduce_scatter(&send, &mut out, &vec![elems; n as usize], &Op::Sum)
        }
        "ireduce_scatter" => {
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            w.ireduce_scatter(send, vec![elems; n as usize], Op::Sum)
                .and_then(|r| r.wait())
                .map(|_| ())
        }
        "allgatherv" => {
            // This rank's counts say every rank passes as many elements as it does.
            let counts = vec![elems; n as usize];
            let mut out = vec![0i64; elems * n as usize];
            w.allgatherv(&mine, &mut out, &counts)
        }
        // The v forms, whose counts say every rank passes as many elements as this one
        // (the root's say so at the root): every member takes the segment whatever its
        // count, and a part, block or package that does not fit a slot goes by messages.
        "gatherv" => {
            let counts = vec![elems; n as usize];
            let mut out = vec![0i64; if me == 0 { elems * n as usize } else { 0 }];
            w.gatherv(&mine, &mut out, &counts, 0)
        }
        "scatterv" => {
            let counts = vec![elems; n as usize];
            let whole: Vec<i64> = if me == 0 {
                (0..n as usize).flat_map(|_| mine.iter().copied()).collect()
            } else {
                Vec::new()
            };
            let mut out = vec![0i64; elems];
            w.scatterv(&whole, &counts, &mut out, 0)
        }
        "alltoallv" => {
            let counts = vec![elems; n as usize];
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            let mut out = vec![0i64; elems * n as usize];
            w.alltoallv(&send, &counts, &mut out, &counts)
        }
        // Their non-blocking forms, the same way.
        "igatherv" => {
            let counts = vec![elems; n as usize];
            w.igatherv(mine, &counts, 0)
                .and_then(|r| r.wait())
                .map(|_| ())
        }
        "iscatterv" => {
            let counts = vec![elems; n as usize];
            let whole: Vec<i64> = if me == 0 {
                (0..n as usize).flat_map(|_| mine.iter().copied()).collect()
            } else {
                Vec::new()
            };
            w.iscatterv(whole, &counts, 0)
                .and_then(|r| r.wait())
                .map(|_| ())
        }
        "ialltoallv" => {
            let counts = vec![elems; n as usize];
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            w.ialltoallv(send, &counts, &counts)
                .and_then(|r| r.wait())
                .map(|_| ())
        }
        "iscan" => w.iscan(mine, Op::Sum).and_then(|r| r.wait()).map(|_| ()),
        "iexscan" => w.iexscan(mine, Op::Sum).and_then(|r| r.wait()).map(|_| ()),
        "exscan" => {
            let mut out = vec![0i64; elems];
            w.exscan(&mine, &mut out, &Op::Sum)
        }
        "iallgather" => w.iallgather(mine).and_then(|r| r.wait()).map(|_| ()),
        "ialltoall" => {
            let send: Vec<i64> = (0..n as usize).flat_map(|_| mine.iter().copied()).collect();
            w.ialltoall(send).and_then(|r| r.wait()).map(|_| ())
        }
        "iallreduce" => w
            .iallreduce(mine, Op::Sum)
            .and_then(|r| r.wait())
            .map(|_| ()),
        "ireduce" => w
            .ireduce(mine, Op::Sum, 0)
            .and_then(|r| r.wait())
            .map(|_| ()),
        "ibcast" => w
            .ibcast(vec![7u8; blen], 0)
            .and_then(|r| r.wait())
            .map(|_| ()),
        _ => return Err(format!("unknown collective {what}")),
    };
    if std::env::var("SPOOLS_TEST_LIMITS").is_ok() {
        // Limits that differ: the segment is off, everything goes through the messages.
        e(r)?;
        let through = w.shared_memory_collectives();
        if through != 0 {
            return Err(format!(
                "rank {me}: {through} collectives through shared memory"
            ));
        }
        println!("rank {me} {what} ok");
        println!("rank {me} done");
        drop((w, d));
        return e(world.finalize());
    }
    match r {
        Ok(()) => println!("rank {me} {what} ok"),
        // The error names the collective (its schedule of messages too).
        Err(MsgError::Mismatch {
            op: "non-blocking collective",
            ..
        }) => {
            return Err(format!(
                "rank {me} {what}: a mismatch that does not name it"
            ))
        }
        Err(err @ MsgError::Mismatch { .. }) => println!("rank {me} {what} mismatch: {err}"),
        Err(err) => return Err(format!("rank {me} {what}: not a mismatch: {err}")),
    }
    // The communicator made before works on.
    let mut out = [0u64];
    e(d.allreduce(&[u64::from(me)], &mut out, &Op::Sum))?;
    if out != [u64::from(n * (n - 1) / 2)] {
        return Err(format!("rank {me}: allreduce on the dup gave {out:?}"));
    }
    println!("rank {me} done");
    drop((w, d));
    e(world.finalize())
}

/// One erroneous job: `n` ranks, `small` pass the short length, the others the long one;
/// every rank of `must_fail` must print a mismatch, every other rank a mismatch or
/// success, and every rank must end.
fn case(n: u32, what: &str, small: &[u32], must_fail: &[u32], env: &[(&str, &str)]) {
    let list: Vec<String> = small.iter().map(u32::to_string).collect();
    let list = list.join(",");
    let mut all = vec![
        ("SPOOLS_TEST_COLL", what),
        ("SPOOLS_TEST_SMALL", list.as_str()),
    ];
    all.extend_from_slice(env);
    let o = launch(
        n,
        "ranks_split_over_the_segment_and_the_messages_get_mismatch",
        "x",
        &all,
    );
    let ctx = format!("{n} ranks, {what}, small {small:?}, {env:?}: {o:?}");
    assert_eq!(o.code(), Some(0), "{ctx}");
    for r in 0..n {
        let failed = o.stdout.lines().any(|l| {
            l.starts_with(&format!("rank {r} {what} mismatch: ")) && l.contains("ranks disagree")
        });
        let ok = o.stdout.lines().any(|l| l == format!("rank {r} {what} ok"));
        assert!(failed != ok, "rank {r}: {ctx}");
        if must_fail.contains(&r) {
            assert!(failed, "rank {r} must fail: {ctx}");
        }
        assert!(
            o.stdout.lines().any(|l| l == format!("rank {r} done")),
            "rank {r}: {ctx}"
        );
    }
}

/// Ranks that pass lengths on both sides of the limit fail with `Mismatch` instead of
/// waiting forever: each rank prints its outcome, the test checks every rank that waits
/// for the others got the error, and that the job ended.
#[test]
fn ranks_split_over_the_segment_and_the_messages_get_mismatch() {
    rank_main(|_| role());
    let first = [("SPOOLS_TEST_FIRST", "1")];
    let later = [("SPOOLS_TEST_FIRST", "0")];
    let two_hosts = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_HOSTS", "2")];
    // Allreduce: every rank waits for everyone, so every rank fails.
    for env in [&first[..], &later[..]] {
        case(2, "allreduce", &[0], &[0, 1], env);
        case(3, "allreduce", &[1], &[0, 1, 2], env);
        case(4, "allreduce", &[0, 3], &[0, 1, 2, 3], env);
    }
    case(4, "allreduce", &[0], &[0, 1, 2, 3], &two_hosts);
    // Beyond 4 members a fan-in to member 0 and a fan-out (oversubscribed).
    case(6, "allreduce", &[0, 3], &[0, 1, 2, 3, 4, 5], &later);
    case(6, "reduce", &[5], &[0, 4], &later);
    case(6, "bcast", &[3], &[3], &later);
    // Reduce to rank 0: the root fails; a contributor returns once its part is posted,
    // on the segment as on the messages' path, and may succeed.
    for env in [&first[..], &later[..]] {
        case(2, "reduce", &[1], &[0], env);
        case(3, "reduce", &[0], &[0], env);
        case(4, "reduce", &[2, 3], &[0], env);
    }
    // Both lengths under the limit, 9 members: barrier, reduce and allreduce gather over
    // a tree of groups of 4, whose leader finds the disagreement and passes it to the
    // root. Allreduce: every rank fails. Reduce to 0: the root and the leader of the
    // group that disagreed (4) fail; a disagreement in the root's own group, the root.
    let inside = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_LARGE", "400")];
    let all9: Vec<u32> = (0..9).collect();
    case(9, "allreduce", &[5], &all9, &inside);
    case(9, "reduce", &[5], &[0, 4], &inside);
    case(9, "reduce", &[2], &[0], &inside);
    // Allgather and alltoall (through the segment, flat, within one host): every
    // rank waits for everyone's part, so every rank fails.
    for env in [&first[..], &later[..]] {
        case(3, "allgather", &[0], &[0, 1, 2], env);
        case(4, "alltoall", &[1, 2], &[0, 1, 2, 3], env);
    }
    case(4, "allgather", &[0, 3], &[0, 1, 2, 3], &later);
    case(2, "allgather", &[1], &[0, 1], &later);
    case(2, "alltoall", &[0], &[0, 1], &first);
    case(2, "bcast", &[1], &[1], &later);
    case(3, "alltoall", &[2], &[0, 1, 2], &later);
    // Gather to rank 0 (through the segment within one host): the root fails; a
    // contributor returns once posted and may succeed. Scatter from rank 0 (the
    // segment takes it by all its bytes): every rank whose length differs from the
    // root's fails.
    for env in [&first[..], &later[..]] {
        case(3, "gather", &[1], &[0], env);
        case(3, "gather", &[0], &[0], env);
        case(3, "scatter", &[0], &[1, 2], env);
        case(3, "scatter", &[1, 2], &[1, 2], env);
    }
    case(9, "gather", &[5], &[0], &inside);
    // The v forms through the segment, with parts on both sides of a slot: the root of a
    // gatherv fails (a contributor whose part went by messages does not wait for it
    // forever: the root leaves the collective, which drops its message and releases
    // it), a scatterv's members whose
    // count differs from the root's fail, and an alltoallv's receivers of a block of
    // another length (here every rank).
    // Their non-blocking forms alike (on the segment once the blocking collectives set
    // it up; before, by the messages), the blocks that do not fit moved by messages
    // after the step on the segment.
    let past_eager = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_LARGE", "200000")];
    for (gatherv, scatterv, alltoallv) in [
        ("gatherv", "scatterv", "alltoallv"),
        ("igatherv", "iscatterv", "ialltoallv"),
    ] {
        for env in [&first[..], &later[..], &past_eager[..]] {
            case(3, gatherv, &[1], &[0], env);
            case(3, gatherv, &[0], &[0], env);
            case(3, scatterv, &[0], &[1, 2], env);
            case(3, scatterv, &[1, 2], &[1, 2], env);
            case(3, alltoallv, &[2], &[0, 1, 2], env);
        }
        case(2, alltoallv, &[0], &[0, 1], &later);
        case(4, gatherv, &[2, 3], &[0], &inside);
        case(4, scatterv, &[3], &[3], &inside);
        case(4, alltoallv, &[1], &[0, 1, 2, 3], &inside);
    }
    // Scan (a chain within one host: a member waits for its left neighbour's post): the
    // member that finds the disagreement and every member after it fail; rank 0 waits
    // for nobody on the segment and may succeed.
    for env in [&first[..], &later[..]] {
        case(3, "scan", &[0], &[1, 2], env);
        case(4, "scan", &[1, 3], &[1, 2, 3], env);
    }
    case(5, "scan", &[2], &[2, 3, 4], &inside);
    case(5, "scan", &[0], &[1, 2, 3, 4], &inside);
    case(3, "exscan", &[0], &[1, 2], &later);
    case(4, "exscan", &[3], &[3], &inside);
    case(4, "exscan", &[1], &[1, 2, 3], &inside);
    // Scans by recursive doubling (among 16 members with a CPU each, or as set here: a
    // member reads member m - 2^k's post in round k): the member that differs, and every
    // member after it (each reads it, or one that failed and never posts its later
    // rounds), fail. Rank 0 alone on the segment goes through every round without
    // waiting: the ranks on the messages find its posts at any of the scan's sequence
    // numbers.
    let from = |r: u32, n: u32| (r..n).collect::<Vec<u32>>();
    let doubling = ("SPOOLS_COLL_SM_SCAN", "doubling");
    let d_inside = [inside[0], inside[1], doubling];
    let d_later = [later[0], doubling];
    let d_first = [first[0], doubling];
    case(6, "scan", &[2], &from(2, 6), &d_inside);
    case(9, "exscan", &[5], &from(5, 9), &d_inside);
    case(17, "iscan", &[6], &from(6, 17), &d_inside);
    case(16, "scan", &[0], &[1], &d_later);
    case(5, "iscan", &[0], &[1], &d_later);
    case(6, "scan", &[5], &[5], &d_first);
    case(9, "exscan", &[8], &[8], &d_later);
    // Scans as a chain of messages (where ranks outnumber CPUs, or as set here): the
    // member that takes a part of another length fails and sends an empty one on, so
    // every member after it fails too (where their parts are not empty themselves).
    let msgs = ("SPOOLS_COLL_SM_SCAN", "messages");
    let m_later = [later[0], msgs];
    case(4, "scan", &[1], &[1, 2, 3], &m_later);
    case(5, "exscan", &[0], &[1, 2, 3, 4], &m_later);
    case(5, "iscan", &[2], &[2, 3, 4], &m_later);
    case(4, "iexscan", &[3], &[3], &m_later);
    case(3, "scan", &[0], &[1, 2], &[first[0], msgs]);
    // Reduce-scatter (flat within one host, by all its bytes): every rank fails.
    for env in [&first[..], &later[..]] {
        case(3, "reduce_scatter", &[0], &[0, 1, 2], env);
    }
    case(4, "reduce_scatter", &[1, 2], &[0, 1, 2, 3], &inside);
    case(4, "scatter", &[0, 1], &[2, 3], &inside);
    // Broadcast from rank 0: every rank
    // whose length differs from the root's fails.
    for env in [&first[..], &later[..]] {
        case(3, "bcast", &[0], &[1, 2], env);
        case(3, "bcast", &[1, 2], &[1, 2], env);
        case(4, "bcast", &[0, 1], &[2, 3], env);
    }
    case(6, "bcast", &[0], &[1, 2, 3, 4, 5], &two_hosts);
    // Longer than `eager_limit` (32 KiB): the messages' side waits in rendezvous sends
    // to ranks that took the segment.
    let rendezvous = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_LARGE", "40000")];
    case(2, "allreduce", &[1], &[0, 1], &rendezvous);
    case(3, "reduce", &[0], &[0], &rendezvous);
    // `coll_sm_limit`s that differ (a length between them would split the ranks): the
    // segment is off on that communicator, every rank uses the messages and succeeds.
    for (n, what, limits) in [
        (3, "allreduce", "64,4096,4096"),
        (3, "bcast", "4096,64,4096"),
        (2, "reduce", "4096,128"),
        (3, "allreduce", "4096,4096,0"),
    ] {
        let all: Vec<u32> = (0..n).collect();
        let env = [("SPOOLS_TEST_FIRST", "1"), ("SPOOLS_TEST_LIMITS", limits)];
        case(n, what, &all, &[], &env);
    }
    // Non-blocking, on a segment set up before.
    case(2, "iallreduce", &[1], &[0, 1], &later);
    case(4, "iallreduce", &[0, 2], &[0, 1, 2, 3], &later);
    case(3, "ireduce", &[0], &[0], &later);
    case(3, "ibcast", &[0], &[1, 2], &later);
    case(3, "igather", &[1], &[0], &later);
    case(3, "igather", &[0], &[0], &later);
    case(3, "iscatter", &[0], &[1, 2], &later);
    case(3, "iscatter", &[1, 2], &[1, 2], &later);
    // Flat: every member reads every part, so every rank fails.
    case(4, "iallgather", &[0, 3], &[0, 1, 2, 3], &later);
    case(3, "iallgather", &[1], &[0, 1, 2], &inside);
    case(3, "ialltoall", &[2], &[0, 1, 2], &later);
    case(2, "ialltoall", &[0], &[0, 1], &inside);
    case(3, "iscan", &[1], &[1, 2], &later);
    // A chain on the segment: the members before the disagreement wait for nobody after it.
    case(3, "iscan", &[0], &[1, 2], &inside);
    case(4, "iscan", &[2], &[2, 3], &inside);
    case(3, "ireduce_scatter", &[2], &[0, 1, 2], &later);
    case(2, "ireduce_scatter", &[0], &[0, 1], &inside);
    // With the progress thread, which advances schedules (never a wait's checks).
    let progress = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_PROGRESS_THREAD", "1")];
    case(3, "iallreduce", &[0], &[0, 1, 2], &progress);
    case(3, "allreduce", &[2], &[0, 1, 2], &progress);
    case(4, "ibcast", &[1, 2, 3], &[1, 2, 3], &later);
    // Across two hosts, on the messages: a rank that finds the ranks disagree keeps its
    // part of the ring, the pairwise exchange, the doubling or the tree, sending empty
    // blocks, so that the ranks after it fail too instead of waiting; every rank ends.
    // Allgatherv (this rank's counts say every rank passes its own length): on one host
    // every member reads every part.
    case(3, "allgatherv", &[1], &[0, 1, 2], &later);
    case(4, "allgatherv", &[0], &[0, 1, 2, 3], &two_hosts);
    for small in [0, 3] {
        for what in [
            "allgatherv",
            "alltoall",
            "scan",
            "exscan",
            "iallgather",
            "iallreduce",
            "ialltoall",
        ] {
            case(5, what, &[small], &[], &two_hosts);
        }
    }
    // Lengths past `eager_limit` across two hosts: a rank that leaves the collective
    // drops the messages that still come for it (a rank that chose another algorithm for
    // its length waits in a rendezvous send to it otherwise), and the hosts' leaders
    // go on to the broadcast within their hosts, which carries nothing.
    let big = [
        ("SPOOLS_TEST_FIRST", "0"),
        ("SPOOLS_TEST_HOSTS", "2"),
        ("SPOOLS_TEST_LARGE", "200000"),
    ];
    for what in ["gather", "alltoall", "allgatherv", "igather"] {
        case(5, what, &[0], &[], &big);
    }
    case(5, "gather", &[3], &[0], &big);
    // Allreduce: every rank waits for everyone, so every rank fails. With the short
    // rank not its host's leader, the leader, which runs the messages, finds it through
    // the segment and goes on, with empty blocks, with the other host's leader (whose
    // steps are not watched on this host's segment) and with its own host's broadcast.
    let all5: Vec<u32> = (0..5).collect();
    for small in [0, 1, 3] {
        case(5, "allreduce", &[small], &all5, &big);
    }
    // Non-blocking past `eager_limit` across two hosts: a peer whose block had another
    // length, or whose message no later step of this rank receives (its length chose
    // another plan: doubling or ring among the leaders), is gone, and no later step
    // waits for it. Each rank that waits for another's part fails.
    for small in [0, 1, 3] {
        for what in ["iallreduce", "iallgather", "ialltoall", "ireduce_scatter"] {
            case(5, what, &[small], &all5, &big);
        }
    }
    case(5, "ireduce", &[3], &[0], &big);
    case(5, "ibcast", &[0], &[1, 2, 3, 4], &big);
    case(5, "ibcast", &[3], &[3], &big);
    case(5, "iscatter", &[0], &[1, 2, 3, 4], &big);
    case(5, "iscan", &[1], &[1, 2, 3, 4], &big);
    // The phases go on after a disagreement: a broadcast's root that is not its host's
    // leader (the leader finds it), and a non-commutative operator's ordered reduce and
    // reduce-scatter (member 0 finds it and still hands on, with nothing).
    // The pipelined chain: a member whose length is the root's short by a chunk, or
    // long by one (the root short), fails (and may take the members after it along); one
    // that returns `Ok` has the root's data.
    for env in [&later[..], &two_hosts[..]] {
        case(4, "bcast_chain", &[1], &[1], env);
        case(4, "bcast_chain", &[3], &[3], env);
        case(4, "bcast_chain", &[0], &[1, 2, 3], env);
        case(5, "bcast_chain", &[2, 3], &[2, 3], env);
    }
    // A member whose length chose the binomial tree where the others chose the chain,
    // with the segment off (so every rank takes the messages), rendezvous chunks too.
    let no_segment = [("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_COLL_SM_LIMIT", "0")];
    let small_eager = [
        ("SPOOLS_TEST_FIRST", "0"),
        ("SPOOLS_COLL_SM_LIMIT", "0"),
        ("SPOOLS_EAGER_LIMIT", "4096"),
    ];
    for env in [&no_segment[..], &small_eager[..]] {
        case(4, "bcast_tiny", &[3], &[3], env);
        case(4, "bcast_tiny", &[1], &[1], env);
        case(4, "bcast_chain", &[1], &[1], env);
    }
    for env in [&two_hosts[..], &big[..]] {
        case(5, "bcast2", &[0], &[0, 1, 3], env);
        case(5, "reduce_nc", &[1], &[3], env);
        case(5, "reduce_scatter_nc", &[1], &all5, env);
    }
}

/// One job, named by `COLL_MISMATCH_CASE` ("ranks what small-list env-name
/// [must-fail-list]", e.g. `5 iallreduce 0 big 0,1,2,3,4`), for looking into one shape:
/// `cargo test -p spools-msg --test coll_mismatch one_case -- --ignored`. The job must
/// end, and the ranks listed must fail.
#[test]
#[ignore = "run by hand, with COLL_MISMATCH_CASE"]
fn one_case() {
    rank_main(|_| role());
    let spec = std::env::var("COLL_MISMATCH_CASE").expect("COLL_MISMATCH_CASE");
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (&[n, what, small, env], must) = words.split_at(4) else {
        panic!("COLL_MISMATCH_CASE: ranks what small env [must-fail]");
    };
    let list = |l: &str| -> Vec<u32> { l.split(',').map(|s| s.parse().unwrap()).collect() };
    let n: u32 = n.parse().unwrap();
    let (small, must_fail) = (list(small), must.first().map_or(Vec::new(), |m| list(m)));
    let env: &[(&str, &str)] = match env {
        "later" => &[("SPOOLS_TEST_FIRST", "0")],
        "two_hosts" => &[("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_HOSTS", "2")],
        "big" => &[
            ("SPOOLS_TEST_FIRST", "0"),
            ("SPOOLS_TEST_HOSTS", "2"),
            ("SPOOLS_TEST_LARGE", "200000"),
        ],
        "rendezvous" => &[("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_LARGE", "40000")],
        "inside" => &[("SPOOLS_TEST_FIRST", "0"), ("SPOOLS_TEST_LARGE", "400")],
        "small_eager" => &[
            ("SPOOLS_TEST_FIRST", "0"),
            ("SPOOLS_COLL_SM_LIMIT", "0"),
            ("SPOOLS_EAGER_LIMIT", "4096"),
        ],
        other => panic!("unknown env {other}"),
    };
    case(n, what, &small, &must_fail, env);
}

/// A scan's outcome on rank `me` of the jobs below: rank 0 waits for nobody and may succeed;
/// ranks 1 and 2 must get `Mismatch`.
fn scan_failed_after_rank_0(me: u32, r: Result<Vec<i64>, MsgError>) -> Result<(), String> {
    match (me, r) {
        (0, _) | (1 | 2, Err(MsgError::Mismatch { .. })) => Ok(()),
        (_, r) => Err(format!("rank {me}: scan gave {r:?}, not a mismatch")),
    }
}

/// Runs test `test`'s role on 3 ranks sharing a temporary directory
/// (`SPOOLS_TEST_DIR`): the job must end well, every rank printing `marker`.
fn three_ranks_in_a_directory(test: &str, marker: &str) {
    let dir = tempdir(test);
    let o = launch(
        3,
        test,
        "x",
        &[("SPOOLS_TEST_DIR", dir.path().to_str().unwrap())],
    );
    assert_eq!(o.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout.matches(marker).count(), 3, "{o:?}");
}

/// Three ranks start a reduce to rank 1, a scan whose part is longer on rank 0, and an
/// allreduce, without waiting; rank 2 only once rank 1's scan failed. Rank 1's scan
/// fails on rank 0's post while its reduce (waiting for rank 2's part) is in flight, so
/// it cannot be marked finished there yet: it must be once the reduce ends, or rank 1's
/// allreduce never posts and the others wait for it.
fn behind_role() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let world = e(spools::init())?;
    let me = world.rank();
    let w = e(world.dup())?;
    // Sets the segment up (non-blocking collectives never do).
    let mut out = [0u64];
    e(w.allreduce(&[1u64], &mut out, &Op::Sum))?;
    let failed = dir.join("scan-failed");
    if me == 2 {
        wait_for_file(&failed, Duration::from_secs(60))?;
    }
    let rd = e(w.ireduce(vec![i64::from(me) + 1], Op::Sum, 1))?;
    let sc = e(w.iscan(vec![5i64; if me == 0 { 2 } else { 1 }], Op::Sum))?;
    let ar = e(w.iallreduce(vec![i64::from(me)], Op::Sum))?;
    if me == 1 {
        let start = Instant::now();
        while !sc.test() {
            if start.elapsed() > Duration::from_secs(60) {
                return Err("rank 1: its scan neither failed nor ended".into());
            }
            std::thread::yield_now();
        }
        if rd.test() {
            return Err("rank 1: its reduce ended without rank 2".into());
        }
        signal_file(&failed, b"")?;
    }
    let reduced = e(rd.wait())?;
    if me == 1 && reduced != [6] {
        return Err(format!("rank 1: reduce gave {reduced:?}"));
    }
    scan_failed_after_rank_0(me, sc.wait())?;
    let all = e(ar.wait())?;
    if all != [3] {
        return Err(format!("rank {me}: allreduce gave {all:?}"));
    }
    println!("rank {me} behind ok");
    drop(w);
    e(world.finalize())
}

#[test]
fn a_scan_failed_behind_a_collective_in_flight_lets_the_next_ones_post() {
    rank_main(|_| behind_role());
    three_ranks_in_a_directory(
        "a_scan_failed_behind_a_collective_in_flight_lets_the_next_ones_post",
        "behind ok",
    );
}

/// Three ranks scan 4 times alike (every slot of the non-blocking collectives' segment
/// then holds a part of this length), then
/// start a scan whose part is longer on rank 1, and a reduce to rank 0. Rank 1 fails the
/// scan on rank 0's post and posts its part of the reduce (a contributor is done once
/// posted); only then does rank 2 start: its left neighbour's post is past the scan, and
/// its slot holds an older scan's part of rank 2's length. Rank 2 must fail (the
/// neighbour's mark), not return that part.
fn past_role() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let world = e(spools::init())?;
    let me = world.rank();
    let w = e(world.dup())?;
    // Sets the segments up (the non-blocking collectives' one too), then fills the
    // non-blocking segment's slots.
    let mut out = [0i64];
    e(w.scan(&[1], &mut out, &Op::Sum))?;
    for k in 0..4i64 {
        let out = e(e(w.iscan(vec![k], Op::Sum))?.wait())?;
        if out != [k * (i64::from(me) + 1)] {
            return Err(format!("rank {me}: warm-up scan {k} gave {out:?}"));
        }
    }
    let posted = dir.join("reduce-posted");
    if me == 2 {
        wait_for_file(&posted, Duration::from_secs(60))?;
    }
    let sc = e(w.iscan(vec![7i64; if me == 1 { 2 } else { 1 }], Op::Sum))?;
    let rd = e(w.ireduce(vec![i64::from(me) + 1], Op::Sum, 0))?;
    if me == 1 {
        let start = Instant::now();
        // The scan fails here, then the reduce's part is posted, which ends it here.
        while !(sc.test() && rd.test()) {
            if start.elapsed() > Duration::from_secs(60) {
                return Err("rank 1: its scan or its reduce never ended".into());
            }
            std::thread::yield_now();
        }
        signal_file(&posted, b"")?;
    }
    scan_failed_after_rank_0(me, sc.wait())?;
    let reduced = e(rd.wait())?;
    if me == 0 && reduced != [6] {
        return Err(format!("rank 0: reduce gave {reduced:?}"));
    }
    println!("rank {me} past ok");
    drop(w);
    e(world.finalize())
}

#[test]
fn a_scan_member_past_a_failed_neighbour_fails_instead_of_reading_an_older_part() {
    rank_main(|_| past_role());
    three_ranks_in_a_directory(
        "a_scan_member_past_a_failed_neighbour_fails_instead_of_reading_an_older_part",
        "past ok",
    );
}
