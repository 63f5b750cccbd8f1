//! Tagged point-to-point messaging with real processes over shared memory and TCP: the
//! three protocols, wildcards and MPI's non-overtaking order, truncation, probe, cancel,
//! non-blocking requests, communicators, RPC (panics included), and asynchronous progress.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{wait_all, wait_any, MsgError, RpcError, Transport, World, ANY_SOURCE, ANY_TAG};
use std::time::Duration;

use spools_testkit::{
    assert_ok, checked, compute_until, e, launch, rank_main, signal_file, tempdir, wait_for_file,
};

mod common;
use common::check;

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

/// Over libfabric with remote memory access (`SPOOLS_TEST_RMA=1`), or within a host
/// with single copy by cross-memory attach (`SPOOLS_TEST_CMA=1`), every rendezvous
/// larger than one message went by a one-sided read of the sender's lent buffer: at
/// least the three 4 MiB receives of [`protocols`] on every rank. Where the kernel
/// refuses cross-memory reads (a ptrace policy), the transport must say so instead.
fn read_one_sidedly(w: &World) -> Result<(), String> {
    let at_least = 3 * ((4u64 << 20) + 3);
    if std::env::var("SPOOLS_TEST_CMA").is_ok_and(|v| v == "1") {
        let shm = w.shm().ok_or("no shared-memory transport")?;
        let caps = shm.caps();
        if caps.single_copy != spools::SingleCopy::Cma {
            return check(caps.single_copy_reason.contains("not permitted"), || {
                format!(
                    "single copy asked for but not chosen: {}",
                    caps.single_copy_reason
                )
            });
        }
        return match shm.rma().map(|r| r.moved()) {
            Some((_, read)) if read >= at_least => Ok(()),
            other => Err(format!(
                "cross-memory bytes (written, read): {other:?}, want at least {at_least} read"
            )),
        };
    }
    if !std::env::var("SPOOLS_TEST_RMA").is_ok_and(|v| v == "1") {
        return Ok(());
    }
    match w.ofi().and_then(|t| t.rma().map(|r| r.moved())) {
        Some((_, read)) if read >= at_least => Ok(()),
        other => Err(format!(
            "one-sided bytes (written, read): {other:?}, want at least {at_least} read"
        )),
    }
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
    rpc_panics(w)
}

/// A function that panics: the caller gets [`RpcError::Panicked`] naming the target and
/// the function (not a hang, not a dead job), for a short and a rendezvous-sized
/// argument, and the target goes on serving calls and messages afterwards.
fn rpc_panics(w: &World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    e(w.register_rpc("panics", |a| {
        panic!("deliberate panic in an RPC function ({} B)", a.len())
    }))?;
    e(w.register_rpc("len", |a| Ok((a.len() as u64).to_le_bytes().to_vec())))?;
    e(w.barrier())?;
    let t = (me + 1) % n;
    for args in [b"boom".to_vec(), pattern(4, 100_000)] {
        match e(w.rpc(t, "panics", &args))?.wait() {
            Err(RpcError::Panicked { rank, name }) if rank == t && name == "panics" => {}
            other => return Err(format!("panicking function: {other:?}")),
        }
        let out = e(e(w.rpc(t, "len", &args))?.wait())?;
        check(out == (args.len() as u64).to_le_bytes(), || {
            format!("a call after the panic gave {out:?}")
        })?;
    }
    // Tagged messages still flow between the two.
    let prev = (me + n - 1) % n;
    let r = e(w.irecv(vec![0u8; 1000], prev, 77))?;
    e(w.send(&pattern(u64::from(me), 1000), t, 77))?;
    let c = e(r.wait())?;
    check(c.buf == pattern(u64::from(prev), 1000), || {
        "message after the panics".into()
    })?;
    e(w.barrier())
}

