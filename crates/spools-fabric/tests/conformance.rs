//! The transport conformance suite: every backend (shm, tcp, and libfabric on each provider
//! of `spools_testkit::OFI_TEST_PROVIDERS` this machine has: tcp;ofi_rxm, shm) runs the
//! same tests, each with real processes under the real launcher (`spools_testkit::Job`):
//! ordering, large and zero-length messages, many peers, flooding in both directions, a
//! peer that dies, priorities, polling one sender's messages, and what `flush` no longer
//! holds reaching the receiver without the sender's calls. Every failure names its
//! backend (`shm`, `tcp`, `ofi:<provider>`), in the test's assertion and in the rank's
//! error; `SPOOLS_TEST_BACKENDS` (comma-separated names) runs only the backends it lists.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spools::{Priority, Transport, World};
use spools_testkit::{
    assert_ok_as, checked, e, ofi_providers, rank_main, signal_file, tempdir, wait_for_file, Job,
};

/// Every backend: shared memory, TCP, and libfabric on each provider this machine has
/// (`ofi:<provider>`). `SPOOLS_TEST_BACKENDS` (a comma-separated list of these names,
/// e.g. `ofi:tcp;ofi_rxm`) keeps only those, to run one backend again and again.
fn backends() -> Vec<String> {
    let mut v = vec!["shm".to_string(), "tcp".to_string()];
    v.extend(ofi_providers().into_iter().map(|p| format!("ofi:{p}")));
    if let Ok(only) = std::env::var("SPOOLS_TEST_BACKENDS") {
        let only: Vec<&str> = only.split(',').map(str::trim).collect();
        v.retain(|b| only.contains(&b.as_str()));
        assert!(
            !v.is_empty(),
            "SPOOLS_TEST_BACKENDS={only:?} names none of this machine's backends"
        );
    }
    v
}

/// The backend a rank runs over, as the test names it (`shm`, `tcp`, `ofi:<provider>`).
fn backend_here() -> String {
    match std::env::var("SPOOLS_TEST_BACKEND").as_deref() {
        Ok("ofi") => format!(
            "ofi:{}",
            std::env::var("SPOOLS_OFI_PROVIDER").unwrap_or_default()
        ),
        Ok(b) => b.to_string(),
        Err(_) => "shm".to_string(),
    }
}

/// [`checked`], with the backend named in the rank's error.
fn checked_here<W>(w: &W, body: impl FnOnce(&W) -> Result<(), String>) {
    checked(w, |w| over_here(body(w)));
}

/// A rank's result, with the backend named in its error.
fn over_here(r: Result<(), String>) -> Result<(), String> {
    r.map_err(|x| format!("over {}: {x}", backend_here()))
}

/// Asserts that the job of `test` over backend `b` succeeded, naming both otherwise.
fn assert_ok_over(o: &spools_testkit::Output, test: &str, b: &str) {
    assert_ok_as(o, &format!("{test} over {b}"));
}

fn env_for(backend: &str) -> Vec<(&'static str, String)> {
    match backend.strip_prefix("ofi:") {
        Some(p) => vec![
            ("SPOOLS_TRANSPORT", "ofi".into()),
            ("SPOOLS_OFI_PROVIDER", p.into()),
            ("SPOOLS_TEST_BACKEND", "ofi".into()),
        ],
        None if backend == "tcp" => vec![
            ("SPOOLS_TRANSPORT", "tcp".into()),
            ("SPOOLS_TEST_BACKEND", "tcp".into()),
        ],
        None => vec![
            ("SPOOLS_TRANSPORT", "auto".into()),
            ("SPOOLS_TEST_BACKEND", "shm".into()),
        ],
    }
}

fn transport(w: &World) -> Result<Arc<dyn Transport>, String> {
    match std::env::var("SPOOLS_TEST_BACKEND").as_deref() {
        Ok("tcp") => Ok(w.tcp().ok_or("no tcp")?.clone() as Arc<dyn Transport>),
        Ok("ofi") => Ok(w.ofi().ok_or("no ofi")?.clone() as Arc<dyn Transport>),
        _ => Ok(w.shm().ok_or("no shm")?.clone() as Arc<dyn Transport>),
    }
}

