//! Multi-host jobs on one machine: `spools run --hosts` starts ranks in network
//! namespaces that play hosts (`spools_testkit::Hosts`: a bridge, a veth and an address
//! per host, a host name of its own through a UTS namespace). Shared memory within a
//! host, TCP between hosts, host-aware collectives, parallel pipes between programs on
//! different hosts, and the errors of a host that cannot be reached or a malformed list.
//! The job and file tests run again with libfabric between the hosts
//! (`SPOOLS_OFI_PROVIDER=tcp;ofi_rxm`) where libfabric is installed (unless `SPOOLS_TEST_OFI=0`).
//!
//! The namespaces need root (CI runs as root); elsewhere these tests print why they skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{assert_ok, checked, e, rank_main, spools, spools_command, tempdir, Job};
use spools::{FileError, Format, Layout, Op, ReadOptions, Route, Striping, World, WriteOptions};
use spools_testkit::{networks_between_hosts as networks, Hosts};

/// With `SPOOLS_OFI_PROVIDER` set, the ranks must reach other hosts through libfabric.
fn check_network(w: &World) -> Result<(), String> {
    match (std::env::var("SPOOLS_OFI_PROVIDER"), w.ofi()) {
        (Ok(p), None) => Err(format!(
            "SPOOLS_OFI_PROVIDER={p} but no libfabric transport"
        )),
        (Ok(_), Some(t)) => {
            println!(
                "rank {} reaches other hosts through libfabric {:?}",
                w.rank(),
                t.provider().0
            );
            Ok(())
        }
        (Err(_), _) => Ok(()),
    }
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
    // Shared memory within a host, the network transport between hosts.
    check_network(w)?;
    for r in 0..4 {
        let want = if r == me {
            Route::Local
        } else if r / 2 == me / 2 {
            Route::Shm
        } else {
            Route::Net
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
    let Some(net) = Hosts::create_or_skip(2) else {
        return;
    };
    for ofi in networks() {
        let mut job = Job::new(4, "one_job_runs_across_namespaces");
        if let Some(p) = ofi {
            job = job.env("SPOOLS_OFI_PROVIDER", p);
        }
        let o = job
            .via_cli(spools())
            .cli_args(&net.run_args("h1:2,h2:2"))
            .run();
        assert_ok(&o);
        for r in 0..4 {
            assert!(
                o.stdout.contains(&format!("across hosts ok rank {r}\n")),
                "{ofi:?} rank {r}:\n{}\n{}",
                o.stdout,
                o.stderr
            );
        }
        assert_eq!(
            o.stdout.matches("through libfabric").count(),
            if ofi.is_some() { 4 } else { 0 },
            "{}",
            o.stdout
        );
    }
}

/// Two ranks that check they are a job of 2, and that rank 1 got the argument after the
/// test's own (the last one).
fn shell_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let mut sum = [0u32];
    e(w.allreduce(&[w.rank() + 1], &mut sum, &Op::Sum))?;
    let arg = std::env::args().next_back().unwrap_or_default();
    if sum[0] != 3 || arg != "it's a \"test\" $HOME" {
        return Err(format!("sum {}, argument {arg:?}", sum[0]));
    }
    println!("shell agent ok rank {}", w.rank());
    e(w.finalize())
}

/// The ssh path, with a local shell for ssh: `{shcmd}` is one string for a shell, run in
/// an empty environment (`env -i`), so the job's variables and the arguments reach the
/// ranks only through the quoted command line.
#[test]
fn a_shell_agent_gets_the_job_through_its_command_line_alone() {
    rank_main(|_| shell_role());
    let mut c = common::grouped(spools());
    common::without_ambient_spools_env(&mut c)
        .env(common::ROLE_VAR, "shell")
        .args([
            "run",
            "--hosts",
            "a:1,b:1",
            "--agent",
            "env -i HOST={host} sh -c {shcmd}",
            // Hosts "a" and "b" are this one: no name lookup.
            "--bootstrap-ip",
            "127.0.0.1",
            "--timeout",
            "60",
            "--",
        ])
        .args(common::self_args(
            "a_shell_agent_gets_the_job_through_its_command_line_alone",
        ))
        .arg("it's a \"test\" $HOME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let o = common::Spawned::new(c.spawn().unwrap()).wait(Duration::from_secs(90));
    assert_ok(&o);
    for r in 0..2 {
        assert!(
            o.stdout.contains(&format!("shell agent ok rank {r}")),
            "{}\n{}",
            o.stdout,
            o.stderr
        );
    }
}

#[test]
fn a_host_that_cannot_be_reached_is_named() {
    rank_main(|_| job_role());
    let Some(net) = Hosts::create_or_skip(1) else {
        return;
    };
    // h7 has no namespace: its agent fails, and rank 0 on h1 waits for it in vain.
    let o = Job::new(2, "a_host_that_cannot_be_reached_is_named")
        .via_cli(spools())
        .cli_args(&net.run_args("h1:1,h7:1"))
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

#[test]
fn a_parallel_pipe_joins_programs_on_different_hosts() {
    let Some(net) = Hosts::create_or_skip(3) else {
        return;
    };
    let d = tempdir("pipe-hosts");
    // The producer on h1 (2 ranks), the consumer on h2 and h3: its ranks listen on
    // their hosts' addresses, which the producer's ranks reach over the bridge.
    if let Err(e) = net.pipe(
        &spools(),
        ("h1:2", "u8[300,200] block,* on 2x1"),
        ("h2:1,h3:2", "u8[300,200] *,cyclic(7) on 1x3"),
        5,
        &d,
    ) {
        panic!("{e}");
    }
}

/// The node-local file's dataset and its value at element `i`.
const NL_DATA: &str = "u32[64,50] block,* on 4x1";
fn nl_value(i: u64) -> u32 {
    (i * 3 + 1) as u32
}

/// This rank's view of the node-local file: a directory per host (its local disk).
fn nl_path() -> std::path::PathBuf {
    let base = std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    base.join(spools_boot::host::host_name()).join("f")
}

/// Reads the node-local file as `layout` and checks every element.
fn nl_read(w: &World, layout: &str) -> Result<(), FileError> {
    let l: Layout = layout.parse().unwrap();
    let me = u64::from(w.rank());
    let mut back = vec![0u32; l.local_bytes(me).unwrap() as usize / 4];
    w.read_file(nl_path(), &mut back, &l, &ReadOptions::default())?;
    for x in l.extents(me).unwrap() {
        for k in 0..x.len / 4 {
            let got = back[(x.local / 4 + k) as usize];
            assert_eq!(
                got,
                nl_value(x.global / 4 + k),
                "element {}",
                x.global / 4 + k
            );
        }
    }
    Ok(())
}

/// Writes the node-local file from 4 ranks (h1:2,h2:2) and reads it back with another
/// distribution and the same placement.
fn nl_write(w: &World) -> Result<(), String> {
    let me = u64::from(w.rank());
    e(std::fs::create_dir_all(nl_path().parent().unwrap()))?;
    let l: Layout = e(NL_DATA.parse())?;
    let part: Vec<u32> = e(l.extents(me))?
        .flat_map(|x| (0..x.len / 4).map(move |k| nl_value(x.global / 4 + k)))
        .collect();
    let opts = WriteOptions {
        format: Format::Striped(Striping {
            layout: e("raid5(unit=256B,count=4)".parse())?,
            dirs: vec![std::path::PathBuf::from("units")],
            node_local: true,
        }),
        ..Default::default()
    };
    e(w.write_file(nl_path(), &part, &l, &opts))?;
    e(nl_read(w, "u32[64,50] *,cyclic(3) on 1x4"))
}

/// Reads the file with ranks placed otherwise (h1:1,h2:3): refused, naming the host.
fn nl_misplaced(w: &World) -> Result<(), String> {
    match nl_read(w, NL_DATA) {
        Err(err @ FileError::UnitElsewhere { .. }) => {
            println!("refused: {err}");
            Ok(())
        }
        other => Err(format!("a misplaced read gave {other:?}")),
    }
}

#[test]
fn node_local_units_stay_on_their_hosts() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| {
            check_network(w)?;
            if role == "write" {
                nl_write(w)
            } else {
                nl_misplaced(w)
            }
        });
        e(w.finalize())
    });
    let Some(net) = Hosts::create_or_skip(2) else {
        return;
    };
    for ofi in networks() {
        node_local_units_over(&net, ofi);
    }
}

