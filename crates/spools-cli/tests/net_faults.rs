//! Network faults between hosts (network namespaces, `spools_testkit::Hosts`): a host
//! whose link goes down for longer than `net_timeout_s` is reported by name, every rank
//! gets an error and the launcher ends the job; a host whose ranks are all killed is
//! reported by name. Times to error are printed (`--nocapture`), never asserted. With
//! libfabric installed (unless `SPOOLS_TEST_OFI=0`) each runs again with libfabric between the hosts
//! (`SPOOLS_OFI_PROVIDER=tcp;ofi_rxm`).
//!
//! The namespaces need root (CI runs as root); elsewhere these tests print why they skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{
    e, networks_between_hosts as networks, rank_main, signal_file, spools, tempdir, wait_for_file,
    Hosts, Job, Output,
};

/// `job` with `SPOOLS_OFI_PROVIDER=ofi` when given.
fn over(job: Job, ofi: Option<&str>) -> Job {
    match ofi {
        Some(p) => job.env("SPOOLS_OFI_PROVIDER", p),
        None => job,
    }
}

/// Seconds since the epoch (the ranks' and the test's common clock, for the report).
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap())
}

/// Ranks 0, 1 on h1 and 2, 3 on h2: after a first exchange across hosts, each says it is
/// ready and then, in role `stall`, waits for a message from its peer on the other host
/// that never comes, or, in role `stream`, exchanges 4 MiB messages with it without end.
/// The error it gets is printed with the time it came.
fn stall(role: &str) -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    if std::env::var("SPOOLS_OFI_PROVIDER").is_ok() && w.ofi().is_none() {
        return Err("SPOOLS_OFI_PROVIDER is set but no libfabric transport".into());
    }
    let peer = me ^ 2;
    let mut got = [0u64; 4];
    e(w.sendrecv(&[u64::from(me); 4], peer, 1, &mut got, peer, 1))?;
    e(w.barrier())?;
    signal_file(&dir().join(format!("ready.{me}")), b"")?;
    let r = if role == "stream" {
        let (out, mut back) = (vec![me as u8; 4 << 20], vec![0u8; 4 << 20]);
        loop {
            if let Err(x) = w.sendrecv(&out, peer, 3, &mut back, peer, 3) {
                break Err(x);
            }
        }
    } else {
        let mut never = [0u8; 8];
        w.recv(&mut never, peer, 2)
    };
    println!(
        "rank {me} error at {:.3}: {:?}",
        now(),
        r.map(|_| ()).map_err(|x| x.to_string())
    );
    // Exit without finalising: the job is broken.
    std::process::exit(1)
}

/// The rank error lines of a job's output: (rank, time, message).
fn rank_errors(o: &Output) -> Vec<(u32, f64, String)> {
    o.stdout
        .lines()
        .filter_map(|l| {
            // The line may follow the test harness's own "test NAME ... ".
            let (head, rest) = l.split_once(" error at ")?;
            let rank = head.rsplit("rank ").next()?;
            let (t, msg) = rest.split_once(": ")?;
            Some((rank.parse().ok()?, t.parse().ok()?, msg.to_string()))
        })
        .collect()
}

/// Starts the stalling job (`role`) on h1:2,h2:2 (over `ofi` between hosts, if given)
/// and waits (bounded) until every rank is ready.
fn start_stalled(
    net: &Hosts,
    (test, role, ofi): (&str, &str, Option<&str>),
    d: &Path,
    timeout_s: u32,
) -> common::Spawned {
    let job = over(Job::new(4, test), ofi)
        .role(role)
        .env("SPOOLS_TEST_DIR", d)
        .env("SPOOLS_NET_TIMEOUT", timeout_s.to_string())
        .timeout(Duration::from_secs(90))
        .via_cli(spools())
        .cli_args(&net.run_args("h1:2,h2:2"));
    let spawned = job.start();
    for r in 0..4 {
        wait_for_file(&d.join(format!("ready.{r}")), Duration::from_secs(60)).unwrap();
    }
    spawned
}

#[test]
fn a_host_cut_off_longer_than_the_timeout_is_named_and_the_job_ends() {
    rank_main(stall);
    cut_off(
        "a_host_cut_off_longer_than_the_timeout_is_named_and_the_job_ends",
        "stall",
    );
}

#[test]
fn a_host_cut_off_during_transfers_is_named_and_the_job_ends() {
    rank_main(stall);
    cut_off(
        "a_host_cut_off_during_transfers_is_named_and_the_job_ends",
        "stream",
    );
}

