//! Hostile input for the file tools (`spools cat`, `ls`, `fsck`): damage a checksum
//! sidecar finds, and metadata of a few hundred bytes that describes an absurdly large
//! array.
//!
//! The rule everywhere: a clear error or correct data; never damaged data, a panic, a
//! crash or memory that grows with what the metadata claims. Every process is waited for
//! with a bound and killed after it; every temporary directory is removed by a guard, also
//! when the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{grouped, spools, wait_bounded, Output};

/// Longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(120);

/// 2.5 MiB of i32 (element `i` holds `i`): sidecar blocks 0 and 1 whole, block 2 short.
const LAYOUT: &str = "i32[640,1024] block,* on 1x1";
const BYTES: u64 = 640 * 1024 * 4;

/// Address space every tool run on hostile metadata gets (KiB, for `ulimit -v`): 2 GiB.
const ADDRESS_SPACE_KIB: u64 = 2 << 20;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The dataset's canonical byte stream.
fn expected() -> Vec<u8> {
    (0..(BYTES / 4) as u32).flat_map(u32::to_le_bytes).collect()
}

/// Runs `spools ARGS` in `dir` (bounded), its standard output to `out` when given.
fn spools_in(dir: &Path, args: &[&str], out: Option<&Path>) -> Output {
    let mut c = grouped(spools());
    common::without_ambient_spools_env(&mut c)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match out {
        Some(p) => c.stdout(fs::File::create(p).expect("output file")),
        None => c.stdout(Stdio::piped()),
    };
    let o = wait_bounded(c.spawn().expect("spawn spools"), LIMIT);
    sane(&o, &args.join(" "));
    o
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

/// `spools cat FILE` in `dir` into a file; returns the output and the bytes.
fn cat(dir: &Path, file: &str) -> (Output, Vec<u8>) {
    let out = dir.join(".cat-output");
    let o = spools_in(dir, &["cat", file], Some(&out));
    let bytes = fs::read(&out).unwrap_or_default();
    let _ = fs::remove_file(&out);
    (o, bytes)
}

/// Flips the byte at `at` of `file`.
fn flip(file: &Path, at: u64) {
    let h = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut b = [0u8];
    h.read_exact_at(&mut b, at).unwrap();
    h.write_all_at(&[!b[0]], at).unwrap();
}

/// `spools cat` checks a canonical, `.npy` or HDF5 file's blocks against its checksum
/// sidecar as `fsck` does: a flipped byte is an error naming the block's offset, with a
/// nonzero exit, and no byte of the damaged block is written; a sidecar that describes
/// another stream is refused.
#[test]
fn cat_verifies_the_checksum_sidecar_of_every_plain_format() {
    let t = common::tempdir("catsums");
    let d = t.path();
    let want = expected();
    for (fmt, name) in [("canonical", "c.bin"), ("npy", "a.npy"), ("hdf5", "f.h5")] {
        let file = d.join(name);
        let o = spools_in(
            d,
            &[
                "bench",
                "io",
                "--layout",
                LAYOUT,
                "--file",
                name,
                "--format",
                fmt,
                "--write",
                "--keep",
                "--reps",
                "1",
                "--checksums",
            ],
            None,
        );
        common::assert_ok_as(&o, &format!("write {name}"));
        let side = d.join(format!("{name}.spools-sums"));
        assert!(side.exists(), "{name}: no sidecar");
        let (o, got) = cat(d, name);
        common::assert_ok_as(&o, &format!("cat {name}"));
        assert!(
            got == want,
            "{name}: cat gave {} bytes, not the dataset",
            got.len()
        );
        // Where the stream starts in the file (the sidecar records it).
        let text = fs::read_to_string(&side).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let head = v["offset"].as_u64().unwrap();
        // Flip a byte of block 1.
        let block1 = head + (1 << 20);
        flip(&file, block1 + 12_345);
        let o = spools_in(d, &["fsck", name], None);
        assert!(!o.status.success(), "{name}: fsck passed: {}", o.stdout);
        assert!(
            o.stdout
                .contains(&format!("block at offset {block1}: checksum mismatch")),
            "{name}: {}",
            o.stdout
        );
        let (o, got) = cat(d, name);
        assert!(
            !o.status.success(),
            "{name}: cat of a flipped byte succeeded ({} bytes)",
            got.len()
        );
        let named = format!("block at offset {block1} failed its CRC32C check");
        assert!(o.stderr.contains(&named), "{name}: {}", o.stderr);
        // Nothing damaged came out: what did is the dataset's start, before block 1.
        assert!(
            got.len() as u64 <= 1 << 20 && want.starts_with(&got),
            "{name}: cat wrote {} bytes, damaged ones among them",
            got.len()
        );
        // Repaired, it passes again; a sidecar of another stream is refused.
        flip(&file, block1 + 12_345);
        let (o, got) = cat(d, name);
        common::assert_ok_as(&o, &format!("cat {name} repaired"));
        assert!(got == want, "{name}: repaired");
        fs::write(
            &side,
            text.replace(
                &format!("\"bytes\":{BYTES}"),
                &format!("\"bytes\":{}", BYTES - 4),
            ),
        )
        .unwrap();
        let (o, got) = cat(d, name);
        assert!(
            !o.status.success() && got.is_empty(),
            "{name}: cat with a sidecar of another stream: {:?} {}",
            o.status,
            o.stderr
        );
        assert!(o.stderr.contains("it describes"), "{name}: {}", o.stderr);
    }
}

/// The `zarr.json` of a 10^9 x 10^9 array of one-byte chunks (10^18 chunk keys), fill
/// value 7; `complete` marks it as written whole by Spools (then a missing key is lost).
fn huge_zarr(dir: &Path, complete: bool) {
    fs::create_dir_all(dir).unwrap();
    let attrs = if complete {
        r#","attributes":{"spools":{"complete":true}}"#
    } else {
        ""
    };
    let json = format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[1000000000,1000000000],"data_type":"uint8","fill_value":7,"chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[1,1]}}}},"codecs":[{{"name":"bytes"}}]{attrs}}}"#
    );
    assert!(json.len() < 400, "{}", json.len());
    fs::write(dir.join("zarr.json"), json).unwrap();
}

