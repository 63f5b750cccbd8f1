//! The test kit's own promises, checked with real jobs: a job sees the test's settings and
//! none of the environment the suite was run in; a job stopped at a wait's limit, or by a
//! guard dropped when a test panics, leaves no rank running and nothing in `/dev/shm`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{e, rank_main, Job};

const AMBIENT: &str = "ambient_spools_variables_do_not_reach_jobs";

/// What a rank of the inner jobs checks: none of the ambient variables the outer process
/// had, the job's own setting, and a runtime configured accordingly.
fn inner_rank() -> Result<(), String> {
    for k in [
        "SPOOLS_PROGRESS_THREAD",
        "SPOOLS_TRANSPORT",
        "SPOOLS_AMBIENT_MARK",
    ] {
        if let Ok(v) = std::env::var(k) {
            return Err(format!("the caller's {k}={v} reached a rank"));
        }
    }
    if std::env::var("SPOOLS_LANES").as_deref() != Ok("4") {
        return Err("the job's own SPOOLS_LANES=4 did not reach the rank".into());
    }
    let w = e(spools::init())?;
    let c = w.worker().config();
    if c.progress_thread || c.lanes != 4 {
        return Err(format!(
            "configured with progress_thread {} and {} lanes",
            c.progress_thread, c.lanes
        ));
    }
    println!("inner rank {} of {}: clean", w.rank(), w.size());
    e(w.finalize())
}

/// Plays a test suite run with `SPOOLS_*` variables in its environment: starts a job
/// through the library launcher, one through `spools run`, and two foreign ranks (Open
/// MPI's variables, a file rendezvous), each setting SPOOLS_LANES=4 itself, and checks
/// that every rank said it saw a clean environment.
fn outer() -> Result<(), String> {
    let mut report = String::new();
    for job in [
        Job::new(2, AMBIENT),
        Job::new(2, AMBIENT).via_cli(common::spools()),
    ] {
        let o = job.role("inner").env("SPOOLS_LANES", "4").run();
        if !o.status.success() || o.stdout.matches(": clean").count() != 2 {
            return Err(format!("a job saw the caller's environment: {o:?}"));
        }
        report.push_str(&o.stdout);
    }
    let dir = std::env::var("SPOOLS_OUTER_DIR").map_err(|x| x.to_string())?;
    let rdv = format!("file:{dir}/rdv");
    let ranks: Vec<common::Spawned> = (0..2)
        .map(|r| {
            let env = [
                ("SPOOLS_BOOTSTRAP", rdv.clone()),
                ("SPOOLS_LANES", "4".to_string()),
                ("SPOOLS_TEST_ROLE", "inner".to_string()),
            ];
            common::Spawned::new(common::foreign_rank(AMBIENT, r, 2, &env))
        })
        .collect();
    for r in ranks {
        let o = r.wait(Duration::from_secs(120));
        if !o.status.success() || !o.stdout.contains(": clean") {
            return Err(format!(
                "a foreign rank saw the caller's environment: {o:?}"
            ));
        }
        report.push_str(&o.stdout);
    }
    print!("{report}");
    println!("outer: every job clean");
    Ok(())
}

