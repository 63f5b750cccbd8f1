//! Checksummed canonical and `.npy` files through the command line: `spools bench io
//! --checksums` writes the sidecar, `spools fsck` finds it clean, then names a block with a
//! flipped byte, and a verified read of that file fails naming the block.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{assert_ok, grouped, spools, tempdir, wait_bounded, Output};
use spools_testkit::without_ambient_spools_env;

/// 2.5 MiB of i32: blocks 0 and 1 whole, block 2 short.
const LAYOUT: &str = "i32[640,1024] cyclic(3),* on 3x1";

fn run(args: &[&str], ranks: Option<u32>) -> Output {
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c);
    if let Some(n) = ranks {
        c.args(["run", "-n", &n.to_string(), "--timeout", "120", "--"])
            .arg(spools());
    }
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(c.spawn().unwrap(), Duration::from_secs(150))
}

fn io(file: &Path, fmt: &str, what: &[&str]) -> Output {
    let f = file.to_str().unwrap();
    let mut args = vec![
        "bench", "io", "--reps", "1", "--layout", LAYOUT, "--file", f,
    ];
    args.extend(["--format", fmt, "--checksums"]);
    args.extend(what);
    run(&args, Some(3))
}

#[test]
fn fsck_and_verified_reads_name_a_flipped_block_of_a_checksummed_file() {
    let d = tempdir("clisums");
    for (fmt, name) in [("canonical", "c.bin"), ("npy", "a.npy")] {
        let file = d.join(name);
        let f = file.to_str().unwrap();
        assert_ok(&io(&file, fmt, &["--write", "--keep"]));
        assert!(d.join(format!("{name}.spools-sums")).exists());
        assert_ok(&io(&file, fmt, &["--read", "--verify"]));
        let o = run(&["fsck", f], None);
        assert_ok(&o);
        assert!(o.stdout.contains("3 blocks"), "{}", o.stdout);
        // Flip a byte of block 1 (past the .npy header, if any).
        let head = std::fs::metadata(&file).unwrap().len() - 640 * 1024 * 4;
        let at = head + (1 << 20) + 12_345;
        let h = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .unwrap();
        let mut b = [0u8];
        h.read_exact_at(&mut b, at).unwrap();
        h.write_all_at(&[!b[0]], at).unwrap();
        let o = run(&["fsck", f], None);
        assert!(!o.status.success(), "{}", o.stdout);
        let want = format!("block at offset {}: checksum mismatch", head + (1 << 20));
        assert!(o.stdout.contains(&want), "{fmt}: {}", o.stdout);
        let o = io(&file, fmt, &["--read"]);
        assert!(
            !o.status.success(),
            "{fmt}: a verified read of a flipped byte succeeded"
        );
        let want = format!(
            "block at offset {} failed its CRC32C check",
            head + (1 << 20)
        );
        assert!(o.stderr.contains(&want), "{fmt}: {}", o.stderr);
    }
}