/// Runs `test` with `n` ranks on each backend and checks that every rank printed `line`.
fn on_each_backend(n: u32, test: &str, line: &str) {
    for b in backends() {
        let b = b.as_str();
        let o = Job::new(n, test).role("x").envs(&env_for(b)).run();
        assert_ok_over(&o, test, b);
        assert_eq!(
            o.stdout.matches(line).count(),
            n as usize,
            "{b}: {}",
            o.stdout
        );
    }
}

/// A message body: sender, sequence number, then a pattern derived from both.
fn body(from: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(12));
    v.extend_from_slice(&from.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(from);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v.truncate(len.max(12));
    v
}

/// Receives and checks messages: per (sender, lane, priority) the sequence numbers must
/// be consecutive and the bytes must match the pattern.
#[derive(Default)]
struct Checker {
    next: HashMap<(u32, u16, usize), u64>,
    got: u64,
    errors: Vec<String>,
}

impl Checker {
    /// Ok when every message arrived in order and intact.
    fn verdict(&self) -> Result<(), String> {
        if self.errors.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} errors, first: {:?}",
            self.errors.len(),
            &self.errors[..self.errors.len().min(3)]
        ))
    }

    fn take(
        &mut self,
        from: u32,
        lane: u16,
        prio: Priority,
        bytes: &[u8],
        lens: &dyn Fn(u64) -> usize,
    ) {
        self.got += 1;
        if bytes.len() < 12 {
            self.errors
                .push(format!("short message of {} bytes", bytes.len()));
            return;
        }
        let f = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        let seq = u64::from_le_bytes(bytes[4..12].try_into().unwrap());
        let want = self.next.entry((from, lane, prio.index())).or_insert(0);
        if f != from || seq != *want {
            self.errors.push(format!("from {from} lane {lane} {prio:?}: got seq {seq} (sender field {f}), expected {want}"));
        }
        *want = seq + 1;
        if bytes != body(from, seq, lens(seq)).as_slice() {
            self.errors.push(format!(
                "from {from} seq {seq}: wrong bytes ({} long)",
                bytes.len()
            ));
        }
    }
}

fn send(
    t: &dyn Transport,
    lane: usize,
    prio: Priority,
    peer: u32,
    msg: &[u8],
    ck: &mut Checker,
    lens: &dyn Fn(u64) -> usize,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if e(t.try_send(lane, prio, peer, &[msg]))? {
            return Ok(());
        }
        e(t.poll(&mut |m| ck.take(m.from, m.lane, m.priority, m.bytes, lens)))?;
        t.wait(Duration::from_millis(1));
        if Instant::now() > deadline {
            return Err("send blocked for 60 s".into());
        }
    }
}

fn drain_until(
    t: &dyn Transport,
    ck: &mut Checker,
    want: u64,
    lens: &dyn Fn(u64) -> usize,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    // Our own queued bytes (TCP partial writes) must keep moving while we drain, and be
    // out before we stop polling: a peer may still be waiting for them.
    let mut queued = true;
    while ck.got < want || queued {
        queued = e(t.flush(1))?;
        if e(t.poll(&mut |m| ck.take(m.from, m.lane, m.priority, m.bytes, lens)))? == 0 {
            t.wait(Duration::from_millis(if queued { 1 } else { 5 }));
        }
        if Instant::now() > deadline {
            // Where each stream stopped: a stream whose next sequence number is short of
            // what its sender sent lost its last messages (a gap in the middle is
            // reported by the checker as an out-of-order sequence number).
            let mut next: Vec<_> = ck.next.iter().collect();
            next.sort();
            return Err(format!(
                "received {} of {want} messages in 60 s (own bytes still queued: {queued}; next sequence number expected per (sender, lane, priority): {next:?}; {})",
                ck.got,
                ck.verdict().err().unwrap_or_else(|| "none out of order or damaged".into())
            ));
        }
    }
    Ok(())
}

