//! Two worlds in one process: every rank of a launched job starts a second job of its own
//! (ranks in reverse order, met through a rendezvous file that rank 0 of the second job
//! hosts). Each world keeps its own settings and its own cache of peers' shared-heap
//! segments: messages of one never reach the other, a heap buffer of the first job is
//! refused by the second job's cache (another job's name) but arrives whole when sent
//! through it, and the first world works on after the second one finished.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use spools::{HeapError, HeapRef, World};
use spools_boot::identity::{JobEnv, LauncherKind, Rendezvous};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

/// Elements of each rank's heap buffer: 512 KiB, a rendezvous message (above any eager
/// limit), whose request-to-send could name the buffer's heap block.
const N: usize = 64 * 1024;
const TAG: i32 = 5;

fn value(job_rank: u32, i: usize) -> u64 {
    (u64::from(job_rank) << 32) | i as u64
}

/// The second job: ranks reversed, its own collective buffer, met through a file.
fn second(a: &World) -> Result<World, String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|e| e.to_string())?);
    let mut cfg = e(spools::Config::load())?;
    cfg.coll_buffer = 8192;
    let env = JobEnv {
        rank: a.size() - 1 - a.rank(),
        size: a.size(),
        rendezvous: Rendezvous::File(dir.join("second.rdv")),
        secret: None,
        // No launcher stands behind the second job: its rank 0 hosts the rendezvous.
        launcher: LauncherKind::None,
        job: None,
    };
    e(spools::init_with(cfg, env))
}

fn both(a: &World) -> Result<(), String> {
    let b = second(a)?;
    let (n, me_a, me_b) = (a.size(), a.rank(), b.rank());
    if b.job() == a.job() {
        return Err(format!("both worlds have job {:016x}", a.job()));
    }
    if a.worker().heaps().job() != a.job() || b.worker().heaps().job() != b.job() {
        return Err("a world's heap cache is not its own job's".into());
    }
    if a.config().coll_buffer == 8192 || b.config().coll_buffer != 8192 {
        return Err(format!(
            "settings crossed: first {}, second {}",
            a.config().coll_buffer,
            b.config().coll_buffer
        ));
    }

    // A buffer of the first world's heap, named to the next rank through the second world.
    let mut buf = e(a.alloc::<u64>(N))?;
    for (i, x) in buf.iter_mut().enumerate() {
        *x = value(me_a, i);
    }
    let (next_b, prev_b) = ((me_b + 1) % n, (me_b + n - 1) % n);
    e(b.send(&buf.heap_ref().to_bytes(), next_b, TAG))?;
    let mut name = [0u8; HeapRef::WIRE_BYTES];
    e(b.recv(&mut name, prev_b, TAG))?;
    let theirs = e(HeapRef::from_bytes(&name))?;
    match b.map_shared(&theirs, N * 8) {
        Err(HeapError::ForeignJob { .. }) => {}
        other => {
            return Err(format!(
                "the second job mapped the first's buffer: {other:?}"
            ))
        }
    }
    // The first world's own cache maps it, with the sender's bytes.
    let pb = e(a.map_shared(&theirs, N * 8))?;
    let mut got = vec![0u8; N * 8];
    e(pb.copy_to(0, &mut got))?;
    let sender_a = theirs.name.rank();
    if got[8..16] != value(sender_a, 1).to_le_bytes() {
        return Err(format!("mapped bytes of rank {sender_a} are wrong"));
    }

    // The heap buffer itself sent through the second world (whose peers cannot map the
    // first job's blocks, so the bytes go through its transport) arrives whole.
    let req = e(b.irecv(vec![0u8; N * 8], prev_b, TAG + 1))?;
    e(b.send(&buf[..], next_b, TAG + 1))?;
    let got = e(req.wait())?;
    let src_a = n - 1 - prev_b;
    let whole: Vec<u8> = (0..N).flat_map(|i| value(src_a, i).to_le_bytes()).collect();
    if got.buf != whole {
        return Err(format!(
            "the buffer from the second world's rank {prev_b} is wrong"
        ));
    }
    // And redistributed through the second world: block over its ranks to cyclic.
    let total = N as u64 * u64::from(n);
    let from: spools::Layout = e(format!("u64[{total}] block on {n}").parse())?;
    let to: spools::Layout = e(format!("u64[{total}] cyclic on {n}").parse())?;
    let mut dst = vec![0u64; N];
    e(b.redistribute(&buf[..], &from, &mut dst, &to))?;
    for (j, &x) in dst.iter().enumerate() {
        let g = j as u64 * u64::from(n) + u64::from(me_b);
        let (unit, i) = ((g / N as u64) as u32, (g % N as u64) as usize);
        if x != value(n - 1 - unit, i) {
            return Err(format!("redistributed element {g} is {x:#x}"));
        }
    }
    if b.worker().heaps().mapped() != 0 {
        return Err("the second job's cache mapped the first job's segments".into());
    }
    // One world's messages never reach the other: the same tag on both at once.
    e(a.send(&[me_a], (me_a + 1) % n, TAG))?;
    e(b.send(&[me_b + 100], next_b, TAG))?;
    let (mut x, mut y) = ([0u32], [0u32]);
    e(a.recv(&mut x, (me_a + n - 1) % n, TAG))?;
    e(b.recv(&mut y, prev_b, TAG))?;
    if x[0] != (me_a + n - 1) % n || y[0] != prev_b + 100 {
        return Err(format!("crossed messages: {x:?} {y:?}"));
    }
    e(b.barrier())?;
    e(b.finalize())?;

    // The first world goes on after the second finished.
    let mut sum = [0u64];
    e(a.allreduce(&[u64::from(me_a)], &mut sum, &spools::Op::Sum))?;
    if sum[0] != u64::from(n * (n - 1) / 2) {
        return Err(format!("allreduce after the second world: {}", sum[0]));
    }
    drop(buf);
    Ok(())
}

#[test]
fn two_worlds_in_one_process_keep_their_own_state() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, both);
        e(w.finalize())
    });
    let d = tempdir("two-worlds");
    assert_ok(
        &Job::new(3, "two_worlds_in_one_process_keep_their_own_state")
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
    );
}
