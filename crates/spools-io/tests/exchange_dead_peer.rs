//! A rank killed (SIGKILL) in the middle of single-copy exchanges: its same-host peer,
//! which pulls from its buffers and whose buffers it pulls from, fails with an error,
//! never a crash or a hang, with ordinary and with shared-heap buffers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use spools::Layout;
use spools_testkit::{e, launch, rank_main, shm_leftovers};

// Runs of 64 rows (1 MiB): both kinds of buffer are pulled (ordinary ones by
// process_vm_readv), which the first exchange checks.
const FROM: &str = "f64[1024,2048] block,* on 2x1";
const TO: &str = "f64[1024,2048] cyclic(64),* on 2x1";

/// This rank's buffer of `len` bytes, in the shared heap or not.
fn buffer(w: &spools::World, len: usize, heap: bool) -> Result<Box<dyn AsMut<[u8]>>, String> {
    Ok(if heap {
        Box::new(e(w.alloc::<u8>(len))?)
    } else {
        Box::new(vec![0x5au8; len])
    })
}

fn role(heap: bool) -> Result<(), String> {
    let w = e(spools::init())?;
    println!("job {:016x}", w.job());
    let me = w.rank();
    let from: Layout = e(FROM.parse())?;
    let to: Layout = e(TO.parse())?;
    let mut src = buffer(&w, e(from.local_bytes(u64::from(me)))? as usize, heap)?;
    let mut dst = buffer(&w, e(to.local_bytes(u64::from(me)))? as usize, heap)?;
    // Rank 1 is killed by a thread of its own once its third exchange has started (an
    // event), so that the signal lands while the peers copy out of each other.
    let (go, killer) = mpsc::channel::<()>();
    if me == 1 {
        std::thread::spawn(move || {
            if killer.recv().is_ok() {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &std::process::id().to_string()])
                    .status();
            }
        });
    }
    let comm = e(w.io_communicator())?;
    let deadline = Instant::now() + Duration::from_secs(120);
    for k in 0u64.. {
        if me == 1 && k == 3 {
            go.send(()).map_err(|x| x.to_string())?;
        }
        let r = spools_io::redistribute(
            comm,
            src.as_mut().as_mut(),
            &from,
            dst.as_mut().as_mut(),
            &to,
            &Default::default(),
        );
        match r {
            Err(err) => {
                println!("rank {me} exchange failed: {err}");
                std::process::exit(5);
            }
            // Before the kill: the single copy is taken (else the test would prove
            // nothing about it).
            Ok(st) if k == 0 && st.pulled == 0 => {
                println!("rank {me}: the first exchange pulled nothing: {st:?}");
                std::process::exit(6);
            }
            Ok(_) => {}
        }
        if Instant::now() > deadline {
            return Err(format!("rank {me}: no failure after {k} exchanges"));
        }
    }
    Ok(())
}

#[test]
fn a_peer_killed_during_single_copy_exchanges_is_an_error() {
    rank_main(|r| role(r == "heap"));
    for kind in ["ordinary", "heap"] {
        let o = launch(
            2,
            "a_peer_killed_during_single_copy_exchanges_is_an_error",
            kind,
            &[],
        );
        assert_eq!(o.code(), Some(128 + 9), "{kind}: {o:?}");
        assert!(
            o.stdout.contains("rank 0 exchange failed: "),
            "{kind}: {o:?}"
        );
        assert!(!o.stderr.contains("panicked"), "{kind}: {o:?}");
        for l in o.stdout.lines().filter(|l| l.contains("failed")) {
            println!("{kind}: {l}");
        }
        let job = o
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("job "))
            .expect("the job id")
            .to_owned();
        assert_eq!(shm_leftovers(&job), Vec::<String>::new(), "{kind}");
    }
}
