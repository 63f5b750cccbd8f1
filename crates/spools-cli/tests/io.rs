//! Parallel files with real processes and real files, through the command line (`spools
//! bench io`, `spools cat/ls/fsck/repair`): files written with M ranks and read with N in
//! every format, RAID-5 with a lost unit and with flipped bits, the file tools, and a rank
//! killed in the middle of a write. (Redistribution is in spools-io's tests.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{
    assert_ok, checked, e, grouped, rank_main, signal_file, spools, tempdir, wait_bounded, Output,
};
use spools::Layout;
use spools_testkit::{kill_when_signalled, without_ambient_spools_env, Spawned};

/// Runs `spools run -n N -- spools bench io ARGS` (bounded).
fn bench_io(n: u32, args: &[&str]) -> Output {
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c);
    c.args(["run", "-n", &n.to_string(), "--timeout", "120", "--"])
        .arg(spools())
        .args(["bench", "io", "--reps", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(c.spawn().unwrap(), Duration::from_secs(150))
}

/// `spools cat FILE`'s standard output, bytes as they are (bounded), with its verdict.
fn cat_bytes(file: &Path) -> (Output, Vec<u8>) {
    let d = tempdir("cat");
    let out = d.join("out");
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c);
    c.args(["cat", s(file)])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped());
    let o = wait_bounded(c.spawn().unwrap(), Duration::from_secs(60));
    let bytes = std::fs::read(&out).unwrap();
    (o, bytes)
}

fn tool(args: &[&str]) -> Output {
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(c.spawn().unwrap(), Duration::from_secs(60))
}

const WRITE4: &str = "i32[90,130] block,block on 2x2";
const READ3: &str = "i32[90,130] cyclic(7),* on 3x1";

/// The canonical bytes of WRITE4's dataset: element i holds i (i32).
fn canonical_bytes() -> Vec<u8> {
    (0..90 * 130u32).flat_map(|i| i.to_le_bytes()).collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn files_written_with_four_ranks_read_back_with_three_in_every_format() {
    let d = tempdir("files");
    let dirs: Vec<String> = (0..4)
        .map(|i| s(&d.join(format!("u{i}"))).to_string())
        .collect();
    let dirs = dirs.join(",");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("plain.bin", vec!["--format", "canonical"]),
        (
            "direct.bin",
            vec!["--format", "canonical", "--reshuffle", "never", "--sync"],
        ),
        (
            "twophase.bin",
            vec!["--format", "canonical", "--reshuffle", "always"],
        ),
        ("a.npy", vec!["--format", "npy"]),
        (
            "r0",
            vec!["--format", "stripe(unit=1000B,count=3)", "--dirs", &dirs],
        ),
        (
            "r5",
            vec![
                "--format",
                "raid5(unit=4KiB,count=4)",
                "--dirs",
                &dirs,
                "--sync",
            ],
        ),
        (
            "r5local",
            vec![
                "--format",
                "raid5(unit=512B,count=5)",
                "--dirs",
                &dirs,
                "--node-local",
            ],
        ),
    ];
    for (name, extra) in &cases {
        let f = d.join(name);
        let mut w = vec!["--layout", WRITE4, "--file", s(&f), "--write", "--keep"];
        w.extend(extra.iter().copied());
        assert_ok(&bench_io(4, &w));
        for (n, layout) in [
            (3, READ3),
            (1, "i32[90,130] *,* on 1x1 order=F"),
            (5, "i32[90,130] *,cyclic(3) on 1x5"),
        ] {
            let r = bench_io(
                n,
                &[
                    "--layout",
                    layout,
                    "--file",
                    s(&f),
                    "--read",
                    "--verify",
                    "--keep",
                ],
            );
            if name.ends_with(".npy") && layout.ends_with("order=F") {
                // A .npy file records its order: read in the other one, its elements
                // would land transposed.
                assert!(
                    !r.status.success()
                        && r.stderr.contains(
                            "in C order but the layout describes dtype <i4 with shape [90, 130] in Fortran order"
                        ),
                    "{name} read as {layout}: {r:?}"
                );
                continue;
            }
            assert_ok(&r);
            assert!(
                r.stdout.contains("verified every element"),
                "{name}: {}",
                r.stdout
            );
        }
        // The logical stream is the canonical bytes, whatever the format.
        let (c, cat) = cat_bytes(&f);
        assert_ok(&c);
        assert!(cat == canonical_bytes(), "{name}: spools cat differs");
    }
    assert_eq!(
        std::fs::read(d.join("plain.bin")).unwrap(),
        canonical_bytes()
    );
    assert_eq!(
        std::fs::read(d.join("direct.bin")).unwrap(),
        canonical_bytes()
    );
    let npy = std::fs::read(d.join("a.npy")).unwrap();
    assert!(npy.starts_with(b"\x93NUMPY\x01\x00"));
    let hl = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let header = std::str::from_utf8(&npy[10..10 + hl]).unwrap();
    assert!(
        header.contains("'descr': '<i4'") && header.contains("'shape': (90, 130)"),
        "{header}"
    );
    assert_eq!(&npy[10 + hl..], &canonical_bytes()[..]);
    // A node-local unit file is written by its owner only; it lives in the owner's dir.
    let ls = tool(&["ls", s(&d.join("r5local"))]);
    assert_ok(&ls);
    assert!(
        ls.stdout.contains("node-local") && ls.stdout.contains("unit 4:"),
        "{}",
        ls.stdout
    );
    // A read with a layout of another size is refused with both sizes named.
    let r = bench_io(
        2,
        &[
            "--layout",
            "i32[90,131] block,* on 2x1",
            "--file",
            s(&d.join("r5")),
            "--read",
            "--keep",
        ],
    );
    assert!(!r.status.success());
    assert!(
        r.stderr
            .contains("holds 46800 bytes but the layout describes 47160"),
        "{}",
        r.stderr
    );
}

