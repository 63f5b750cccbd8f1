//! A one-sided read over libfabric lands straight in the caller's memory (where the
//! provider needs no local registration and progresses only inside calls to it). If the
//! job fails while such a read is in flight, the read is abandoned and the transport is
//! fenced: it never calls the provider again, so the bytes cannot land after the call
//! returned, in memory the caller may have freed.
//!
//! Rank 1 exposes 64 MiB and stops itself (SIGSTOP: its provider can no longer answer);
//! rank 0 reads them; rank 2 dies. Rank 0's read must fail naming a death, and every
//! later call must fail too (a `poll` that reached the provider would answer `Ok`).
//! Only over `tcp;ofi_rxm`: the `shm` provider reads a stopped peer's memory itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use spools::{Priority, Transport};
use spools_fabric::{Access, FabricError, RemoteRegion, Rma};
use spools_testkit::{e, ofi_providers, rank_main, signal_file, tempdir, wait_for_file, Job};

const LEN: usize = 64 << 20;

/// Waits for the launcher to end the job (the test stops it once rank 0 has reported).
fn park() -> ! {
    let _ = std::io::Write::flush(&mut std::io::stdout());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Polls `t` until `want` says a message is the one awaited (60 s at most).
fn await_message(t: &dyn Transport, want: &mut dyn FnMut(&[u8]) -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = false;
    while !got {
        e(t.poll(&mut |m| got |= want(m.bytes)))?;
        if !got {
            t.wait(Duration::from_millis(5));
        }
        if Instant::now() > deadline {
            return Err("no message in 60 s".into());
        }
    }
    Ok(())
}

/// Sends `msg` to `peer` (60 s at most for room).
fn send(t: &dyn Transport, peer: u32, msg: &[u8]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !e(t.try_send(0, Priority::Low, peer, &[msg]))? {
        e(t.poll(&mut |_| {}))?;
        t.wait(Duration::from_millis(1));
        if Instant::now() > deadline {
            return Err("no room to send in 60 s".into());
        }
    }
    while e(t.flush(0))? {}
    Ok(())
}

/// Whether process `pid` is stopped (state `T` in /proc).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

fn signal(sig: &str, pid: u32) -> Result<(), String> {
    std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(|x| x.to_string())
        .map(drop)
}

fn fence_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let t = w.ofi().ok_or("no libfabric transport")?.clone();
    let rma = t.rma().ok_or("the provider has no one-sided operations")?;
    e(w.runtime_barrier())?;
    match w.rank() {
        1 => {
            let mut mem = vec![0x5au8; LEN];
            // SAFETY: `mem` lives until the process ends (this role never returns).
            let at = e(unsafe { rma.expose(7, mem.as_mut_ptr(), LEN, Access::Read) })?;
            let mut msg = Vec::new();
            for v in [at.addr, at.key, at.len, u64::from(std::process::id())] {
                msg.extend_from_slice(&v.to_le_bytes());
            }
            send(&*t, 0, &msg)?;
            await_message(&*t, &mut |b| b == b"stop")?;
            signal("-STOP", std::process::id())?;
            // Continued by rank 0 once it is fenced: its read requests are answered now.
            loop {
                if t.poll(&mut |_| {}).is_err() {
                    break;
                }
                t.wait(Duration::from_millis(5));
            }
            std::hint::black_box(&mem);
            park();
        }
        2 => {
            await_message(&*t, &mut |b| b == b"die")?;
            signal("-KILL", std::process::id())?;
            park();
        }
        _ => {
            let done = reader(&*t, rma);
            // Said either way, so that the test stops the job at once.
            if let Ok(dir) = std::env::var("SPOOLS_TEST_DIR") {
                e(signal_file(&std::path::Path::new(&dir).join("fenced"), b""))?;
            }
            done?;
            park();
        }
    }
}

/// Rank 0: reads rank 1's memory once rank 1 is stopped and rank 2 is told to die.
fn reader(t: &dyn Transport, rma: &dyn Rma) -> Result<(), String> {
    let mut words = [0u64; 4];
    await_message(t, &mut |b| {
        if b.len() != 32 {
            return false;
        }
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        }
        true
    })?;
    let at = RemoteRegion {
        addr: words[0],
        key: words[1],
        len: words[2],
    };
    let pid = words[3] as u32;
    send(t, 1, b"stop")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stopped(pid) {
        if Instant::now() > deadline {
            return Err(format!("rank 1 (pid {pid}) not stopped after 60 s"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    send(t, 2, b"die")?;
    let mut dst = vec![0u8; LEN];
    match rma.read(1, at, 0, &mut dst) {
        Ok(()) => return Err("the read of a stopped rank completed".into()),
        Err(FabricError::PeerFailed(f)) => println!("rank 0 read failed: {f}"),
        Err(other) => return Err(format!("the read failed otherwise: {other}")),
    }
    // Fenced: even a poll, which would reach the provider, fails now.
    match t.poll(&mut |_| {}) {
        Ok(n) => return Err(format!("poll after the abandoned read answered Ok({n})")),
        Err(err) => println!("rank 0 fenced: {err}"),
    }
    signal("-CONT", pid)
}

#[test]
fn a_read_abandoned_in_flight_fences_the_transport() {
    rank_main(|_| fence_role());
    if !ofi_providers().contains(&"tcp;ofi_rxm") {
        return;
    }
    let dir = tempdir("fence");
    let env = [
        ("SPOOLS_TRANSPORT", "ofi".to_string()),
        ("SPOOLS_OFI_PROVIDER", "tcp;ofi_rxm".to_string()),
        ("SPOOLS_TEST_DIR", dir.to_string_lossy().into_owned()),
    ];
    // The launcher's grace outlasts the test: it reports rank 2's death, and the test
    // stops the job once rank 0 has said what it saw.
    let run = Job::new(3, "a_read_abandoned_in_flight_fences_the_transport")
        .envs(&env)
        .grace(Duration::from_secs(600))
        .start();
    let waited = wait_for_file(&dir.join("fenced"), Duration::from_secs(120));
    run.signal("-TERM");
    let o = run.wait(Duration::from_secs(120));
    waited.unwrap_or_else(|x| panic!("{x}: {o:?}"));
    assert!(o.stdout.contains("rank 0 read failed: rank "), "{o:?}");
    assert!(o.stdout.contains("rank 0 fenced: rank "), "{o:?}");
    assert_eq!(o.code(), Some(128 + 9), "{o:?}");
}