/// `Job`, `Job::via_cli` and `foreign_rank` start their processes without the caller's
/// `SPOOLS_*` variables: a process playing the test harness, run with
/// SPOOLS_PROGRESS_THREAD=1, SPOOLS_TRANSPORT=bogus (which would fail `init`) and a marker
/// variable, starts jobs whose ranks see none of them but see the job's own setting.
#[test]
fn ambient_spools_variables_do_not_reach_jobs() {
    rank_main(|role| match role {
        "outer" => outer(),
        _ => inner_rank(),
    });
    let dir = common::tempdir("ambient");
    let mut c = common::grouped(common::current_exe());
    c.args(&common::self_args(AMBIENT)[1..])
        .env(common::ROLE_VAR, "outer")
        .env("SPOOLS_PROGRESS_THREAD", "1")
        .env("SPOOLS_TRANSPORT", "bogus")
        .env("SPOOLS_AMBIENT_MARK", "1")
        .env("SPOOLS_OUTER_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = common::Spawned::new(c.spawn().unwrap()).wait(Duration::from_secs(300));
    common::assert_ok_as(&o, "the outer process");
    assert_eq!(o.stdout.matches(": clean").count(), 6, "{o:?}");
    assert!(o.stdout.contains("outer: every job clean"), "{o:?}");
}

const HANG: &str = "a_job_stopped_by_the_test_kit_leaves_nothing_behind";

/// A rank that says where it is (its pid and its job, through files written atomically),
/// leaves an object of its job in `/dev/shm` (as a segment not yet unlinked would be),
/// then waits to be stopped.
fn hanging_rank() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let rank = std::env::var("SPOOLS_RANK").map_err(|x| x.to_string())?;
    let job = std::env::var("SPOOLS_JOB").map_err(|x| x.to_string())?;
    std::fs::write(format!("/dev/shm/spools-{job}-testkit-{rank}"), b"x")
        .map_err(|x| x.to_string())?;
    common::signal_file(&dir.join(format!("job.{rank}")), job.as_bytes())?;
    common::signal_file(
        &dir.join(format!("pid.{rank}")),
        std::process::id().to_string().as_bytes(),
    )?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Starts a 2-rank job of hanging ranks and waits until both said where they are: their
/// pids and the job's id.
fn start_hanging(dir: &Path, via_cli: bool) -> (common::Spawned, Vec<u32>, String) {
    let mut job = Job::new(2, HANG).role("hang").env("SPOOLS_TEST_DIR", dir);
    if via_cli {
        job = job.via_cli(common::spools());
    }
    let started = job.start();
    let mut pids = Vec::new();
    let mut id = String::new();
    for r in 0..2 {
        let p = dir.join(format!("pid.{r}"));
        common::wait_for_file(&p, Duration::from_secs(60)).unwrap();
        pids.push(std::fs::read_to_string(&p).unwrap().parse().unwrap());
        id = std::fs::read_to_string(dir.join(format!("job.{r}"))).unwrap();
    }
    assert_eq!(common::shm_leftovers(&id).len(), 2, "{id}");
    (started, pids, id)
}

/// Removes, when dropped (also when the test fails), the `/dev/shm` objects of the job
/// it names that the hanging ranks made.
struct ShmMarkers(String);

impl Drop for ShmMarkers {
    fn drop(&mut self) {
        for name in common::shm_leftovers(&self.0) {
            if name.contains("-testkit-") {
                let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
            }
        }
    }
}

/// Nothing of the job is left: every rank gone (a bounded wait for the kernel, an event),
/// no `/dev/shm` object of its job.
fn assert_all_gone(pids: &[u32], job: &str, how: &str) {
    for &pid in pids {
        let mut waited = 0;
        while alive(pid) && waited < 3000 {
            std::thread::sleep(Duration::from_millis(10));
            waited += 1;
        }
        assert!(!alive(pid), "{how}: rank {pid} still runs");
    }
    assert_eq!(common::shm_leftovers(job), Vec::<String>::new(), "{how}");
}

/// A job that never ends, stopped by the test kit: at `wait_bounded`'s limit (which must
/// panic) and by a `Spawned` guard dropped by a panicking test, through the library
/// launcher and through `spools run`. Either way the launcher stops the ranks and removes
/// the job's `/dev/shm` objects.
#[test]
fn a_job_stopped_by_the_test_kit_leaves_nothing_behind() {
    rank_main(|_| hanging_rank());
    for via_cli in [false, true] {
        let dir = common::tempdir("hang");
        let (started, pids, job) = start_hanging(&dir, via_cli);
        let _markers = ShmMarkers(job.clone());
        let timed_out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            started.wait(Duration::from_millis(1))
        }));
        let msg = timed_out.expect_err("a wait past its limit must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("did not end within"), "{msg}");
        assert_all_gone(&pids, &job, &format!("limit, via_cli {via_cli}"));

        let dir = common::tempdir("hang");
        let (started, pids, job) = start_hanging(&dir, via_cli);
        let _markers = ShmMarkers(job.clone());
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _guard = started;
            panic!("the test fails before waiting");
        }));
        assert!(dropped.is_err());
        assert_all_gone(&pids, &job, &format!("guard, via_cli {via_cli}"));
    }
}
