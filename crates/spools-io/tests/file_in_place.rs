//! Canonical and `.npy` files written in place (`Commit::InPlace`) on 3 ranks: an
//! existing, longer file keeps its inode and is cut to the dataset, reshuffled in many
//! rounds and written directly; the sidecar follows the data (written with checksums,
//! removed without); an atomic write (`Commit::Replace`, the default) gives a new inode; a
//! symlink at the path is written through and stays a symlink; a directory at the path
//! or a FIFO is an error on every rank, its sidecar kept; ranks that disagree on checksums,
//! commit or reshuffle are refused before the file or its sidecar is touched. (An in-place write that fails after its data went out,
//! a full file system, leaves no sidecar: `spools-cli/tests/hostile_io.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod seeded;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use spools::{Commit, FileError, Format, Layout, ReadOptions, Reshuffle, World, WriteOptions};
use spools_io::file::{sidecar_path, tools, SumsDefect, SUMS_BLOCK};
use spools_io::FormatDefect;
use spools_testkit::{assert_ok, e, tempdir, Job};

/// Two whole checksum blocks and a short one, in cyclic runs of 4099 bytes.
const BYTES: u64 = 2 * SUMS_BLOCK + 777;

/// The collective buffer of the reshuffled writes: many rounds.
const ROUND: usize = 64 << 10;

fn layout(n: u32) -> Layout {
    seeded::layout(BYTES, n)
}

/// Writes the dataset of `seed` to `path`.
fn write(
    w: &World,
    path: &Path,
    fmt: &Format,
    commit: Commit,
    reshuffle: Reshuffle,
    sums: bool,
    seed: u64,
) -> Result<(), FileError> {
    let l = layout(w.size());
    let data = seeded::part(&l, u64::from(w.rank()), seed).unwrap_or_default();
    let opts = WriteOptions {
        format: fmt.clone(),
        checksums: sums,
        reshuffle,
        coll_buffer: Some(ROUND),
        commit,
        ..WriteOptions::default()
    };
    let stats = w.write_file(path, &data, &l, &opts)?;
    if reshuffle == Reshuffle::Always {
        assert!(
            stats.rounds > 1,
            "a reshuffled write in one round: {stats:?}"
        );
    }
    Ok(())
}

/// Reads `path` back (verified against the sidecar with `sums`) and compares.
fn read(w: &World, path: &Path, sums: bool, seed: u64) -> Result<(), FileError> {
    let opts = ReadOptions {
        checksums: sums,
        coll_buffer: Some(ROUND),
        ..ReadOptions::default()
    };
    seeded::read_back(w, path, BYTES, &opts, seed)
}

/// The inode of `path` (through a symlink).
fn inode(path: &Path) -> Result<u64, String> {
    Ok(e(std::fs::metadata(path))?.ino())
}

