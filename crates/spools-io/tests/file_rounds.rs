//! Parallel files written and read in many rounds of a tiny collective buffer: every
//! format, odd rank counts, block, cyclic and block-cyclic layouts (and a column-major one,
//! whose local storage is not in stream order), read back with the write's layout and
//! with another one; and the memory bound of an aggregator (`VmHWM`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use spools::{Format, Layout, ReadOptions, Reshuffle, Striping, WriteOptions};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

/// The dataset's byte at stream offset `g`.
fn byte(g: u64) -> u8 {
    (g.wrapping_mul(31) ^ (g >> 8)) as u8
}

/// This rank's share of `l`, filled with [`byte`].
fn share(l: &Layout, me: u64) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; e(l.local_bytes(me))? as usize];
    for x in e(l.extents(me))? {
        for k in 0..x.len {
            v[(x.local + k) as usize] = byte(x.global + k);
        }
    }
    Ok(v)
}

/// The formats under test, by name.
fn format(name: &str, ranks: u64) -> Result<Format, String> {
    let striped = |spec: String| -> Result<Format, String> {
        Ok(Format::Striped(Striping {
            layout: e(spec.parse())?,
            dirs: Vec::new(),
            node_local: false,
        }))
    };
    match name {
        "canonical" => Ok(Format::Canonical),
        "npy" => Ok(Format::Npy),
        "raid0" => striped(format!("stripe(unit=512B,count={})", ranks + 1)),
        "raid5" => striped(format!("raid5(unit=256B,count={})", ranks + 2)),
        _ => Err(format!("no format {name}")),
    }
}

/// Layouts over the same f64[96,101] dataset, for `n` ranks.
fn layouts(n: u64) -> Vec<String> {
    vec![
        format!("f64[96,101] block,* on {n}x1"),
        format!("f64[96,101] *,cyclic on 1x{n}"),
        format!("f64[96,101] cyclic(5),* on {n}x1"),
        format!("f64[96,101] block,* on {n}x1 order=F"),
        format!("f64[96,101] *,cyclic(3) on 1x{n} order=F"),
    ]
}

/// The layout to read back what was written with `ls[i]`, other than `ls[i]`: one of the
/// same storage order (a `.npy` header records the order).
fn other(ls: &[String], i: usize) -> &str {
    match i {
        0..=2 => &ls[(i + 1) % 3],
        _ => &ls[3 + (i - 2) % 2],
    }
}

const BUFFER: usize = 4096;

fn many_rounds(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    let ls = layouts(n);
    for fmt in ["canonical", "npy", "raid0", "raid5"] {
        for (i, spec) in ls.iter().enumerate() {
            let l: Layout = e(spec.parse())?;
            let path = dir.join(format!("{fmt}-{i}"));
            let data = share(&l, me)?;
            let opts = WriteOptions {
                format: format(fmt, n)?,
                reshuffle: Reshuffle::Always,
                coll_buffer: Some(BUFFER),
                ..WriteOptions::default()
            };
            let st = e(w.write_file(&path, &data, &l, &opts))?;
            let total = l.total_bytes().unwrap();
            let least = total.div_ceil(u64::from(st.aggregators) * BUFFER as u64);
            if st.rounds < least.max(4) {
                return Err(format!(
                    "{fmt} {spec}: {} rounds, want at least {least}",
                    st.rounds
                ));
            }
            if me == 0 && (fmt == "canonical" || fmt == "npy") {
                let bytes = e(std::fs::read(&path))?;
                let body = &bytes[bytes.len() - total as usize..];
                if let Some(g) = (0..total).find(|&g| body[g as usize] != byte(g)) {
                    return Err(format!("{fmt} {spec}: file byte {g} is wrong"));
                }
            }
            // Read back with the write's layout and with the next one.
            for back in [spec.as_str(), other(&ls, i)] {
                let r: Layout = e(back.parse())?;
                let mut got = vec![0u8; e(r.local_bytes(me))? as usize];
                let opts = ReadOptions {
                    reshuffle: Reshuffle::Always,
                    coll_buffer: Some(BUFFER),
                    ..ReadOptions::default()
                };
                let st = e(w.read_file(&path, &mut got, &r, &opts))?;
                if st.rounds < least.max(4) {
                    return Err(format!("{fmt} read as {back}: {} rounds", st.rounds));
                }
                if got != share(&r, me)? {
                    return Err(format!("{fmt}: written as {spec}, read as {back}: differs"));
                }
            }
        }
    }
    Ok(())
}