#[test]
fn raid5_survives_a_lost_unit_and_flipped_bits_and_raid0_names_the_damage() {
    let d = tempdir("raid");
    let dirs: Vec<String> = (0..4)
        .map(|i| s(&d.join(format!("u{i}"))).to_string())
        .collect();
    let dirs = dirs.join(",");
    let f = d.join("r5");
    let f0 = d.join("r0");
    assert_ok(&bench_io(
        4,
        &[
            "--layout",
            WRITE4,
            "--file",
            s(&f),
            "--write",
            "--keep",
            "--format",
            "raid5(unit=1KiB,count=4)",
            "--dirs",
            &dirs,
        ],
    ));
    assert_ok(&bench_io(
        4,
        &[
            "--layout",
            WRITE4,
            "--file",
            s(&f0),
            "--write",
            "--keep",
            "--format",
            "stripe(unit=1KiB,count=4)",
            "--dirs",
            &dirs,
        ],
    ));
    let unit = |name: &str, u: usize| d.join(format!("u{u}")).join(format!("{name}.u{u}.s1"));
    let read3 = |file: &Path| {
        bench_io(
            3,
            &[
                "--layout",
                READ3,
                "--file",
                s(file),
                "--read",
                "--verify",
                "--keep",
            ],
        )
    };
    assert_ok(&tool(&["fsck", s(&f)]));

    // One unit deleted: reads rebuild it from parity; fsck names it; repair restores it.
    std::fs::remove_file(unit("r5", 2)).unwrap();
    let r = read3(&f);
    assert_ok(&r);
    assert!(
        r.stderr.contains("rebuilt") && r.stderr.contains("[2]"),
        "{}",
        r.stderr
    );
    let fsck = tool(&["fsck", s(&f)]);
    assert!(!fsck.status.success());
    assert!(
        fsck.stdout.contains("unit 2") && fsck.stdout.contains("missing"),
        "{}",
        fsck.stdout
    );
    assert_ok(&tool(&["repair", s(&f)]));
    assert_ok(&tool(&["fsck", s(&f)]));
    assert_ok(&read3(&f));

    // Flipped bits in one block: the block is rebuilt on read and named by fsck.
    let u1 = unit("r5", 1);
    let mut bytes = std::fs::read(&u1).unwrap();
    bytes[3 * 1024 + 17] ^= 0x04;
    std::fs::write(&u1, &bytes).unwrap();
    let r = read3(&f);
    assert_ok(&r);
    assert!(r.stderr.contains("rebuilt 1 damaged block"), "{}", r.stderr);
    let fsck = tool(&["fsck", s(&f)]);
    assert_eq!(fsck.code(), Some(1), "fsck of a damaged file: {fsck:?}");
    assert!(
        fsck.stdout.contains("unit 1") && fsck.stdout.contains("offset 3072: checksum mismatch"),
        "{}",
        fsck.stdout
    );
    let (c, cat) = cat_bytes(&f);
    assert_ok(&c);
    assert!(cat == canonical_bytes(), "cat of a rebuilt block differs");
    assert_ok(&tool(&["repair", s(&f)]));
    assert_eq!(
        std::fs::read(&u1).unwrap()[3 * 1024 + 17],
        bytes[3 * 1024 + 17] ^ 0x04
    );
    assert_ok(&tool(&["fsck", s(&f)]));

    // Damage to a parity block only (row 0's parity is on unit 3): fsck reports it, the
    // data still reads whole, repair restores the parity byte for byte.
    let u3 = unit("r5", 3);
    let parity = std::fs::read(&u3).unwrap();
    let mut bad = parity.clone();
    bad[100] ^= 0x80;
    std::fs::write(&u3, &bad).unwrap();
    let fsck = tool(&["fsck", s(&f)]);
    assert_eq!(fsck.code(), Some(1), "fsck of damaged parity: {fsck:?}");
    assert!(
        fsck.stdout.contains("unit 3") && fsck.stdout.contains("offset 0: checksum mismatch"),
        "{}",
        fsck.stdout
    );
    assert_ok(&read3(&f));
    let (c, cat) = cat_bytes(&f);
    assert_ok(&c);
    assert!(cat == canonical_bytes(), "cat with damaged parity differs");
    assert_ok(&tool(&["repair", s(&f)]));
    assert!(
        std::fs::read(&u3).unwrap() == parity,
        "repair did not restore the parity"
    );
    assert_ok(&tool(&["fsck", s(&f)]));

    // Two units of one row lost: no silent data, an error naming the row and units.
    std::fs::remove_file(unit("r5", 0)).unwrap();
    std::fs::remove_file(unit("r5", 3)).unwrap();
    let r = read3(&f);
    assert!(!r.status.success());
    assert!(r.stderr.contains("units [0, 3] are lost"), "{}", r.stderr);
    // Nor from the tools: cat and repair fail naming the lost units, fsck exits 1.
    let (c, _) = cat_bytes(&f);
    assert!(
        !c.status.success() && c.stderr.contains("units [0, 3] are lost"),
        "cat of an unrecoverable row: {c:?}"
    );
    let rep = tool(&["repair", s(&f)]);
    assert!(
        !rep.status.success() && rep.stderr.contains("units [0, 3] are lost"),
        "repair of an unrecoverable row: {rep:?}"
    );
    assert_eq!(tool(&["fsck", s(&f)]).code(), Some(1));

    // RAID-0 has no parity: a lost unit and a flipped bit are errors naming unit and offset.
    let mut b = std::fs::read(unit("r0", 3)).unwrap();
    b[2048 + 5] ^= 1;
    std::fs::write(unit("r0", 3), &b).unwrap();
    let r = read3(&f0);
    assert!(!r.status.success());
    assert!(
        r.stderr.contains("unit 3")
            && r.stderr
                .contains("block at offset 2048 failed its CRC32C check"),
        "{}",
        r.stderr
    );
    std::fs::remove_file(unit("r0", 1)).unwrap();
    let r = read3(&f0);
    assert!(
        !r.status.success(),
        "a read of a RAID-0 file with a lost unit passed"
    );
    assert!(
        r.stderr.contains("unit 1") && r.stderr.contains("is missing or short at offset 0"),
        "{}",
        r.stderr
    );
    let c = tool(&["repair", s(&f0)]);
    assert!(
        !c.status.success() && c.stderr.contains("RAID-0 file has no parity"),
        "{}",
        c.stderr
    );
}

