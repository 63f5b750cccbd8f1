//! Checksums of canonical and `.npy` files (`WriteOptions::checksums`): the sidecar
//! written with the data on 1, 3 and 4 ranks, `fsck` clean; a flipped byte found by a
//! verified read (naming the block) and by `fsck`; a truncated sidecar refused; a stale
//! sidecar removed by a write without checksums; and a write whose ranks disagree on
//! checksums is refused, leaving the previous file and sidecar as they were, with no
//! temporary file behind. Reshuffled writes and reads go in rounds of a
//! 64 KiB collective buffer, so the sums gather pieces of many rounds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod seeded;

use std::os::unix::fs::FileExt;
use std::path::Path;

use spools::{FileError, Format, Layout, ReadOptions, Reshuffle, World, WriteOptions};
use spools_io::file::{tools, SumsDefect, SUMS_BLOCK};
use spools_io::FormatDefect;
use spools_testkit::{assert_ok, e, tempdir, Job};

/// 3 MiB and a bit: three whole blocks and a short one; cyclic runs of 4099 bytes, so
/// that blocks straddle the ranks' runs (direct path) and domains (reshuffled).
const BYTES: u64 = 3 * SUMS_BLOCK + 4321;

/// The collective buffer: the reshuffled writes and reads go in many rounds.
const ROUND: usize = 64 << 10;

fn layout(n: u32) -> Layout {
    seeded::layout(BYTES, n)
}

/// Writes the dataset of `seed`: the first one reshuffled (in rounds), the others as
/// `Reshuffle::Auto` decides (each rank its own runs, for these runs).
fn write(w: &World, path: &Path, fmt: &Format, sums: bool, seed: u64) -> Result<(), String> {
    let l = layout(w.size());
    let data = seeded::part(&l, u64::from(w.rank()), seed)?;
    let opts = WriteOptions {
        format: fmt.clone(),
        checksums: sums,
        reshuffle: if seed == 1 {
            Reshuffle::Always
        } else {
            Reshuffle::Auto
        },
        // Many rounds: the 1 MiB blocks straddle the rounds' parts.
        coll_buffer: Some(ROUND),
        ..WriteOptions::default()
    };
    let stats = e(w.write_file(path, &data, &l, &opts))?;
    if seed == 1 && (!stats.reshuffled || stats.rounds < 2) {
        return Err(format!("a reshuffled write in one round: {stats:?}"));
    }
    Ok(())
}

/// Reads with verification (reshuffled or direct) and checks the values.
fn read(w: &World, path: &Path, how: Reshuffle, seed: u64) -> Result<(), FileError> {
    let opts = ReadOptions {
        reshuffle: how,
        checksums: true,
        coll_buffer: Some(ROUND),
        ..ReadOptions::default()
    };
    seeded::read_back(w, path, BYTES, &opts, seed)
}

