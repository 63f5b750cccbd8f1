//! How a rank leaves the job, for every way it can (the contract in `World::finalize`):
//! returning an error, dropping its `World` with operations pending, `World::abort`,
//! under `spools run` and under a launcher where rank 0 hosts the rendezvous. In each
//! failure the job ends (bounded wait), the failing rank's own error is printed once, and
//! the other ranks' pending operations fail naming it. A `World` dropped at a clean end
//! still serves its peers until they have finished.
//!
//! (Killed ranks, exits without finalising and panics are in `watchdog.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{e, launch, rank_main, wait_bounded};

/// The ranks that do not fail wait in a barrier: it must fail, naming the failing rank.
fn wait_in_barrier(w: &spools::World) -> ! {
    match w.barrier() {
        Ok(()) => {
            println!("rank {} barrier completed", w.rank());
            std::process::exit(3)
        }
        Err(err) => {
            println!("rank {} saw: {err}", w.rank());
            std::process::exit(4)
        }
    }
}

/// Rank 1 returns an error from its body: its `World` is dropped on the way out and the
/// process exits with status 1 (as `fn main() -> Result` does).
fn error_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 1 {
        return Err("deliberate failure in rank 1".into());
    }
    wait_in_barrier(&w)
}

#[test]
fn returning_an_error_ends_the_job() {
    rank_main(|_| error_role());
    for t in ["auto", "tcp"] {
        let o = launch(
            3,
            "returning_an_error_ends_the_job",
            "x",
            &[("SPOOLS_TRANSPORT", t)],
        );
        assert_eq!(o.code(), Some(1), "{t}: {o:?}");
        assert_eq!(
            o.stderr.matches("deliberate failure in rank 1").count(),
            1,
            "{t}: the rank's error printed once: {o:?}"
        );
        // The launcher learns of the failure from the rank itself or from its exit status,
        // whichever comes first: either way it names the rank and its status.
        let launcher_line = o
            .stderr
            .lines()
            .find(|l| l.contains("spools run: rank 1 "))
            .unwrap_or_else(|| panic!("{t}: no launcher line: {o:?}"));
        assert!(launcher_line.contains("status 1"), "{t}: {o:?}");
        for r in [0, 2] {
            let saw = o
                .stdout
                .lines()
                .find(|l| l.contains(&format!("rank {r} saw: rank 1 died (")))
                .unwrap_or_else(|| panic!("{t}: rank {r} did not fail: {o:?}"));
            assert!(saw.contains("status 1"), "{t}: {o:?}");
        }
    }
}

/// Rank 1 leaves with operations pending (a receive nobody sends to, a large send nobody
/// receives) and exits with status 5.
fn pending_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 1 {
        let r = e(w.irecv(vec![0u8; 64], 0u32, 77))?;
        let s = e(w.isend(vec![1u8; 1 << 20], 0, 78))?;
        drop(w);
        drop((r, s));
        eprintln!("rank 1 gives up");
        std::process::exit(5);
    }
    wait_in_barrier(&w)
}

#[test]
fn leaving_with_operations_pending_ends_the_job() {
    rank_main(|_| pending_role());
    let o = launch(2, "leaving_with_operations_pending_ends_the_job", "x", &[]);
    assert_eq!(o.code(), Some(5), "{o:?}");
    let saw = o
        .stdout
        .lines()
        .find(|l| l.contains("rank 0 saw: rank 1 died ("))
        .unwrap_or_else(|| panic!("rank 0 did not fail: {o:?}"));
    assert!(saw.contains("status 5"), "{o:?}");
}

/// Rank 2 calls `World::abort` with a cause: the others' errors carry it.
fn abort_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 2 {
        w.abort("input file is corrupt");
        std::process::exit(3);
    }
    wait_in_barrier(&w)
}

#[test]
fn world_abort_names_its_cause() {
    rank_main(|_| abort_role());
    let o = launch(3, "world_abort_names_its_cause", "x", &[]);
    assert_eq!(o.code(), Some(3), "{o:?}");
    for r in [0, 1] {
        assert!(
            o.stdout.contains(&format!(
                "rank {r} saw: rank 2 died (input file is corrupt)"
            )),
            "{o:?}"
        );
    }
}