#[test]
fn ordering_sizes_and_many_peers() {
    rank_main(|_| over_here(ordering_by_priority_role()));
    on_each_backend(5, "ordering_sizes_and_many_peers", "in order and intact");
}

/// Every rank sends to every other rank messages of many sizes (12-byte tags only, one
/// cell, several cells, the largest message), at both priorities; everyone checks order
/// and content per (sender, lane, priority) stream.
fn ordering_by_priority_role() -> Result<(), String> {
    let w = e(spools::init())?;
    // On an error, exit at once (the launcher stops the job) instead of finalising,
    // which would wait for a peer that waits for this rank.
    checked_here(&w, |w| {
        let t = transport(w)?;
        let caps = t.caps().clone();
        let max = caps.max_message.min(1 << 20);
        let sizes = [12usize, 13, 56, 57, 200, 4096, caps.max_inline.max(12), max];
        let lens = move |seq: u64| sizes[(seq % sizes.len() as u64) as usize];
        let (me, n) = (w.rank(), w.size());
        let per = 48u64;
        let mut ck = Checker::default();
        for seq in 0..per {
            for peer in (0..n).filter(|&p| p != me) {
                for prio in [Priority::Low, Priority::High] {
                    let msg = body(me, seq, lens(seq));
                    send(&*t, 1, prio, peer, &msg, &mut ck, &lens)?;
                }
            }
        }
        drain_until(&*t, &mut ck, 2 * per * u64::from(n - 1), &lens)?;
        ck.verdict()?;
        e(w.runtime_barrier())?;
        println!("rank {me}: {} messages in order and intact", ck.got);
        Ok(())
    });
    e(w.finalize())
}

/// Two ranks flood each other without pausing: each polls only when its sends are
/// refused. Nothing may be lost, duplicated or reordered, and neither may deadlock.
fn flood_role() -> Result<(), String> {
    let w = e(spools::init())?;
    // On an error, exit at once (the launcher stops the job) instead of finalising,
    // which would wait for a peer that waits for this rank.
    checked_here(&w, |w| {
        let t = transport(w)?;
        let (me, peer) = (w.rank(), 1 - w.rank());
        let count: u64 = 200_000;
        let lens = |seq: u64| 12 + (seq % 50) as usize;
        let mut ck = Checker::default();
        for seq in 0..count {
            let msg = body(me, seq, lens(seq));
            send(&*t, 1, Priority::Low, peer, &msg, &mut ck, &lens)?;
        }
        drain_until(&*t, &mut ck, count, &lens)?;
        ck.verdict()?;
        e(w.runtime_barrier())?;
        println!("rank {me}: flood of {} received intact", ck.got);
        Ok(())
    });
    e(w.finalize())
}

#[test]
fn flooding_in_both_directions() {
    rank_main(|_| over_here(flood_role()));
    on_each_backend(2, "flooding_in_both_directions", "received intact");
}

/// Waits for the launcher to end the job (for another rank's death): a rank that exited
/// here by itself could be seen first and reported instead. The launcher's timeout bounds
/// the wait.
fn park_until_stopped() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Says (through a file written atomically) that this rank has reported what it detected,
/// then waits for the launcher to end the job.
fn detected(rank: u32) -> ! {
    let _ = std::io::Write::flush(&mut std::io::stdout());
    if let Ok(dir) = std::env::var("SPOOLS_TEST_DIR") {
        let _ = signal_file(
            &std::path::Path::new(&dir).join(format!("detected.{rank}")),
            b"",
        );
    }
    park_until_stopped();
}

