//! Hostile input for parallel files and pipes. Manifests whose unit paths lead out of the
//! file set, symlinks planted in place of unit files, truncated, extended, zero-filled and
//! bit-flipped files of every format, layouts with more units than the job has ranks or
//! describing another dataset on either end of every device, and a full file system.
//!
//! The rule everywhere: a clear error or correct data; never wrong data, a panic or a
//! hang. Every process is waited for with a bound and killed after it; every temporary
//! directory (and the test's tmpfs) is removed by a guard, also when the test fails.
//!
//! (Longer than 600 lines on purpose: one test binary, so that the fixtures, the `spools`
//! binary and its jobs are shared by every hostile case; each case is a short table entry
//! or test, in the order of the devices.)
//!
//! Canonical and `.npy` files written without checksums (no sidecar, the default) carry
//! none: damage to their data bytes cannot be detected by a reader and is only caught by
//! `bench io --verify` (with a sidecar, verified reads and `fsck` find it: `file_sums.rs`);
//! everything else about them (size, header) must be an error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::{grouped, spools, wait_bounded, Output};
use spools_testkit::listing;

/// Longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(120);

/// The dataset of every file here: element `i` holds `i` (i32, little-endian).
const L1: &str = "i32[60,50] block,* on 1x1";
const BYTES: usize = 60 * 50 * 4;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The canonical byte stream of the dataset (of [`L1`] and every other layout here).
fn expected() -> Vec<u8> {
    (0..(BYTES / 4) as u32).flat_map(u32::to_le_bytes).collect()
}

/// Runs `spools ARGS` in `dir` (bounded), its standard output to `out` when given.
fn spools_in(dir: &Path, args: &[&str], env: &[(&str, &str)], out: Option<&Path>) -> Output {
    let mut c = grouped(spools());
    c.args(args)
        .current_dir(dir)
        .env_remove("SPOOLS_RANK")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match out {
        Some(p) => c.stdout(fs::File::create(p).expect("output file")),
        None => c.stdout(Stdio::piped()),
    };
    for (k, v) in env {
        c.env(k, v);
    }
    let o = wait_bounded(c.spawn().expect("spawn spools"), LIMIT);
    sane(&o, &args.join(" "));
    o
}

/// `spools run -n N -- spools ARGS` in `dir` (bounded).
fn job(dir: &Path, n: u32, args: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = spools();
    let mut all = vec!["run", "-n", "", "--timeout", "100", "--", s(&bin)];
    let n = n.to_string();
    all[2] = &n;
    all.extend_from_slice(args);
    spools_in(dir, &all, env, None)
}