/// A panic while the `World` is held ends the job at once, and the others learn that the
/// rank panicked.
fn panic_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 0 {
        panic!("deliberate panic in rank 0");
    }
    wait_in_barrier(&w)
}

#[test]
fn a_panic_is_named_in_the_others_errors() {
    rank_main(|_| panic_role());
    let o = launch(2, "a_panic_is_named_in_the_others_errors", "x", &[]);
    assert_eq!(o.code(), Some(101), "{o:?}");
    assert_eq!(
        o.stderr.matches("deliberate panic in rank 0").count(),
        1,
        "{o:?}"
    );
    assert!(
        o.stdout.contains("rank 1 saw: rank 0 died (it panicked"),
        "{o:?}"
    );
}

/// Rank 0 sends (eagerly and by rendezvous), drops its `World` at a clean end and exits 0
/// while rank 1 has not received yet: rank 1 still gets every byte (over TCP too), and
/// the job succeeds.
fn clean_drop_role(dir: PathBuf) -> Result<(), String> {
    let w = e(spools::init())?;
    let marker = dir.join("rank0-dropped");
    let sizes = [8usize, 4096, 60_000];
    if w.rank() == 0 {
        let mut pending = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..*n).map(|k| (k * 7 + i) as u8).collect();
            // The largest is past the eager limit: its rendezvous completes only once
            // rank 1 receives, after this rank has dropped its World.
            pending.push(e(w.isend(data, 1, i as i32))?);
        }
        drop(pending);
        drop(w);
        std::fs::write(&marker, b"").map_err(|x| x.to_string())?;
        return Ok(());
    }
    // Receive only once rank 0 has dropped its World (an event: the file it writes).
    for _ in 0..60_000 {
        if marker.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if !marker.exists() {
        return Err("rank 0 never dropped its World".into());
    }
    for (i, n) in sizes.iter().enumerate() {
        let mut buf = vec![0u8; *n];
        e(w.recv(&mut buf, 0u32, i as i32))?;
        let want: Vec<u8> = (0..*n).map(|k| (k * 7 + i) as u8).collect();
        if buf != want {
            return Err(format!("message {i} ({n} B) differs"));
        }
    }
    println!("rank 1 received everything after rank 0 left");
    e(w.finalize())
}

#[test]
fn a_world_dropped_at_a_clean_end_serves_its_peers() {
    rank_main(|_| {
        clean_drop_role(PathBuf::from(
            std::env::var("LEAVE_DIR").map_err(|x| x.to_string())?,
        ))
    });
    for t in ["auto", "tcp"] {
        let dir = tempfile::tempdir().unwrap();
        let o = launch(
            2,
            "a_world_dropped_at_a_clean_end_serves_its_peers",
            "x",
            &[
                ("SPOOLS_TRANSPORT", t),
                ("LEAVE_DIR", dir.path().to_str().unwrap()),
            ],
        );
        common::assert_ok(&o);
        assert!(
            o.stdout
                .contains("rank 1 received everything after rank 0 left"),
            "{t}: {o:?}"
        );
    }
}

