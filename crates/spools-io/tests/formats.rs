//! The conformance suite every parallel-file format runs, as zarrs runs one suite over
//! every store: canonical, `.npy`, RAID-0, RAID-5, Zarr (one file per chunk, and sharded
//! and compressed) and HDF5, each through the same four properties with real jobs.
//!
//! 1. Written by M ranks under a random layout, read back by N ranks under other random
//!    layouts, element by element.
//! 2. Damage is reported, never returned: a truncated file (formats without checksums) or
//!    flipped bits beyond what the format repairs (formats with checksums) fail the read
//!    on every rank, as damage where the format keeps checksums.
//! 3. A rank killed with SIGKILL in the middle of a write leaves a whole version: the one
//!    before, or (if the kill came after the commit) the new one; never a mixture.
//! 4. A full file system is an error on every rank, and the version before stays whole.
//!
//! Adding a format to the suite is one row of [`FORMATS`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use spools::Layout;
use spools_io::file::{self, Format, ReadOptions, WriteOptions};
use spools_io::{Cause, ErrorKind};
use spools_testkit::{
    assert_ok, checked, e, kill_when_signalled, listing, rank_main, signal_file, tempdir, Job, Rng,
    Tmpfs,
};

/// One format under test.
struct Case {
    /// Its name in test messages and file names.
    name: &'static str,
    /// Its spec, as `Format::parse` reads it.
    spec: &'static str,
    /// Whether it keeps checksums of the data (then flipped bits are found).
    checksums: bool,
}

const FORMATS: &[Case] = &[
    Case {
        name: "canonical",
        spec: "canonical",
        checksums: false,
    },
    Case {
        name: "npy",
        spec: "npy",
        checksums: false,
    },
    Case {
        name: "raid0",
        spec: "raid0(unit=1000B,count=3)",
        checksums: true,
    },
    Case {
        name: "raid5",
        spec: "raid5(unit=1KiB,count=4)",
        checksums: true,
    },
    Case {
        name: "zarr",
        spec: "zarr(chunk=16x32)",
        checksums: true,
    },
    Case {
        name: "zarr-sharded",
        spec: "zarr(chunk=8x16,shard=32x64,codec=zstd)",
        checksums: true,
    },
    Case {
        name: "hdf5",
        spec: "hdf5",
        checksums: false,
    },
];

/// The dataset's shape in the tests (18 KiB of `u32`).
const SHAPE: [u64; 2] = [60, 77];
/// The larger dataset that does not fit the small file system.
const BIG: [u64; 2] = [600, 770];
/// Bytes of the small file system.
const SMALL_FS: &str = "256k";

/// Element `i` of version `v`.
fn value(i: u64, v: u32) -> u32 {
    (i as u32) | (v << 24)
}

/// A random 2-D layout of `shape` over `n` ranks, in C order: a random grid, and per
/// dimension block, cyclic or block-cyclic (or `*` where the grid has one rank).
fn random_layout(shape: [u64; 2], n: u32, seed: u64) -> String {
    let mut r = Rng(seed);
    let grids: Vec<(u32, u32)> = (1..=n).filter(|p| n % p == 0).map(|p| (p, n / p)).collect();
    let (p, q) = grids[r.below(grids.len() as u64) as usize];
    let mut dist = |g: u32| -> String {
        if g == 1 && r.below(2) == 0 {
            return "*".into();
        }
        match r.below(3) {
            0 => "block".into(),
            1 => "cyclic".into(),
            _ => format!("cyclic({})", 1 + r.below(7)),
        }
    };
    let (d0, d1) = (dist(p), dist(q));
    format!("u32[{},{}] {d0},{d1} on {p}x{q}", shape[0], shape[1])
}

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// This rank's share of `l`, version `v`.
fn share(l: &Layout, me: u64, v: u32) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; e(l.local_bytes(me))? as usize];
    for x in e(l.extents(me))? {
        for k in (0..x.len).step_by(4) {
            let at = (x.local + k) as usize;
            b[at..at + 4].copy_from_slice(&value((x.global + k) / 4, v).to_le_bytes());
        }
    }
    Ok(b)
}

/// The version this rank's share holds, if every element is of the same one.
fn version_of(l: &Layout, me: u64, b: &[u8]) -> Result<Option<u32>, String> {
    let mut seen = None;
    for x in e(l.extents(me))? {
        for k in (0..x.len).step_by(4) {
            let at = (x.local + k) as usize;
            let got = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let i = (x.global + k) / 4;
            let v = got >> 24;
            if got != value(i, v) || seen.is_some_and(|s| s != v) {
                return Err(format!(
                    "rank {me}: element {i} is {got:#x}, not of version {seen:?}"
                ));
            }
            seen = Some(v);
        }
    }
    Ok(seen)
}