/// No panic, no crash by a signal.
fn sane(o: &Output, what: &str) {
    assert!(
        o.code().is_some() && o.code() != Some(101) && !o.stderr.contains("panicked"),
        "{what}: panicked or killed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
}

fn ok(o: &Output, what: &str) {
    common::assert_ok_as(o, what);
}

/// Whether `text` says `needle`: verbatim, or on one line interleaved with another
/// rank's message (ranks' standard errors share one pipe).
fn says(text: &str, needle: &str) -> bool {
    text.contains(needle)
        || text.lines().any(|l| {
            let mut it = l.chars();
            needle.chars().all(|c| it.any(|x| x == c))
        })
}

/// Asserts a failure whose message contains `needle`.
fn fails_with(o: &Output, what: &str, needle: &str) {
    assert!(
        !o.status.success() && says(&o.stderr, needle),
        "{what} should fail with {needle:?}: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
}

/// Writes the dataset to `file` in `dir` with one rank (extra `bench io` options).
fn write_fixture(dir: &Path, file: &str, extra: &[&str]) {
    let mut a = vec![
        "bench", "io", "--layout", L1, "--file", file, "--write", "--keep", "--reps", "1",
    ];
    a.extend_from_slice(extra);
    ok(&spools_in(dir, &a, &[], None), &format!("write {file}"));
}

/// The fixture files of every format, by name, with the arguments that write them.
const FIXTURES: [(&str, &[&str]); 4] = [
    ("c.bin", &[]),
    ("a.npy", &["--format", "npy"]),
    (
        "r0",
        &[
            "--format",
            "stripe(unit=1000B,count=3)",
            "--dirs",
            "u0,u1,u2",
        ],
    ),
    (
        "r5",
        &[
            "--format",
            "raid5(unit=1KiB,count=4)",
            "--dirs",
            "u0,u1,u2,u3",
        ],
    ),
];

/// Writes the fixtures named `files` (see [`FIXTURES`]) into `dir`.
fn write_fixtures(dir: &Path, files: &[&str]) {
    for (file, extra) in FIXTURES.iter().filter(|(f, _)| files.contains(f)) {
        write_fixture(dir, file, extra);
    }
}

/// Reads `file` with the read API (`bench io --read --verify`, one rank).
fn read_api(dir: &Path, file: &str, layout: &str) -> Output {
    spools_in(
        dir,
        &[
            "bench", "io", "--layout", layout, "--file", file, "--read", "--verify", "--reps", "1",
        ],
        &[],
        None,
    )
}

/// `spools cat FILE` into a file; returns the output and the bytes.
fn cat(dir: &Path, file: &str) -> (Output, Vec<u8>) {
    let out = dir.join(".cat-output");
    let o = spools_in(dir, &["cat", file], &[], Some(&out));
    let bytes = fs::read(&out).unwrap_or_default();
    let _ = fs::remove_file(&out);
    (o, bytes)
}

fn stamp(p: &Path) -> (Vec<u8>, SystemTime) {
    (
        fs::read(p).expect("read decoy"),
        fs::metadata(p).and_then(|m| m.modified()).expect("mtime"),
    )
}

#[test]
fn manifest_unit_paths_leading_out_of_the_set_are_refused_and_never_written() {
    let t = common::tempdir("paths");
    let set = t.path().join("set");
    fs::create_dir_all(&set).unwrap();
    let decoy = t.path().join("decoy");
    fs::write(&decoy, b"decoy: must stay as it is\n").unwrap();
    let before = stamp(&decoy);
    // Writes a version of the RAID-5 file (into the slot the current one does not use).
    let write_raid5 = || {
        write_fixture(
            &set,
            "r.raid5",
            &[
                "--format",
                "raid5(unit=1KiB,count=4)",
                "--dirs",
                "d1,d2,d3,d4",
            ],
        )
    };
    write_raid5();
    let manifest = fs::read_to_string(set.join("r.raid5")).unwrap();
    let notes = set.join("notes.txt");
    fs::write(&notes, b"a file next to the set\n").unwrap();
    let notes_before = stamp(&notes);
    let unit1 = "\"d2/r.raid5.u1.s1\"";
    assert!(manifest.contains(unit1), "{manifest}");

    let abs = s(&decoy).to_string();
    for bad in [
        abs.as_str(),
        "../decoy",
        "d2/../../decoy",
        "./../decoy",
        "/etc/../",
        // Inside the directory, but not a unit file: a neighbour, the manifest itself.
        "notes.txt",
        "r.raid5",
    ] {
        let evil = manifest.replace(unit1, &format!("{bad:?}"));
        fs::write(set.join("evil"), evil).unwrap();
        for tool in ["repair", "cat", "fsck", "ls"] {
            let o = spools_in(&set, &[tool, "evil"], &[], None);
            fails_with(&o, &format!("{tool} with unit path {bad}"), "refused");
        }
        let o = read_api(&set, "evil", L1);
        fails_with(&o, &format!("read with unit path {bad}"), "refused");
        assert_eq!(stamp(&decoy), before, "unit path {bad} wrote the decoy");
        assert_eq!(
            stamp(&notes),
            notes_before,
            "unit path {bad} wrote notes.txt"
        );
        assert_eq!(fs::read_to_string(set.join("r.raid5")).unwrap(), manifest);
    }

    // A symlink in place of a unit file is never followed: reads rebuild the unit from
    // parity, fsck names it, repair refuses to write through it.
    let u1 = set.join("d2/r.raid5.u1.s1");
    fs::remove_file(&u1).unwrap();
    symlink(&decoy, &u1).unwrap();
    let o = spools_in(&set, &["repair", "r.raid5"], &[], None);
    assert!(!o.status.success(), "repair through a symlink: {o:?}");
    assert_eq!(stamp(&decoy), before, "repair wrote through a symlink");
    let o = spools_in(&set, &["fsck", "r.raid5"], &[], None);
    assert!(
        !o.status.success() && o.stdout.contains("symbolic link"),
        "{o:?}"
    );
    let (o, data) = cat(&set, "r.raid5");
    ok(&o, "cat with a symlinked unit");
    assert!(data == expected(), "cat returned wrong data");
    ok(&read_api(&set, "r.raid5", L1), "read with a symlinked unit");
    assert_eq!(stamp(&decoy), before);

    // A symlink planted at the slot the next version uses is replaced, not written
    // through.
    let next = set.join("d1/r.raid5.u0.s0");
    symlink(&decoy, &next).unwrap();
    fs::remove_file(&u1).unwrap();
    write_raid5();
    assert_eq!(
        stamp(&decoy),
        before,
        "a write went through a planted symlink"
    );
    assert!(fs::symlink_metadata(&next).unwrap().is_file());
    ok(
        &spools_in(&set, &["fsck", "r.raid5"], &[], None),
        "fsck after rewrite",
    );

    // The version after that writes slot 1 again: a hard link to the decoy planted there
    // is unlinked (never written through), while the older version's plain unit files are
    // reused in place (same inode).
    let linked = set.join("d2/r.raid5.u1.s1");
    fs::hard_link(&decoy, &linked).unwrap();
    let plain = set.join("d3/r.raid5.u2.s1");
    let ino = fs::metadata(&plain).unwrap().ino();
    write_raid5();
    assert_eq!(
        stamp(&decoy),
        before,
        "a write went through a planted hard link"
    );
    assert_eq!(fs::metadata(&linked).unwrap().nlink(), 1);
    assert_eq!(
        fs::metadata(&plain).unwrap().ino(),
        ino,
        "the old unit file was not reused"
    );
    ok(
        &spools_in(&set, &["fsck", "r.raid5"], &[], None),
        "fsck after a rewrite over a hard link",
    );

    // A writer does not name unit directories outside the manifest's directory.
    let outside = t.path().join("outside");
    let o = spools_in(
        &set,
        &[
            "bench",
            "io",
            "--layout",
            L1,
            "--file",
            "r2",
            "--write",
            "--keep",
            "--reps",
            "1",
            "--format",
            "raid5(unit=1KiB,count=4)",
            "--dirs",
            s(&outside),
        ],
        &[],
        None,
    );
    fails_with(
        &o,
        "write with a unit directory outside",
        "inside the manifest",
    );
    assert!(!set.join("r2").exists() && !outside.exists());
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Truncate,
    Extend,
    Zero,
    Flip(usize),
}

fn damage(b: &[u8], d: Damage) -> Vec<u8> {
    let mut v = b.to_vec();
    match d {
        Damage::Truncate => v.truncate(b.len() / 2),
        Damage::Extend => v.extend_from_slice(&[0xab; 37]),
        Damage::Zero => v.fill(0),
        Damage::Flip(i) => v[i % b.len()] ^= 1 << (i % 8),
    }
    v
}

/// One damaged file of a parallel file, checked with `cat`, `fsck` and the read API.
struct Case<'a> {
    dir: &'a Path,
    /// The parallel file (what the tools are given).
    file: &'a str,
    /// The file damaged (the parallel file itself or one of its units).
    target: PathBuf,
    /// Whether the parallel file has checksums (striped).
    striped: bool,
    /// Bytes before the data in `target` (the `.npy` header), for plain files.
    header: usize,
}

impl Case<'_> {
    fn check(&self, d: Damage, with_read: bool) {
        let good = fs::read(&self.target).unwrap();
        let bad = damage(&good, d);
        fs::write(&self.target, &bad).unwrap();
        let what = format!("{} damaged by {d:?}", self.target.display());
        let manifest = self.target == self.dir.join(self.file);
        // `cat`: the stream, or for a file that no longer is a manifest or `.npy`
        // file, its bytes as they are.
        let (o, out) = cat(self.dir, self.file);
        if o.status.success() {
            let plain_now =
                !bad.starts_with(b"\x93NUMPY") && !bad.trim_ascii_start().starts_with(b"{");
            let faithful = if self.striped {
                out == expected() || (manifest && plain_now && out == bad)
            } else if self.header > 0 && !plain_now {
                out == bad[self.header.min(bad.len())..]
            } else {
                out == bad
            };
            assert!(
                faithful,
                "{what}: cat exited 0 with wrong data\n{}",
                o.stderr
            );
        }
        // fsck on a striped file: damage to a unit is always reported.
        if self.striped {
            let o = spools_in(self.dir, &["fsck", self.file], &[], None);
            if !manifest {
                assert!(!o.status.success(), "{what}: fsck passed: {}", o.stdout);
            }
        }
        // The read API: verified data or an error of the I/O layer. Only the data bytes of
        // plain files (no checksums) may fail verification instead.
        if with_read {
            let o = read_api(self.dir, self.file, L1);
            let undetectable = !self.striped
                && bad.len() == good.len()
                && bad[..self.header] == good[..self.header];
            if !o.status.success() && o.stderr.contains("verification failed") {
                assert!(
                    undetectable,
                    "{what}: the read returned wrong data\n{}",
                    o.stderr
                );
            }
            if o.status.success() {
                assert!(o.stdout.contains("verified every element"), "{what}: {o:?}");
            }
        }
        fs::write(&self.target, &good).unwrap();
    }
}