/// Each rank writes and reads its own runs (vectored where they lie back to back in the
/// file but not in memory, as with a column-major layout).
fn direct(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    for (i, spec) in layouts(n).iter().enumerate() {
        let l: Layout = e(spec.parse())?;
        let path = dir.join(format!("direct-{i}"));
        let data = share(&l, me)?;
        let opts = WriteOptions {
            reshuffle: Reshuffle::Never,
            ..WriteOptions::default()
        };
        let st = e(w.write_file(&path, &data, &l, &opts))?;
        if st.reshuffled {
            return Err(format!("{spec}: reshuffled"));
        }
        if me == 0 {
            let bytes = e(std::fs::read(&path))?;
            if let Some(g) = (0..bytes.len()).find(|&g| bytes[g] != byte(g as u64)) {
                return Err(format!("{spec}: file byte {g} is wrong"));
            }
        }
        let mut got = vec![0u8; data.len()];
        let opts = ReadOptions {
            reshuffle: Reshuffle::Never,
            ..ReadOptions::default()
        };
        e(w.read_file(&path, &mut got, &l, &opts))?;
        if got != data {
            return Err(format!("{spec}: read back differs"));
        }
    }
    Ok(())
}

#[test]
fn ranks_write_and_read_their_own_runs_vectored() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, direct);
        e(w.finalize())
    });
    let d = tempdir("direct");
    assert_ok(
        &Job::new(3, "ranks_write_and_read_their_own_runs_vectored")
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
    );
}

#[test]
fn files_many_times_the_collective_buffer_round_trip_in_every_format() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, many_rounds);
        e(w.finalize())
    });
    for ranks in [3, 5] {
        let d = tempdir("rounds");
        assert_ok(
            &Job::new(
                ranks,
                "files_many_times_the_collective_buffer_round_trip_in_every_format",
            )
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
        );
    }
}

/// `VmHWM` of this process, in bytes.
fn vm_hwm() -> Result<u64, String> {
    let s = e(std::fs::read_to_string("/proc/self/status"))?;
    let line = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM in /proc/self/status")?;
    let kib: u64 = e(line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse())?;
    Ok(kib << 10)
}

/// The memory bound's file: 64 MiB over 4 ranks (16 MiB each).
const BIG: &str = "u32[16777216] cyclic(262144) on 4";
/// Its collective buffer: the file is 64 times larger.
const BIG_BUFFER: usize = 1 << 20;
/// What a rank may add to its peak beyond its own data (allocated before measuring): the
/// round's buffer, a striped file's unit chunks of the round (data and parity, about one
/// buffer more each way), and this slack for the exchange's transfer units and
/// bookkeeping. Without rounds, each of the 4 aggregators would hold its whole 16 MiB file
/// domain (and a striped one its chunks besides).
const SLACK: u64 = 4 << 20;

/// A layout of 4-byte runs: 4 MiB (8 rounds), whose rounds' windows are
/// described run by run, so they shrink to hold at most 2^17 runs.
const FINE: &str = "u32[1048576] cyclic on 4";
/// What describing a round's window may take, for [`FINE`]: about 100 bytes per run of the
/// window, over all ranks' views of it.
const FINE_SLACK: u64 = 16 << 20;

