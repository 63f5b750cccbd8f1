//! Several threads of a rank messaging at once (MPI_THREAD_MULTIPLE): 4 threads per rank
//! on 3 communicators (two threads share one, told apart by tag), every protocol, blocking
//! receives from a known rank and from any rank, probes and cancels racing the traffic;
//! with and without the progress thread. Real processes over shared memory and TCP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{Communicator, ANY_SOURCE};
use spools_testkit::{assert_ok, checked, e, launch, rank_main};

mod common;
use common::check;

/// Threads per rank.
const THREADS: u32 = 4;

/// Rounds per thread.
const ROUNDS: usize = 120;

/// Sizes a thread cycles through: short, eager, rendezvous.
const SIZES: [usize; 4] = [8, 200, 5000, 70_000];

/// What thread `t` of rank `from` sends in round `i`.
fn payload(from: u32, t: u32, i: usize) -> Vec<u8> {
    let len = SIZES[(i + t as usize) % SIZES.len()];
    let seed = u64::from(from) * 1_000_003 + u64::from(t) * 7919 + i as u64;
    (0..len)
        .map(|k| (seed.wrapping_mul(31).wrapping_add(k as u64 * 131) >> 3) as u8)
        .collect()
}

/// Thread `t`: each round sends to the next rank and receives from the previous one on
/// its communicator with its own tag; every third receive is from any source (only the
/// previous rank sends this thread's tag to it), and every fifth round a receive that
/// nothing matches is cancelled and a probe looks for this round's message first.
fn thread_role(c: &Communicator, t: u32) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let tag = 10 + t as i32;
    for i in 0..ROUNDS {
        let send = e(c.isend(payload(me, t, i), next, tag))?;
        if i % 5 == 4 {
            // A tag nobody sends to: the cancel must win, and never take a message.
            let r = e(c.irecv(vec![0u8; 16], ANY_SOURCE, 1000 + tag))?;
            check(r.cancel(), || {
                format!("thread {t}: cancel of a pending receive")
            })?;
            let done = e(r.wait())?;
            check(done.status.cancelled, || {
                format!("thread {t}: a cancelled receive took a message")
            })?;
            let st = e(c.probe(prev, tag))?;
            check(
                st.source == prev && st.len == payload(prev, t, i).len(),
                || format!("thread {t} round {i}: probe saw {st:?}"),
            )?;
        }
        let want = payload(prev, t, i);
        let mut got = vec![0u8; want.len()];
        let st = if i % 3 == 2 {
            e(c.recv(&mut got, ANY_SOURCE, tag))?
        } else {
            e(c.recv(&mut got, prev, tag))?
        };
        check(
            st.source == prev && st.len == want.len() && got == want,
            || format!("thread {t} round {i}: {st:?}, data equal: {}", got == want),
        )?;
        e(send.wait())?;
    }
    Ok(())
}

fn multiple_role() -> Result<(), String> {
    let w = e(spools::init())?;
    // Communicators are made by the main thread (creation is collective, in order).
    let comms = [e(w.dup())?, e(w.dup())?];
    let comm_of = |t: u32| match t % 3 {
        0 => &*w,
        k => &comms[k as usize - 1],
    };
    // A thread that fails ends the rank at once (`checked`: print, exit), so that the
    // job fails instead of its partners' threads waiting for it until the timeout.
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || checked(&t, |&t| thread_role(comm_of(t), t)));
        }
    });
    e(w.barrier())?;
    if w.rank() == 0 {
        println!("{THREADS} threads x {ROUNDS} rounds on 3 communicators: all delivered");
    }
    e(w.finalize())
}

#[test]
fn four_threads_message_at_once_on_several_communicators() {
    rank_main(|_| multiple_role());
    // Pinned at multiple: a test pass at another level (SPOOLS_TEST_THREAD_LEVEL) must
    // not change what this test is about.
    for env in [
        &[("SPOOLS_THREAD_LEVEL", "multiple")][..],
        &[
            ("SPOOLS_THREAD_LEVEL", "multiple"),
            ("SPOOLS_PROGRESS_THREAD", "1"),
        ][..],
        &[
            ("SPOOLS_THREAD_LEVEL", "multiple"),
            ("SPOOLS_TRANSPORT", "tcp"),
        ][..],
    ] {
        let o = launch(
            3,
            "four_threads_message_at_once_on_several_communicators",
            "multiple",
            env,
        );
        assert_ok(&o);
        assert!(o.stdout.contains("all delivered"), "{env:?}: {}", o.stdout);
    }
}

/// At thread level single, rank 0 messages from a second thread: the rank ends with an
/// error naming the level (its state is the initialising thread's, reached with no lock),
/// and the job ends with it instead of racing or hanging; rank 1 waits in a barrier.
fn misuse_role() -> Result<(), String> {
    let w = e(spools::init())?;
    e(w.barrier())?;
    if w.rank() == 0 {
        let r = std::thread::scope(|s| s.spawn(|| w.send(&[1u8; 8], 1, 5).is_ok()).join());
        return Err(format!("a send from a second thread came back: {r:?}"));
    }
    e(w.barrier())?;
    Err("the barrier ended without rank 0".into())
}