/// Rank 2 dies by SIGKILL; rank 0, sending to it, must get an error naming it.
fn peer_dies_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let t = transport(&w)?;
    e(w.runtime_barrier())?;
    match w.rank() {
        2 => {
            std::process::Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status()
                .map_err(|x| x.to_string())?;
            park_until_stopped();
        }
        0 => {
            let msg = vec![7u8; 1000];
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match t.try_send(1, Priority::Low, 2, &[&msg]) {
                    Ok(true) => {}
                    Ok(false) => {
                        t.poll(&mut |_| {}).ok();
                        t.wait(Duration::from_millis(2));
                    }
                    Err(err) => {
                        println!("rank 0 detected: {err}");
                        detected(0);
                    }
                }
                if Instant::now() > deadline {
                    return Err("no error after 30 s".into());
                }
            }
        }
        _ => {
            // Waits in a collective that can never complete: must fail, not hang.
            match w.runtime_barrier() {
                Ok(()) => Err("barrier completed without rank 2".into()),
                Err(err) => {
                    println!("rank 1 detected: {err}");
                    detected(1);
                }
            }
        }
    }
}

/// Decided by events, whatever the load: the launcher's grace is far longer than the test
/// (it never kills the survivors by itself); the test reads the launcher's report of the
/// failure as it comes, waits for both survivors to say they detected it, and only then
/// stops the job (SIGTERM), which keeps the status of the failure already reported.
#[test]
fn a_peer_that_dies_is_reported() {
    rank_main(|_| over_here(peer_dies_role()));
    for b in backends() {
        let b = b.as_str();
        let dir = tempdir(&format!("dies-{b}"));
        let mut env = env_for(b);
        let d = dir.to_string_lossy().into_owned();
        env.push(("SPOOLS_TEST_DIR", d.clone()));
        let job = Job::new(3, "a_peer_that_dies_is_reported")
            .envs(&env)
            .grace(Duration::from_secs(600));
        let mut run = job.start();
        let err = run.child().stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(err)) {
                let Ok(line) = line else { break };
                if line.starts_with("spools run: rank ") {
                    let _ = tx.send(line.clone());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let report = rx.recv_timeout(Duration::from_secs(120));
        for r in [0, 1] {
            if report.is_err() {
                break;
            }
            wait_for_file(&dir.join(format!("detected.{r}")), Duration::from_secs(120))
                .unwrap_or_else(|x| panic!("{b}: {x}"));
        }
        run.signal("-TERM");
        let o = run.wait(Duration::from_secs(120));
        let stderr = reader.join().unwrap();
        let report = report.unwrap_or_else(|_| panic!("{b}: no failure reported: {stderr}{o:?}"));
        assert!(
            report.contains("rank 2 was killed by signal 9"),
            "{b}: {report}\n{stderr}{o:?}"
        );
        assert_eq!(o.code(), Some(128 + 9), "{b}: {stderr}{o:?}");
        assert!(
            o.stdout.contains("rank 0 detected:") && o.stdout.contains("rank 2"),
            "{b}: {o:?}"
        );
        assert!(o.stdout.contains("rank 1 detected:"), "{b}: {o:?}");
    }
}

/// Each rank states its transport's capabilities, has an oversized message refused, and
/// sends its peer three empty messages, which must arrive as such.
fn caps_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let t = transport(&w)?;
    let c = t.caps().clone();
    {
        println!(
            "caps {} max_message={} max_inline={} ordered={} lanes={}",
            c.name, c.max_message, c.max_inline, c.ordered, c.lanes
        );
        if c.max_message < c.max_inline || c.max_message < 4096 || !c.ordered || c.lanes < 1 {
            return Err(format!("implausible capabilities {c:?}"));
        }
        // A message one byte over the limit is refused, not truncated.
        let peer = 1 - w.rank();
        let too_big = vec![0u8; c.max_message + 1];
        if !matches!(
            t.try_send(1, Priority::Low, peer, &[&too_big]),
            Err(spools::FabricError::TooLarge { .. })
        ) {
            return Err("an oversized message was not refused".into());
        }
        // Zero-length messages arrive as such.
        for _ in 0..3 {
            while !e(t.try_send(1, Priority::Low, peer, &[]))? {
                t.wait(Duration::from_millis(1));
            }
        }
        let mut empty = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while empty < 3 && Instant::now() < deadline {
            e(t.poll(&mut |m| {
                if m.bytes.is_empty() && m.from == peer {
                    empty += 1;
                }
            }))?;
            t.wait(Duration::from_millis(1));
        }
        if empty != 3 {
            return Err(format!("{empty} of 3 empty messages arrived"));
        }
        println!("rank {}: empty messages arrived", w.rank());
    }
    e(w.runtime_barrier())?;
    e(w.finalize())
}