/// [`node_local_units_stay_on_their_hosts`] with `ofi` as `SPOOLS_OFI_PROVIDER`.
fn node_local_units_over(net: &Hosts, ofi: Option<&str>) {
    let d = tempdir("nl-hosts");
    let job = |role: &str, list: &str| {
        let mut job = Job::new(4, "node_local_units_stay_on_their_hosts")
            .role(role)
            .env("SPOOLS_TEST_DIR", d.path());
        if let Some(p) = ofi {
            job = job.env("SPOOLS_OFI_PROVIDER", p);
        }
        job.via_cli(spools()).cli_args(&net.run_args(list)).run()
    };
    assert_ok(&job("write", "h1:2,h2:2"));
    // Each host's disk holds the units of its ranks (u % 4: 0, 1 on h1; 2, 3 on h2).
    for (host, units) in [
        ("h1", ["f.u0.s1", "f.u1.s1"]),
        ("h2", ["f.u2.s1", "f.u3.s1"]),
    ] {
        let mut found: Vec<String> = std::fs::read_dir(d.join(host).join("units"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        found.sort();
        assert_eq!(found, units, "{host}");
    }
    // The manifest (rank 0's, on h1) says which host holds each unit.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("h1").join("f")).unwrap()).unwrap();
    let hosts: Vec<&str> = m["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["host"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(hosts, ["h1", "h1", "h2", "h2"]);
    // Rank 1 now runs on h2, but unit 1 is on h1.
    let o = job("misplaced", "h1:1,h2:3");
    assert_ok(&o);
    assert_eq!(
        o.stdout
            .matches("unit 1 is stored on host h1 (node-local), but rank 1, which must serve it, runs on host h2")
            .count(),
        4,
        "{}\n{}",
        o.stdout,
        o.stderr
    );
}

/// Byte `g` of ADU `a` of the stream across hosts.
fn st_byte(a: u64, g: u64) -> u8 {
    (g.wrapping_mul(7) ^ (g >> 9) ^ a.wrapping_mul(31)) as u8
}

/// The stream across hosts: ranks 0, 1 on h1 and 2, 3 on h2 send 3 ADUs of
/// `u8[40000] cyclic(100) on 4` over 4 links to the receiver at `SPOOLS_TEST_DEST`.
fn stream_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let dest = std::env::var("SPOOLS_TEST_DEST")
        .map_err(|e| e.to_string())?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let l: Layout = "u8[40000] cyclic(100) on 4".parse().unwrap();
    let me = u64::from(w.rank());
    let mut c = e(spools::StreamConnection::open(w.communicator(), dest, 4))?;
    // The links go round the hosts: each host sends from two of its own.
    if c.link_owners() != [0, 2, 1, 3] {
        return Err(format!("links owned by {:?}", c.link_owners()));
    }
    let s = e(c.open_stream(spools::StreamOptions {
        tu: 4000,
        ..Default::default()
    }))?;
    for a in 0..3 {
        let mine: Vec<u8> = (0..40000u64)
            .filter(|g| (g / 100) % 4 == me)
            .map(|g| st_byte(a, g))
            .collect();
        e(c.send_adu(s, &mine, &l))?;
    }
    e(c.close())?;
    println!("streamed across hosts rank {me}");
    e(w.finalize())
}

#[test]
fn a_stream_leaves_every_host_from_links_of_its_own() {
    rank_main(|_| stream_role());
    let Some(net) = Hosts::create_or_skip(2) else {
        return;
    };
    let r = spools_stream::Receiver::bind(
        std::net::SocketAddr::from((net.bridge_ip(), 0)),
        spools_stream::Limits::default(),
    )
    .unwrap();
    let addr = r.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(1, |d| {
            got.push(d.event);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    let o = Job::new(4, "a_stream_leaves_every_host_from_links_of_its_own")
        .via_cli(spools())
        .cli_args(&net.run_args("h1:2,h2:2"))
        .env("SPOOLS_TEST_DEST", addr.to_string())
        .run();
    assert_ok(&o);
    let (summary, got) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(
        summary.broken.is_empty() && summary.refused.is_empty(),
        "{summary:?}"
    );
    let mut want: Vec<spools_stream::Event> = (0..3)
        .map(|a| spools_stream::Event::Adu {
            stream: 1,
            adu: a,
            data: (0..40000).map(|g| st_byte(a, g)).collect(),
        })
        .collect();
    want.push(spools_stream::Event::Ended {
        stream: 1,
        adus: 3,
        complete: true,
    });
    assert_eq!(got, want);
}
