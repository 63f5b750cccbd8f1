//! Parallel pipes between two separately launched jobs of different sizes and
//! distributions: by name, by TCP address, joined by a Unix pipe (data bypassing it), the
//! byte-stream fallback to a file or a non-Spools program, all through `spools run` and
//! `spools bench pipe`. (A rank that dies on either side is in spools-io's tests.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{grouped, pipe_end, spools, tempdir, wait_bounded, Output};

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Waits for both ends of a pipe at once (bounded), so that neither is left running
/// when the other fails or hangs.
fn wait_both(p: std::process::Child, c: std::process::Child) -> (Output, Output) {
    std::thread::scope(|s| {
        let tc = s.spawn(|| wait_bounded(c, Duration::from_secs(120)));
        let po = wait_bounded(p, Duration::from_secs(120));
        (po, tc.join().unwrap())
    })
}

fn both_ok(p: &Output, c: &Output) {
    assert!(
        p.status.success() && c.status.success(),
        "producer {:?}:\n{}\nconsumer {:?}:\n{}",
        p.status,
        p.stderr,
        c.status,
        c.stderr
    );
    assert!(c.stderr.contains("verified"), "{}", c.stderr);
}

#[test]
fn pipes_connect_programs_of_different_sizes_and_distributions() {
    let d = tempdir("pipes");
    let cases = [
        (
            4,
            "u8[256,384] block,* on 4x1",
            3,
            "u8[256,384] *,block on 1x3",
        ),
        (
            1,
            "u32[100,90] *,* on 1x1",
            2,
            "u32[100,90] cyclic(7),* on 2x1",
        ),
        (
            3,
            "i16[64,64,8] block,*,* on 3x1x1",
            5,
            "i16[64,64,8] *,cyclic(3),* on 1x5x1",
        ),
        (2, "f64[3000] cyclic(10) on 2", 1, "f64[3000] block on 1"),
    ];
    for (i, (pn, pl, cn, cl)) in cases.iter().enumerate() {
        let name = format!("pipe:t{i}");
        let p = pipe_end(*pn, "producer", pl, Some(&name), 7, &d);
        let c = pipe_end(*cn, "consumer", cl, Some(&name), 7, &d);
        let (po, co) = wait_both(p, c);
        both_ok(&po, &co);
    }
    // By TCP address: the consumer's rank 0 listens, the producer's connects.
    let port = common::free_port(0);
    let name = format!("tcp:127.0.0.1:{port}");
    let c = pipe_end(
        2,
        "consumer",
        "u8[500,500] *,block on 1x2",
        Some(&name),
        4,
        &d,
    );
    let p = pipe_end(
        3,
        "producer",
        "u8[500,500] block,* on 3x1",
        Some(&name),
        4,
        &d,
    );
    let (po, co) = wait_both(p, c);
    both_ok(&po, &co);
    // Different datasets are refused on both sides.
    let p = pipe_end(
        1,
        "producer",
        "u8[10,10] block,* on 1x1",
        Some("pipe:bad"),
        1,
        &d,
    );
    let c = pipe_end(
        1,
        "consumer",
        "u8[10,11] block,* on 1x1",
        Some("pipe:bad"),
        1,
        &d,
    );
    let (po, co) = wait_both(p, c);
    assert!(!po.status.success() && !co.status.success());
    assert!(
        co.stderr.contains("hold different datasets"),
        "{}",
        co.stderr
    );
}

/// Record k's canonical bytes for a u8 layout: element i holds (i + k) as u8.
fn canonical(n: u64, records: u64) -> Vec<u8> {
    (0..records)
        .flat_map(|k| (0..n).map(move |i| (i + k) as u8))
        .collect()
}

/// Whether `text` says `needle`: verbatim, or on one line interleaved with another job's
/// line (jobs sharing a standard error).
fn says(text: &str, needle: &str) -> bool {
    text.contains(needle)
        || text.lines().any(|l| {
            let mut it = l.chars();
            needle.chars().all(|c| it.any(|x| x == c))
        })
}

fn sh(script: &str, dir: &std::path::Path) -> Output {
    let mut c = grouped("sh");
    c.args(["-c", script])
        .env("SPOOLS", spools())
        .env("SPOOLS_PIPE_DIR", dir)
        .env("SPOOLS_PIPE_TIMEOUT", "30")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(c.spawn().unwrap(), Duration::from_secs(150))
}

#[test]
fn a_unix_pipe_between_launchers_is_bypassed_and_a_plain_reader_gets_the_byte_stream() {
    let d = tempdir("unixpipe");
    let prod = "\"$SPOOLS\" run -n 4 -- \"$SPOOLS\" bench pipe --role producer --layout 'u8[300,200] block,* on 4x1' --records 5";
    let cons = "\"$SPOOLS\" run -n 3 -- \"$SPOOLS\" bench pipe --role consumer --layout 'u8[300,200] *,cyclic(7) on 1x3' --records 5 --verify";
    let o = sh(&format!("{prod} | {cons}"), &d);
    assert!(o.status.success(), "{}", o.stderr);
    // The two jobs share the shell's standard error: their lines may interleave.
    assert!(
        says(&o.stderr, "consumer: 3 ranks, 5 records") && says(&o.stderr, "via pipe:fifo-"),
        "{}",
        o.stderr
    );
    // To a file, through a non-Spools program, and from one: the canonical bytes.
    let f1 = d.join("direct.bin");
    let f2 = d.join("cat.bin");
    let o = sh(
        &format!(
            "{prod} > '{}' && {prod} | cat > '{}' && cat '{}' | {cons}",
            s(&f1),
            s(&f2),
            s(&f1)
        ),
        &d,
    );
    assert!(o.status.success(), "{}", o.stderr);
    assert!(
        o.stderr.contains("via stdout") && o.stderr.contains("via stdin"),
        "{}",
        o.stderr
    );
    let want = canonical(300 * 200, 5);
    assert!(
        std::fs::read(&f1).unwrap() == want,
        "the file is not the canonical stream"
    );
    assert!(
        std::fs::read(&f2).unwrap() == want,
        "the pipe through cat is not the canonical stream"
    );
}