#[test]
fn capabilities_are_stated_and_empty_messages_arrive() {
    rank_main(|_| over_here(caps_role()));
    for b in backends() {
        let b = b.as_str();
        let o = Job::new(2, "capabilities_are_stated_and_empty_messages_arrive")
            .role("x")
            .envs(&env_for(b))
            .run();
        assert_ok_over(&o, "capabilities_are_stated_and_empty_messages_arrive", b);
        let name = b.split(':').next().unwrap_or(b);
        assert!(o.stdout.contains(&format!("caps {name} ")), "{b}: {o:?}");
        assert_eq!(
            o.stdout.matches("empty messages arrived").count(),
            2,
            "{b}: {o:?}"
        );
    }
}

/// Opens both priorities' paths: rank 1 sends one message of each priority; rank 0
/// receives both (so both paths are open and adopted) and says so through a file; rank 1
/// waits for that.
fn warm_up(rank: u32, t: &dyn Transport, dir: &std::path::Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let warmed = dir.join("warmed");
    if rank == 1 {
        for p in [Priority::Low, Priority::High] {
            while !e(t.try_send(1, p, 0, &[b"warm"]))? {
                e(t.poll(&mut |_| {}))?;
                if Instant::now() > deadline {
                    return Err("could not send the warm-up".into());
                }
            }
        }
        while !warmed.exists() {
            e(t.flush(1))?;
            e(t.poll(&mut |_| {}))?;
            t.wait(Duration::from_millis(1));
            if Instant::now() > deadline {
                return Err("rank 0 never received the warm-up".into());
            }
        }
    } else {
        let mut seen = Vec::new();
        while seen.len() < 2 {
            e(t.poll(&mut |m| seen.push((m.priority, m.bytes.to_vec()))))?;
            if Instant::now() > deadline {
                return Err(format!("warm-up: received only {seen:?}"));
            }
        }
        if seen.iter().any(|(_, b)| b != b"warm") {
            return Err(format!("warm-up: unexpected {seen:?}"));
        }
        signal_file(&warmed, b"")?;
    }
    Ok(())
}

