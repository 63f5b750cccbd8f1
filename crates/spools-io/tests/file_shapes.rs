//! Single-element runs in every shape (issue 62, point 1): 1-, 2- and 3-D arrays whose
//! fastest dimension (or any other) is cyclic or block-cyclic with small blocks, over rank
//! counts that do not divide the extents, in C and Fortran order, written and read through
//! every format (canonical, `.npy`, RAID-0, RAID-5 healthy and degraded, Zarr with chunks
//! and with shards), in many rounds of a tiny collective buffer (windows that start
//! anywhere in a period and cut rows) and in one round. Every element holds its own
//! canonical index; what a job reads is checked against that one-process oracle element by
//! element, and a canonical or `.npy` file's bytes are checked whole by rank 0; those two
//! are also read sieved (every rank reading the windows that hold its runs). Each file is
//! also read back in plain row blocks, so a write and a read cannot hide each other's
//! mistakes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use spools::{Format, Layout, ReadOptions, Reshuffle, WriteOptions};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

mod indexed;
use indexed::{check, share, ELEM};

/// Whether `l`'s runs are shorter than 32 bytes on average: its one-file reads left to
/// Spools are then sieved.
fn short_runs(l: &Layout) -> Result<bool, String> {
    let mut runs = 0;
    for u in 0..l.units() {
        runs += e(l.extents(u))?.count() as u64;
    }
    Ok(l.total_bytes().unwrap() / runs.max(1) < 32)
}

/// The shapes under test for `n` ranks: `(layout, the same array in row blocks, zarr
/// chunk shape)`.
fn shapes(n: u64) -> Vec<(String, String, &'static str)> {
    let (g2, g3) = match n {
        2 => ("2x1", "1x1x2"),
        3 => ("3x1", "1x1x3"),
        _ => ("2x2", "2x1x2"),
    };
    vec![
        (
            format!("i32[4001] cyclic on {n}"),
            format!("i32[4001] block on {n}"),
            "333",
        ),
        (
            format!("i32[37,101] *,cyclic on 1x{n}"),
            format!("i32[37,101] block,* on {n}x1"),
            "5x17",
        ),
        (
            format!("i32[24,50] *,cyclic(2) on 1x{n}"),
            format!("i32[24,50] block,* on {n}x1"),
            "7x9",
        ),
        (
            format!("i32[37,101] cyclic,cyclic on {g2}"),
            format!("i32[37,101] block,* on {n}x1"),
            "6x25",
        ),
        (
            format!("i32[9,10,11] *,*,cyclic on 1x1x{n}"),
            format!("i32[9,10,11] block,*,* on {n}x1x1"),
            "2x3x4",
        ),
        (
            format!("i32[9,10,11] cyclic,cyclic(2),cyclic on {g3}"),
            format!("i32[9,10,11] block,*,* on {n}x1x1"),
            "4x10x3",
        ),
        (
            format!("i32[101,37] cyclic,* on {n}x1 order=F"),
            format!("i32[101,37] *,block on 1x{n} order=F"),
            "17x5",
        ),
    ]
}

/// The formats under test for `n` ranks, and a Zarr array of chunks `chunk`.
fn formats(n: u64, chunk: &str) -> Result<Vec<(String, Format)>, String> {
    let mut out = Vec::new();
    for name in [
        "canonical".to_string(),
        "npy".to_string(),
        format!("raid0(unit=512B,count={})", n + 1),
        format!("raid5(unit=256B,count={})", n + 2),
        format!("zarr(chunk={chunk},codec=none)"),
        format!("zarr(chunk={chunk},shard={},codec=none)", double(chunk)),
    ] {
        let f = e(Format::parse(&name, Vec::new(), false))?;
        out.push((name, f));
    }
    Ok(out)
}

/// A shard shape of two chunks along the first dimension.
fn double(chunk: &str) -> String {
    let mut parts: Vec<String> = chunk.split('x').map(str::to_string).collect();
    parts[0] = (parts[0].parse::<u64>().unwrap() * 2).to_string();
    parts.join("x")
}