fn memory_bound(w: &spools::World, fmt: &str) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let me = u64::from(w.rank());
    let l: Layout = e(if fmt == "fine" { FINE } else { BIG }.parse())?;
    let data = share(&l, me)?;
    let mut back = vec![1u8; data.len()];
    let path = dir.join("big");
    // A small file first, so that the runtime's own lazily allocated state is in the
    // baseline.
    let small: Layout = e("u32[4096] block on 4".parse())?;
    let sdata = share(&small, me)?;
    let spath = dir.join("small");
    // Blocks of 64 KiB: the manifest's block checksums (O(file / block), read and written
    // whole by rank 0) stay small.
    let format = match fmt {
        "raid5" => Format::Striped(Striping {
            layout: e("raid5(unit=64KiB,count=6)".parse())?,
            dirs: Vec::new(),
            node_local: false,
        }),
        "fine" => Format::Canonical,
        _ => format(fmt, 4)?,
    };
    let wopts = WriteOptions {
        format,
        reshuffle: Reshuffle::Always,
        coll_buffer: Some(BIG_BUFFER),
        ..WriteOptions::default()
    };
    let ropts = ReadOptions {
        reshuffle: Reshuffle::Always,
        coll_buffer: Some(BIG_BUFFER),
        ..ReadOptions::default()
    };
    e(w.write_file(&spath, &sdata, &small, &wopts))?;
    let mut sback = vec![0u8; sdata.len()];
    e(w.read_file(&spath, &mut sback, &small, &ropts))?;
    let base = vm_hwm()?;
    e(w.write_file(&path, &data, &l, &wopts))?;
    let after_write = vm_hwm()?;
    e(w.read_file(&path, &mut back, &l, &ropts))?;
    let after_read = vm_hwm()?;
    if back != data {
        return Err("the big file read back differs".into());
    }
    let bound = 3 * BIG_BUFFER as u64 + SLACK + if fmt == "fine" { FINE_SLACK } else { 0 };
    eprintln!(
        "rank {me} {fmt}: VmHWM {} MiB at start, +{} KiB writing, +{} KiB reading (bound +{} KiB)",
        base >> 20,
        (after_write - base) >> 10,
        (after_read - base) >> 10,
        bound >> 10
    );
    if after_read - base > bound {
        return Err(format!(
            "rank {me} {fmt}: the peak grew by {} KiB writing and reading a file of {} MiB with a 1 MiB buffer (bound {} KiB)",
            (after_read - base) >> 10,
            l.total_bytes().unwrap_or(0) >> 20,
            bound >> 10
        ));
    }
    Ok(())
}

#[test]
fn writing_and_reading_a_file_64_times_the_buffer_keeps_the_peak_bounded() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| memory_bound(w, role));
        e(w.finalize())
    });
    for fmt in ["canonical", "raid5", "fine"] {
        let d = tempdir("rounds-mem");
        assert_ok(
            &Job::new(
                4,
                "writing_and_reading_a_file_64_times_the_buffer_keeps_the_peak_bounded",
            )
            .role(fmt)
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
        );
    }
}

/// `SPOOLS_COLL_BUFFER` sets the rounds; a per-call buffer overrides it.
fn configured(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let me = u64::from(w.rank());
    let l: Layout = e(layouts(u64::from(w.size()))[1].parse())?;
    let data = share(&l, me)?;
    let path = dir.join("configured");
    let total = l.total_bytes().unwrap();
    for (choice, want) in [(None, total.div_ceil(4096)), (Some(1 << 20), 1)] {
        let opts = WriteOptions {
            reshuffle: Reshuffle::Always,
            coll_buffer: choice,
            ..WriteOptions::default()
        };
        let st = e(w.write_file(&path, &data, &l, &opts))?;
        if st.rounds != want || st.aggregators != 1 {
            return Err(format!(
                "buffer {choice:?}: {} rounds over {} aggregators, want {want} over 1",
                st.rounds, st.aggregators
            ));
        }
        let mut got = vec![0u8; data.len()];
        let opts = ReadOptions {
            reshuffle: Reshuffle::Always,
            coll_buffer: choice,
            ..ReadOptions::default()
        };
        let st = e(w.read_file(&path, &mut got, &l, &opts))?;
        if st.rounds != want || got != data {
            return Err(format!(
                "buffer {choice:?}: read {} rounds or other data",
                st.rounds
            ));
        }
    }
    Ok(())
}

#[test]
fn the_configured_collective_buffer_sets_the_rounds() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, configured);
        e(w.finalize())
    });
    let d = tempdir("rounds-config");
    assert_ok(
        &Job::new(3, "the_configured_collective_buffer_sets_the_rounds")
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .env("SPOOLS_COLL_BUFFER", "4KiB")
            .run(),
    );
}

/// The configuration a program gives `init_with` is the one the rounds follow, not the
/// environment read again: the environment says 1 MiB (one round), the program 4 KiB.
#[test]
fn the_collective_buffer_given_to_init_with_sets_the_rounds() {
    rank_main(|_| {
        let mut cfg = e(spools::Config::load())?;
        cfg.coll_buffer = 4096;
        let env = e(spools_boot::identity::JobEnv::from_env())?;
        let w = e(spools::init_with(cfg, env))?;
        checked(&w, configured);
        e(w.finalize())
    });
    let d = tempdir("rounds-init-with");
    assert_ok(
        &Job::new(
            3,
            "the_collective_buffer_given_to_init_with_sets_the_rounds",
        )
        .role("rank")
        .env("SPOOLS_TEST_DIR", d.path())
        .env("SPOOLS_COLL_BUFFER", "1MiB")
        .run(),
    );
}