/// Rank 1 fills its low-priority path to rank 0 while rank 0 does not poll, until the
/// transport pushes back, then sends one high-priority message: it must be accepted at
/// once, and rank 0 must receive it before the low-priority backlog drains.
///
/// Decided by events only. Rank 1 makes no transport call from the moment it says (through
/// a file) that the backlog is in until rank 0 says it has the high-priority message, so
/// whatever part of the backlog the transport still holds on rank 1's side (with TCP: the
/// bytes it queued when the socket pushed back, at least one whole message) cannot reach
/// rank 0 meanwhile: a transport that served the backlog before the high-priority message
/// would never deliver it (the bounded wait then fails the test), and one that serves
/// priorities delivers it after fewer than all of the backlog's messages, however the
/// processes and the kernel's delivery are scheduled. With shared memory the message is in
/// the high-priority ring before rank 0 polls at all, so it must be the very first.
fn priority_role() -> Result<(), String> {
    let w = e(spools::init())?;
    // On an error, exit at once (the launcher stops the job) instead of finalising,
    // which would wait for a peer that waits for this rank.
    checked_here(&w, |w| {
        let t = transport(w)?;
        let dir =
            std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
        e(w.runtime_barrier())?;
        // Open both priorities' paths first (TCP connects lazily, and the receiver adopts a
        // new connection on its own thread): the test is about delivery order, not about
        // which connection the receiver happens to have adopted by its first poll.
        warm_up(w.rank(), &*t, &dir)?;
        let (filled, urgent, done) = (dir.join("filled"), dir.join("urgent"), dir.join("done"));
        if w.rank() == 1 {
            let msg = vec![1u8; 4000];
            let mut sent = 0u64;
            let deadline = Instant::now() + Duration::from_secs(60);
            // Fill: low-priority messages until the transport pushes back.
            loop {
                if !e(t.try_send(1, Priority::Low, 0, &[&msg]))? {
                    break;
                }
                sent += 1;
                if Instant::now() > deadline {
                    return Err("the low-priority buffer never filled".into());
                }
            }
            if !e(t.try_send(1, Priority::High, 0, &[b"urgent"]))? {
                return Err(
                    "a high-priority message was refused behind a full low-priority buffer".into(),
                );
            }
            signal_file(&filled, sent.to_string().as_bytes())?;
            // No transport call until rank 0 has the high-priority message (see above).
            spools_testkit::wait_for_file(&urgent, Duration::from_secs(60)).map_err(|x| {
                format!("rank 0 never received the high-priority message while the low-priority backlog was held back ({x})")
            })?;
            // Let the rest of the backlog go (a transport pushes out what it queued when
            // its owner polls or flushes).
            while !done.exists() {
                e(t.flush(1))?;
                e(t.poll(&mut |_| {}))?;
                t.wait(Duration::from_millis(1));
                if Instant::now() > deadline + Duration::from_secs(60) {
                    return Err("rank 0 never received the backlog".into());
                }
            }
            println!("rank 1: filled with {sent} messages");
        } else {
            // Do not poll until rank 1 says its high-priority message is in.
            spools_testkit::wait_for_file(&filled, Duration::from_secs(60))?;
            let sent: u64 = std::fs::read_to_string(&filled)
                .map_err(|x| x.to_string())?
                .parse()
                .map_err(|_| "count")?;
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut low = 0u64;
            let mut high = None;
            let mut others = Vec::new();
            while high.is_none() {
                e(t.poll(&mut |m| match m.priority {
                    Priority::High if high.is_none() => high = Some((low, m.bytes.to_vec())),
                    Priority::Low if m.bytes.len() == 4000 => low += 1,
                    p => others.push((p, m.bytes.to_vec())),
                }))?;
                if Instant::now() > deadline {
                    return Err(format!(
                        "the high-priority message did not arrive while rank 1 held back part of its low-priority backlog: received {low} of {sent} low-priority messages"
                    ));
                }
            }
            match high {
                Some((before, b)) if b == b"urgent" && before < sent && others.is_empty() => {
                    println!("rank 0: high priority delivered after {before} of {sent} low-priority messages, before the backlog drained");
                    if before == 0 {
                        println!("rank 0: high priority delivered first");
                    }
                }
                other => {
                    return Err(format!(
                        "high-priority delivery {other:?} (after that many of {sent} low-priority messages); also received {others:?}"
                    ))
                }
            }
            signal_file(&urgent, b"")?;
            // Drain the rest so rank 1 can finish.
            while low < sent {
                if e(t.poll(&mut |_| low += 1))? == 0 {
                    t.wait(Duration::from_millis(1));
                }
                if Instant::now() > deadline + Duration::from_secs(60) {
                    return Err(format!("received {low} of {sent} messages"));
                }
            }
            signal_file(&done, b"")?;
        }
        e(w.runtime_barrier())?;
        Ok(())
    });
    e(w.finalize())
}

#[test]
fn high_priority_is_not_stuck_behind_low() {
    rank_main(|_| over_here(priority_role()));
    for b in backends() {
        let b = b.as_str();
        let dir = tempdir(&format!("prio-{b}"));
        let mut env = env_for(b);
        let d = dir.to_string_lossy().into_owned();
        env.push(("SPOOLS_TEST_DIR", d.clone()));
        // Nothing but the rank's own calls moves its transport (see `priority_role`).
        env.push(("SPOOLS_PROGRESS_THREAD", "0".into()));
        let o = Job::new(2, "high_priority_is_not_stuck_behind_low")
            .role("x")
            .envs(&env)
            .run();
        assert_ok_over(&o, "high_priority_is_not_stuck_behind_low", b);
        assert!(
            o.stdout.contains("before the backlog drained"),
            "{b}: {o:?}"
        );
        if b == "shm" {
            assert!(
                o.stdout.contains("rank 0: high priority delivered first"),
                "{b}: {o:?}"
            );
        }
    }
}