/// What a rank reports of an expected failure, in `DIR/err-RANK`: its kind, and its
/// message with its sources'.
fn report_failure(dir: &Path, me: u32, err: &spools_io::FileError) -> Result<(), String> {
    let mut msg = err.to_string();
    let mut src = std::error::Error::source(err);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    e(std::fs::write(
        dir.join(format!("err-{me}")),
        format!("{:?}|{msg}", err.kind()),
    ))
}

/// The ranks' side: `SPOOLS_TEST_ROLE` says what to do with `SPOOLS_TEST_FORMAT`,
/// `SPOOLS_TEST_LAYOUT` and `SPOOLS_TEST_FILE`.
fn ranks() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| {
            let comm = w.communicator();
            let me = w.rank();
            let path = PathBuf::from(var("SPOOLS_TEST_FILE")?);
            let dir = PathBuf::from(var("SPOOLS_TEST_DIR")?);
            let l: Layout = e(var("SPOOLS_TEST_LAYOUT")?.parse())?;
            let format = e(Format::parse(
                &var("SPOOLS_TEST_FORMAT")?,
                Vec::new(),
                false,
            ))?;
            let opts = WriteOptions {
                format,
                sync: true,
                ..WriteOptions::default()
            };
            let version = var("SPOOLS_TEST_VERSION")?;
            match role {
                "write" => {
                    let v: u32 = e(version.parse())?;
                    e(file::write(
                        comm,
                        &path,
                        &share(&l, me.into(), v)?,
                        &l,
                        &opts,
                    ))?;
                }
                "write-fails" => {
                    let v: u32 = e(version.parse())?;
                    match file::write(comm, &path, &share(&l, me.into(), v)?, &l, &opts) {
                        Ok(_) => return Err("the write succeeded".into()),
                        Err(x) => report_failure(&dir, me, &x)?,
                    }
                }
                "write-declined" => {
                    // The last rank's binding found its part wrong and declines it.
                    let v: u32 = e(version.parse())?;
                    let last = w.size() - 1;
                    let opts = WriteOptions {
                        declined: (me == last).then(|| Cause::new(ErrorKind::WrongType, DECLINED)),
                        ..opts
                    };
                    let data = if me == last {
                        Vec::new()
                    } else {
                        share(&l, me.into(), v)?
                    };
                    match file::write(comm, &path, &data, &l, &opts) {
                        Ok(_) => return Err("the write succeeded".into()),
                        Err(x) => report_failure(&dir, me, &x)?,
                    }
                }
                "write-forever" => {
                    // Versions 1, 2, ...; once version 3 has committed, rank 1 says so
                    // with its pid, and the test kills it during a later write.
                    for v in 1u32..=250 {
                        e(file::write(
                            comm,
                            &path,
                            &share(&l, me.into(), v)?,
                            &l,
                            &opts,
                        ))?;
                        if v == 3 && me == 1 {
                            signal_file(
                                &dir.join("committed3"),
                                std::process::id().to_string().as_bytes(),
                            )?;
                        }
                    }
                    // Written out before the kill came (the versions fit in 8 bits):
                    // wait for it, for a message no rank sends (the job's death ends it).
                    let next = (me + 1) % w.size();
                    e(w.recv(&mut [0u8; 1], next, 0x7e57))?;
                    return Err("never killed".into());
                }
                "read" | "read-fails" => {
                    let mut b = vec![0u8; e(l.local_bytes(me.into()))? as usize];
                    let r = file::read(comm, &path, &mut b, &l, &ReadOptions::default());
                    match (role, r) {
                        ("read", r) => {
                            e(r)?;
                            let v = version_of(&l, me.into(), &b)?;
                            // Every rank holds the same version: at least the one asked.
                            let mine = v.unwrap_or(u32::MAX);
                            let (mut lo, mut hi) = ([0u32], [0u32]);
                            let any = |x: u32| if x == u32::MAX { 0 } else { x };
                            e(comm.allreduce(&[mine], &mut lo, &spools::Op::Min))?;
                            e(comm.allreduce(&[any(mine)], &mut hi, &spools::Op::Max))?;
                            let least: u32 = match version.strip_prefix("at-least-") {
                                Some(n) => e(n.parse())?,
                                None => e(version.parse())?,
                            };
                            let exact = !version.starts_with("at-least-");
                            if lo[0] != hi[0] || lo[0] < least || (exact && lo[0] != least) {
                                return Err(format!(
                                    "versions {}..{} read, {version} expected",
                                    lo[0], hi[0]
                                ));
                            }
                            if me == 0 {
                                e(std::fs::write(dir.join("version"), lo[0].to_string()))?;
                            }
                        }
                        (_, Ok(_)) => return Err("the read succeeded".into()),
                        (_, Err(x)) => report_failure(&dir, me, &x)?,
                    }
                }
                other => return Err(format!("no role {other}")),
            }
            Ok(())
        });
        e(w.finalize())
    });
}