/// RPC panics with the function run by the progress thread (the p2p test above runs it
/// inside the ranks' own Spools calls): the panic must not take the thread down.
#[test]
fn rpc_panics_come_back_as_errors_with_the_progress_thread() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, rpc_panics);
        println!("rpc panics ok rank {}", w.rank());
        e(w.finalize())
    });
    let o = launch(
        2,
        "rpc_panics_come_back_as_errors_with_the_progress_thread",
        "x",
        &[("SPOOLS_PROGRESS_THREAD", "1")],
    );
    assert_ok(&o);
    assert_eq!(o.stdout.matches("rpc panics ok").count(), 2, "{o:?}");
    assert!(o.stderr.contains("deliberate panic"), "{o:?}");
}

/// Under `SPOOLS_SINGLE_COPY=auto` within a host: where the sender's probe keeps
/// point-to-point transfers in the rings (`CmaCollectives`), a 4 MiB message read
/// nothing of its memory, and a collective's 4 MiB transfers were read (an allgather and
/// a broadcast, checked); where it found reads faster (`Cma`) both were. A rank whose
/// reads the kernel refuses, or whose probe found one read slower than two copies, must
/// say so.
#[test]
fn collectives_read_peers_memory_where_point_to_point_keeps_the_rings() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, |w| {
            let shm = w.shm().ok_or("no shared-memory transport")?;
            let (mode, why) = (
                shm.caps().single_copy,
                shm.caps().single_copy_reason.clone(),
            );
            let read = || shm.rma().map_or(0, |r| r.moved().1);
            let (me, n) = (w.rank(), w.size());
            const LEN: usize = 4 << 20;
            let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
            let r = e(w.irecv(vec![0u8; LEN], prev, 5))?;
            e(w.send(&pattern(u64::from(me), LEN), next, 5))?;
            let got = e(r.wait())?;
            check(got.buf == pattern(u64::from(prev), LEN), || {
                "p2p bytes".into()
            })?;
            let after_p2p = read();
            let mine = pattern(100 + u64::from(me), LEN);
            let mut all = vec![0u8; LEN * n as usize];
            e(w.allgather(&mine, &mut all))?;
            for r in 0..n as usize {
                check(
                    all[r * LEN..(r + 1) * LEN] == pattern(100 + r as u64, LEN)[..],
                    || format!("allgather block {r}"),
                )?;
            }
            let mut b = if me == 0 {
                pattern(7, LEN)
            } else {
                vec![0u8; LEN]
            };
            e(w.bcast(&mut b, 0))?;
            check(b == pattern(7, LEN), || "bcast bytes".into())?;
            // Each rank's probe chose its mode alone, and the sender's decides whether
            // it lends: expect what every rank's mode implies.
            let code = |m| match m {
                spools::SingleCopy::None => 0u8,
                spools::SingleCopy::CmaCollectives => 1,
                spools::SingleCopy::Cma => 2,
            };
            let mut modes = vec![0u8; n as usize];
            e(w.allgather(&[code(mode)], &mut modes))?;
            // Loans end with their sends: more collectives than a process has loan
            // words (16,384) still read, the last ones too. Every rank takes part or
            // none (a probe under load may find one read slower on one rank only).
            if modes.iter().all(|&m| m != 0) {
                let part = vec![me as u8; 40 << 10];
                let mut both = vec![0u8; part.len() * n as usize];
                for _ in 0..17_000 {
                    e(w.allgather(&part, &mut both))?;
                }
                let before_last = read();
                e(w.allgather(&part, &mut both))?;
                check(read() > before_last, || {
                    format!("the 17,001st allgather read nothing ({why})")
                })?;
            }
            let after_coll = read();
            if mode == spools::SingleCopy::None {
                let refused_or_slower =
                    why.contains("not permitted") || why.contains("two copies are faster");
                return check(refused_or_slower, || {
                    format!("no single copy, and not because refused or slower: {why}")
                });
            }
            let prev_mode = modes[prev as usize];
            if prev_mode == 1 {
                check(after_p2p == 0, || format!("p2p read {after_p2p} B ({why})"))?;
            } else if prev_mode == 2 {
                check(after_p2p >= LEN as u64, || {
                    format!("p2p read {after_p2p} B ({why})")
                })?;
            }
            if modes.iter().all(|&m| m != 0) {
                check(after_coll >= LEN as u64, || {
                    format!("collectives read {after_coll} B ({why})")
                })?;
            }
            Ok(())
        });
        println!("single copy ok rank {}", w.rank());
        e(w.finalize())
    });
    let o = launch(
        2,
        "collectives_read_peers_memory_where_point_to_point_keeps_the_rings",
        "x",
        &[("SPOOLS_SINGLE_COPY", "auto")],
    );
    assert_ok(&o);
    assert_eq!(o.stdout.matches("single copy ok").count(), 2, "{o:?}");
}