/// Ranks 1 and 2 each send rank 0 a few messages and say so through a file (a
/// `World::barrier` would poll the transports and take the messages); rank 0 polls rank 2's messages
/// only (`Transport::poll_from`) until all of them came, then the rest. Every message
/// arrives once, in order and intact; shared memory, which reads each sender's rings
/// apart, gives nothing of rank 1's while asked for rank 2's.
fn poll_from_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked_here(&w, |w| {
        let t = transport(w)?;
        let dir =
            std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
        let me = w.rank();
        let per = 16u64;
        let lens = |seq: u64| 12 + (seq as usize * 37) % 200;
        let mut ck = Checker::default();
        if me != 0 {
            for seq in 0..per {
                send(
                    &*t,
                    1,
                    Priority::Low,
                    0,
                    &body(me, seq, lens(seq)),
                    &mut ck,
                    &lens,
                )?;
            }
            // Our own bytes must be out before rank 0 counts on them.
            let deadline = Instant::now() + Duration::from_secs(60);
            while e(t.flush(1))? {
                t.wait(Duration::from_millis(1));
                if Instant::now() > deadline {
                    return Err("own bytes still queued after 60 s".into());
                }
            }
            signal_file(&dir.join(format!("sent-{me}")), b"")?;
        } else {
            for r in [1, 2] {
                wait_for_file(&dir.join(format!("sent-{r}")), Duration::from_secs(60))?;
            }
            let mut from = [0u64; 3];
            let deadline = Instant::now() + Duration::from_secs(60);
            while from[2] < per {
                e(t.poll_from(2, &mut |m| {
                    from[m.from as usize % 3] += 1;
                    ck.take(m.from, m.lane, m.priority, m.bytes, &lens)
                }))?;
                if Instant::now() > deadline {
                    return Err(format!("{} of rank 2's {per} messages in 60 s", from[2]));
                }
            }
            let selective = std::env::var("SPOOLS_TEST_BACKEND").as_deref() == Ok("shm");
            if selective && from[1] != 0 {
                return Err(format!(
                    "poll_from(2) delivered {} of rank 1's messages",
                    from[1]
                ));
            }
            drain_until(&*t, &mut ck, 2 * per, &lens)?;
            ck.verdict()?;
        }
        e(w.runtime_barrier())?;
        println!("rank {me}: one sender's messages polled apart, in order and intact");
        Ok(())
    });
    e(w.finalize())
}

#[test]
fn polling_one_sender_delivers_its_messages_in_order() {
    rank_main(|_| over_here(poll_from_role()));
    for b in backends() {
        let b = b.as_str();
        let dir = tempdir("conformance-poll-from");
        let mut env = env_for(b);
        env.push(("SPOOLS_TEST_DIR", dir.path().to_str().unwrap().into()));
        let o = Job::new(3, "polling_one_sender_delivers_its_messages_in_order")
            .role("x")
            .envs(&env)
            .run();
        assert_ok_over(&o, "polling_one_sender_delivers_its_messages_in_order", b);
        assert_eq!(
            o.stdout
                .matches("polled apart, in order and intact")
                .count(),
            3,
            "{b}: {}",
            o.stdout
        );
    }
}