#[test]
fn a_call_from_another_thread_at_thread_level_single_ends_the_job_naming_the_level() {
    rank_main(|_| misuse_role());
    let o = launch(
        2,
        "a_call_from_another_thread_at_thread_level_single_ends_the_job_naming_the_level",
        "misuse",
        &[("SPOOLS_THREAD_LEVEL", "single")],
    );
    assert!(!o.status.success(), "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(
            "called from a thread other than the one that initialised, at thread level single"
        ),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("came back"), "{}", o.stderr);
}

/// At thread level single, a rank makes its `World` on a thread of its own, messages,
/// and drops it there without finalising; the process then exits from another thread,
/// whose exit hook finishes the rank (waiting for the others without serving the state
/// it does not own): the job ends cleanly, not with an abort.
fn exit_elsewhere_role() -> Result<(), String> {
    let r = std::thread::spawn(|| -> Result<(), String> {
        let w = e(spools::init())?;
        let me = w.rank();
        let mut got = [0u8; 4];
        let peer = 1 - me;
        let send = e(w.isend(me.to_le_bytes().to_vec(), peer, 3))?;
        e(w.recv(&mut got, peer, 3))?;
        e(send.wait())?;
        check(u32::from_le_bytes(got) == peer, || {
            format!("rank {me} got {got:?}")
        })?;
        e(w.barrier())?;
        drop(w);
        Ok(())
    })
    .join()
    .map_err(|_| "the World's thread panicked".to_string())?;
    r?;
    println!("dropped on its thread");
    Ok(())
}

#[test]
fn a_world_dropped_on_its_own_thread_at_thread_level_single_ends_cleanly_at_exit() {
    rank_main(|_| exit_elsewhere_role());
    let o = launch(
        2,
        "a_world_dropped_on_its_own_thread_at_thread_level_single_ends_cleanly_at_exit",
        "exit-elsewhere",
        &[("SPOOLS_THREAD_LEVEL", "single")],
    );
    assert_ok(&o);
    assert_eq!(
        o.stdout.matches("dropped on its thread").count(),
        2,
        "{}",
        o.stdout
    );
    assert!(!o.stderr.contains("thread level"), "{}", o.stderr);
}

/// Creations per thread in [`creating_role`].
const CREATIONS: usize = 200;

/// Thread `t` makes communicators from its own parent (`dup`, and `split` every third
/// round) while the other threads of its rank do the same from theirs, and uses each: a
/// ring of messages carrying (thread, round) and an allreduce of the thread's number. Two
/// communicators of a rank in one context would cross their messages (a thread gets
/// another's payload) or their collectives.
fn creating_role(parent: &Communicator, t: u32) -> Result<(), String> {
    let (me, n) = (parent.rank(), parent.size());
    for i in 0..CREATIONS {
        let c = if i % 3 == 2 {
            e(parent.split(Some(0), -(me as i32)))?
                .ok_or_else(|| format!("thread {t}: split gave no communicator"))?
        } else {
            e(parent.dup())?
        };
        let (cme, cn) = (c.rank(), c.size());
        let word = [t as u8, i as u8];
        let send = e(c.isend(word.to_vec(), (cme + 1) % cn, 7))?;
        let mut got = [0u8; 2];
        e(c.recv(&mut got, (cme + cn - 1) % cn, 7))?;
        e(send.wait())?;
        check(got == word, || {
            format!("thread {t} round {i}: got (thread, round) {got:?} on a new communicator")
        })?;
        let mut sum = [0u64];
        e(c.allreduce(&[u64::from(t) + 1], &mut sum, &spools::Op::Sum))?;
        check(sum[0] == u64::from(n) * (u64::from(t) + 1), || {
            format!("thread {t} round {i}: allreduce gave {}", sum[0])
        })?;
    }
    Ok(())
}

fn concurrent_creation_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let parents = [e(w.dup())?, e(w.dup())?, e(w.dup())?];
    std::thread::scope(|s| {
        for (t, p) in parents.iter().enumerate() {
            s.spawn(move || checked(&(t as u32), |&t| creating_role(p, t)));
        }
    });
    e(w.barrier())?;
    if w.rank() == 0 {
        println!("3 threads x {CREATIONS} communicators made at once: none crossed");
    }
    e(w.finalize())
}

/// Threads of each rank make communicators at once from different parents over the same
/// ranks (MPICH's threads/comm/comm_create_threads): every creation gets a context of its
/// own on every rank. Before the claim round of `new_context`, two agreements that met on
/// one id both took it.
#[test]
fn threads_make_communicators_at_once_from_different_parents() {
    rank_main(|_| concurrent_creation_role());
    for env in [
        &[("SPOOLS_THREAD_LEVEL", "multiple")][..],
        &[
            ("SPOOLS_THREAD_LEVEL", "multiple"),
            ("SPOOLS_PROGRESS_THREAD", "1"),
        ][..],
    ] {
        let o = launch(
            3,
            "threads_make_communicators_at_once_from_different_parents",
            "concurrent",
            env,
        );
        assert_ok(&o);
        assert!(o.stdout.contains("none crossed"), "{env:?}: {}", o.stdout);
    }
}