fn p2p_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, |w| {
        protocols(w)?;
        ordering(w)?;
        truncation(w)?;
        requests(w)?;
        communicators(w)?;
        rpc(w)?;
        read_one_sidedly(w)
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
    // Within a host, every rendezvous by one read of the sender's memory.
    for n in [2u32, 4] {
        let o = launch(
            n,
            "tagged_messages_protocols_order_and_errors",
            "x",
            &[("SPOOLS_SINGLE_COPY", "cma"), ("SPOOLS_TEST_CMA", "1")],
        );
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("p2p ok").count(),
            n as usize,
            "cma {n}: {}",
            o.stdout
        );
    }
    for p in spools_testkit::ofi_providers() {
        for n in [2u32, 4] {
            let o = launch(
                n,
                "tagged_messages_protocols_order_and_errors",
                "x",
                &[
                    ("SPOOLS_TRANSPORT", "ofi"),
                    ("SPOOLS_OFI_PROVIDER", p),
                    ("SPOOLS_TEST_RMA", "1"),
                ],
            );
            assert_ok(&o);
            assert_eq!(
                o.stdout.matches("p2p ok").count(),
                n as usize,
                "ofi {p} {n}: {}",
                o.stdout
            );
        }
    }
}

/// A 16 MiB rendezvous from rank 0 to rank 1 while rank 0, the sender, computes without
/// calling Spools: the data can only flow if something on rank 0 answers rank 1's
/// clear-to-send and streams the chunks. Decided by events both ranks control, never by
/// the clock:
///
/// - Rank 0 starts the send (its request-to-send leaves), then says through a file
///   (`computing`) "I make no Spools call until told"; only then does rank 1 post its
///   receive, so the rendezvous can only progress on rank 0 while rank 0 is provably
///   outside Spools.
/// - With the progress thread, rank 0 computes until rank 1 says (file `got`) that the
///   receive completed with the right bytes: the transfer progressed in the background.
///   (The wait is bounded as a safety net: if it runs out, rank 0 reports "after" and the
///   test fails.)
/// - Without it, rank 0 computes until rank 1 tells it to stop (file `go`), then, before
///   any Spools call, checks whether the receive completed meanwhile (file `got`): it
///   must not have, since nothing streams rank 0's data while it makes no Spools call.
///   Rank 1 gives the transfer a while to (wrongly) complete before it says `go`; that
///   time only makes the check more or less searching, it cannot change its outcome.
fn progress_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    let dir =
        std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let (computing, go, got) = (dir.join("computing"), dir.join("go"), dir.join("got"));
    // What the test asked for, not what the runtime says it does.
    let threaded = std::env::var("SPOOLS_PROGRESS_THREAD").is_ok_and(|v| v == "1");
    const LEN: usize = 16 << 20;
    e(w.barrier())?;
    if me == 0 {
        let req = e(w.isend(pattern(3, LEN), 1, 1))?;
        // From here until `stop` exists, no Spools call.
        signal_file(&computing, b"")?;
        let stop = if threaded { &got } else { &go };
        // The limit is a safety net only (a broken progress thread): the test then fails.
        compute_until(stop, Duration::from_secs(90));
        // Still before any Spools call.
        let served = got.exists();
        println!(
            "rank 1: receive completed {} rank 0 finished computing",
            if served { "before" } else { "after" }
        );
        let c = e(req.wait())?;
        check(c.buf == pattern(3, LEN), || {
            "the send did not return its buffer".into()
        })?;
    } else {
        wait_for_file(&computing, Duration::from_secs(90))?;
        let stopper = (!threaded).then(|| {
            // Stops rank 0's computation once the transfer has had its chance to complete
            // wrongly (it cannot complete before rank 0 calls Spools again).
            let go = go.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                signal_file(&go, b"")
            })
        });
        let c = e(e(w.irecv(vec![0u8; LEN], 0, 1))?.wait())?;
        check(c.buf == pattern(3, LEN) && c.status.len == LEN, || {
            "16 MiB corrupt".into()
        })?;
        signal_file(&got, b"")?;
        if let Some(s) = stopper {
            s.join().map_err(|_| "the stopper panicked")??;
        }
    }
    e(w.barrier())?;
    e(w.finalize())
}