/// Rank 1 sends rank 0 small messages until the transport pushes back, while rank 0 does
/// not poll; then it flushes until the transport says nothing of its is queued, and from
/// then on makes no transport call at all until rank 0 says it has every message. Rank 0
/// must receive them all, in order and intact: what `flush` does not report as queued
/// must reach the receiver by the receiver's calls alone (a rank that finished sending and
/// flushing may wait in a collective that does not drive this transport, or end).
///
/// Decided by events only. When the sender first flushes, its receiver has not read a
/// byte, so whatever the transport holds back at the push-back (TCP: the bytes the kernel
/// did not take; libfabric over `tcp;ofi_rxm`: the sends the provider queued behind a
/// full socket) cannot have gone yet: a transport whose `flush` said "nothing queued"
/// then would leave those messages with a sender that never calls it again, and the
/// bounded receive fails.
fn flushed_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked_here(&w, |w| {
        let t = transport(w)?;
        let dir =
            std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
        let (filled, flushed, received) = (
            dir.join("filled"),
            dir.join("flushed"),
            dir.join("received"),
        );
        let lens = |seq: u64| 12 + (seq % 50) as usize;
        e(w.runtime_barrier())?;
        if w.rank() == 1 {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut sent = 0u64;
            // Fill: until the transport pushes back (rank 0 is not polling).
            while e(t.try_send(1, Priority::Low, 0, &[&body(1, sent, lens(sent))]))? {
                sent += 1;
                if Instant::now() > deadline {
                    return Err(format!("no push-back after {sent} messages in 60 s"));
                }
            }
            // Flush while rank 0 drains, until nothing of ours is queued; rank 0 starts
            // draining once it learns the count (after the first flush).
            let mut told = false;
            loop {
                let queued = e(t.flush(1))?;
                if !told {
                    signal_file(&filled, sent.to_string().as_bytes())?;
                    told = true;
                }
                if !queued {
                    break;
                }
                // Only sends are under way here: a receive would be a protocol error.
                let mut unexpected = 0u32;
                e(t.poll(&mut |_| unexpected += 1))?;
                if unexpected != 0 {
                    return Err(format!("{unexpected} unexpected messages"));
                }
                t.wait(Duration::from_millis(1));
                if Instant::now() > deadline {
                    return Err(format!(
                        "own messages still queued 60 s after the push-back ({sent} sent)"
                    ));
                }
            }
            signal_file(&flushed, b"")?;
            // No transport call from here until rank 0 has everything (see above).
            wait_for_file(&received, Duration::from_secs(120)).map_err(|x| {
                format!("rank 0 never received all {sent} messages, which flush had said were no longer queued here ({x})")
            })?;
            println!("rank 1: {sent} messages out, flushed, then silent");
        } else {
            wait_for_file(&filled, Duration::from_secs(60))?;
            let sent: u64 = std::fs::read_to_string(&filled)
                .map_err(|x| x.to_string())?
                .parse()
                .map_err(|_| "count")?;
            let mut ck = Checker::default();
            let deadline = Instant::now() + Duration::from_secs(60);
            while ck.got < sent {
                if e(t.poll(&mut |m| ck.take(m.from, m.lane, m.priority, m.bytes, &lens)))? == 0 {
                    t.wait(Duration::from_millis(1));
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "received {} of the {sent} messages rank 1 sent (it had flushed: {}; next sequence number expected: {:?}) in 60 s",
                        ck.got,
                        flushed.exists(),
                        ck.next
                    ));
                }
            }
            ck.verdict()?;
            signal_file(&received, b"")?;
            println!("rank 0: all {sent} flushed messages received without the sender's help");
        }
        e(w.runtime_barrier())?;
        Ok(())
    });
    e(w.finalize())
}

#[test]
fn what_flush_no_longer_holds_arrives_without_the_sender() {
    rank_main(|_| over_here(flushed_role()));
    for b in backends() {
        let b = b.as_str();
        let dir = tempdir(&format!("flushed-{b}"));
        let mut env = env_for(b);
        env.push(("SPOOLS_TEST_DIR", dir.to_string_lossy().into_owned()));
        // Nothing but the rank's own calls moves its transport.
        env.push(("SPOOLS_PROGRESS_THREAD", "0".into()));
        let test = "what_flush_no_longer_holds_arrives_without_the_sender";
        let o = Job::new(2, test).role("x").envs(&env).run();
        assert_ok_over(&o, test, b);
        assert!(
            o.stdout.contains("received without the sender's help")
                && o.stdout.contains("flushed, then silent"),
            "{b}: {o:?}"
        );
    }
}
