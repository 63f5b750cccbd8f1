//! Tagged point-to-point messaging with real processes over shared memory and TCP: the
//! three protocols, wildcards and MPI's non-overtaking order, truncation, probe, cancel,
//! non-blocking requests, communicators, RPC, and asynchronous progress.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{wait_all, wait_any, MsgError, RpcError, World, ANY_SOURCE, ANY_TAG};
use spools_testkit::{assert_ok, checked, e, launch, rank_main};

const TRANSPORTS: [&str; 2] = ["auto", "tcp"];

/// Sizes that cross every protocol boundary with the default limits (short 24 B, eager
/// 32 KiB): empty, short, just past short, eager, at and past the eager limit, and
/// rendezvous of many chunks.
const SIZES: [usize; 9] = [
    0,
    1,
    24,
    25,
    1000,
    32 << 10,
    (32 << 10) + 1,
    100_000,
    (4 << 20) + 3,
];

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 131 + i * 7 + (i >> 9)) as u8)
        .collect()
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// Every size around a ring, in both blocking and non-blocking forms.
fn protocols(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    for (i, &len) in SIZES.iter().enumerate() {
        let tag = i as i32;
        let r = e(w.irecv(vec![0u8; len], prev, tag))?;
        e(w.send(&pattern(u64::from(me) * 100 + i as u64, len), next, tag))?;
        let c = e(r.wait())?;
        check(
            c.buf == pattern(u64::from(prev) * 100 + i as u64, len),
            || format!("{len} B from {prev} corrupt"),
        )?;
        check(
            c.status.source == prev && c.status.tag == tag && c.status.len == len,
            || format!("status {:?}", c.status),
        )?;
        // Non-blocking on both sides; the buffers come back.
        let r = e(w.irecv(vec![0u8; len + 5], ANY_SOURCE, tag))?;
        let s = e(w.isend(pattern(7 + i as u64, len), next, tag))?;
        let sent = e(s.wait())?;
        check(sent.buf == pattern(7 + i as u64, len), || {
            "isend did not return its buffer".into()
        })?;
        let c = e(r.wait())?;
        check(
            c.status.len == len && c.buf[..len] == pattern(7 + i as u64, len)[..],
            || format!("irecv of {len} B"),
        )?;
        // recv_vec sizes itself (the send is non-blocking: a rendezvous waits for it).
        let s = e(w.isend(pattern(9, len), next, tag))?;
        let (v, st) = e(w.recv_vec(prev, tag))?;
        e(s.wait())?;
        check(v == pattern(9, len) && st.len == len, || {
            format!("recv_vec of {len} B")
        })?;
    }
    Ok(())
}

/// Many senders to rank 0 with mixed sizes and tags: ANY_SOURCE/ANY_TAG receives see
/// each sender's messages in the order sent; a specific tag skips over others.
fn ordering(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    const COUNT: u64 = 60;
    let len_of = |i: u64| match i % 4 {
        0 => 8,
        1 => 500,
        2 => 40_000,
        _ => 0,
    };
    if me != 0 {
        for i in 0..COUNT {
            let mut m = pattern(i, len_of(i).max(16));
            m.truncate(len_of(i));
            if m.len() >= 16 {
                m[..8].copy_from_slice(&u64::from(me).to_le_bytes());
                m[8..16].copy_from_slice(&i.to_le_bytes());
            }
            e(w.send(&m, 0, (i % 3) as i32))?;
        }
        // Tag selectivity: tag 11 then tag 12; rank 0 takes 12 first.
        e(w.barrier())?;
        e(w.send(&[1u32], 0, 11))?;
        e(w.send(&[2u32], 0, 12))?;
    } else {
        let mut next = vec![0u64; n as usize];
        for _ in 0..COUNT * u64::from(n - 1) {
            let (v, st) = e(w.recv_vec(ANY_SOURCE, ANY_TAG))?;
            let s = st.source as usize;
            let i = next[s];
            check(st.len == len_of(i) && st.tag == (i % 3) as i32, || {
                format!("from {s}: message {i} has len {} tag {}", st.len, st.tag)
            })?;
            if v.len() >= 16 {
                check(
                    v[..8] == u64::from(st.source).to_le_bytes() && v[8..16] == i.to_le_bytes(),
                    || format!("from {s}: out of order at {i}"),
                )?;
            }
            next[s] += 1;
        }
        e(w.barrier())?;
        for s in 1..n {
            let mut x = [0u32];
            let st = e(w.recv(&mut x, s, 12))?;
            check(x[0] == 2 && st.tag == 12, || "tag 12 first".into())?;
            let st = e(w.recv(&mut x, s, ANY_TAG))?;
            check(x[0] == 1 && st.tag == 11, || "then tag 11".into())?;
        }
    }
    e(w.barrier())
}