fn every_shape(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    for (si, (spec, blocks, chunk)) in shapes(n).iter().enumerate() {
        let l: Layout = e(spec.parse())?;
        let rows: Layout = e(blocks.parse())?;
        let data = share(&l, me)?;
        for (fi, (fname, format)) in formats(n, chunk)?.into_iter().enumerate() {
            // Zarr's chunks are an array's: a vector's chunk shape has one extent.
            for buffer in [Some(4096usize), None] {
                let path = dir.join(format!("s{si}-f{fi}-{}", buffer.is_some()));
                let what = format!("{spec} as {fname}, buffer {buffer:?}");
                let opts = WriteOptions {
                    format: format.clone(),
                    reshuffle: Reshuffle::Always,
                    coll_buffer: buffer,
                    ..WriteOptions::default()
                };
                e(w.write_file(&path, &data, &l, &opts)).map_err(|x| format!("{what}: {x}"))?;
                if me == 0 && (fname == "canonical" || fname == "npy") {
                    let bytes = e(std::fs::read(&path))?;
                    let total = l.total_bytes().unwrap() as usize;
                    let body = &bytes[bytes.len() - total..];
                    for (i, c) in body.chunks(ELEM as usize).enumerate() {
                        if u32::from_le_bytes(c.try_into().unwrap()) != i as u32 {
                            return Err(format!("{what}: file element {i} is wrong"));
                        }
                    }
                }
                let read_as = |r: &Layout, how: &str, reshuffle| {
                    let mut got = vec![0xa5u8; e(r.local_bytes(me))? as usize];
                    let opts = ReadOptions {
                        reshuffle,
                        coll_buffer: buffer,
                        ..ReadOptions::default()
                    };
                    let stats = e(w.read_file(&path, &mut got, r, &opts))
                        .map_err(|x| format!("{what}, read {how}: {x}"))?;
                    check(r, me, &got, &format!("{what}, read {how}"))?;
                    Ok::<_, String>(stats)
                };
                let read = |r: &Layout, how: &str| read_as(r, how, Reshuffle::Always).map(drop);
                read(&l, "as written")?;
                read(&rows, "in row blocks")?;
                if fname == "canonical" || fname == "npy" {
                    // Left to Spools, a one-file read of runs shorter than 32 bytes on
                    // average, on one host, is sieved: every rank reads the windows that
                    // hold its runs.
                    let stats = read_as(&l, "left to Spools", Reshuffle::Auto)?;
                    let short = short_runs(&l)?;
                    if stats.sieved != short || (stats.sieved && stats.reshuffled) {
                        return Err(format!(
                            "{what}: runs short: {short}, but the read went so: {stats:?}"
                        ));
                    }
                }
                if fname == "canonical" && buffer.is_some() {
                    // With checksums: the sieved read checks every block a rank reads
                    // (blocks across windows, windows a rank skips), and a flipped byte
                    // fails the read on every rank.
                    let sums = dir.join(format!("s{si}-sums"));
                    let wopts = WriteOptions {
                        checksums: true,
                        coll_buffer: buffer,
                        ..WriteOptions::default()
                    };
                    e(w.write_file(&sums, &data, &l, &wopts))
                        .map_err(|x| format!("{what}, with checksums: {x}"))?;
                    let ropts = ReadOptions {
                        checksums: true,
                        coll_buffer: buffer,
                        ..ReadOptions::default()
                    };
                    let mut got = vec![0u8; data.len()];
                    let st = e(w.read_file(&sums, &mut got, &l, &ropts))
                        .map_err(|x| format!("{what}, read with checksums: {x}"))?;
                    check(&l, me, &got, &format!("{what}, read with checksums"))?;
                    if st.sieved != short_runs(&l)? {
                        return Err(format!("{what}: a checked read went so: {st:?}"));
                    }
                    e(w.barrier())?;
                    if me == 0 {
                        let mut bytes = e(std::fs::read(&sums))?;
                        let at = bytes.len() / 2;
                        bytes[at] ^= 0x40;
                        e(std::fs::write(&sums, &bytes))?;
                    }
                    e(w.barrier())?;
                    if w.read_file(&sums, &mut got, &l, &ropts).is_ok() {
                        return Err(format!("{what}: a flipped byte read as good"));
                    }
                }
                if fname.starts_with("raid5") {
                    // Unit 1 of the current version gone: read rebuilt from parity.
                    e(w.barrier())?;
                    if me == 0 {
                        let m: serde_json::Value =
                            e(serde_json::from_slice(&e(std::fs::read(&path))?))?;
                        let unit = m["units"][1]["path"].as_str().ok_or("no unit 1")?;
                        e(std::fs::remove_file(path.parent().unwrap().join(unit)))?;
                    }
                    e(w.barrier())?;
                    read(&l, "degraded")?;
                }
            }
        }
    }
    Ok(())
}

#[test]
fn single_element_runs_in_every_shape_and_format_read_back_element_by_element() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, every_shape);
        e(w.finalize())
    });
    for ranks in [2, 3, 4] {
        let d = tempdir("shapes");
        assert_ok(
            &Job::new(
                ranks,
                "single_element_runs_in_every_shape_and_format_read_back_element_by_element",
            )
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
        );
    }
}