/// Cuts h2's link while the ranks play `role`; every rank must get an error naming the
/// host it lost, and the launcher must end the job leaving nothing behind.
fn cut_off(test: &str, role: &str) {
    for ofi in networks() {
        let Some(net) = Hosts::create_or_skip(2) else {
            return;
        };
        cut_off_over(&net, test, role, ofi);
    }
}

/// [`cut_off`] over one network between the hosts.
fn cut_off_over(net: &Hosts, test: &str, role: &str, ofi: Option<&str>) {
    let d = tempdir("link-down");
    let timeout = 2;
    let job = start_stalled(net, (test, role, ofi), &d, timeout);
    let t0 = now();
    net.link("h2", false).unwrap();
    let o = job.wait(Duration::from_secs(120));
    let t_end = now();
    let errors = rank_errors(&o);
    eprintln!(
        "{role} over {}: link of h2 down at {t0:.3}, net_timeout_s {timeout}; job ended after {:.2} s",
        ofi.unwrap_or("TCP"),
        t_end - t0
    );
    for (r, t, msg) in &errors {
        eprintln!("  rank {r}: error after {:.2} s: {msg}", t - t0);
    }
    assert!(!o.status.success(), "{}\n{}", o.stdout, o.stderr);
    // The launcher names the host it lost.
    assert!(
        o.stderr.contains("on host h2"),
        "stdout:\n{}\nstderr:\n{}",
        o.stdout,
        o.stderr
    );
    // Every rank got an error naming the host it lost: h2 for the ranks of h1; for the
    // ranks of h2, the launcher's (its address: their rendezvous timed out) or h1 (a
    // connection to one of its ranks failed first).
    let launcher = net.bridge_ip().to_string();
    for r in 0..4 {
        let lost: &[&str] = if r < 2 {
            &["on host h2"]
        } else {
            &[launcher.as_str(), "on host h1"]
        };
        assert!(
            errors.iter().any(|(x, _, m)| *x == r
                && m.starts_with("Err")
                && lost.iter().any(|l| m.contains(l))),
            "rank {r}: {errors:?}\nstdout:\n{}\nstderr:\n{}",
            o.stdout,
            o.stderr
        );
    }
    nothing_left(net);
}

/// No process of the job is left on any host.
fn nothing_left(net: &Hosts) {
    for h in ["h1", "h2"] {
        assert_eq!(net.processes(h), Vec::<i32>::new(), "left on {h}");
    }
}

#[test]
fn a_host_whose_ranks_are_all_killed_is_named() {
    rank_main(stall);
    for ofi in networks() {
        let Some(net) = Hosts::create_or_skip(2) else {
            return;
        };
        host_killed_over(&net, ofi);
    }
}

/// [`a_host_whose_ranks_are_all_killed_is_named`] over one network between the hosts.
fn host_killed_over(net: &Hosts, ofi: Option<&str>) {
    let d = tempdir("host-killed");
    let job = start_stalled(
        net,
        ("a_host_whose_ranks_are_all_killed_is_named", "stall", ofi),
        &d,
        5,
    );
    let t0 = now();
    // Every process of h2 dies at once, as with a host that crashes.
    let pids = net.processes("h2");
    assert_eq!(pids.len(), 2, "h2's ranks: {pids:?}");
    // One at a time, so that a process already gone (one fresh-clone run beside another
    // found a pid of the list gone at the kill) does not keep the other alive; which one
    // was gone is said, and the job's report below decides.
    let mut killed = 0;
    for pid in &pids {
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        if status.success() {
            killed += 1;
        } else {
            eprintln!("h2's process {pid} was gone before the kill");
        }
    }
    assert!(
        killed > 0,
        "every process of h2 was gone before the kill: {pids:?}"
    );
    let o = job.wait(Duration::from_secs(120));
    let errors = rank_errors(&o);
    eprintln!(
        "over {}: h2's ranks killed at {t0:.3}; job ended after {:.2} s",
        ofi.unwrap_or("TCP"),
        now() - t0
    );
    for (r, t, msg) in &errors {
        eprintln!("  rank {r}: error after {:.2} s: {msg}", t - t0);
    }
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("on host h2 was killed by signal 9"),
        "stdout:\n{}\nstderr:\n{}",
        o.stdout,
        o.stderr
    );
    nothing_left(net);
    for r in [0, 1] {
        assert!(
            errors
                .iter()
                .any(|(x, _, m)| *x == r && m.contains("on host h2")),
            "rank {r}: {errors:?}\nstdout:\n{}\nstderr:\n{}",
            o.stdout,
            o.stderr
        );
    }
}