#[test]
fn rendezvous_progresses_while_the_application_computes() {
    rank_main(|_| progress_role());
    for t in TRANSPORTS {
        for (thread, when) in [("1", "before"), ("0", "after")] {
            let dir = tempdir("p2p-progress");
            let o = launch(
                2,
                "rendezvous_progresses_while_the_application_computes",
                "x",
                &[
                    ("SPOOLS_TRANSPORT", t),
                    ("SPOOLS_PROGRESS_THREAD", thread),
                    ("SPOOLS_TEST_DIR", dir.to_str().unwrap()),
                ],
            );
            assert_ok(&o);
            let want = format!("receive completed {when} rank 0 finished computing");
            assert!(o.stdout.contains(&want), "{t} thread={thread}: {o:?}");
        }
    }
}

/// End of data: rank 1 sends rank 0 two messages and finalises, rank 2 finalises without
/// sending. Rank 0 waits until both announced that they finalise, then still receives
/// rank 1's two messages whole (what a rank sent before finalising is delivered), and
/// a third receive from rank 1 and one from rank 2 fail naming them (they waited forever
/// before).
fn end_of_data_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    match me {
        0 => {
            let health = w.worker().bootstrap().state();
            e(w.worker()
                .wait_for(|| health.is_finalizing(1) && health.is_finalizing(2)))?;
            let mut short = [0u8; 8];
            let st = e(w.recv(&mut short, 1, 7))?;
            check(st.len == 8 && short == *b"8 bytes!", || {
                format!("short message {short:?}")
            })?;
            let mut eager = vec![0u8; 1000];
            e(w.recv(&mut eager, 1, 7))?;
            check(eager == pattern(3, 1000), || "eager message corrupt".into())?;
            let mut more = [0u8; 8];
            match w.recv(&mut more, 1, 7) {
                Err(MsgError::SourceFinalized { rank: 1, sent: 2 }) => {}
                other => return Err(format!("third receive from rank 1: {other:?}")),
            }
            match w.recv(&mut more, 2, ANY_TAG) {
                Err(err @ MsgError::SourceFinalized { rank: 2, sent: 0 }) => {
                    let text = err.to_string();
                    check(text.contains("job rank 2 finalised"), || text.clone())?;
                }
                other => return Err(format!("receive from rank 2: {other:?}")),
            }
            // A non-blocking receive too.
            let r = e(w.irecv(vec![0u8; 4], 2, 9))?;
            match r.wait() {
                Err(MsgError::SourceFinalized { rank: 2, sent: 0 }) => {}
                other => return Err(format!("irecv from rank 2: {other:?}")),
            }
        }
        1 => {
            e(w.send(b"8 bytes!", 0, 7))?;
            e(w.send(&pattern(3, 1000), 0, 7))?;
        }
        _ => {}
    }
    println!("end of data ok rank {me}");
    e(w.finalize())
}

#[test]
fn a_receive_from_a_rank_that_finalised_fails_naming_it() {
    rank_main(|_| end_of_data_role());
    for t in TRANSPORTS {
        let o = launch(
            3,
            "a_receive_from_a_rank_that_finalised_fails_naming_it",
            "x",
            &[("SPOOLS_TRANSPORT", t)],
        );
        assert_ok(&o);
        assert_eq!(o.stdout.matches("end of data ok").count(), 3, "{t}: {o:?}");
    }
}