/// Single-element runs in many rounds (each round's window a slab of the vector, moved as
/// strided progressions): `i64` and `i32` vectors `cyclic on P` written to and read from a
/// RAID-5 file and a canonical one, every element read checked against its index, then the
/// RAID-5 file read again with one unit file deleted (rebuilt from parity), and with
/// `block` and `cyclic(3)` (windows that are no slabs).
fn single_elements(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    for (t, size) in [("i64", 8u64), ("i32", 4)] {
        let count = 48_008 / size + 1;
        let fill = |l: &Layout| -> Result<Vec<u8>, String> {
            let mut v = vec![0u8; e(l.local_bytes(me))? as usize];
            for x in e(l.extents(me))? {
                for k in (0..x.len).step_by(size as usize) {
                    let i = (x.global + k) / size;
                    let at = (x.local + k) as usize;
                    v[at..at + size as usize].copy_from_slice(&i.to_le_bytes()[..size as usize]);
                }
            }
            Ok(v)
        };
        let check = |l: &Layout, got: &[u8], what: &str| -> Result<(), String> {
            for x in e(l.extents(me))? {
                for k in (0..x.len).step_by(size as usize) {
                    let i = (x.global + k) / size;
                    let at = (x.local + k) as usize;
                    let want = &i.to_le_bytes()[..size as usize];
                    if &got[at..at + size as usize] != want {
                        return Err(format!(
                            "{what}: rank {me} element {i} (local byte {at}) is {:?}, want {want:?}",
                            &got[at..at + size as usize]
                        ));
                    }
                }
            }
            Ok(())
        };
        let cyclic: Layout = e(format!("{t}[{count}] cyclic on {n}").parse())?;
        let data = fill(&cyclic)?;
        for fmt in ["raid5", "canonical"] {
            let path = dir.join(format!("single-{t}-{fmt}"));
            let opts = WriteOptions {
                format: format(fmt, n)?,
                reshuffle: Reshuffle::Always,
                coll_buffer: Some(BUFFER),
                ..WriteOptions::default()
            };
            let st = e(w.write_file(&path, &data, &cyclic, &opts))?;
            if st.rounds < 4 {
                return Err(format!("{fmt} {t}: {} rounds, want several", st.rounds));
            }
            let read = |l: &Layout, what: &str| -> Result<(), String> {
                let mut got = vec![0xa5u8; e(l.local_bytes(me))? as usize];
                let opts = ReadOptions {
                    reshuffle: Reshuffle::Always,
                    coll_buffer: Some(BUFFER),
                    ..ReadOptions::default()
                };
                let st = e(w.read_file(&path, &mut got, l, &opts))?;
                if st.rounds < 4 {
                    return Err(format!("{what}: {} rounds, want several", st.rounds));
                }
                check(l, &got, what)
            };
            read(&cyclic, &format!("{fmt} {t} cyclic"))?;
            for other in ["block", "cyclic(3)"] {
                let l: Layout = e(format!("{t}[{count}] {other} on {n}").parse())?;
                read(&l, &format!("{fmt} {t} read as {other}"))?;
            }
            if fmt == "raid5" {
                // Unit 1 of the current version gone: every row rebuilt from parity.
                e(w.barrier())?;
                if me == 0 {
                    let m: serde_json::Value =
                        e(serde_json::from_slice(&e(std::fs::read(&path))?))?;
                    let unit = m["units"][1]["path"].as_str().ok_or("no unit 1")?;
                    e(std::fs::remove_file(dir.join(unit)))?;
                }
                e(w.barrier())?;
                read(&cyclic, &format!("degraded {t} cyclic"))?;
            }
        }
    }
    Ok(())
}

#[test]
fn single_element_runs_in_many_rounds_read_back_element_by_element() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, single_elements);
        e(w.finalize())
    });
    for ranks in [2, 3] {
        let d = tempdir("single");
        assert_ok(
            &Job::new(
                ranks,
                "single_element_runs_in_many_rounds_read_back_element_by_element",
            )
            .role("rank")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
        );
    }
}