/// A job of `n` ranks playing `role` on `case`'s file `file` with `layout`; the ranks
/// report to the directory of the case (`file`'s, or the one above a file system's).
fn job(
    test: &str,
    n: u32,
    role: &str,
    case: &Case,
    file: &Path,
    layout: &str,
    version: &str,
) -> Job {
    let mut report = file.parent().unwrap();
    if report.ends_with("fs") {
        report = report.parent().unwrap();
    }
    Job::new(n, test)
        .role(role)
        .env("SPOOLS_TEST_FORMAT", case.spec)
        .env("SPOOLS_TEST_FILE", file)
        .env("SPOOLS_TEST_DIR", report)
        .env("SPOOLS_TEST_LAYOUT", layout)
        .env("SPOOLS_TEST_VERSION", version)
}

/// Every rank's report of its failure: `(kind, message)` per rank.
fn failures(dir: &Path, n: u32) -> Vec<(String, String)> {
    (0..n)
        .map(|r| {
            let s = std::fs::read_to_string(dir.join(format!("err-{r}")))
                .unwrap_or_else(|_| panic!("rank {r} reported no failure in {}", dir.display()));
            let (k, m) = s.split_once('|').unwrap();
            (k.to_string(), m.to_string())
        })
        .collect()
}

/// What the last rank's binding says when it declines its part.
const DECLINED: &str = "a: dtype int64 is not the layout's u32";