/// A message longer than the buffer is an error naming both sizes, and nothing past the
/// buffer is written; both protocols; afterwards messaging still works.
fn truncation(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    if n < 2 {
        return Ok(());
    }
    if me == 1 {
        e(w.send(&pattern(1, 100), 0, 3))?;
        e(w.send(&pattern(2, 100_000), 0, 4))?;
        e(w.send(&[42u8], 0, 5))?;
    } else if me == 0 {
        for (tag, len) in [(3, 100usize), (4, 100_000)] {
            let mut buf = [0xEEu8; 60];
            match w.recv(&mut buf[..50], 1, tag) {
                Err(MsgError::Truncated {
                    len: l,
                    capacity: 50,
                    source_rank: 1,
                    tag: t,
                }) if l == len && t == tag => {}
                other => return Err(format!("expected truncation of {len} B, got {other:?}")),
            }
            check(buf[50..].iter().all(|&b| b == 0xEE), || {
                "bytes past the buffer were written".into()
            })?;
        }
        let mut one = [0u8];
        e(w.recv(&mut one, 1, 5))?;
        check(one[0] == 42, || "message after truncation".into())?;
    }
    e(w.barrier())
}

/// probe and iprobe, cancel, test, wait_any and wait_all.
fn requests(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    check(e(w.iprobe(ANY_SOURCE, 777))?.is_none(), || {
        "iprobe found a message never sent".into()
    })?;
    let r = e(w.irecv(vec![0u8; 8], ANY_SOURCE, 999))?;
    check(r.cancel(), || "cancel of a pending receive".into())?;
    let c = e(r.wait())?;
    check(c.status.cancelled, || "cancelled status".into())?;
    check(
        matches!(
            w.recv(&mut [0u8; 1], n + 3, 0),
            Err(MsgError::BadRank { .. })
        ),
        || "bad rank".into(),
    )?;
    check(
        matches!(w.send(&[0u8], 0, -4), Err(MsgError::BadTag(-4))),
        || "negative tag".into(),
    )?;
    if me != 0 {
        e(w.send(&pattern(u64::from(me), 3000), 0, 9))?;
    } else {
        for _ in 1..n {
            let st = e(w.probe(ANY_SOURCE, 9))?;
            check(st.len == 3000 && st.tag == 9, || format!("probe {st:?}"))?;
            let (v, st2) = e(w.recv_vec(st.source, 9))?;
            check(
                st2.source == st.source && v == pattern(u64::from(st.source), 3000),
                || "probed message".into(),
            )?;
        }
    }
    // Every rank posts a receive from each other rank; wait_any collects them all.
    let mut reqs = Vec::new();
    for s in 0..n {
        reqs.push(e(w.irecv(vec![0u8; 50_000], s, 20))?);
    }
    let sends: Vec<_> = (0..n)
        .map(|d| {
            w.isend(
                pattern(
                    u64::from(me),
                    1000 * (me as usize + 1) + 40_000 * usize::from(d % 2 == 0),
                ),
                d,
                20,
            )
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut seen = vec![false; n as usize];
    while !reqs.is_empty() {
        let (_, c) = e(wait_any(&mut reqs))?;
        let s = c.status.source;
        check(!seen[s as usize], || "completed twice".into())?;
        seen[s as usize] = true;
        let want = pattern(
            u64::from(s),
            1000 * (s as usize + 1) + 40_000 * usize::from(me % 2 == 0),
        );
        check(c.buf[..c.status.len] == want[..], || format!("from {s}"))?;
    }
    let mut sends = sends;
    if let Some(s) = sends.first_mut() {
        e(s.test())?;
    }
    e(wait_all(sends))?;
    e(w.barrier())
}

/// split, dup, and contexts that never match each other.
fn communicators(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    let sub = e(w.split(Some(me % 2), -(me as i32)))?.ok_or("no sub-communicator")?;
    let members: Vec<u32> = (0..n).filter(|r| r % 2 == me % 2).rev().collect();
    check(
        sub.size() as usize == members.len() && members[sub.rank() as usize] == me,
        || format!("split: rank {} of {}", sub.rank(), sub.size()),
    )?;
    let (sr, sn) = (sub.rank(), sub.size());
    let mut got = [0u32];
    let r = e(sub.irecv(vec![0u8; 4], (sr + sn - 1) % sn, 1))?;
    e(sub.send(&[me], (sr + 1) % sn, 1))?;
    let c = e(r.wait())?;
    got[0] = u32::from_le_bytes(c.buf[..4].try_into().unwrap());
    check(got[0] == members[((sr + sn - 1) % sn) as usize], || {
        "ring in the sub-communicator".into()
    })?;
    check(e(w.split(None, 0))?.is_none(), || {
        "split(None) gives nothing".into()
    })?;
    let d = e(w.dup())?;
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    e(d.send(&[1u8], next, 5))?;
    e(w.send(&[2u8], next, 5))?;
    let mut x = [0u8];
    e(w.recv(&mut x, prev, 5))?;
    check(x[0] == 2, || "world received the dup's message".into())?;
    e(d.recv(&mut x, prev, 5))?;
    check(x[0] == 1, || "dup".into())?;
    e(w.barrier())
}

/// RPC with small and large arguments and results, remote errors, unknown functions.
fn rpc(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    e(w.register_rpc("sum", |a| {
        Ok(a.iter()
            .map(|&x| u64::from(x))
            .sum::<u64>()
            .to_le_bytes()
            .to_vec())
    }))?;
    e(w.register_rpc("twice", |a| Ok([a, a].concat())))?;
    let rank = me;
    e(w.register_rpc("fail", move |_| Err(format!("refused by {rank}"))))?;
    e(w.barrier())?;
    let t = (me + 1) % n;
    let out = e(e(w.rpc(t, "sum", &[1, 2, 3, 250]))?.wait())?;
    check(out == 256u64.to_le_bytes(), || format!("sum gave {out:?}"))?;
    let big = pattern(5, 300_000);
    let out = e(e(w.rpc(t, "twice", &big))?.wait())?;
    check(out == [big.clone(), big].concat(), || {
        "twice of 300 kB".into()
    })?;
    let out = e(e(w.rpc(t, "twice", b""))?.wait())?;
    check(out.is_empty(), || "twice of nothing".into())?;
    match e(w.rpc(t, "fail", b"x"))?.wait() {
        Err(RpcError::Remote { message, rank, .. })
            if rank == t && message == format!("refused by {t}") => {}
        other => return Err(format!("remote error: {other:?}")),
    }
    match e(w.rpc(t, "nope", b""))?.wait() {
        Err(RpcError::UnknownFunction { name, .. }) if name == "nope" => {}
        other => return Err(format!("unknown function: {other:?}")),
    }
    e(w.barrier())
}

fn p2p_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        protocols(w)?;
        ordering(w)?;
        truncation(w)?;
        requests(w)?;
        communicators(w)?;
        rpc(w)
    });
    println!("p2p ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn tagged_messages_protocols_order_and_errors() {
    rank_main(|_| p2p_role());
    for t in TRANSPORTS {
        for n in [1u32, 2, 4] {
            let o = launch(
                n,
                "tagged_messages_protocols_order_and_errors",
                "x",
                &[("SPOOLS_TRANSPORT", t)],
            );
            assert_ok(&o);
            assert_eq!(
                o.stdout.matches("p2p ok").count(),
                n as usize,
                "{t} {n}: {}",
                o.stdout
            );
        }
    }
}

