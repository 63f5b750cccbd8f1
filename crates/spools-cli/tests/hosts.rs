//! Multi-host jobs on one machine: `spools run --hosts` starts ranks in network
//! namespaces that play hosts (`spools_testkit::Hosts`: a bridge, a veth and an address
//! per host, a host name of its own through a UTS namespace). Shared memory within a
//! host, TCP between hosts, host-aware collectives, parallel pipes between programs on
//! different hosts, and the errors of a host that cannot be reached or a malformed list.
//!
//! The namespaces need root (CI runs as root); elsewhere these tests print why they skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{
    assert_ok, checked, e, grouped, rank_main, spools, spools_command, tempdir, wait_bounded,
    without_ambient_spools_env, Job, Output,
};
use spools::{Op, Route, World};
use spools_testkit::Hosts;

/// The hosts, or `None` after printing why they cannot be made here.
fn hosts_or_skip(n: usize) -> Option<Hosts> {
    match Hosts::create(n) {
        Ok(h) => Some(h),
        Err(why) => {
            eprintln!("skipped: network namespaces unavailable: {why}");
            None
        }
    }
}

/// `spools run` options that start ranks on `list` through the namespaces' agent.
fn on_hosts(net: &Hosts, list: &str) -> Vec<String> {
    vec![
        "--hosts".into(),
        list.into(),
        "--agent".into(),
        net.agent(),
        "--bootstrap-ip".into(),
        net.bridge_ip().to_string(),
    ]
}

/// A rank's bytes for `tag`: distinct per rank, tag and position.
fn pattern(rank: u32, tag: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ (rank << 24) ^ (tag << 16))
        .collect()
}

/// Runs `f` and returns the (messages, bytes) this rank sent to other hosts meanwhile.
fn crossing(w: &World, f: impl FnOnce() -> Result<(), String>) -> Result<(u64, u64), String> {
    let before = w.cross_host_sends();
    f()?;
    let after = w.cross_host_sends();
    Ok((after.0 - before.0, after.1 - before.1))
}

/// Ranks 0, 1 on h1 and 2, 3 on h2.
fn across_hosts(w: &World) -> Result<(), String> {
    let me = w.rank();
    if w.size() != 4 {
        return Err(format!("size {}", w.size()));
    }
    let host = spools_boot::host::host_name();
    if host != format!("h{}", me / 2 + 1) {
        return Err(format!("rank {me} runs on host {host:?}"));
    }
    // Shared memory within a host, TCP between hosts.
    for r in 0..4 {
        let want = if r == me {
            Route::Local
        } else if r / 2 == me / 2 {
            Route::Shm
        } else {
            Route::Tcp
        };
        let got = e(w.worker().route(r))?;
        if got != want || w.same_host(r) != (r / 2 == me / 2) {
            return Err(format!(
                "rank {me} reaches {r} by {got:?}, expected {want:?}"
            ));
        }
    }
    // Large messages to the peer on the other host, then to the one on this host.
    for (tag, peer) in [(1, me ^ 2), (2, me ^ 1)] {
        let n = 3 << 18; // 3 MiB of u32
        let mut got = vec![0u32; n];
        e(w.sendrecv(
            &pattern(me, tag, n),
            peer,
            tag as i32,
            &mut got,
            peer,
            tag as i32,
        ))?;
        if got != pattern(peer, tag, n) {
            return Err(format!("rank {me}: wrong bytes from rank {peer}"));
        }
    }
    // Host-aware collectives: only host leaders (ranks 0 and 2) send across hosts.
    let leader = me % 2 == 0;
    for len in [8usize, 20_000] {
        let mine: Vec<u64> = (0..len as u64).map(|i| i * u64::from(me + 1)).collect();
        let mut sum = vec![0u64; len];
        let sent = crossing(w, || e(w.allreduce(&mine, &mut sum, &Op::Sum)))?;
        if sum.iter().enumerate().any(|(i, &s)| s != i as u64 * 10) {
            return Err(format!("rank {me}: allreduce of {len} wrong"));
        }
        if (sent.0 > 0) != leader {
            return Err(format!(
                "rank {me}: allreduce of {len} sent {sent:?} across hosts (leader: {leader})"
            ));
        }
        let mut buf = if me == 3 {
            pattern(3, 9, len)
        } else {
            vec![0; len]
        };
        let sent = crossing(w, || e(w.bcast(&mut buf, 3)))?;
        if buf != pattern(3, 9, len) {
            return Err(format!("rank {me}: bcast of {len} wrong"));
        }
        // From rank 3 (h2): only h2's leader sends to h1.
        if (sent.0 > 0) != (me == 2) {
            return Err(format!(
                "rank {me}: bcast of {len} from rank 3 sent {sent:?} across hosts"
            ));
        }
    }
    e(w.barrier())
}

