//! Hostile calls: ranks that pass different layouts (or formats, or a group's streams in
//! another order) to the same collective call. Every such call must fail on every rank
//! with the same error naming the ranks that differ, before anything moves: no file is
//! committed, no unit or temporary file is left, no rank waits for ever, no rank returns
//! wrong data (issue 58, defect 1: a `.npy` written from two shapes was committed broken,
//! a RAID-5 write left one rank hanging, redistributions returned wrong data).
//!
//! Rank 1 is the one that differs, in a job of 3 ranks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use spools::Layout;
use spools_io::file::{self, Format, ReadOptions, WriteOptions};
use spools_io::pipe::{PipeName, PipeWriter};
use spools_io::{ErrorKind, ExchangeError, FileError, PipeError};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

/// The layout every rank passes.
const SAME: &str = "f64[100,100] block,* on 3x1";
/// What rank 1 passes instead: another shape.
const OTHER_SHAPE: &str = "f64[101,100] block,* on 3x1";
/// What rank 1 passes instead: the same dataset, distributed otherwise (same size).
const OTHER_DIST: &str = "f64[100,100] *,block on 1x3";

fn layout(s: &str) -> Result<Layout, String> {
    e(s.parse::<Layout>())
}

/// This rank's share of `l`, filled with its global element indices.
fn share(l: &Layout, me: u32) -> Result<Vec<u8>, String> {
    let n = e(l.local_bytes(u64::from(me)))?;
    Ok((0..n).map(|i| i as u8).collect())
}

/// Checks that `r` failed with the arguments of rank 1 named, and nothing else.
fn differs<T, E: std::fmt::Display>(
    what: &str,
    r: Result<T, E>,
    found: impl Fn(&E) -> Option<&ExchangeError>,
    kind: impl Fn(&E) -> ErrorKind,
) -> Result<(), String> {
    let err = match r {
        Ok(_) => {
            return Err(format!(
                "{what}: succeeded with different arguments on rank 1"
            ))
        }
        Err(err) => err,
    };
    match found(&err) {
        Some(ExchangeError::ArgumentsDiffer { ranks, .. }) if ranks == &[1] => {}
        _ => return Err(format!("{what}: not the ranks' disagreement: {err}")),
    }
    if kind(&err) != ErrorKind::Mismatch {
        return Err(format!("{what}: not of kind Mismatch: {err}"));
    }
    if !err.to_string().contains("rank 1 passed") {
        return Err(format!("{what}: the message does not name rank 1: {err}"));
    }
    Ok(())
}

fn file_differs<T>(what: &str, r: Result<T, FileError>) -> Result<(), String> {
    differs(
        what,
        r,
        |e| match e {
            FileError::Exchange(x) => Some(x),
            _ => None,
        },
        FileError::kind,
    )
}