#[test]
fn damaged_files_of_every_format_end_in_an_error_or_correct_data() {
    let t = common::tempdir("damage");
    let dir = t.path();
    write_fixtures(dir, &["c.bin", "a.npy", "r0", "r5"]);
    let npy_header = fs::read(dir.join("a.npy")).unwrap().len() - BYTES;
    let mut cases = vec![
        Case {
            dir,
            file: "c.bin",
            target: dir.join("c.bin"),
            striped: false,
            header: 0,
        },
        Case {
            dir,
            file: "a.npy",
            target: dir.join("a.npy"),
            striped: false,
            header: npy_header,
        },
        Case {
            dir,
            file: "r0",
            target: dir.join("r0"),
            striped: true,
            header: 0,
        },
        Case {
            dir,
            file: "r5",
            target: dir.join("r5"),
            striped: true,
            header: 0,
        },
    ];
    cases.push(Case {
        dir,
        file: "r0",
        target: dir.join("u1/r0.u1.s1"),
        striped: true,
        header: 0,
    });
    cases.push(Case {
        dir,
        file: "r5",
        target: dir.join("u1/r5.u1.s1"),
        striped: true,
        header: 0,
    });
    for c in &cases {
        let len = fs::read(&c.target).unwrap().len();
        let mut ds = vec![Damage::Truncate, Damage::Extend, Damage::Zero];
        // Every few bytes of manifests and headers (where parsing happens), a few spots
        // of data.
        let text = if c.striped && c.target == dir.join(c.file) {
            len
        } else {
            c.header
        };
        ds.extend((0..text).step_by(5).map(Damage::Flip));
        ds.extend([text, text + 1 + (len - text) / 2, len - 1].map(Damage::Flip));
        for (i, d) in ds.into_iter().enumerate() {
            c.check(d, i < 3 || i % 9 == 0);
        }
    }
    // Two damaged units of one RAID-5 row: an error naming the row, never wrong data.
    let u1 = dir.join("u1/r5.u1.s1");
    let u2 = dir.join("u2/r5.u2.s1");
    let (g1, g2) = (fs::read(&u1).unwrap(), fs::read(&u2).unwrap());
    fs::write(&u1, damage(&g1, Damage::Flip(8))).unwrap();
    fs::write(&u2, damage(&g2, Damage::Flip(9))).unwrap();
    let (o, _) = cat(dir, "r5");
    fails_with(&o, "cat with two lost blocks in a row", "stripe row 0");
    fails_with(
        &read_api(dir, "r5", L1),
        "read with two lost blocks",
        "stripe row 0",
    );
    fails_with(
        &spools_in(dir, &["repair", "r5"], &[], None),
        "repair with two lost blocks",
        "stripe row 0",
    );
    fs::write(&u1, &g1).unwrap();
    fs::write(&u2, &g2).unwrap();
    // A unit file extended past its recorded size: fsck reports it, repair cuts it back.
    let mut long = g1.clone();
    long.extend_from_slice(&[0; 80]);
    fs::write(&u1, &long).unwrap();
    let o = spools_in(dir, &["fsck", "r5"], &[], None);
    assert!(
        !o.status.success() && o.stdout.contains("the manifest records"),
        "fsck passed an extended unit: {o:?}"
    );
    ok(&spools_in(dir, &["repair", "r5"], &[], None), "repair");
    assert_eq!(fs::read(&u1).unwrap(), g1);
    ok(
        &spools_in(dir, &["fsck", "r5"], &[], None),
        "fsck after repair",
    );
}

