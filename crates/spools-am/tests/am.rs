//! Active messages, memory transfers, modes, channels and progress, with real processes
//! over shared memory and over TCP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spools::{AmError, Channel, Delivery, Transport};
use spools_testkit::{
    assert_ok, compute_until, e, launch, ofi_providers, rank_main, signal_file, tempdir,
    wait_for_file,
};

const TRANSPORTS: [&str; 2] = ["auto", "tcp"];

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 31 + i * 7 + (i >> 8)) as u8)
        .collect()
}

/// Short, bulk (all sizes up to the bulk limit), batched, priorities, channel order,
/// an unknown handler at the target, and the bulk limit.
fn messages_role() -> Result<(), String> {
    let mut w = e(spools::init())?;
    let (me, n) = (w.rank(), w.size());
    let shorts = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let bulks = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(Mutex::new(Vec::<String>::new()));
    let order = Arc::new(Mutex::new(vec![0u64; n as usize]));
    {
        let (s, t) = (shorts.clone(), sum.clone());
        e(w.worker().register("short", move |m| {
            s.fetch_add(1, Ordering::Relaxed);
            t.fetch_add(
                m.args[0] + m.args[1] + m.args[2] + m.args[3],
                Ordering::Relaxed,
            );
        }))?;
        let (b, bad1) = (bulks.clone(), bad.clone());
        e(w.worker().register("bulk", move |m| {
            let want = pattern(m.args[0], m.args[1] as usize);
            if m.payload != want.as_slice() {
                bad1.lock().unwrap().push(format!(
                    "bulk from {} of {} bytes corrupt",
                    m.from, m.args[1]
                ));
            }
            b.fetch_add(1, Ordering::Relaxed);
        }))?;
        let (o, bad2) = (order.clone(), bad.clone());
        e(w.worker().register("ordered", move |m| {
            let mut o = o.lock().unwrap();
            let want = o[m.from as usize];
            if m.args[0] != want || m.channel != 3 {
                bad2.lock().unwrap().push(format!(
                    "channel {} from {}: seq {} expected {want}",
                    m.channel, m.from, m.args[0]
                ));
            }
            o[m.from as usize] = m.args[0] + 1;
        }))?;
    }
    if me == 0 {
        e(w.worker().register("only-on-0", |_| {}))?;
    }
    e(w.worker().sync_handlers())?;
    // The runtime's own handlers come first and keep their ids; new names are appended
    // in sorted order.
    let table = w.worker().handler_table();
    let user: Vec<&str> = table
        .iter()
        .map(String::as_str)
        .filter(|n| !n.starts_with("spools."))
        .collect();
    if user != ["bulk", "only-on-0", "ordered", "short"] || !table[0].starts_with("spools.") {
        return Err(format!("global table {table:?}"));
    }
    let h_short = e(w.worker().handler_id("short"))?;
    let h_bulk = e(w.worker().handler_id("bulk"))?;
    let h_ord = e(w.worker().handler_id("ordered"))?;
    let limit = w.worker().config().bulk_limit as usize;
    let sizes = [0usize, 1, 100, 4096, 40_000, limit];
    let per_short = 1000u64;
    let per_batched = 5000u64;
    let per_ordered = 2000u64;
    for peer in 0..n {
        let ep = w.endpoint();
        for i in 0..per_short {
            let ch = if i % 2 == 0 {
                Channel::new(1)
            } else {
                Channel::new(2).high()
            };
            e(ep.send_short(peer, h_short, [i, 1, 2, 3], ch, Delivery::Immediate))?;
        }
        for i in 0..per_batched {
            e(ep.send_short(
                peer,
                h_short,
                [i, 0, 0, 0],
                Channel::new(0),
                Delivery::Batched,
            ))?;
        }
        e(ep.flush())?;
        for (k, &len) in sizes.iter().enumerate() {
            let data = pattern(k as u64 + u64::from(me), len);
            e(ep.send_bulk(
                peer,
                h_bulk,
                [k as u64 + u64::from(me), len as u64, 0, 0],
                &data,
                Channel::new(0),
            ))?;
        }
        for i in 0..per_ordered {
            e(ep.send_short(
                peer,
                h_ord,
                [i, 0, 0, 0],
                Channel::new(3),
                if i % 3 == 0 {
                    Delivery::Batched
                } else {
                    Delivery::Immediate
                },
            ))?;
        }
        e(ep.flush())?;
    }
    // The bulk limit is enforced at the sender.
    let too_big = vec![0u8; limit + 1];
    match w
        .endpoint()
        .send_bulk(0, h_bulk, [0; 4], &too_big, Channel::new(0))
    {
        Err(AmError::TooLarge { .. }) => {}
        other => return Err(format!("oversized bulk: {other:?}")),
    }
    let n64 = u64::from(n);
    let want_shorts = n64 * (per_short + per_batched);
    let each: u64 = (0..per_short).map(|i| i + 6).sum::<u64>() + (0..per_batched).sum::<u64>();
    // Wait until everything has arrived; the deadline only bounds the wait: what follows
    // checks every count again, so that a message lost for good fails the test.
    let deadline = Instant::now() + Duration::from_secs(60);
    e(w.worker().wait_for(|| {
        Instant::now() > deadline
            || (shorts.load(Ordering::Relaxed) == want_shorts
                && bulks.load(Ordering::Relaxed) == n64 * sizes.len() as u64
                && order.lock().unwrap().iter().all(|&c| c == per_ordered))
    }))?;
    let ordered = order.lock().unwrap().clone();
    if ordered != vec![per_ordered; n as usize] {
        return Err(format!(
            "channel-3 messages received per sender {ordered:?}; want {per_ordered} from each"
        ));
    }
    if shorts.load(Ordering::Relaxed) != want_shorts || sum.load(Ordering::Relaxed) != n64 * each {
        return Err(format!(
            "shorts {} sum {}; want {want_shorts} and {}",
            shorts.load(Ordering::Relaxed),
            sum.load(Ordering::Relaxed),
            n64 * each
        ));
    }
    if bulks.load(Ordering::Relaxed) != n64 * sizes.len() as u64 {
        return Err(format!("bulks {}", bulks.load(Ordering::Relaxed)));
    }
    let errs = bad.lock().unwrap().clone();
    if !errs.is_empty() {
        return Err(format!("{errs:?}"));
    }
    e(w.barrier())?;
    // A handler only rank 0 has: rank 0 sending it to rank 1 gets an error back.
    if n > 1 {
        let only = e(w.worker().handler_id("only-on-0"))?;
        if me == 1 {
            e(w.endpoint()
                .send_short(0, only, [0; 4], Channel::new(0), Delivery::Immediate))?;
        }
        if me == 0 {
            e(w.endpoint()
                .send_short(1, only, [0; 4], Channel::new(0), Delivery::Immediate))?;
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match w.worker().poll() {
                    Err(AmError::NoHandlerAtTarget { peer: 1, name, .. })
                        if name == "only-on-0" =>
                    {
                        break
                    }
                    Err(other) => return Err(format!("unexpected error {other}")),
                    Ok(_) if Instant::now() > deadline => {
                        return Err("no error came back for an unknown handler".into())
                    }
                    Ok(_) => std::thread::sleep(Duration::from_micros(100)),
                }
            }
            println!("rank 0: unknown handler reported back");
        }
    }
    e(w.barrier())?;
    println!("rank {me}: messages ok");
    e(w.finalize())
}

