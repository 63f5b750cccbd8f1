//! [`Hosts`]: "hosts" on one machine for multi-host tests: network namespaces joined by
//! veth pairs to a bridge, each with its own address and host name.
//!
//! As root, [`Hosts::create`] makes namespaces `spools-<pid>-<seq>-hN` (N = 1, 2, ...),
//! each with `lo` up and an `eth0` at `10.A.B.(N+1)/24` whose peer is enslaved to a bridge
//! `spb<pid>x<seq>` at `10.A.B.1/24` in the root namespace (A.B derived from the pid and a
//! per-process sequence, so that test binaries and tests running at once do not collide).
//! A program started on host `hN` ([`Hosts::command`], or [`Hosts::agent`] as the agent of
//! `spools run --hosts`) runs in that namespace and in a UTS namespace of its own whose
//! host name is `hN`: the runtime sees different hosts (its host identity starts with the
//! host name), although `/dev/shm` is shared.
//!
//! Dropping the value kills every process still in the namespaces and deletes the
//! namespaces, veths and bridge, however the test ends. Namespaces, veths and bridges
//! left by a test process that no longer exists (killed before its drop ran) are removed
//! by the next [`Hosts::create`].

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use std::path::Path;

use crate::fixtures::{pipe_end_placed, tempdir, TempDir};
use crate::wait::wait_bounded;

/// How long [`Hosts::pipe`] waits for each end.
const PIPE_WAIT: Duration = Duration::from_secs(120);

/// Most hosts one [`Hosts`] makes (addresses .2 to .9).
pub const MAX_NET_HOSTS: usize = 8;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// One host of a [`Hosts`].
#[derive(Debug, Clone)]
pub struct NetHost {
    /// Its host name (and name in `spools run --hosts`): `h1`, `h2`, ...
    pub name: String,
    /// Its network namespace.
    pub netns: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// The root-namespace end of its veth pair (`ip link set IT down` cuts the host off).
    pub veth: String,
}

/// Network namespaces playing hosts, removed on drop (see the module's documentation).
#[derive(Debug)]
pub struct Hosts {
    hosts: Vec<NetHost>,
    bridge: String,
    bridge_ip: Ipv4Addr,
    dir: TempDir,
}

/// Runs `ip ARGS`, returning its standard error on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The pids of the processes in namespace `ns`.
fn pids_in(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every process in namespace `ns` and waits (bounded) until none is left.
fn kill_all_in(ns: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = pids_in(ns);
        if pids.is_empty() || Instant::now() > until {
            return;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(i32::to_string))
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes namespaces and links named after a test process that no longer runs.
fn sweep_stale() {
    let alive = |pid: &str| std::path::Path::new(&format!("/proc/{pid}")).exists();
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let pid = name
                .strip_prefix("spools-")
                .and_then(|r| r.split('-').next());
            if let Some(pid) = pid.filter(|p| p.chars().all(|c| c.is_ascii_digit())) {
                if !alive(pid) {
                    kill_all_in(name);
                    let _ = ip(&["netns", "del", name]);
                }
            }
        }
    }
    if let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // "7: spb123x0: <...": the name, up to an '@' for veths.
            let name = line
                .split(": ")
                .nth(1)
                .and_then(|n| n.split('@').next())
                .unwrap_or("");
            let pid = name
                .strip_prefix("spb")
                .or_else(|| name.strip_prefix("spv"))
                .and_then(|r| r.split('x').next());
            if let Some(pid) =
                pid.filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            {
                if !alive(pid) {
                    let _ = ip(&["link", "del", name]);
                }
            }
        }
    }
}