fn job_role() -> Result<(), String> {
    let w = e(spools::init())?;
    checked(&w, across_hosts);
    println!("across hosts ok rank {}", w.rank());
    e(w.finalize())
}

#[test]
fn one_job_runs_across_namespaces() {
    rank_main(|_| job_role());
    let Some(net) = hosts_or_skip(2) else { return };
    let o = Job::new(4, "one_job_runs_across_namespaces")
        .via_cli(spools())
        .cli_args(&on_hosts(&net, "h1:2,h2:2"))
        .run();
    assert_ok(&o);
    for r in 0..4 {
        assert!(
            o.stdout.contains(&format!("across hosts ok rank {r}\n")),
            "rank {r}:\n{}\n{}",
            o.stdout,
            o.stderr
        );
    }
}

#[test]
fn a_host_that_cannot_be_reached_is_named() {
    rank_main(|_| job_role());
    let Some(net) = hosts_or_skip(1) else { return };
    // h7 has no namespace: its agent fails, and rank 0 on h1 waits for it in vain.
    let o = Job::new(2, "a_host_that_cannot_be_reached_is_named")
        .via_cli(spools())
        .cli_args(&on_hosts(&net, "h1:1,h7:1"))
        .grace(Duration::from_secs(2))
        .run();
    assert!(!o.status.success(), "{}", o.stderr);
    assert!(
        o.stderr.contains("rank 1 on host h7 exited with status")
            && o.stderr.contains("before joining the job"),
        "{}",
        o.stderr
    );
}

#[test]
fn malformed_host_lists_are_refused_before_anything_starts() {
    for (args, says) in [
        (vec!["--hosts", "h1", "--", "true"], "is not HOST:RANKS"),
        (vec!["--hosts", "h1:2,h1:1", "--", "true"], "listed twice"),
        (
            vec!["-n", "3", "--hosts", "h1:2", "--", "true"],
            "-n 3 but --hosts lists 2",
        ),
        (
            vec!["--hosts", "h1:1", "--agent", "ssh", "--", "true"],
            "must contain {host}",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend(args.iter().copied());
        let o = spools_command(&all, &[], Duration::from_secs(30));
        assert_eq!(o.code(), Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
    }
}

/// One end of a parallel pipe (`spools bench pipe`) started by `spools run --hosts`.
fn pipe_end_on(
    net: &Hosts,
    list: &str,
    role: &str,
    layout: &str,
    dir: &std::path::Path,
) -> std::process::Child {
    let mut c = grouped(spools());
    without_ambient_spools_env(&mut c)
        .env("SPOOLS_PIPE_DIR", dir)
        .env("SPOOLS_PIPE_TIMEOUT", "30")
        .arg("run")
        .args(on_hosts(net, list))
        .args(["--timeout", "100", "--"])
        .arg(spools())
        .args([
            "bench",
            "pipe",
            "--role",
            role,
            "--layout",
            layout,
            "--records",
            "5",
            "--name",
            "pipe:across",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if role == "consumer" {
        c.arg("--verify");
    }
    c.spawn().expect("spawn a pipe end")
}

#[test]
fn a_parallel_pipe_joins_programs_on_different_hosts() {
    let Some(net) = hosts_or_skip(3) else { return };
    let d = tempdir("pipe-hosts");
    // The producer on h1 (2 ranks), the consumer on h2 and h3: its ranks listen on
    // their hosts' addresses, which the producer's ranks reach over the bridge.
    let p = pipe_end_on(&net, "h1:2", "producer", "u8[300,200] block,* on 2x1", &d);
    let c = pipe_end_on(
        &net,
        "h2:1,h3:2",
        "consumer",
        "u8[300,200] *,cyclic(7) on 1x3",
        &d,
    );
    let (po, co): (Output, Output) = std::thread::scope(|s| {
        let tc = s.spawn(|| wait_bounded(c, Duration::from_secs(120)));
        let po = wait_bounded(p, Duration::from_secs(120));
        (po, tc.join().unwrap())
    });
    assert!(
        po.status.success() && co.status.success(),
        "producer {:?}:\n{}\nconsumer {:?}:\n{}",
        po.status,
        po.stderr,
        co.status,
        co.stderr
    );
    assert!(co.stderr.contains("verified"), "{}", co.stderr);
}