/// Writes and reads every format with a layout of more units than the job's ranks, and
/// reads with another element type or shape than the file records.
#[test]
fn file_layouts_that_do_not_fit_the_job_or_the_file_are_refused() {
    let t = common::tempdir("filelayouts");
    let dir = t.path();
    let formats: [(&str, &[&str]); 4] = [
        ("c.bin", &[]),
        ("a.npy", &["--format", "npy"]),
        ("r0", &["--format", "stripe(unit=1000B,count=3)"]),
        ("r5", &["--format", "raid5(unit=1KiB,count=4)"]),
    ];
    for (file, extra) in formats {
        let mut w = vec![
            "bench",
            "io",
            "--layout",
            "i32[60,50] block,* on 3x1",
            "--file",
            file,
            "--write",
            "--keep",
            "--reps",
            "1",
        ];
        w.extend_from_slice(extra);
        let o = job(dir, 2, &w, &[]);
        fails_with(
            &o,
            &format!("write {file} on 3x1 with 2 ranks"),
            "3 units but the communicator has 2 ranks",
        );
        assert!(
            !dir.join(file).exists(),
            "{file}: a refused write left a file"
        );
        write_fixture(dir, file, extra);
        let r = [
            "bench",
            "io",
            "--layout",
            "i32[60,50] block,* on 5x1",
            "--file",
            file,
            "--read",
            "--verify",
            "--reps",
            "1",
        ];
        let o = job(dir, 2, &r, &[]);
        fails_with(
            &o,
            &format!("read {file} on 5x1 with 2 ranks"),
            "5 units but the communicator has 2 ranks",
        );
        ok(
            &job(
                dir,
                2,
                &[
                    "bench",
                    "io",
                    "--layout",
                    "i32[60,50] block,* on 2x1",
                    "--file",
                    file,
                    "--read",
                    "--verify",
                    "--reps",
                    "1",
                ],
                &[],
            ),
            file,
        );
        if file != "c.bin" {
            // A canonical file records no element type or shape; the others do.
            for other in [
                "f32[60,50] block,* on 1x1",
                "i32[50,60] block,* on 1x1",
                "u8[12000] block on 1",
            ] {
                let o = read_api(dir, file, other);
                fails_with(
                    &o,
                    &format!("read {file} as {other}"),
                    "but the layout describes",
                );
            }
        }
    }
    // A size= in a striped layout that is not the dataset's.
    let o = spools_in(
        dir,
        &[
            "bench",
            "io",
            "--layout",
            L1,
            "--file",
            "bad",
            "--write",
            "--reps",
            "1",
            "--format",
            "raid5(unit=1KiB,count=4,size=5)",
        ],
        &[],
        None,
    );
    fails_with(&o, "raid5 with size=5", "size=5");
    // Redistribution.
    for (from, to) in [
        ("i32[60,50] block,* on 3x1", "i32[60,50] *,block on 1x2"),
        ("i32[60,50] block,* on 2x1", "i32[60,50] *,block on 1x5"),
    ] {
        let o = job(
            dir,
            2,
            &["bench", "redist", "--from", from, "--to", to, "--reps", "1"],
            &[],
        );
        fails_with(
            &o,
            &format!("redist {from} -> {to}"),
            "units but the communicator has 2 ranks",
        );
    }
}