/// Under a launcher other than `spools run` (here: two processes started by the test with
/// Open MPI's variables), rank 0 hosts the rendezvous; rank 1 returns an error while rank 0
/// waits in a barrier. Both processes end, rank 0 with an error naming rank 1, and the
/// rendezvous file is gone.
#[test]
fn a_failing_rank_ends_a_job_whose_rendezvous_rank_0_hosts() {
    rank_main(|_| error_role());
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    let children: Vec<_> = (0..2)
        .map(|r| {
            common::foreign_rank(
                "a_failing_rank_ends_a_job_whose_rendezvous_rank_0_hosts",
                r,
                2,
                &[("SPOOLS_BOOTSTRAP", format!("file:{}", rdv.display()))],
            )
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| wait_bounded(c, Duration::from_secs(60)))
        .collect();
    assert_eq!(outs[1].code(), Some(1), "{outs:?}");
    assert_eq!(outs[0].code(), Some(4), "{outs:?}");
    assert!(
        outs[0]
            .stdout
            .contains("rank 0 saw: rank 1 died (it exited with status 1"),
        "{outs:?}"
    );
    assert!(
        !rdv.exists(),
        "the rendezvous file is removed once every rank joined"
    );
}

/// Rank 1 ends cleanly (status 0) without entering a barrier that the others wait in: the
/// others' barrier fails, naming rank 1 and the collective it never joined, instead of
/// hanging. The same for a non-blocking collective and on a communicator made by `dup`.
fn skipped_collective_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let d = e(w.dup())?;
    e(d.barrier())?;
    if w.rank() == 1 {
        return Ok(());
    }
    let (world_err, dup_err) = (w.barrier(), d.ibarrier().and_then(|r| r.wait()));
    match (world_err, dup_err) {
        (Err(a), Err(b)) => {
            println!("rank {} saw: {a}", w.rank());
            println!("rank {} dup saw: {b}", w.rank());
            std::process::exit(4)
        }
        other => Err(format!("the collectives did not both fail: {other:?}")),
    }
}

#[test]
fn a_collective_a_finalised_rank_never_joins_fails() {
    rank_main(|_| skipped_collective_role());
    for t in ["auto", "tcp"] {
        let o = launch(
            3,
            "a_collective_a_finalised_rank_never_joins_fails",
            "x",
            &[("SPOOLS_TRANSPORT", t)],
        );
        // The job ends in the name of rank 1 (it exited 0, so the status is 1).
        assert_eq!(o.code(), Some(1), "{t}: {o:?}");
        assert!(
            o.stderr
                .contains("spools run: rank 1 ended the job (it finalised after 1 collective(s)"),
            "{t}: {o:?}"
        );
        for r in [0, 2] {
            // `dup` is itself a collective of the world communicator: rank 1 started one.
            // The rank that finds it first ends the job in rank 1's name; the others may
            // hear it that way: either error names rank 1 and what it did.
            let world = o
                .stdout
                .lines()
                .find_map(|l| l.split_once(&format!("rank {r} saw: ")).map(|x| x.1))
                .unwrap_or_else(|| panic!("{t}: rank {r}'s barrier: {o:?}"));
            assert!(
                world.contains("rank 1 ") && world.contains("finalised after 1 collective(s)"),
                "{t}: rank {r}: {o:?}"
            );
            // By then the job may already be over in rank 1's name: either error names
            // rank 1 and what it did.
            let dup = o
                .stdout
                .lines()
                .find_map(|l| l.split_once(&format!("rank {r} dup saw: ")).map(|x| x.1))
                .unwrap_or_else(|| panic!("{t}: rank {r}'s dup barrier: {o:?}"));
            assert!(
                dup.contains("rank 1 ") && dup.contains("finalised after 1 collective(s)"),
                "{t}: rank {r}: {o:?}"
            );
        }
    }
}

/// The runtime's own barrier (through the rendezvous): a rank that finalises without
/// joining it ends the job.
fn skipped_runtime_barrier_role() -> Result<(), String> {
    let w = e(spools::init())?;
    if w.rank() == 1 {
        return Ok(());
    }
    match w.runtime_barrier() {
        Ok(()) => Err("the runtime barrier completed without rank 1".into()),
        Err(err) => {
            println!("rank {} saw: {err}", w.rank());
            std::process::exit(4)
        }
    }
}

#[test]
fn a_runtime_barrier_a_finalised_rank_never_joins_fails() {
    rank_main(|_| skipped_runtime_barrier_role());
    let o = launch(
        2,
        "a_runtime_barrier_a_finalised_rank_never_joins_fails",
        "x",
        &[],
    );
    // The job's status is the culprit's (it exited 0, so 1), not the status of the rank
    // it left waiting.
    assert_eq!(o.code(), Some(1), "{o:?}");
    assert!(
        o.stderr
            .contains("spools run: rank 1 ended the job (it finalised without joining"),
        "{o:?}"
    );
    assert!(
        o.stdout.contains(
            "rank 0 saw: rank 1 died (it finalised without joining the runtime's collective"
        ),
        "{o:?}"
    );
}