/// Ranks 0, 1 on h1 and 2, 3 on h2: a large transfer across hosts and an allreduce,
/// both checked, each timed (printed for the report).
fn transfer_and_reduce() -> Result<(), String> {
    let w = e(spools::init())?;
    let me = w.rank();
    let peer = me ^ 2;
    let value = |r: u32, i: usize| (i as u32).wrapping_mul(0x9e37_79b9) ^ r;
    let n = 2 << 20; // 8 MiB of u32 each way
    let mine: Vec<u32> = (0..n).map(|i| value(me, i)).collect();
    let mut got = vec![0u32; n];
    let t = std::time::Instant::now();
    e(w.sendrecv(&mine, peer, 3, &mut got, peer, 3))?;
    let transfer = t.elapsed().as_secs_f64();
    if got.iter().enumerate().any(|(i, &v)| v != value(peer, i)) {
        return Err(format!("rank {me}: wrong bytes from rank {peer}"));
    }
    let len = 1 << 17; // 1 MiB of u64
    let part: Vec<u64> = (0..len as u64).map(|i| i + u64::from(me)).collect();
    let mut sum = vec![0u64; len];
    let t = std::time::Instant::now();
    e(w.allreduce(&part, &mut sum, &spools::Op::Sum))?;
    let reduce = t.elapsed().as_secs_f64();
    if sum.iter().enumerate().any(|(i, &s)| s != 4 * i as u64 + 6) {
        return Err(format!("rank {me}: allreduce wrong"));
    }
    println!("rank {me} transfer {transfer:.3} s allreduce {reduce:.3} s");
    e(w.finalize())
}

#[test]
fn transfers_collectives_and_pipes_survive_packet_loss() {
    rank_main(|_| transfer_and_reduce());
    let Some(net) = Hosts::create_or_skip(2) else {
        return;
    };
    let run_over = |ofi: Option<&str>| {
        over(
            Job::new(4, "transfers_collectives_and_pipes_survive_packet_loss"),
            ofi,
        )
        .via_cli(spools())
        .cli_args(&net.run_args("h1:2,h2:2"))
        .run()
    };
    let run = || run_over(None);
    let times = |o: &Output| -> Vec<String> {
        o.stdout
            .lines()
            .filter_map(|l| l.find("rank 0 transfer").map(|i| l[i..].to_string()))
            .collect()
    };
    let d = tempdir("pipe-loss");
    let pipe = |what: &str| {
        let t = std::time::Instant::now();
        if let Err(e) = net.pipe(
            &spools(),
            ("h1:2", "u8[1000,1000] block,* on 2x1"),
            ("h2:2", "u8[1000,1000] *,block on 1x2"),
            8,
            &d,
        ) {
            panic!("{what}: {e}");
        }
        t.elapsed().as_secs_f64()
    };
    let clean = (run(), pipe("no loss"));
    common::assert_ok(&clean.0);
    if let Err(why) = net.loss("h2", 3) {
        // scripts/install-net-tools.sh installs nftables; without it, say so.
        eprintln!("skipped the lossy part: {why}");
        return;
    }
    let lossy = (run(), pipe("3 % loss"));
    common::assert_ok(&lossy.0);
    // The same transfer and allreduce with libfabric between the hosts: checked, so
    // nothing was lost.
    let lossy_ofi = networks()
        .into_iter()
        .flatten()
        .map(|p| (p, run_over(Some(p))))
        .collect::<Vec<_>>();
    for (p, o) in &lossy_ofi {
        common::assert_ok(o);
        eprintln!("3 % loss each way on h2, over {p}: {:?}", times(o));
    }
    net.rate("h2", 200).unwrap();
    let limited = (run(), pipe("3 % loss, 200 Mbit/s"));
    common::assert_ok(&limited.0);
    for (what, (o, p)) in [
        ("no loss", clean),
        ("3 % loss each way on h2", lossy),
        ("3 % loss and h2 sending at 200 Mbit/s (tbf)", limited),
    ] {
        eprintln!("{what}: {:?}, pipe of 8 MB h1 -> h2 {p:.2} s", times(&o));
    }
}

#[test]
fn stopping_the_launcher_stops_every_remote_rank() {
    rank_main(stall);
    let Some(net) = Hosts::create_or_skip(2) else {
        return;
    };
    let d = tempdir("stop");
    let job = start_stalled(
        &net,
        (
            "stopping_the_launcher_stops_every_remote_rank",
            "stall",
            None,
        ),
        &d,
        5,
    );
    assert_eq!(net.processes("h2").len(), 2);
    job.signal("-TERM");
    let o = job.wait(Duration::from_secs(60));
    assert_eq!(o.code(), Some(143), "{}", o.stderr);
    // The agent (ip netns exec) execs the rank: the launcher's signal reached it.
    nothing_left(&net);
}