#[test]
fn pipe_layouts_that_do_not_fit_either_job_fail_on_both_ends() {
    let t = common::tempdir("pipes");
    let dir = t.path();
    let cases = [
        (
            "i32[60,50] block,* on 3x1",
            "i32[60,50] *,block on 1x2",
            "producer's layout",
        ),
        (
            "i32[60,50] block,* on 2x1",
            "i32[60,50] *,block on 1x5",
            "consumer's layout",
        ),
        (
            "i32[60,50] block,* on 2x1",
            "f32[60,50] *,block on 1x2",
            "hold different datasets",
        ),
        (
            "i32[60,50] block,* on 2x1",
            "i32[50,60] *,block on 1x2",
            "hold different datasets",
        ),
    ];
    for (k, (prod, cons, needle)) in cases.iter().enumerate() {
        let port = common::free_port(k as u16);
        for name in [
            format!("pipe:hostile-{k}-{}", std::process::id()),
            format!("tcp:127.0.0.1:{port}"),
        ] {
            let c = common::pipe_end(2, "consumer", cons, Some(&name), 3, dir);
            let p = common::pipe_end(2, "producer", prod, Some(&name), 3, dir);
            // Each end is waited for in its own thread, so neither blocks the other.
            let tc = std::thread::spawn(move || wait_bounded(c, LIMIT));
            let po = wait_bounded(p, LIMIT);
            let co = tc.join().unwrap();
            for (side, o) in [("producer", &po), ("consumer", &co)] {
                sane(o, side);
                assert!(
                    !o.status.success()
                        && (says(&o.stderr, needle)
                            || says(&o.stderr, "units but the communicator")),
                    "{name}: {prod} | {cons}: the {side} did not fail with {needle:?}: {:?}\n{}",
                    o.status,
                    o.stderr
                );
                assert!(!o.stderr.contains("verified"), "{side}: {}", o.stderr);
            }
        }
    }
    // The byte-stream ends check their own layout too.
    let o = job(
        dir,
        2,
        &[
            "bench",
            "pipe",
            "--role",
            "producer",
            "--layout",
            "i32[60,50] block,* on 3x1",
            "--records",
            "1",
            "--name",
            "stdout",
        ],
        &[],
    );
    fails_with(
        &o,
        "producer to stdout on 3x1 with 2 ranks",
        "3 units but the communicator has 2 ranks",
    );
    let o = job(
        dir,
        2,
        &[
            "bench",
            "pipe",
            "--role",
            "consumer",
            "--layout",
            "i32[60,50] block,* on 5x1",
            "--records",
            "1",
            "--name",
            "stdin",
        ],
        &[],
    );
    fails_with(
        &o,
        "consumer from stdin on 5x1 with 2 ranks",
        "5 units but the communicator has 2 ranks",
    );
}