#[test]
fn short_bulk_batched_channels_and_errors() {
    rank_main(|_| messages_role());
    for t in TRANSPORTS {
        for n in [1u32, 3] {
            let o = launch(
                n,
                "short_bulk_batched_channels_and_errors",
                "x",
                &[("SPOOLS_TRANSPORT", t)],
            );
            assert_ok(&o);
            assert_eq!(
                o.stdout.matches("messages ok").count(),
                n as usize,
                "{t} {n}: {}",
                o.stdout
            );
            if n > 1 {
                assert!(o.stdout.contains("unknown handler reported back"), "{o:?}");
            }
        }
    }
}

/// Puts and gets of many sizes (to 8 MiB), checked on both sides; out-of-range and
/// unknown-region accesses fail at the initiator and touch nothing.
fn memory_role() -> Result<(), String> {
    let mut w = e(spools::init())?;
    let (me, n) = (w.rank(), w.size());
    let len = 8 << 20;
    let region = e(w.worker().region(len))?;
    let keys: Vec<u32> = e(w.allgather_bytes(&region.key().to_le_bytes()))?
        .iter()
        .map(|k| u32::from_le_bytes(k[..4].try_into().unwrap()))
        .collect();
    let right = (me + 1) % n;
    let key = keys[right as usize];
    for (i, &size) in [0usize, 1, 57, 4096, 100_000, 1 << 20, len]
        .iter()
        .enumerate()
    {
        let off = if size == len { 0 } else { 12_345 };
        let data = pattern(i as u64 + u64::from(me) * 100, size);
        e(w.endpoint().put(right, key, off as u64, &data))?;
        let mut back = vec![0u8; size];
        e(w.endpoint().get(right, key, off as u64, &mut back))?;
        if back != data {
            return Err(format!("get after put of {size} bytes differs"));
        }
    }
    e(w.barrier())?;
    // What the left neighbour wrote last is the whole region.
    let left = (me + n - 1) % n;
    if region.to_vec() != pattern(6 + u64::from(left) * 100, len) {
        return Err("region content differs from the last put".into());
    }
    e(w.barrier())?;
    // Out of range: refused at the target, nothing touched.
    let before = region.to_vec();
    e(w.barrier())?;
    match w.endpoint().put(right, key, (len - 10) as u64, &[1u8; 11]) {
        Err(AmError::OutOfBounds { op: "put", .. }) => {}
        other => return Err(format!("out-of-range put: {other:?}")),
    }
    match w.endpoint().put(right, key, u64::MAX - 3, &[1u8; 11]) {
        Err(AmError::OutOfBounds { .. }) => {}
        other => return Err(format!("overflowing put: {other:?}")),
    }
    let mut buf = vec![0u8; 100];
    match w.endpoint().get(right, key, len as u64 - 99, &mut buf) {
        Err(AmError::OutOfBounds { op: "get", .. }) => {}
        other => return Err(format!("out-of-range get: {other:?}")),
    }
    match w.endpoint().get(right, 999_999, 0, &mut buf) {
        Err(AmError::UnknownRegion { key: 999_999, .. }) => {}
        other => return Err(format!("unknown region: {other:?}")),
    }
    e(w.barrier())?;
    if region.to_vec() != before {
        return Err("a refused put changed the region".into());
    }
    e(w.barrier())?;
    // A region withdrawn after its neighbour has used it (and, over a network with
    // remote memory access, learnt its network key): later accesses are refused.
    let gone = e(w.worker().region(512 << 10))?;
    let gone_keys: Vec<u32> = e(w.allgather_bytes(&gone.key().to_le_bytes()))?
        .iter()
        .map(|k| u32::from_le_bytes(k[..4].try_into().unwrap()))
        .collect();
    let gone_key = gone_keys[right as usize];
    // Larger than one message: one-sided over libfabric.
    let big = vec![7u8; 300_000];
    e(w.endpoint().put(right, gone_key, 0, &big))?;
    e(w.barrier())?;
    drop(gone);
    e(w.barrier())?;
    match w.endpoint().put(right, gone_key, 0, &big) {
        Err(AmError::UnknownRegion { .. }) => {}
        other => return Err(format!("put into a withdrawn region: {other:?}")),
    }
    match w.endpoint().get(right, gone_key, 0, &mut buf) {
        Err(AmError::UnknownRegion { .. }) => {}
        other => return Err(format!("get from a withdrawn region: {other:?}")),
    }
    e(w.barrier())?;
    if std::env::var("SPOOLS_TEST_RMA").is_ok_and(|v| v == "1") {
        // Over libfabric the transfers larger than one message (256 KiB through shm,
        // 16 KiB through RxM) went one-sidedly.
        let wrote_at_least = (1u64 << 20) + len as u64 + 300_000;
        let read_at_least = (1u64 << 20) + len as u64;
        let rma = w.ofi().and_then(|t| t.rma().map(|r| r.moved()));
        match rma {
            Some((wrote, read)) if wrote >= wrote_at_least && read >= read_at_least => {
                println!("rank {me}: {wrote} bytes written and {read} read one-sidedly");
            }
            other => {
                return Err(format!(
                    "one-sided bytes (written, read): {other:?}, want at least ({wrote_at_least}, {read_at_least})"
                ))
            }
        }
    }
    println!("rank {me}: memory ok");
    e(w.finalize())
}