fn body(w: &World, fmt: &Format) -> Result<(), String> {
    let (dir, path, side) = seeded::paths(fmt);
    let root = w.rank() == 0;
    let inplace = |how, sums, seed| e(write(w, &path, fmt, Commit::InPlace, how, sums, seed));
    // An older, longer file of other bytes, with a sidecar of its own.
    if root {
        e(std::fs::write(&path, vec![0xeeu8; 3 * BYTES as usize]))?;
        e(std::fs::write(&side, b"not the sums of anything"))?;
    }
    e(w.barrier())?;
    let ino = inode(&path)?;
    inplace(Reshuffle::Always, true, 1)?;
    e(read(w, &path, true, 1))?;
    let (off, bytes) = seeded::stream(&path);
    let len = e(std::fs::metadata(&path))?.len();
    if inode(&path)? != ino || bytes != BYTES || len != off + BYTES {
        return Err(format!(
            "in place: inode {ino} -> {}, {len} bytes",
            inode(&path)?
        ));
    }
    if root {
        let rep = e(tools::fsck(&path, &mut |_, _| {}))?;
        if !rep.bad.is_empty() || rep.blocks != BYTES.div_ceil(SUMS_BLOCK) {
            return Err(format!("fsck after an in-place write: {rep:?}"));
        }
    }
    // Directly (each rank its own runs), without checksums: the sidecar goes.
    inplace(Reshuffle::Never, false, 2)?;
    e(read(w, &path, false, 2))?;
    if inode(&path)? != ino || side.exists() {
        return Err("a direct in-place write moved the file or kept the sidecar".into());
    }
    // The default commit replaces the file.
    e(write(
        w,
        &path,
        fmt,
        Commit::Replace,
        Reshuffle::Auto,
        false,
        3,
    ))?;
    e(read(w, &path, false, 3))?;
    let ino = inode(&path)?;
    // Through a symlink: the file it names is written, the link stays.
    let link = dir.join(if *fmt == Format::Npy { "l.npy" } else { "l" });
    if root {
        e(std::os::unix::fs::symlink(&path, &link))?;
    }
    e(w.barrier())?;
    e(write(
        w,
        &link,
        fmt,
        Commit::InPlace,
        Reshuffle::Auto,
        false,
        4,
    ))?;
    e(read(w, &path, false, 4))?;
    if inode(&path)? != ino || !e(std::fs::symlink_metadata(&link))?.is_symlink() {
        return Err("an in-place write through a symlink replaced something".into());
    }
    // A directory or a FIFO at the path: an error on every rank (never a wait for a FIFO's
    // reader), nothing written, and a sidecar beside it stays.
    let sub = dir.join("sub");
    let fifo = dir.join("fifo");
    if root {
        e(std::fs::create_dir(&sub))?;
        e(std::fs::write(sidecar_path(&sub), b"kept"))?;
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } != 0 {
            return Err(format!("mkfifo: {}", std::io::Error::last_os_error()));
        }
    }
    e(w.barrier())?;
    for bad in [&sub, &fifo] {
        match write(w, bad, fmt, Commit::InPlace, Reshuffle::Auto, false, 5) {
            Err(FileError::Io { path: p, .. }) if root && p == *bad => {}
            Err(FileError::Remote { .. }) if !root => {}
            other => return Err(format!("an in-place write to {bad:?}: {other:?}")),
        }
    }
    if e(std::fs::read(sidecar_path(&sub)))? != b"kept" {
        return Err("a refused in-place write removed the sidecar".into());
    }
    // Ranks that ask for different commits (or reshuffles) are refused on every rank.
    let before = e(std::fs::read(&path))?;
    let commit = if root {
        Commit::InPlace
    } else {
        Commit::Replace
    };
    match write(w, &path, fmt, commit, Reshuffle::Auto, false, 8) {
        Err(FileError::Options(_)) => {}
        other => return Err(format!("ranks asking for different commits: {other:?}")),
    }
    let how = if root {
        Reshuffle::Always
    } else {
        Reshuffle::Never
    };
    match write(w, &path, fmt, Commit::InPlace, how, false, 8) {
        Err(FileError::Options(_)) => {}
        other => return Err(format!("ranks asking for different reshuffles: {other:?}")),
    }
    e(w.barrier())?;
    if e(std::fs::read(&path))? != before {
        return Err("a refused write changed the file".into());
    }
    // Ranks that disagree on checksums are refused, on every rank, before anything is
    // touched: the file and its sidecar stay as they were.
    inplace(Reshuffle::Always, true, 6)?;
    let before = (e(std::fs::read(&path))?, e(std::fs::read(&side))?);
    let disagree = w.rank() + 1 != w.size();
    match write(
        w,
        &path,
        fmt,
        Commit::InPlace,
        Reshuffle::Always,
        disagree,
        7,
    ) {
        Err(FileError::Format {
            defect: FormatDefect::Sums(SumsDefect::Disagree),
            ..
        }) => {}
        other => return Err(format!("ranks disagreeing on checksums: {other:?}")),
    }
    e(w.barrier())?;
    if (e(std::fs::read(&path))?, e(std::fs::read(&side))?) != before {
        return Err("a refused in-place write changed the file or its sidecar".into());
    }
    e(read(w, &path, true, 6))?;
    seeded::no_temporaries(&dir)?;
    Ok(())
}

fn run(ranks: u32, role: &str) {
    let d = tempdir(&format!("inplace{ranks}{role}"));
    assert_ok(
        &Job::new(ranks, "files_written_in_place_on_3_ranks")
            .role(role)
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
    );
}

#[test]
fn files_written_in_place_on_3_ranks() {
    seeded::ranks(body);
    run(3, "canonical");
    run(3, "npy");
}
