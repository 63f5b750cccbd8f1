//! The watchdog: a rank that dies in the middle of a large transfer, or exits without
//! finalising, fails the others' operations with a clear error; the launcher ends the
//! job naming the rank and the cause; nothing of the job is left in /dev/shm.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use spools_testkit::{e, launch, rank_main, shm_leftovers};

/// Rank 0 puts 32 MiB blocks into rank 1's region in a loop; rank 1 kills itself with
/// SIGKILL while they flow. Rank 0's put must fail with an error naming rank 1.
fn kill_role() -> Result<(), String> {
    let mut w = e(spools::init())?;
    println!("job {:016x}", w.job());
    let region = e(w.worker().region(32 << 20))?;
    let key = e(w.bcast_bytes(1, &region.key().to_le_bytes()))?;
    let key = u32::from_le_bytes(key[..4].try_into().unwrap());
    e(w.barrier())?;
    if w.rank() == 1 {
        // Serve puts until the first bytes of one have landed (a transfer is under way:
        // an event, not a time), then die abruptly.
        let mut first = [0u8; 1];
        e(w.worker()
            .wait_for(|| region.read(0, &mut first).is_ok() && first[0] == 0xab))?;
        std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status()
            .map_err(|x| x.to_string())?;
        // The signal ends this process; the launcher's timeout bounds this wait.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let data = vec![0xabu8; 32 << 20];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Err(err) = w.endpoint().put(1, key, 0, &data) {
            println!("rank 0 put failed: {err}");
            std::process::exit(5);
        }
        if Instant::now() > deadline {
            return Err("no failure after 60 s".into());
        }
    }
}

#[test]
fn kill_9_in_a_large_transfer() {
    rank_main(|_| kill_role());
    for t in ["auto", "tcp"] {
        let o = launch(
            2,
            "kill_9_in_a_large_transfer",
            "x",
            &[("SPOOLS_TRANSPORT", t)],
        );
        assert_eq!(o.code(), Some(128 + 9), "{t}: {o:?}");
        assert!(
            o.stderr.contains("rank 1 was killed by signal 9 (SIGKILL)"),
            "{t}: {o:?}"
        );
        assert!(
            o.stdout.contains("rank 0 put failed:") && o.stdout.contains("rank 1"),
            "{t}: {o:?}"
        );
        let job = o
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("job "))
            .expect("job id printed");
        assert!(
            shm_leftovers(job).is_empty(),
            "{t}: left in /dev/shm: {:?}",
            shm_leftovers(job)
        );
    }
}

/// Rank 2 returns from main without finalising (std::process::exit skips Drop); the
/// others, waiting in a barrier, fail.
fn no_finalize_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 2 {
        std::process::exit(0);
    }
    match w.barrier() {
        Ok(()) => Err("barrier completed without rank 2".into()),
        Err(err) => {
            println!("rank {} saw: {err}", w.rank());
            std::process::exit(4)
        }
    }
}

#[test]
fn exit_without_finalize_fails_the_job() {
    rank_main(|_| no_finalize_role());
    let o = launch(3, "exit_without_finalize_fails_the_job", "x", &[]);
    assert_eq!(o.code(), Some(1), "{o:?}");
    assert!(
        o.stderr
            .contains("rank 2 exited with status 0 without finalising"),
        "{o:?}"
    );
    assert!(o.stdout.contains("rank 0 saw: rank 2 died"), "{o:?}");
}

/// A rank that panics: the job ends with its status and the others are told.
#[test]
fn a_panicking_rank_ends_the_job() {
    rank_main(|_| {
        let w = e(spools::init())?;
        if w.rank() == 1 {
            panic!("deliberate panic in rank 1");
        }
        match w.barrier() {
            Ok(()) => Err("barrier completed".into()),
            Err(err) => {
                println!("rank {} saw: {err}", w.rank());
                std::process::exit(4)
            }
        }
    });
    let o = launch(2, "a_panicking_rank_ends_the_job", "x", &[]);
    assert_ne!(o.code(), Some(0), "{o:?}");
    assert!(o.stderr.contains("deliberate panic in rank 1"), "{o:?}");
    assert!(o.stderr.contains("rank 1 "), "{o:?}");
}

/// Rings far larger than /dev/shm can hold shrink to what fits, with a warning, and the
/// job still works.
#[test]
fn rings_shrink_to_fit_dev_shm() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let g = w.shm().ok_or("no shm")?.geometry();
        println!("rank {}: rings {} B", w.rank(), g.ring_low);
        e(w.barrier())?;
        e(w.finalize())
    });
    // 4 ranks x 64 lanes x 2 sources... of 1 GiB rings: 4 * 64 * 2 GiB = 512 GiB per
    // segment, far more than any /dev/shm this runs on.
    let o = launch(
        4,
        "rings_shrink_to_fit_dev_shm",
        "x",
        &[
            ("SPOOLS_RING_SIZE", "1GiB"),
            ("SPOOLS_HIGH_RING_SIZE", "1GiB"),
            ("SPOOLS_LANES", "64"),
        ],
    );
    spools_testkit::assert_ok(&o);
    assert!(o.stderr.contains("rings shrunk from 1GiB/1GiB"), "{o:?}");
    assert_eq!(o.stdout.matches("rings ").count(), 4, "{o:?}");
    assert!(!o.stdout.contains("rings 1073741824 B"), "{o:?}");
}
