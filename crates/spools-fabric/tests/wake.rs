//! Waking a rank that sleeps for both transports at once: in a job spread over two
//! (fake) hosts, rank 0 reaches rank 1 through shared memory and rank 2 through TCP, and
//! sleeps in one wait of the TCP event loop that also watches its shared-memory bell.
//! A message from either side must wake it: the sleeps here have no useful timeout (an
//! hour), so a lost wake-up would hang the rank and fail the test at the launcher's
//! bounded wait, whatever the scheduling. The senders send only after rank 0 said (through
//! a file) that it announced its sleep, so the store-then-load handshake between a
//! sender and a receiver going to sleep is what is exercised.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use spools::{Priority, Transport, World};
use spools_testkit::{
    assert_ok, checked, e, launch, rank_main, signal_file, tempdir, wait_for_file,
};

/// Rounds of (shm message, tcp message) rank 0 sleeps through.
const ROUNDS: u32 = 20;
const LIMIT: Duration = Duration::from_secs(120);

/// Polls both transports once; returns the messages as (sender, bytes).
fn poll_both(w: &World) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let mut got = Vec::new();
    for t in [
        w.shm().ok_or("no shm")?.clone() as std::sync::Arc<dyn Transport>,
        w.tcp().ok_or("no tcp")?.clone() as std::sync::Arc<dyn Transport>,
    ] {
        e(t.poll(&mut |m| got.push((m.from, m.bytes.to_vec()))))?;
    }
    Ok(got)
}

/// Rank 0: sleeps until each round's message from `from` arrives.
fn sleeper(w: &World, dir: &Path) -> Result<(), String> {
    let shm = w.shm().ok_or("no shm")?;
    let tcp = w.tcp().ok_or("no tcp")?;
    if !shm.reaches(1) || !tcp.reaches(2) || shm.reaches(2) {
        return Err("rank 1 must be on shared memory and rank 2 on tcp".into());
    }
    let bell = shm.bell().ok_or("shared memory has no bell")?;
    // Rank 2's connection is opened by its warm-up message.
    let deadline = Instant::now() + LIMIT;
    let mut warm = Vec::new();
    while warm.is_empty() {
        warm = poll_both(w)?;
        if Instant::now() > deadline {
            return Err("no warm-up from rank 2".into());
        }
    }
    if warm != [(2, b"warm".to_vec())] {
        return Err(format!("warm-up: {warm:?}"));
    }
    let mut sleeps = 0u32;
    for round in 0..ROUNDS {
        for from in [1u32, 2] {
            let want = format!("round {round} from {from}").into_bytes();
            let mut got = Vec::new();
            let mut announced = false;
            while got.is_empty() {
                if shm.begin_sleep_elsewhere() {
                    if !announced {
                        signal_file(&dir.join(format!("asleep-{round}-{from}")), b"")?;
                        announced = true;
                    }
                    tcp.wait_with(bell, Duration::from_secs(3600));
                    sleeps += 1;
                }
                shm.end_sleep_elsewhere();
                got = poll_both(w)?;
            }
            if got != [(from, want.clone())] {
                return Err(format!(
                    "round {round}: expected {:?} from {from}, got {got:?}",
                    String::from_utf8_lossy(&want)
                ));
            }
        }
    }
    println!("rank 0: woken by shm and tcp in {ROUNDS} rounds ({sleeps} sleeps)");
    Ok(())
}

/// Ranks 1 (shm) and 2 (tcp): send each round's message once rank 0 sleeps.
fn waker(w: &World, dir: &Path) -> Result<(), String> {
    let me = w.rank();
    let t: std::sync::Arc<dyn Transport> = if me == 1 {
        w.shm().ok_or("no shm")?.clone()
    } else {
        w.tcp().ok_or("no tcp")?.clone()
    };
    let send = |bytes: &[u8]| -> Result<(), String> {
        let deadline = Instant::now() + LIMIT;
        while !e(t.try_send(1, Priority::Low, 0, &[bytes]))? {
            e(t.poll(&mut |_| {}))?;
            if Instant::now() > deadline {
                return Err("rank 0 never took the message".into());
            }
        }
        while e(t.flush(1))? {
            if Instant::now() > deadline {
                return Err("the message never left".into());
            }
        }
        Ok(())
    };
    if me == 2 {
        send(b"warm")?;
    }
    for round in 0..ROUNDS {
        wait_for_file(&dir.join(format!("asleep-{round}-{me}")), LIMIT)?;
        send(format!("round {round} from {me}").as_bytes())?;
    }
    println!("rank {me}: woke rank 0 {ROUNDS} times");
    Ok(())
}

fn role() -> Result<(), String> {
    let rank: u32 = e(std::env::var("SPOOLS_RANK"))?
        .parse()
        .map_err(|_| "bad rank")?;
    std::env::set_var("SPOOLS_HOST_ID", if rank == 2 { "b" } else { "a" });
    let dir = std::path::PathBuf::from(e(std::env::var("SPOOLS_TEST_DIR"))?);
    let w = e(spools::init())?;
    checked(&w, |w| {
        if w.rank() == 0 {
            sleeper(w, &dir)?;
        } else {
            waker(w, &dir)?;
        }
        e(w.runtime_barrier())
    });
    e(w.finalize())
}

#[test]
fn one_sleep_is_woken_by_shm_and_by_tcp() {
    rank_main(|_| role());
    let dir = tempdir("wake-mixed");
    let d = dir.path().to_string_lossy().into_owned();
    let o = launch(
        3,
        "one_sleep_is_woken_by_shm_and_by_tcp",
        "x",
        &[
            ("SPOOLS_TEST_DIR", d.as_str()),
            ("SPOOLS_PROGRESS_THREAD", "0"),
        ],
    );
    assert_ok(&o);
    assert!(
        o.stdout
            .contains("rank 0: woken by shm and tcp in 20 rounds"),
        "{o:?}"
    );
    for r in [1, 2] {
        assert!(
            o.stdout
                .contains(&format!("rank {r}: woke rank 0 20 times")),
            "{o:?}"
        );
    }
}