fn body(w: &World, fmt: &Format) -> Result<(), String> {
    let (dir, path, side) = seeded::paths(fmt);
    let root = w.rank() == 0;
    let all_ok = |r: Result<(), FileError>| e(r);
    write(w, &path, fmt, true, 1)?;
    for how in [Reshuffle::Always, Reshuffle::Never] {
        all_ok(read(w, &path, how, 1))?;
    }
    let off = seeded::stream(&path).0;
    if root {
        let rep = e(tools::fsck(&path, &mut |_, _| {}))?;
        if !rep.bad.is_empty() || rep.blocks != BYTES.div_ceil(SUMS_BLOCK) {
            return Err(format!("fsck of a good file: {rep:?}"));
        }
        // Flip a byte of block 2.
        let f = e(std::fs::OpenOptions::new()
            .write(true)
            .read(true)
            .open(&path))?;
        let at = off + 2 * SUMS_BLOCK + 777;
        let mut b = [0u8];
        e(f.read_exact_at(&mut b, at))?;
        e(f.write_all_at(&[b[0] ^ 0x20], at))?;
    }
    e(w.barrier())?;
    let bad_block = off + 2 * SUMS_BLOCK;
    for how in [Reshuffle::Always, Reshuffle::Never] {
        match read(w, &path, how, 1) {
            Err(FileError::Corrupt {
                offset, path: p, ..
            }) if offset == bad_block && p == path => {
                // This rank read the block: mark it.
                e(std::fs::write(
                    dir.join(format!("saw-{how:?}-{}", w.rank())),
                    b"",
                ))?;
            }
            Err(FileError::Remote { .. }) => {}
            other => return Err(format!("{how:?} read of a flipped byte: {other:?}")),
        }
    }
    if root {
        let rep = e(tools::fsck(&path, &mut |_, _| {}))?;
        let offsets: Vec<(u64, &str)> = rep.bad.iter().map(|b| (b.offset, b.problem)).collect();
        if offsets != [(bad_block, "checksum mismatch")] {
            return Err(format!("fsck of a flipped byte: {rep:?}"));
        }
        // A truncated sidecar.
        let text = e(std::fs::read(&side))?;
        e(std::fs::write(&side, &text[..text.len() / 2]))?;
        match tools::fsck(&path, &mut |_, _| {}) {
            Err(FileError::Format {
                defect: FormatDefect::Sums(SumsDefect::NotSums { .. }),
                path: p,
            }) if p == side => {}
            other => return Err(format!("fsck with a truncated sidecar: {other:?}")),
        }
    }
    e(w.barrier())?;
    match read(w, &path, Reshuffle::Auto, 1) {
        Err(FileError::Format {
            defect: FormatDefect::Sums(SumsDefect::NotSums { .. }),
            ..
        })
        | Err(FileError::Remote { .. }) => {}
        other => return Err(format!("read with a truncated sidecar: {other:?}")),
    }
    // A good write again, then one whose ranks disagree on checksums: refused on every
    // rank before anything is written. The file and sidecar stay.
    write(w, &path, fmt, true, 2)?;
    let before = (e(std::fs::read(&path))?, e(std::fs::read(&side))?);
    if w.size() > 1 {
        if write(w, &path, fmt, w.rank() + 1 != w.size(), 3).is_ok() {
            return Err("a write whose ranks disagree on checksums succeeded".into());
        }
        e(w.barrier())?;
        if (e(std::fs::read(&path))?, e(std::fs::read(&side))?) != before {
            return Err("a failed write changed the file or its sidecar".into());
        }
    }
    all_ok(read(w, &path, Reshuffle::Auto, 2))?;
    seeded::no_temporaries(&dir)?;
    e(w.barrier())?;
    // A write without checksums removes the (now stale) sidecar.
    write(w, &path, fmt, false, 4)?;
    if side.exists() {
        return Err("a write without checksums left the old sidecar".into());
    }
    match read(w, &path, Reshuffle::Auto, 4) {
        Err(FileError::Io { path: p, .. }) if p == side => Ok(()),
        Err(FileError::Remote { .. }) => Ok(()),
        other => Err(format!("verified read without a sidecar: {other:?}")),
    }
}

fn run(ranks: u32, role: &str) {
    let test = "checksummed_files_on_1_3_and_4_ranks";
    let d = tempdir(&format!("sums{ranks}{role}"));
    assert_ok(
        &Job::new(ranks, test)
            .role(role)
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
    );
    // Some rank found the flipped byte, on each path.
    for how in ["Always", "Never"] {
        let saw = (0..ranks).any(|r| d.path().join(format!("saw-{how}-{r}")).exists());
        assert!(
            saw,
            "{ranks} ranks, {role}: no rank named the bad block ({how})"
        );
    }
}

#[test]
fn checksummed_files_on_1_3_and_4_ranks() {
    seeded::ranks(body);
    run(1, "canonical");
    run(3, "canonical");
    run(4, "npy");
}