impl Hosts {
    /// Creates `n` hosts (1 to [`MAX_NET_HOSTS`]).
    ///
    /// # Errors
    /// Why they cannot be made (not root, `ip netns` failing): the test should skip,
    /// printing it. Whatever was made before the failure is removed.
    pub fn create(n: usize) -> Result<Hosts, String> {
        if !(1..=MAX_NET_HOSTS).contains(&n) {
            return Err(format!("{n} hosts: 1 to {MAX_NET_HOSTS}"));
        }
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
            return Err("network namespaces need root".into());
        }
        sweep_stale();
        let pid = std::process::id();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let v = (pid.wrapping_mul(8).wrapping_add(seq)) % (64 * 256);
        let (a, b) = (160 + (v / 256) as u8, (v % 256) as u8);
        let dir = tempdir("netns");
        let prefix = format!("spools-{pid}-{seq}-");
        let mut hosts = Hosts {
            hosts: Vec::new(),
            bridge: format!("spb{pid}x{seq}"),
            bridge_ip: Ipv4Addr::new(10, a, b, 1),
            dir,
        };
        // From here on, the drop removes whatever was made.
        ip(&["link", "add", &hosts.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", hosts.bridge_ip),
            "dev",
            &hosts.bridge,
        ])?;
        ip(&["link", "set", &hosts.bridge, "up"])?;
        for i in 1..=n {
            let h = NetHost {
                name: format!("h{i}"),
                netns: format!("{prefix}h{i}"),
                ip: Ipv4Addr::new(10, a, b, 1 + i as u8),
                veth: format!("spv{pid}x{seq}h{i}"),
            };
            ip(&["netns", "add", &h.netns])?;
            hosts.hosts.push(h.clone());
            ip(&[
                "link", "add", &h.veth, "type", "veth", "peer", "name", "eth0", "netns", &h.netns,
            ])?;
            ip(&["link", "set", &h.veth, "master", &hosts.bridge])?;
            ip(&["link", "set", &h.veth, "up"])?;
            let in_ns = |args: &[&str]| {
                let mut all = vec!["-n", h.netns.as_str()];
                all.extend_from_slice(args);
                ip(&all)
            };
            in_ns(&["link", "set", "lo", "up"])?;
            in_ns(&["addr", "add", &format!("{}/24", h.ip), "dev", "eth0"])?;
            in_ns(&["link", "set", "eth0", "up"])?;
        }
        hosts.write_agent(&prefix)?;
        Ok(hosts)
    }

    /// [`Hosts::create`], or `None` after printing why the test skips (not root, no
    /// network namespaces).
    ///
    /// # Panics
    /// With `SPOOLS_REQUIRE_NETNS=1` (CI), when the namespaces cannot be made: there the
    /// multi-host tests must run, not skip.
    #[allow(clippy::panic)]
    pub fn create_or_skip(n: usize) -> Option<Hosts> {
        match Hosts::create(n) {
            Ok(h) => Some(h),
            Err(why) if std::env::var("SPOOLS_REQUIRE_NETNS").is_ok_and(|v| v == "1") => {
                panic!("network namespaces unavailable but SPOOLS_REQUIRE_NETNS=1: {why}")
            }
            Err(why) => {
                eprintln!("skipped: network namespaces unavailable: {why}; set SPOOLS_REQUIRE_NETNS=1 to make this a failure");
                None
            }
        }
    }

    /// The options of `spools run` that start the ranks on `list` (`h1:2,h2:2`) in these
    /// hosts: `--hosts LIST --agent AGENT --bootstrap-ip BRIDGE`.
    pub fn run_args(&self, list: &str) -> Vec<String> {
        vec![
            "--hosts".into(),
            list.into(),
            "--agent".into(),
            self.agent(),
            "--bootstrap-ip".into(),
            self.bridge_ip.to_string(),
        ]
    }

    /// Runs a parallel pipe between two programs (`spools bench pipe` of the `spools`
    /// binary `spools`, `records` records, meeting by name in `dir`): the producer's
    /// ranks on `producer.0` (a `--hosts` list) with layout `producer.1`, the consumer's,
    /// verifying, on `consumer.0` with `consumer.1`. Waits for both (bounded).
    ///
    /// # Errors
    /// Either end failed, or the consumer did not verify the records: both ends' errors.
    pub fn pipe(
        &self,
        spools: &Path,
        producer: (&str, &str),
        consumer: (&str, &str),
        records: u64,
        dir: &Path,
    ) -> Result<(), String> {
        let name = Some("pipe:across-hosts");
        let end = |(list, layout): (&str, &str), role: &str| {
            pipe_end_placed(
                spools,
                &self.run_args(list),
                role,
                layout,
                name,
                records,
                dir,
            )
        };
        let p = end(producer, "producer");
        let c = end(consumer, "consumer");
        let (po, co) = std::thread::scope(|s| {
            let tc = s.spawn(|| wait_bounded(c, PIPE_WAIT));
            let po = wait_bounded(p, PIPE_WAIT);
            (po, tc.join())
        });
        let co = co.map_err(|_| "the consumer's waiter panicked".to_string())?;
        if po.status.success() && co.status.success() && co.stderr.contains("verified") {
            return Ok(());
        }
        Err(format!(
            "producer {:?}:\n{}\nconsumer {:?}:\n{}",
            po.status, po.stderr, co.status, co.stderr
        ))
    }

    fn write_agent(&self, prefix: &str) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.agent_path();
        let script = format!(
            "#!/bin/sh\n\
             # Runs \"$@\" on host $1: in namespace {prefix}$1, with host name $1.\n\
             h=$1; shift\n\
             exec ip netns exec \"{prefix}$h\" unshare --uts sh -c 'hostname \"$0\" && exec \"$@\"' \"$h\" \"$@\"\n"
        );
        std::fs::write(&path, script).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    fn agent_path(&self) -> PathBuf {
        self.dir.join("agent")
    }

    /// The hosts.
    pub fn hosts(&self) -> &[NetHost] {
        &self.hosts
    }

    /// Host `name`, if there is one.
    pub fn host(&self, name: &str) -> Option<&NetHost> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The bridge's address in the root namespace (where `spools run` listens).
    pub fn bridge_ip(&self) -> Ipv4Addr {
        self.bridge_ip
    }

    /// The agent template for `spools run --hosts`: `AGENT {host} {cmd}`.
    pub fn agent(&self) -> String {
        format!("{} {{host}} {{cmd}}", self.agent_path().display())
    }

    /// A command that runs `program` on host `name` (its namespace and host name).
    pub fn command(&self, name: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(self.agent_path());
        c.arg(name).arg(program);
        c
    }

    /// The processes running on host `name` (in its namespace).
    pub fn processes(&self, name: &str) -> Vec<i32> {
        self.host(name)
            .map(|h| pids_in(&h.netns))
            .unwrap_or_default()
    }

    /// Drops `percent` % of the packets entering and of those leaving host `name`, at
    /// random (an nftables table `spools_loss` in its namespace: `numgen random mod 100 <
    /// N drop`); 0 removes the rule.
    ///
    /// # Errors
    /// No such host, or `nft` missing or failing.
    pub fn loss(&self, name: &str, percent: u8) -> Result<(), String> {
        use std::io::Write;
        let host = self.host(name).ok_or_else(|| format!("no host {name}"))?;
        let rules = if percent == 0 {
            "delete table inet spools_loss\n".to_string()
        } else {
            format!(
                "table inet spools_loss {{\n\
                 chain input {{ type filter hook input priority 0; numgen random mod 100 < {percent} drop; }}\n\
                 chain output {{ type filter hook output priority 0; numgen random mod 100 < {percent} drop; }}\n\
                 }}\n"
            )
        };
        let mut nft = Command::new("ip")
            .args(["netns", "exec", &host.netns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("ip netns exec ... nft: {e}"))?;
        if let Some(mut input) = nft.stdin.take() {
            input
                .write_all(rules.as_bytes())
                .map_err(|e| format!("nft: {e}"))?;
        }
        let out = nft.wait_with_output().map_err(|e| format!("nft: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "nft in {}: {}",
                host.netns,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Limits what host `name` sends to `mbit` Mbit/s (a `tbf` qdisc on its `eth0`).
    ///
    /// # Errors
    /// No such host, or `tc` failing.
    pub fn rate(&self, name: &str, mbit: u32) -> Result<(), String> {
        let host = self.host(name).ok_or_else(|| format!("no host {name}"))?;
        let rate = format!("{mbit}mbit");
        ip(&[
            "netns",
            "exec",
            &host.netns,
            "tc",
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            "256kb",
            "latency",
            "200ms",
        ])
    }

    /// Sets the link of host `name` up or down (its root-namespace veth end).
    ///
    /// # Errors
    /// No such host, or the `ip` command's error.
    pub fn link(&self, name: &str, up: bool) -> Result<(), String> {
        let host = self.host(name).ok_or_else(|| format!("no host {name}"))?;
        ip(&["link", "set", &host.veth, if up { "up" } else { "down" }])
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &self.hosts {
            kill_all_in(&h.netns);
            let _ = ip(&["link", "del", &h.veth]);
            let _ = ip(&["netns", "del", &h.netns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