/// What `dir` holds, by name (sorted).
fn listing(dir: &Path) -> Result<Vec<String>, String> {
    let mut v: Vec<String> = e(std::fs::read_dir(dir))?
        .map(|d| d.map(|d| d.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    v.sort();
    Ok(v)
}

fn rank(w: &spools::World) -> Result<(), String> {
    let comm = w.communicator();
    let me = comm.rank();
    let dir = PathBuf::from(std::env::var("ARGS_DIR").map_err(|e| e.to_string())?);
    let same = layout(SAME)?;
    let mine = |other: &str| -> Result<Layout, String> {
        if me == 1 {
            layout(other)
        } else {
            Ok(same.clone())
        }
    };

    // Writes in every kind of format: nothing may be left in the directory.
    for (name, fmt) in [
        ("a.npy", "npy"),
        ("a.bin", "canonical"),
        ("a.raid5", "raid5(unit=4KiB,count=3)"),
        ("a.zarr", "zarr(chunk=10x10)"),
    ] {
        for other in [OTHER_SHAPE, OTHER_DIST] {
            let l = mine(other)?;
            let data = share(&l, me)?;
            let opts = WriteOptions {
                format: e(Format::parse(fmt, Vec::new(), false))?,
                ..WriteOptions::default()
            };
            let r = file::write(comm, &dir.join(name), &data, &l, &opts);
            file_differs(&format!("write {fmt} ({other} on rank 1)"), r)?;
            e(comm.barrier())?;
            let left = listing(&dir)?;
            if !left.is_empty() {
                return Err(format!("write {fmt}: left {left:?}"));
            }
            e(comm.barrier())?;
        }
    }

    // A format that differs on rank 1, of the same family (one file) or of another
    // (whose first collective step has another shape unless they share it).
    let data = share(&same, me)?;
    for (theirs, rank1) in [
        ("npy", "canonical"),
        ("npy", "raid5(unit=4KiB,count=3)"),
        ("zarr(chunk=10x10)", "npy"),
        ("raid0(unit=4KiB,count=2)", "zarr(chunk=10x10)"),
    ] {
        let fmt = if me == 1 { rank1 } else { theirs };
        let opts = WriteOptions {
            format: e(Format::parse(fmt, Vec::new(), false))?,
            ..WriteOptions::default()
        };
        file_differs(
            &format!("write as {theirs} with {rank1} on rank 1"),
            file::write(comm, &dir.join("f"), &data, &same, &opts),
        )?;
        e(comm.barrier())?;
        let left = listing(&dir)?;
        if !left.is_empty() {
            return Err(format!(
                "write as {theirs} with {rank1} on rank 1: left {left:?}"
            ));
        }
        e(comm.barrier())?;
    }

    // Reads of a good file, of every kind, with another layout on rank 1 (of another
    // size, which this rank alone would have refused, or of the same size, which would
    // have read wrong data).
    for (name, fmt) in [
        ("g.npy", "npy"),
        ("g.raid5", "raid5(unit=4KiB,count=3)"),
        ("g.zarr", "zarr(chunk=10x10)"),
    ] {
        let opts = WriteOptions {
            format: e(Format::parse(fmt, Vec::new(), false))?,
            ..WriteOptions::default()
        };
        e(file::write(comm, &dir.join(name), &data, &same, &opts))?;
        for other in [OTHER_SHAPE, OTHER_DIST] {
            let l = mine(other)?;
            let mut back = vec![0u8; e(l.local_bytes(u64::from(me)))? as usize];
            let r = file::read(
                comm,
                &dir.join(name),
                &mut back,
                &l,
                &ReadOptions::default(),
            );
            file_differs(&format!("read {fmt} ({other} on rank 1)"), r)?;
        }
    }

    // Redistributions: another destination of the same size, another dataset on both
    // sides, and two layouts that cannot be planned on rank 1 alone.
    for (what, from, to) in [
        ("another destination", SAME, OTHER_DIST),
        ("another dataset", OTHER_SHAPE, OTHER_SHAPE),
        ("layouts of two datasets", SAME, OTHER_SHAPE),
    ] {
        let (f, t) = if me == 1 {
            (layout(from)?, layout(to)?)
        } else {
            (same.clone(), same.clone())
        };
        let src = share(&f, me)?;
        let mut dst = vec![0u8; e(t.local_bytes(u64::from(me)))? as usize];
        let r = spools_io::redistribute(comm, &src, &f, &mut dst, &t, &Default::default());
        differs(
            &format!("redistribute: {what} on rank 1"),
            r,
            |x: &ExchangeError| Some(x),
            ExchangeError::kind,
        )?;
    }

    // A pipe's end: refused before any rank meets its other end (none is started).
    let l = mine(OTHER_SHAPE)?;
    let r = PipeWriter::open(comm, &PipeName::Dir("differ".into()), &l);
    differs(
        "pipe writer",
        r,
        |e| match e {
            PipeError::Exchange(x) => Some(x),
            _ => None,
        },
        PipeError::kind,
    )?;

    // The communicator is still usable, and agreeing calls still work.
    let mut back = vec![0u8; data.len()];
    e(file::read(
        comm,
        &dir.join("g.npy"),
        &mut back,
        &same,
        &ReadOptions::default(),
    ))?;
    if back != data {
        return Err("a read after the refused calls returned other data".into());
    }
    Ok(())
}

#[test]
fn ranks_that_pass_different_arguments_fail_alike_before_anything_moves() {
    rank_main(|role| {
        assert_eq!(role, "differ");
        let w = e(spools::init())?;
        checked(&w, rank);
        e(w.finalize())
    });
    let dir = tempdir("args-differ");
    let pipes = tempdir("args-differ-pipes");
    let o = Job::new(
        3,
        "ranks_that_pass_different_arguments_fail_alike_before_anything_moves",
    )
    .role("differ")
    .env("ARGS_DIR", dir.path())
    .env("SPOOLS_PIPE_DIR", pipes.path())
    .run();
    assert_ok(&o);
}
