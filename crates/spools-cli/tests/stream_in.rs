//! `spools send` into a `spools run` job: two files streamed over 3 links with TUs that
//! do not divide them; the job's ranks receive each into a block layout with `recv_adu`
//! and write their shares, which put together in rank order are the files, byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{e, rank_main, signal_file, spools, spools_command, tempdir, Job, Spawned};
use spools::{AduInfo, Layout};

const RANKS: u32 = 4;
const SIZES: [usize; 2] = [1_000_003, 300_001];

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// A rank: listens (rank 0 tells the test where), then receives every ADU into
/// `u8[SIZE] block on RANKS` and writes its share to `s<STREAM>-a<ADU>-r<RANK>`.
fn receive() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let w = e(spools::init())?;
    let me = w.rank();
    let mut r = e(w.stream_listen("127.0.0.1:0".parse().unwrap()))?;
    if me == 0 {
        signal_file(&dir.join("addr"), r.local_addr().to_string().as_bytes())?;
    }
    while let Some(AduInfo { stream, adu, size }) = e(r.next_adu())? {
        let l: Layout = e(format!("u8[{size}] block on {RANKS}").parse())?;
        let mut mine = vec![0u8; e(l.local_bytes(u64::from(me)))? as usize];
        e(r.recv_adu(&mut mine, &l))?;
        let name = format!("s{stream}-a{adu}-r{me}");
        e(std::fs::write(dir.join(name), &mine))?;
    }
    e(w.finalize())
}

/// Waits for `path`, written by the job; a job that ended first fails the test.
fn wait_job(path: &Path, job: &mut Option<Spawned>) -> String {
    let start = Instant::now();
    while !path.exists() {
        let ended = job
            .as_mut()
            .map(|j| j.child().try_wait().unwrap().is_some());
        if ended == Some(true) || start.elapsed() > Duration::from_secs(120) {
            let o = job.take().unwrap().wait(Duration::from_secs(120));
            panic!("the job never listened: {o:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn spools_send_streams_files_into_a_job_byte_identical() {
    rank_main(|_| receive());
    let d = tempdir("stream-in-cli");
    let job = Job::new(RANKS, "spools_send_streams_files_into_a_job_byte_identical")
        .env("SPOOLS_TEST_DIR", &d)
        .via_cli(spools());
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let files: Vec<PathBuf> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = d.join(format!("in-{i}"));
            std::fs::write(&p, pattern(n, i as u8)).unwrap();
            p
        })
        .collect();
    let addr = wait_job(&d.join("addr"), &mut job);
    let s = spools_command(
        &[
            "send",
            files[0].to_str().unwrap(),
            files[1].to_str().unwrap(),
            &format!("tcp:{addr}"),
            "--links",
            "3",
            "--tu",
            "96KiB",
        ],
        &[],
        Duration::from_secs(120),
    );
    common::assert_ok_as(&s, "spools send");
    let o = job.take().unwrap().wait(wait);
    common::assert_ok(&o);
    // `spools send` sends file i as the one ADU of stream i + 1.
    for (i, f) in files.iter().enumerate() {
        let mut got = Vec::new();
        for r in 0..RANKS {
            let share = d.join(format!("s{}-a0-r{r}", i + 1));
            got.extend(std::fs::read(&share).unwrap_or_else(|x| panic!("{share:?}: {x}")));
        }
        assert!(
            got == std::fs::read(f).unwrap(),
            "file {i}: the ranks' shares are not the file"
        );
    }
}