/// A 16 MiB rendezvous between two ranks that compute without calling into Spools (they
/// only look at their request's state, which drives nothing): with the progress thread it
/// completes during the computation; without, it cannot (no rank answers the request to
/// send) until a Spools call.
fn progress_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let threaded = w.worker().config().progress_thread;
    let me = w.rank();
    const LEN: usize = 16 << 20;
    e(w.barrier())?;
    let req = if me == 0 {
        e(w.isend(pattern(3, LEN), 1, 1))?
    } else {
        e(w.irecv(vec![0u8; LEN], 0, 1))?
    };
    let mut spins = 0u64;
    let mut acc = 0u64;
    if threaded {
        let start = std::time::Instant::now();
        while !req.is_complete() {
            acc = acc.wrapping_mul(6364136223846793005).wrapping_add(spins);
            spins += 1;
            if start.elapsed() > std::time::Duration::from_secs(60) {
                return Err("the transfer did not complete during the computation".into());
            }
        }
    } else {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(300) {
            acc = acc.wrapping_mul(6364136223846793005).wrapping_add(spins);
            spins += 1;
        }
        if req.is_complete() {
            return Err("completed without progress".into());
        }
    }
    let c = e(req.wait())?;
    if me == 1 {
        check(c.buf == pattern(3, LEN), || "16 MiB corrupt".into())?;
    }
    println!(
        "progress ok rank {me} threaded={threaded} during_compute={} ({acc})",
        threaded
    );
    e(w.finalize())
}

#[test]
fn rendezvous_progresses_while_the_application_computes() {
    rank_main(|_| progress_role());
    for t in TRANSPORTS {
        for thread in ["1", "0"] {
            let o = launch(
                2,
                "rendezvous_progresses_while_the_application_computes",
                "x",
                &[("SPOOLS_TRANSPORT", t), ("SPOOLS_PROGRESS_THREAD", thread)],
            );
            assert_ok(&o);
            let want = format!("threaded={}", thread == "1");
            assert_eq!(
                o.stdout.matches(&want).count(),
                2,
                "{t} {thread}: {}",
                o.stdout
            );
        }
    }
}