#[test]
fn put_get_bounds_checked() {
    rank_main(|_| memory_role());
    for t in TRANSPORTS {
        let o = launch(3, "put_get_bounds_checked", "x", &[("SPOOLS_TRANSPORT", t)]);
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("memory ok").count(),
            3,
            "{t}: {}",
            o.stdout
        );
    }
    // Over libfabric (remote memory access: one-sided writes and reads).
    for p in ofi_providers() {
        let o = launch(
            3,
            "put_get_bounds_checked",
            "x",
            &[
                ("SPOOLS_TRANSPORT", "ofi"),
                ("SPOOLS_OFI_PROVIDER", p),
                ("SPOOLS_TEST_RMA", "1"),
            ],
        );
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("memory ok").count(),
            3,
            "ofi {p}: {}",
            o.stdout
        );
        assert_eq!(
            o.stdout.matches("one-sidedly").count(),
            3,
            "ofi {p}: {}",
            o.stdout
        );
    }
}

/// Rank 0 gets 4 MiB from rank 1 while rank 1 computes without calling Spools. Decided by
/// events both ranks control, never by the clock:
///
/// - Rank 1 first says, through a file (`computing`), "I am computing and make no Spools
///   call until told": only then does rank 0 start the get, so the get can only progress
///   while rank 1 is provably outside Spools (a barrier or any other call still under way
///   on rank 1 cannot serve it).
/// - With the progress thread, rank 1 computes until rank 0 says (file `got`) that the get
///   has completed: the get progressed in the background. (The wait is bounded as a
///   safety net: if it runs out, rank 1 reports "after" and the test fails.)
/// - Without it, rank 1 computes until rank 0 tells it to stop (file `go`), then, before
///   any Spools call, checks whether the get completed meanwhile (file `got`): it must not
///   have, since nothing serves the get while rank 1 makes no Spools call. Rank 0 gives
///   the get a while to (wrongly) complete before it says `go`; that time only makes the
///   check more or less searching, it cannot change its outcome.
fn progress_role() -> Result<(), String> {
    let mut w = e(spools::init())?;
    let me = w.rank();
    let dir =
        std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let (computing, go, got) = (dir.join("computing"), dir.join("go"), dir.join("got"));
    let threaded = std::env::var("SPOOLS_PROGRESS_THREAD").is_ok_and(|v| v == "1");
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    e(w.worker()
        .register("done", move |_| d.store(true, Ordering::SeqCst)))?;
    e(w.worker().sync_handlers())?;
    let h = e(w.worker().handler_id("done"))?;
    let region = e(w.worker().region(4 << 20))?;
    e(region.write(0, &pattern(9, 4 << 20)))?;
    let key = e(w.bcast_bytes(1, &region.key().to_le_bytes()))?;
    let key = u32::from_le_bytes(key[..4].try_into().unwrap());
    e(w.barrier())?;
    if me == 1 {
        // From here until `stop` holds, no Spools call.
        signal_file(&computing, b"")?;
        let stop = if threaded { &got } else { &go };
        // The limit is a safety net only (a broken progress thread): the test then fails.
        compute_until(stop, Duration::from_secs(90));
        // Still before any Spools call.
        let served = got.exists();
        println!(
            "rank 0: get completed {} rank 1 finished computing",
            if served { "before" } else { "after" }
        );
        e(w.endpoint()
            .send_short(0, h, [1, 0, 0, 0], Channel::new(0), Delivery::Immediate))?;
    } else {
        wait_for_file(&computing, Duration::from_secs(90))?;
        if !threaded {
            // Stops rank 1's computation once the get has had its chance to complete
            // wrongly (it cannot complete before rank 1 calls Spools again).
            let go = go.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                let _ = signal_file(&go, b"");
            });
        }
        let mut buf = vec![0u8; 4 << 20];
        e(w.endpoint().get(1, key, 0, &mut buf))?;
        signal_file(&got, b"")?;
        if buf != pattern(9, 4 << 20) {
            return Err("get returned wrong bytes".into());
        }
        e(w.worker().wait_for(|| done.load(Ordering::SeqCst)))?;
    }
    e(w.barrier())?;
    e(w.finalize())
}