#[test]
fn a_write_that_fills_the_file_system_leaves_no_file_that_looks_complete() {
    let t = common::tempdir("full");
    let mnt = t.path().join("mnt");
    let _m = match spools_testkit::Tmpfs::mount(&mnt, "1m") {
        Ok(m) => m,
        Err(e) => {
            println!(
                "SKIPPED a_write_that_fills_the_file_system...: cannot mount a tmpfs here ({})",
                e.trim()
            );
            return;
        }
    };
    let big = "i32[600,500] block,* on 2x1"; // 1.2 MB: does not fit in 1 MiB
    let small = "i32[60,50] block,* on 2x1";
    let formats: [(&str, &[&str]); 3] = [
        ("c.bin", &[]),
        ("a.npy", &["--format", "npy"]),
        (
            "r5",
            &["--format", "raid5(unit=4KiB,count=3)", "--dirs", "d0,d1,d2"],
        ),
    ];
    for reshuffle in ["always", "never"] {
        for (file, extra) in formats {
            if file == "r5" && reshuffle == "never" {
                continue;
            }
            // `bench io --write` of `layout` to this file, with `more` arguments.
            let write = |layout: &'static str, more: &[&'static str]| {
                let mut w = vec![
                    "bench", "io", "--layout", layout, "--file", file, "--write", "--keep",
                    "--reps", "1",
                ];
                w.extend_from_slice(more);
                w.extend_from_slice(extra);
                job(&mnt, 2, &w, &[])
            };
            // A fresh write that fails leaves nothing behind.
            let o = write(big, &["--reshuffle", reshuffle]);
            fails_with(
                &o,
                &format!("{file}: a write to a full disk"),
                "No space left on device",
            );
            assert!(
                o.stderr
                    .lines()
                    .all(|l| l.matches("(os error 28)").count() <= 1),
                "an error printed twice:\n{}",
                o.stderr
            );
            assert!(
                listing(&mnt).iter().all(|p| !p.contains(file)),
                "{file}: left {:?}",
                listing(&mnt)
            );
            let o = spools_in(&mnt, &["ls", file], &[], None);
            assert!(
                !o.status.success(),
                "{file}: ls describes a failed write: {}",
                o.stdout
            );
            // Over an existing file, a failed write leaves the old one intact.
            ok(&write(small, &[]), "small write");
            let before = listing(&mnt);
            let o = write(big, &["--reshuffle", reshuffle, "--seed", "7"]);
            fails_with(
                &o,
                &format!("{file}: an overwrite on a full disk"),
                "No space left on device",
            );
            assert_eq!(
                listing(&mnt),
                before,
                "{file}: a failed overwrite left files"
            );
            ok(
                &job(
                    &mnt,
                    2,
                    &[
                        "bench", "io", "--layout", small, "--file", file, "--read", "--verify",
                        "--reps", "1",
                    ],
                    &[],
                ),
                &format!("{file}: the old file after a failed overwrite"),
            );
            let (o, data) = cat(&mnt, file);
            ok(&o, "cat");
            assert!(data == expected(), "{file}: cat of the old file");
            if file != "r5" {
                // Written in place, a write that fails after some of its data went out
                // leaves no sidecar: a verified read reports the file, never returns it.
                let sums = format!("{file}.spools-sums");
                ok(&write(small, &["--in-place", "--checksums"]), "in place");
                assert!(listing(&mnt).contains(&sums), "{file}: no sidecar");
                let o = write(
                    big,
                    &["--reshuffle", reshuffle, "--in-place", "--checksums"],
                );
                fails_with(
                    &o,
                    &format!("{file}: an in-place overwrite on a full disk"),
                    "No space left on device",
                );
                assert!(
                    !listing(&mnt).contains(&sums),
                    "{file}: a failed in-place write left its sidecar"
                );
                let read = [
                    "bench",
                    "io",
                    "--layout",
                    big,
                    "--file",
                    file,
                    "--read",
                    "--checksums",
                    "--reps",
                    "1",
                ];
                fails_with(
                    &job(&mnt, 2, &read, &[]),
                    &format!("{file}: a verified read after a failed in-place write"),
                    "spools-sums",
                );
            }
            for p in listing(&mnt) {
                let _ = fs::remove_file(mnt.join(p));
            }
        }
    }
}

