//! The watchdog: a rank that dies in the middle of a large transfer, or exits without
//! finalising, fails the others' operations with a clear error; the launcher ends the
//! job naming the first failing rank and the cause, with its exit status; the ranks
//! leave nothing of the job in /dev/shm once they have mapped each other's segments.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use spools_testkit::{e, launch, rank_main, shm_leftovers};

/// Rank 0 puts 32 MiB blocks into rank 1's region in a loop; rank 1 kills itself with
/// SIGKILL while they flow. Rank 0's put must fail with an error naming rank 1.
fn kill_role() -> Result<(), String> {
    let mut w = e(spools::init())?;
    let region = e(w.worker().region(32 << 20))?;
    let key = e(w.bcast_bytes(1, &region.key().to_le_bytes()))?;
    let key = u32::from_le_bytes(key[..4].try_into().unwrap());
    e(w.barrier())?;
    // Every rank has mapped every segment of this host (it returned from `init`): the
    // names are gone already, whatever happens to the job later (the runtime's duty, not
    // the launcher's clean-up at the end). (security.rs opens a segment by the name this
    // prefix matches, so a change of names cannot make this check vacuous.)
    let mut left = shm_leftovers(&format!("{:016x}", w.job()));
    // libfabric's shm provider names its endpoints `/dev/shm/<pid>:<n>:0` (16 MiB each):
    // gone too.
    let ours = format!("{}:", std::process::id());
    for entry in std::fs::read_dir("/dev/shm").map_err(|x| x.to_string())? {
        let name = entry.map_err(|x| x.to_string())?.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&ours) {
            left.push(format!("/dev/shm/{name}"));
        }
    }
    if !left.is_empty() {
        return Err(format!("rank {}: /dev/shm still holds {left:?}", w.rank()));
    }
    println!("rank {}: nothing of the job in /dev/shm", w.rank());
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
    // Over libfabric the puts are one-sided writes (remote memory access).
    let ofi = spools_testkit::ofi_providers();
    let runs = [("auto", ""), ("tcp", "")]
        .into_iter()
        .chain(ofi.iter().map(|p| ("ofi", *p)));
    for (t, p) in runs {
        let o = launch(
            2,
            "kill_9_in_a_large_transfer",
            "x",
            &[("SPOOLS_TRANSPORT", t), ("SPOOLS_OFI_PROVIDER", p)],
        );
        let t = format!("{t} {p}");
        assert_eq!(o.code(), Some(128 + 9), "{t}: {o:?}");
        assert_eq!(
            o.reports(),
            ["spools run: rank 1 was killed by signal 9 (SIGKILL); stopping the job"],
            "{t}: {o:?}"
        );
        // Rank 0's put fails naming rank 1 and how it died (the launcher's words).
        assert!(
            o.stdout
                .contains("rank 0 put failed: rank 1 died (was killed by signal 9 (SIGKILL))"),
            "{t}: {o:?}"
        );
        for r in 0..2 {
            assert!(
                o.stdout
                    .contains(&format!("rank {r}: nothing of the job in /dev/shm")),
                "{t}: {o:?}"
            );
        }
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
    assert_eq!(
        o.reports(),
        ["spools run: rank 2 exited with status 0 without finalising (the job object was not dropped or finalised); stopping the job"],
        "{o:?}"
    );
    for r in 0..2 {
        assert!(
            o.stdout.contains(&format!(
                "rank {r} saw: rank 2 died (exited with status 0 without finalising"
            )),
            "{o:?}"
        );
    }
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
    // A panic's exit status (101), and the cause the rank gave before it exited.
    assert_eq!(o.code(), Some(101), "{o:?}");
    assert_eq!(
        o.reports(),
        ["spools run: rank 1 ended the job (it panicked (its own output has the panic message)); stopping the job"],
        "{o:?}"
    );
    assert_eq!(
        o.stderr.matches("deliberate panic in rank 1").count(),
        1,
        "{o:?}"
    );
    assert!(
        o.stdout.contains("rank 0 saw: rank 1 died (it panicked"),
        "{o:?}"
    );
}

/// Several ranks fail: rank 2 first, with status 7; the others only once told of it, each
/// with a status of its own (10 + rank: ranks 0 and 1, lower than rank 2, fail later). The
/// job's status and report are the first failing rank's. Rank 2 either leaves its `World`
/// (dropped: it ends the job itself, with its status) or just exits holding it (the
/// watchdog finds it).
fn several_failing_role(how: &str) -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    if me == 2 {
        if how == "drop" {
            drop(w);
        } else {
            std::mem::forget(w);
        }
        std::process::exit(7);
    }
    match w.barrier() {
        Ok(()) => Err("barrier completed without rank 2".into()),
        Err(err) => {
            println!("rank {me} saw: {err}");
            std::process::exit(10 + me as i32)
        }
    }
}

#[test]
fn several_failing_ranks_the_first_one_is_reported() {
    rank_main(several_failing_role);
    for (how, report) in [
        (
            "drop",
            "spools run: rank 2 ended the job (it exited with status 7; its own output says why); stopping the job",
        ),
        (
            "exit",
            "spools run: rank 2 exited with status 7; stopping the job",
        ),
    ] {
        let o = launch(4, "several_failing_ranks_the_first_one_is_reported", how, &[]);
        assert_eq!(o.code(), Some(7), "{how}: {o:?}");
        assert_eq!(o.reports(), [report], "{how}: {o:?}");
        for r in [0, 1, 3] {
            assert!(
                o.stdout.contains(&format!("rank {r} saw: rank 2 died (")),
                "{how}: rank {r} failed because of rank 2: {o:?}"
            );
        }
    }
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