#[test]
fn progress_thread_makes_progress_while_the_target_computes() {
    rank_main(|_| progress_role());
    for t in TRANSPORTS {
        let dir = tempdir("progress-thread");
        let d = dir.to_str().unwrap();
        let o = launch(
            2,
            "progress_thread_makes_progress_while_the_target_computes",
            "x",
            &[
                ("SPOOLS_TRANSPORT", t),
                ("SPOOLS_PROGRESS_THREAD", "1"),
                ("SPOOLS_TEST_DIR", d),
            ],
        );
        assert_ok(&o);
        assert!(
            o.stdout
                .contains("get completed before rank 1 finished computing"),
            "{t}: {o:?}"
        );
        let dir = tempdir("progress-none");
        let d = dir.to_str().unwrap();
        let o = launch(
            2,
            "progress_thread_makes_progress_while_the_target_computes",
            "x",
            &[
                ("SPOOLS_TRANSPORT", t),
                ("SPOOLS_PROGRESS_THREAD", "0"),
                ("SPOOLS_TEST_DIR", d),
            ],
        );
        assert_ok(&o);
        assert!(
            o.stdout
                .contains("get completed after rank 1 finished computing"),
            "{t}: {o:?}"
        );
    }
}

/// World basics: rank, size, same_host, barrier, broadcast, allgather.
fn world_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let (me, n) = (w.rank(), w.size());
    if me >= n || !w.same_host(me) || (0..n).any(|r| !w.same_host(r)) || w.same_host(n) {
        return Err(format!("rank {me} size {n} same_host wrong"));
    }
    for root in 0..n {
        let got = e(w.bcast_bytes(root, format!("from {me}").as_bytes()))?;
        if got != format!("from {root}").into_bytes() {
            return Err(format!("broadcast from {root}: {got:?}"));
        }
    }
    let all = e(w.allgather_bytes(&me.to_le_bytes().repeat(me as usize + 1)))?;
    for (r, part) in all.iter().enumerate() {
        if *part != (r as u32).to_le_bytes().repeat(r + 1) {
            return Err(format!("allgather part {r}"));
        }
    }
    for _ in 0..50 {
        e(w.barrier())?;
    }
    println!("rank {me} of {n}: world ok");
    e(w.finalize())
}

#[test]
fn world_collectives_from_one_to_eight_ranks() {
    rank_main(|_| world_role());
    for n in [1u32, 2, 3, 8] {
        let o = launch(n, "world_collectives_from_one_to_eight_ranks", "x", &[]);
        assert_ok(&o);
        assert_eq!(
            o.stdout.matches("world ok").count(),
            n as usize,
            "{n}: {}",
            o.stdout
        );
    }
}
