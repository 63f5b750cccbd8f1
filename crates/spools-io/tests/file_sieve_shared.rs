//! Sieved reads whose windows the ranks share (issue 62, point 1): a read of a canonical
//! or `.npy` file of 1 MiB or more, in runs shorter than 32 bytes, on one host, reads each
//! window of the file once, into a rank's segment of the job's heap, and every rank copies
//! its runs out of every window. Checked here with real ranks against a one-process
//! oracle (every element holds its own index): many rounds of a small collective buffer
//! (each rank's two slots reused round after round, rounds in which some ranks read no
//! window), one round, checksums (a flipped byte fails the read on every rank), a read
//! on a sub-communicator right after one on the whole job (the segments are kept between
//! reads, and no rank may still read one when its owner writes it again), and the
//! segment's release when the process leaves the job (`World::finalize`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use spools::{Format, Layout, ReadOptions, Reshuffle, WriteOptions};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

mod indexed;
use indexed::{check, share};

/// The names of this job's heap segments in `/dev/shm` that rank `rank` owns.
fn own_segments(job: u64, rank: u32) -> Vec<String> {
    let prefix = format!("spools-{job:016x}-heap-{rank}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads `path` (written from `l`) as `l`, left to Spools, on `comm`, and checks every
/// element and that the windows were shared.
fn read_shared(
    comm: &spools::Communicator,
    path: &Path,
    l: &Layout,
    opts: &ReadOptions,
    what: &str,
) -> Result<(), String> {
    let me = u64::from(comm.rank());
    let mut got = vec![0xa5u8; e(l.local_bytes(me))? as usize];
    let st = e(spools_io::file::read(comm, path, &mut got, l, opts))
        .map_err(|x| format!("{what}: {x}"))?;
    check(l, me, &got, what)?;
    if !(st.sieved && st.sieve_shared && !st.reshuffled) {
        return Err(format!(
            "{what}: the read did not share its windows: {st:?}"
        ));
    }
    Ok(())
}

fn shared_windows(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let n = w.size();
    let me = u64::from(w.rank());
    // 4 MiB and a little more (the windows are shared from 1 MiB); the fastest dimension
    // dealt cyclically (4-byte runs) over a rank count that need not divide it.
    let shapes = [
        format!("i32[1025,1024] *,cyclic on 1x{n}"),
        format!("i32[1025,1024] cyclic,* on {n}x1 order=F"),
        format!("i32[17,250,247] *,*,cyclic on 1x1x{n}"),
        // 1.2 MB: one window, smaller than the collective buffer, that rank 0 alone reads.
        format!("i32[300,1024] *,cyclic on 1x{n}"),
    ];
    for (si, spec) in shapes.iter().enumerate() {
        let l: Layout = e(spec.parse())?;
        let data = share(&l, me)?;
        for fname in ["canonical", "npy"] {
            let path = dir.join(format!("s{si}.{fname}"));
            let format = e(Format::parse(fname, Vec::new(), false))?;
            let wopts = WriteOptions {
                format,
                checksums: fname == "canonical",
                ..WriteOptions::default()
            };
            e(w.write_file(&path, &data, &l, &wopts)).map_err(|x| format!("{spec}: {x}"))?;
            // 64 KiB windows: 19 of them for the 1.2 MB shape, 65 and more for the others,
            // so 7 rounds and more at 3 ranks (each slot written again and again), and a
            // last round that some ranks sit out; then the whole collective buffer: one
            // window of 1.2 MB, or two of about 4 MiB, in one round.
            for buffer in [Some(64 << 10), None] {
                let what = format!("{spec} as {fname}, buffer {buffer:?}");
                let opts = ReadOptions {
                    reshuffle: Reshuffle::Auto,
                    coll_buffer: buffer,
                    ..ReadOptions::default()
                };
                read_shared(w.communicator(), &path, &l, &opts, &what)?;
                if fname == "canonical" {
                    let checked = ReadOptions {
                        checksums: true,
                        ..opts.clone()
                    };
                    read_shared(
                        w.communicator(),
                        &path,
                        &l,
                        &checked,
                        &format!("{what}, checked"),
                    )?;
                }
            }
        }
    }
    // A read of half the ranks (another group, other segments' owners) right after one
    // of all: every rank's segment is written again while the others may have just
    // finished reading it.
    let l: Layout = e(shapes[0].parse())?;
    let path = dir.join("s0.canonical");
    let opts = ReadOptions {
        coll_buffer: Some(64 << 10),
        ..ReadOptions::default()
    };
    let half = e(w.split(Some(u32::from(me % 2 == 0)), me as i32))?.ok_or("no group")?;
    let lh: Layout = e(format!("i32[1025,1024] *,cyclic on 1x{}", half.size()).parse())?;
    for k in 0..3 {
        read_shared(
            w.communicator(),
            &path,
            &l,
            &opts,
            &format!("whole job, {k}"),
        )?;
        if half.size() >= 2 {
            read_shared(&half, &path, &lh, &opts, &format!("half the job, {k}"))?;
        }
    }
    // A flipped byte fails the checked read on every rank.
    let checked = ReadOptions {
        checksums: true,
        coll_buffer: Some(64 << 10),
        ..ReadOptions::default()
    };
    e(w.barrier())?;
    if me == 0 {
        let mut bytes = e(std::fs::read(&path))?;
        let at = bytes.len() / 3;
        bytes[at] ^= 0x10;
        e(std::fs::write(&path, &bytes))?;
    }
    e(w.barrier())?;
    let mut got = vec![0u8; e(l.local_bytes(me))? as usize];
    if let Ok(st) = w.read_file(&path, &mut got, &l, &checked) {
        return Err(format!("rank {me}: a flipped byte read as good: {st:?}"));
    }
    // The segment stays between reads (and goes when the process leaves the job: see
    // the test below). A release for another job leaves it.
    let rank = w.rank();
    spools_io::file::release_shared_windows(w.job() ^ 1);
    if own_segments(w.job(), rank).len() != 1 {
        return Err(format!(
            "rank {rank} keeps {:?} between reads",
            own_segments(w.job(), rank)
        ));
    }
    Ok(())
}

#[test]
fn shared_sieved_reads_match_the_oracle_and_fail_alike() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let (job, rank) = (w.job(), w.rank());
        checked(&w, shared_windows);
        e(w.finalize())?;
        // Leaving the job freed the segment: its name is gone from `/dev/shm`.
        match own_segments(job, rank).as_slice() {
            [] => Ok(()),
            left => Err(format!("rank {rank} left {left:?} after finalize")),
        }
    });
    for ranks in [2, 3] {
        let d = tempdir("sieve-shared");
        assert_ok(
            &Job::new(ranks, "shared_sieved_reads_match_the_oracle_and_fail_alike")
                .role("rank")
                .env("SPOOLS_TEST_DIR", d.path())
                .run(),
        );
    }
}
