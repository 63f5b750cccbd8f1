//! `spools send` into a `spools run` job: two files streamed over 3 links with TUs that
//! do not divide them; the job's ranks receive each into a block layout with `recv_adu`
//! and write their shares, which put together in rank order are the files, byte for byte.
//! Across hosts (network namespaces): a job on two hosts listening on every address, and
//! `spools send` on a third host, whose links rank 0 moves to the ranks on both hosts.

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

/// A rank: listens at `at` (rank 0 tells the test where), then receives every ADU into
/// `u8[SIZE] block on RANKS` and writes its share to `s<STREAM>-a<ADU>-r<RANK>`; then
/// says which links it received.
fn receive(at: &str) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let w = e(spools::init())?;
    let me = w.rank();
    let mut r = e(w.stream_listen(at.parse().unwrap()))?;
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
    println!("rank {me}: links {:?}", r.links_here());
    e(w.finalize())
}

/// The ranks' shares of stream `stream`'s ADU 0, put together in rank order.
fn shares(d: &Path, stream: usize) -> Vec<u8> {
    let mut got = Vec::new();
    for r in 0..RANKS {
        let share = d.join(format!("s{stream}-a0-r{r}"));
        got.extend(std::fs::read(&share).unwrap_or_else(|x| panic!("{share:?}: {x}")));
    }
    got
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
    rank_main(|_| receive("127.0.0.1:0"));
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
        assert!(
            shares(&d, i + 1) == std::fs::read(f).unwrap(),
            "file {i}: the ranks' shares are not the file"
        );
    }
    // `spools send` moves its links: link s on rank s % 4.
    for (r, links) in [(0, "[0]"), (1, "[1]"), (2, "[2]"), (3, "[]")] {
        assert!(
            o.stdout.contains(&format!("rank {r}: links {links}")),
            "{}",
            o.stdout
        );
    }
}

/// A job on hosts h1 and h2 (2 ranks each) listens on every address; `spools send` on h3
/// sends a file over 5 links to rank 0 at h1's address, which moves links 1..4 to ranks 1
/// (h1), 2 and 3 (h2, named by h2's address) and keeps links 0 and 4: the shares are the
/// file. Needs root for the namespaces (skipped elsewhere, unless `SPOOLS_REQUIRE_NETNS`).
#[test]
fn spools_send_into_a_job_on_two_hosts_spreads_its_links() {
    rank_main(|_| receive("0.0.0.0:0"));
    let Some(net) = spools_testkit::Hosts::create_or_skip(3) else {
        return;
    };
    let d = tempdir("stream-in-hosts");
    let job = Job::new(
        RANKS,
        "spools_send_into_a_job_on_two_hosts_spreads_its_links",
    )
    .env("SPOOLS_TEST_DIR", &d)
    .via_cli(spools())
    .cli_args(&net.run_args("h1:2,h2:2"));
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let file = d.join("in");
    std::fs::write(&file, pattern(700_001, 9)).unwrap();
    let addr = wait_job(&d.join("addr"), &mut job);
    let port = addr.rsplit(':').next().unwrap();
    let h1 = net.host("h1").unwrap().ip;
    let mut send = net.command("h3", spools());
    send.args([
        "send",
        file.to_str().unwrap(),
        &format!("tcp:{h1}:{port}"),
        "--links",
        "5",
        "--tu",
        "100KiB",
    ])
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let s = Spawned::new(send.spawn().unwrap()).wait(Duration::from_secs(120));
    common::assert_ok_as(&s, "spools send");
    let o = job.take().unwrap().wait(wait);
    common::assert_ok(&o);
    assert!(
        shares(&d, 1) == std::fs::read(&file).unwrap(),
        "the ranks' shares are not the file"
    );
    for (r, links) in [(0, "[0, 4]"), (1, "[1]"), (2, "[2]"), (3, "[3]")] {
        assert!(
            o.stdout.contains(&format!("rank {r}: links {links}")),
            "{}",
            o.stdout
        );
    }
}