const CRASH: &str = "u32[256,1024] block,* on 4x1";

/// The version a striped file's manifest records.
fn manifest_version(manifest: &Path) -> Option<u64> {
    std::fs::read_to_string(manifest)
        .ok()?
        .split("\"version\": ")
        .nth(1)?
        .split(',')
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_rank_killed_in_the_middle_of_a_write_leaves_the_previous_version_readable() {
    rank_main(|role| {
        assert_eq!(role, "crash-writer");
        let w = e(spools::init())?;
        checked(&w, |w| {
            let dir = std::path::PathBuf::from(
                std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?,
            );
            let l: Layout = e(CRASH.parse())?;
            let f = dir.join("crash");
            let fmt = spools::Format::Striped(spools::Striping {
                layout: e("raid5(unit=64KiB,count=3)".parse())?,
                dirs: vec![dir.join("a"), dir.join("b"), dir.join("c")],
                node_local: false,
            });
            let opts = spools::WriteOptions {
                format: fmt,
                ..Default::default()
            };
            // Every version holds index + version; the test kills rank 1 once version 3
            // has committed, that is while it writes version 4 (or a later one).
            for seed in 1u32.. {
                let me = w.rank() as usize;
                let part: Vec<u32> = (0..64 * 1024u32)
                    .map(|i| (me as u32 * 64 * 1024 + i).wrapping_add(seed))
                    .collect();
                e(w.write_file(&f, &part, &l, &opts))?;
                if seed == 3 && me == 1 {
                    signal_file(
                        &dir.join("committed3"),
                        std::process::id().to_string().as_bytes(),
                    )?;
                }
            }
            Ok(())
        });
        e(w.finalize())
    });
    let d = tempdir("crash");
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c);
    c.args(["run", "-n", "4", "--timeout", "120", "--"])
        .args(common::self_args(
            "a_rank_killed_in_the_middle_of_a_write_leaves_the_previous_version_readable",
        ))
        .env("SPOOLS_TEST_ROLE", "crash-writer")
        .env("SPOOLS_TEST_DIR", &d)
        .env_remove("SPOOLS_RANK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Stopped when dropped, should the test fail before it ends.
    let job = Spawned::new(c.spawn().unwrap());
    // Version 3 committed (rank 1 says so, with its pid): kill rank 1 with SIGKILL.
    kill_when_signalled(&d.join("committed3"), Duration::from_secs(100)).unwrap();
    let o = job.wait(Duration::from_secs(60));
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("rank 1 was killed by signal 9"),
        "{}",
        o.stderr
    );
    // Whatever moment of which write the kill hit, the file reads as one complete
    // version, 3 or later.
    let manifest = d.join("crash");
    let v = manifest_version(&manifest).unwrap();
    assert!(v >= 3, "version {v}");
    eprintln!("the kill left version {v}");
    let r = bench_io(
        3,
        &[
            "--layout",
            "u32[256,1024] cyclic(5),* on 3x1",
            "--file",
            s(&manifest),
            "--read",
            "--verify",
            "--keep",
            "--seed",
            &v.to_string(),
        ],
    );
    assert_ok(&r);
    assert_ok(&tool(&["fsck", s(&manifest)]));
}

#[test]
fn bench_io_reports_each_ranks_peak_rss_against_its_own_buffers() {
    let d = tempdir("rss");
    let f = d.join("m");
    let r = bench_io(
        3,
        &[
            "--layout",
            "u8[3000000] block on 3",
            "--file",
            s(&f),
            "--write",
            "--read",
            "--json",
        ],
    );
    assert_ok(&r);
    let line = r.stdout.lines().rev().find(|l| l.starts_with('{')).unwrap();
    let doc: serde_json::Value = serde_json::from_str(line).unwrap();
    let memory = doc["memory"].as_array().unwrap();
    assert_eq!(memory.len(), 3, "{line}");
    for m in memory {
        // A share of 1 MB written and one read back.
        assert_eq!(m["buffer_bytes"].as_u64(), Some(2_000_000), "{line}");
        let peak = m["peak_rss_kib"].as_u64().unwrap() * 1024;
        assert!(peak >= 2_000_000, "{line}");
    }
    // The file was created by this run and not kept.
    assert!(!f.exists());
}