/// Runs `spools ARGS` in `dir` under a 2 GiB address-space limit, its standard output
/// through `head -c HEAD` into `out` when given: the output, and spools' own exit status
/// as the shell saw it (128 + N when a signal N ended it).
fn limited(dir: &Path, args: &[&str], head: Option<(u64, &Path)>) -> (Output, String) {
    let status = dir.join(".status");
    let script = match head {
        Some((n, out)) => format!(
            "ulimit -v {ADDRESS_SPACE_KIB} || exit 99; \
             {{ \"$0\" \"$@\"; echo $? > '{}'; }} | head -c {n} > '{}'",
            s(&status),
            s(out)
        ),
        None => format!(
            "ulimit -v {ADDRESS_SPACE_KIB} || exit 99; \"$0\" \"$@\"; echo $? > '{}'",
            s(&status)
        ),
    };
    let mut c = grouped("sh");
    common::without_ambient_spools_env(&mut c)
        .arg("-c")
        .arg(script)
        .arg(spools())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = wait_bounded(c.spawn().expect("spawn sh"), LIMIT);
    let code = fs::read_to_string(&status).unwrap_or_default();
    let _ = fs::remove_file(&status);
    (o, code.trim().to_string())
}

/// A `zarr.json` of 300 bytes claiming 10^18 chunk keys: `ls` answers, `fsck` refuses it
/// up front, and `cat` streams its fill value in bounded memory (its first megabyte comes
/// at once under a 2 GiB address-space limit, and it stops cleanly when the reader goes),
/// or, when the array says every chunk was written, fails at the first missing one.
#[test]
fn a_tiny_zarr_json_of_an_absurd_array_is_walked_in_bounded_memory() {
    let t = common::tempdir("hugezarr");
    let arr = t.path().join("huge.zarr");
    huge_zarr(&arr, false);
    let d = t.path();

    let (o, code) = limited(d, &["ls", "huge.zarr"], None);
    assert_eq!(code, "0", "ls: {}", o.stderr);
    assert!(
        o.stdout.contains("shape [1000000000, 1000000000]")
            && o.stdout.contains("too many to count"),
        "{}",
        o.stdout
    );

    let (o, code) = limited(d, &["fsck", "huge.zarr"], None);
    assert_eq!(code, "1", "fsck ended by a signal or passed: {}", o.stderr);
    assert!(
        o.stderr.contains("more than the 4294967296 fsck checks"),
        "{}",
        o.stderr
    );

    let out = d.join("head");
    let n = 1_000_000;
    let (o, code) = limited(d, &["cat", "huge.zarr"], Some((n, &out)));
    assert_eq!(code, "0", "cat ended by a signal or failed: {}", o.stderr);
    let got = fs::read(&out).unwrap();
    assert!(
        got.len() as u64 == n && got.iter().all(|&b| b == 7),
        "cat gave {} bytes, not {n} of fill value",
        got.len()
    );

    huge_zarr(&arr, true);
    let (o, code) = limited(d, &["cat", "huge.zarr"], Some((n, &out)));
    assert_eq!(code, "1", "cat of a lost chunk: {}", o.stderr);
    assert!(
        o.stderr.contains("c/0/0") && o.stderr.contains("chunk [0, 0]"),
        "{}",
        o.stderr
    );
    assert!(fs::read(&out).unwrap().is_empty());
}