/// A fresh directory for one case of one test.
fn case_dir(root: &Path, case: &Case) -> PathBuf {
    let d = root.join(case.name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_format_is_written_by_m_ranks_and_read_by_n_under_random_layouts() {
    const T: &str = "every_format_is_written_by_m_ranks_and_read_by_n_under_random_layouts";
    ranks();
    let root = tempdir("formats-mn");
    for (i, case) in FORMATS.iter().enumerate() {
        let d = case_dir(root.path(), case);
        let f = d.join("data");
        let seed = 0x5eed_0000 + i as u64 * 16;
        let wl = random_layout(SHAPE, 4, seed);
        assert_ok(&job(T, 4, "write", case, &f, &wl, "7").run());
        for (n, s) in [(3, seed + 1), (2, seed + 2), (1, seed + 3)] {
            let rl = random_layout(SHAPE, n, s);
            let o = job(T, n, "read", case, &f, &rl, "7").run();
            assert!(
                o.status.success(),
                "{}: written as {wl}, read as {rl}: {}",
                case.name,
                o.stderr
            );
        }
    }
}

/// Truncates `path` by `by` bytes.
fn truncate(path: &Path, by: u64) {
    let len = std::fs::metadata(path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len - by).unwrap();
}

/// Flips a bit of `path` at byte `at`.
fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

/// Damages `case`'s file at `f` beyond what the format repairs.
fn damage(case: &Case, f: &Path) {
    match case.name {
        "canonical" | "npy" | "hdf5" => truncate(f, 7),
        "raid0" | "raid5" => {
            // The first block of units 0 and 1: one row with two bad blocks (RAID-5
            // rebuilds one, not two).
            let m: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            for u in 0..2 {
                let unit = m["units"][u]["path"].as_str().unwrap();
                flip(&f.parent().unwrap().join(unit), 10);
            }
        }
        "zarr" => flip(&f.join("c/0/0"), 20),
        "zarr-sharded" => flip(&f.join("c/0/0"), 20),
        other => panic!("no damage for {other}"),
    }
}

#[test]
fn damage_in_every_format_fails_the_read_on_every_rank() {
    const T: &str = "damage_in_every_format_fails_the_read_on_every_rank";
    ranks();
    let root = tempdir("formats-damage");
    for (i, case) in FORMATS.iter().enumerate() {
        let d = case_dir(root.path(), case);
        let f = d.join("data");
        let seed = 0xda3a_0000 + i as u64 * 16;
        assert_ok(&job(T, 4, "write", case, &f, &random_layout(SHAPE, 4, seed), "2").run());
        damage(case, &f);
        let rl = random_layout(SHAPE, 3, seed + 1);
        let o = job(T, 3, "read-fails", case, &f, &rl, "2").run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
        let got = failures(&d, 3);
        if case.checksums {
            assert!(
                got.iter()
                    .any(|(k, _)| k == &format!("{:?}", ErrorKind::Damaged)),
                "{}: no rank reports damage: {got:?}",
                case.name
            );
        }
        assert!(
            got.iter()
                .any(|(_, m)| m.contains(&f.display().to_string())),
            "{}: no rank names the file: {got:?}",
            case.name
        );
    }
}

#[test]
fn a_rank_killed_mid_write_leaves_a_whole_version_in_every_format() {
    const T: &str = "a_rank_killed_mid_write_leaves_a_whole_version_in_every_format";
    ranks();
    let root = tempdir("formats-kill");
    for (i, case) in FORMATS.iter().enumerate() {
        let d = case_dir(root.path(), case);
        let f = d.join("data");
        let seed = 0x4111_0000 + i as u64 * 16;
        let running = job(
            T,
            4,
            "write-forever",
            case,
            &f,
            &random_layout(SHAPE, 4, seed),
            "-",
        )
        .timeout(Duration::from_secs(120))
        .start();
        kill_when_signalled(&d.join("committed3"), Duration::from_secs(100)).unwrap();
        let o = running.wait(Duration::from_secs(60));
        assert!(!o.status.success(), "{}: the job did not fail", case.name);
        // Whichever write the kill hit, and wherever in it, the file reads as one whole
        // version, 3 or later.
        let rl = random_layout(SHAPE, 3, seed + 1);
        let o = job(T, 3, "read", case, &f, &rl, "at-least-3").run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
        let v = std::fs::read_to_string(d.join("version")).unwrap();
        eprintln!("{}: the kill left version {v}", case.name);
    }
}

#[test]
fn a_full_file_system_fails_the_write_on_every_rank_and_keeps_the_version_before() {
    const T: &str = "a_full_file_system_fails_the_write_on_every_rank_and_keeps_the_version_before";
    ranks();
    let root = tempdir("formats-full");
    for (i, case) in FORMATS.iter().enumerate() {
        let d = case_dir(root.path(), case);
        let fs = match Tmpfs::mount(&d.join("fs"), SMALL_FS) {
            Ok(fs) => fs,
            Err(x) => {
                // As the CLI's full-disk test: a machine that cannot mount one skips.
                println!("SKIPPED {T}: cannot mount a tmpfs here ({})", x.trim());
                return;
            }
        };
        let f = fs.path().join("data");
        let seed = 0xf011_0000 + i as u64 * 16;
        assert_ok(&job(T, 4, "write", case, &f, &random_layout(SHAPE, 4, seed), "1").run());
        let big = random_layout(BIG, 4, seed + 1);
        let o = job(T, 4, "write-fails", case, &f, &big, "2").run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
        let got = failures(&d, 4);
        let left: Vec<String> = listing(fs.path())
            .into_iter()
            .filter(|p| p.contains("spools-tmp"))
            .collect();
        assert!(
            left.is_empty(),
            "{}: the failed write left {left:?}",
            case.name
        );
        assert!(
            got.iter()
                .any(|(_, m)| m.contains("No space left on device")),
            "{}: no rank says the disk is full: {got:?}",
            case.name
        );
        let rl = random_layout(SHAPE, 3, seed + 2);
        let o = job(T, 3, "read", case, &f, &rl, "1").run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
        drop(fs);
    }
}

#[test]
fn a_declined_part_fails_the_write_on_every_rank_with_its_cause() {
    const T: &str = "a_declined_part_fails_the_write_on_every_rank_with_its_cause";
    ranks();
    let root = tempdir("formats-declined");
    for (i, case) in FORMATS.iter().enumerate() {
        let d = case_dir(root.path(), case);
        let f = d.join("data");
        let seed = 0xdec1_0000 + i as u64 * 16;
        assert_ok(&job(T, 4, "write", case, &f, &random_layout(SHAPE, 4, seed), "1").run());
        let before = listing(&d);
        let o = job(
            T,
            4,
            "write-declined",
            case,
            &f,
            &random_layout(SHAPE, 4, seed + 1),
            "2",
        )
        .run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
        // Every rank fails with the declining rank's kind and message; the others name it.
        for (r, (kind, msg)) in failures(&d, 4).into_iter().enumerate() {
            assert_eq!(kind, "WrongType", "{}: rank {r}: {msg}", case.name);
            assert!(msg.contains(DECLINED), "{}: rank {r}: {msg}", case.name);
            assert!(
                r == 3 || msg.contains("rank 3"),
                "{}: rank {r}: {msg}",
                case.name
            );
        }
        // Nothing was touched: the same files, and version 1 reads.
        let after: Vec<String> = listing(&d)
            .into_iter()
            .filter(|p| !p.contains("err-"))
            .collect();
        let before: Vec<String> = before.into_iter().filter(|p| !p.contains("err-")).collect();
        assert_eq!(
            after, before,
            "{}: the declined write changed the files",
            case.name
        );
        let o = job(
            T,
            3,
            "read",
            case,
            &f,
            &random_layout(SHAPE, 3, seed + 2),
            "1",
        )
        .run();
        assert!(o.status.success(), "{}: {}", case.name, o.stderr);
    }
}