#[test]
fn tools_and_benchmarks_refuse_what_they_cannot_do_and_never_delete_a_read_file() {
    let t = common::tempdir("tools");
    let dir = t.path();
    write_fixtures(dir, &["c.bin", "a.npy", "r5"]);
    let files = listing(dir);
    // Reading never deletes, with or without --keep.
    for f in ["c.bin", "a.npy", "r5"] {
        ok(
            &job(
                dir,
                2,
                &[
                    "bench",
                    "io",
                    "--layout",
                    "i32[60,50] block,* on 2x1",
                    "--file",
                    f,
                    "--read",
                    "--verify",
                    "--reps",
                    "1",
                ],
                &[],
            ),
            f,
        );
        ok(&read_api(dir, f, L1), f);
    }
    assert_eq!(listing(dir), files, "a read removed files");
    // A write over an existing file does not remove it afterwards either; a fresh one does.
    ok(
        &spools_in(
            dir,
            &[
                "bench", "io", "--layout", L1, "--file", "c.bin", "--write", "--reps", "1",
            ],
            &[],
            None,
        ),
        "overwrite",
    );
    assert_eq!(listing(dir), files);
    ok(
        &spools_in(
            dir,
            &[
                "bench", "io", "--layout", L1, "--file", "fresh", "--write", "--reps", "1",
            ],
            &[],
            None,
        ),
        "fresh",
    );
    assert_eq!(listing(dir), files);
    // --reps 0.
    for b in [
        vec![
            "bench", "io", "--layout", L1, "--file", "c.bin", "--read", "--reps", "0",
        ],
        vec!["bench", "redist", "--from", L1, "--to", L1, "--reps", "0"],
    ] {
        fails_with(&spools_in(dir, &b, &[], None), "--reps 0", "--reps 0");
    }
    // repair and fsck name the kind of file they refuse.
    fails_with(
        &spools_in(dir, &["repair", "a.npy"], &[], None),
        "repair a.npy",
        "this is a .npy file",
    );
    fails_with(
        &spools_in(dir, &["fsck", "a.npy"], &[], None),
        "fsck a.npy",
        "a .npy file has no checksums",
    );
    fails_with(
        &spools_in(dir, &["repair", "c.bin"], &[], None),
        "repair c.bin",
        "this is a canonical file",
    );
    // An operating-system error is printed once.
    let o = spools_in(dir, &["cat", "missing"], &[], None);
    assert_eq!(o.stderr.matches("(os error 2)").count(), 1, "{}", o.stderr);
    let o = spools_in(
        dir,
        &[
            "bench", "io", "--layout", L1, "--file", "missing", "--read", "--reps", "1",
        ],
        &[],
        None,
    );
    assert_eq!(o.stderr.matches("(os error 2)").count(), 1, "{}", o.stderr);
}
