//! Ranks on other hosts: `spools run --hosts h1:2,h2:2 [--agent TEMPLATE]`.
//!
//! Ranks are placed in blocks, in the order of the list (`h1:2,h2:2`: ranks 0 and 1 on
//! `h1`, 2 and 3 on `h2`). Each rank is started through the *agent*, a command template
//! split on whitespace (no quoting) in which
//!
//! - `{host}` is replaced by the host's name,
//! - `{cmd}` by the rank's command as separate words: `env SPOOLS_...=... PROGRAM ARGS...`
//!   (for agents that exec their arguments: `ip netns exec {host} {cmd}`, `srun -w {host}
//!   {cmd}`, `docker exec {host} {cmd}`),
//! - `{shcmd}` by the same command as one word quoted for a POSIX shell, preceded by a `cd`
//!   to the launcher's directory (for agents that hand one string to a remote shell: ssh).
//!
//! Without `{cmd}` or `{shcmd}` the words of `{cmd}` are appended. The default agent is
//! [`DEFAULT_AGENT`]. The job's variables travel on the command line (ssh passes no
//! environment), with every `SPOOLS_*` variable of the launcher's own environment, but for
//! the job secret, which no command line shows (any user of a host can read those): an
//! agent of `{cmd}` gets it in its environment (exec-style agents pass it on), and one of
//! `{shcmd}` on its standard input, which the shell line reads before anything else
//! (`read -r SPOOLS_SECRET`); a remote rank's standard input is then empty.
//!
//! The launcher's rendezvous listens on every interface (`0.0.0.0`), and each host is told
//! the address of the launcher's interface that routes to it (or the `--bootstrap-ip`
//! given): see [`bootstrap_addr`].

use std::ffi::{OsStr, OsString};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::Command;

pub use crate::plan::{
    parse_agent, parse_hosts, HostPlan, HostSlot, HostsError, DEFAULT_AGENT, MAX_HOSTS,
    MAX_HOST_NAME,
};
use crate::spec::LaunchSpec;

/// `s` quoted for a POSIX shell (single quotes; a single quote as `'\''`).
pub fn shell_quote(s: &OsStr) -> OsString {
    let b = s.as_bytes();
    if !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_-./=:,@%+".contains(c))
    {
        return s.to_owned();
    }
    let mut out = Vec::with_capacity(b.len() + 2);
    out.push(b'\'');
    for &c in b {
        if c == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(c);
        }
    }
    out.push(b'\'');
    OsString::from_vec(out)
}

/// The address ranks on `host` reach the launcher's rendezvous at (port `port`): the
/// `--bootstrap-ip` given, else the local address of the route to `host` (when its name
/// resolves), else that of the default route, else loopback.
pub fn bootstrap_addr(plan: &HostPlan, host: &str, port: u16) -> SocketAddr {
    let route_from = |to: SocketAddr| {
        let any = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        UdpSocket::bind(any)
            .and_then(|u| {
                u.connect(to)?;
                u.local_addr()
            })
            .ok()
            .map(|a| a.ip())
            .filter(|ip| !ip.is_unspecified())
    };
    let ip = plan
        .bootstrap_ip
        .or_else(|| {
            (host, 9)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .and_then(route_from)
        })
        .or_else(|| route_from(SocketAddr::from(([192, 0, 2, 1], 9))))
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    SocketAddr::new(ip, port)
}

/// Where the launcher's rendezvous listens: loopback for a job on this host, every
/// interface for a multi-host one.
pub(crate) fn rendezvous_bind(spec: &LaunchSpec) -> SocketAddr {
    let ip = if spec.hosts.is_some() {
        Ipv4Addr::UNSPECIFIED
    } else {
        Ipv4Addr::LOCALHOST
    };
    SocketAddr::from((ip, 0))
}

/// The rendezvous address each rank is given (`SPOOLS_BOOTSTRAP`), by rank: the server's
/// own for a job on this host, else [`bootstrap_addr`] for the rank's host, looked up
/// once per host.
pub(crate) fn bootstrap_addrs(spec: &LaunchSpec, server: SocketAddr) -> Vec<SocketAddr> {
    match &spec.hosts {
        None => vec![server; spec.ranks as usize],
        Some(plan) => plan
            .hosts
            .iter()
            .flat_map(|h| {
                let addr = bootstrap_addr(plan, &h.name, server.port());
                std::iter::repeat_n(addr, h.ranks as usize)
            })
            .collect(),
    }
}

/// For messages about `rank`: `" on host NAME"` in a multi-host job, else nothing.
pub(crate) fn place(spec: &LaunchSpec, rank: u32) -> String {
    spec.hosts
        .as_ref()
        .and_then(|p| p.host_of(rank))
        .map(|h| format!(" on host {h}"))
        .unwrap_or_default()
}

/// Why a running rank's connection to the launcher ended without finalising: it closed
/// it, or, on another host, the network may have failed (keepalive, `net_timeout_s`).
pub(crate) fn lost_cause(spec: &LaunchSpec, rank: u32) -> String {
    if place(spec, rank).is_empty() {
        "closed its connection to the job without finalising".into()
    } else {
        "lost its connection to the launcher without finalising (the host stopped answering for net_timeout_s, or the rank closed it)".into()
    }
}

/// The variable that carries the job secret, kept off command lines.
const SECRET_VAR: &str = "SPOOLS_SECRET";

/// How a rank is started: the command, and what to write to its standard input first
/// (the job secret, for a `{shcmd}` agent; `None`: its input is the usual one).
pub(crate) struct RankCommand {
    /// The program, or the agent that starts it on its host.
    pub(crate) cmd: Command,
    /// Bytes for the agent's standard input, which is then a pipe closed after them.
    pub(crate) stdin: Option<Vec<u8>>,
}

/// The command that starts `rank`: the program itself with `vars` in its environment, or,
/// with hosts, the agent for its host with the variables on its command line (the secret
/// in the agent's environment or on its standard input).
pub(crate) fn rank_command(spec: &LaunchSpec, rank: u32, vars: &[(&str, String)]) -> RankCommand {
    let plan = spec.hosts.as_ref();
    let host = plan.and_then(|p| p.host_of(rank));
    command_on(
        plan.zip(host),
        Program {
            program: &spec.program,
            args: &spec.args,
            wdir: None,
        },
        vars,
    )
}

/// What a process runs: its program, arguments and working directory (`None`: the
/// launcher's).
pub(crate) struct Program<'a> {
    pub(crate) program: &'a OsStr,
    pub(crate) args: &'a [OsString],
    pub(crate) wdir: Option<&'a std::path::Path>,
}

/// The command that starts `what` with `vars`: on this host (`on` is `None`), or through
/// the plan's agent on the host named (see [`rank_command`]).
pub(crate) fn command_on(
    on: Option<(&HostPlan, &str)>,
    what: Program<'_>,
    vars: &[(&str, String)],
) -> RankCommand {
    let Some((plan, host)) = on else {
        let mut cmd = Command::new(what.program);
        cmd.args(what.args);
        cmd.envs(vars.iter().map(|(k, v)| (k, v)));
        if let Some(w) = what.wdir {
            cmd.current_dir(w);
        }
        return RankCommand { cmd, stdin: None };
    };
    let secret = vars.iter().find(|(k, _)| *k == SECRET_VAR).map(|(_, v)| v);
    // The job's variables, then the launcher's other SPOOLS_* settings (configuration).
    let mut words: Vec<OsString> = vec!["env".into()];
    words.extend(
        vars.iter()
            .filter(|(k, _)| *k != SECRET_VAR)
            .map(|(k, v)| OsString::from(format!("{k}={v}"))),
    );
    for (k, v) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("SPOOLS_")
            && name != SECRET_VAR
            && !vars.iter().any(|(n, _)| *n == name)
        {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(&v);
            words.push(kv);
        }
    }
    words.push(what.program.to_owned());
    words.extend(what.args.iter().cloned());
    let shell_line = || {
        let mut line = OsString::new();
        if secret.is_some() {
            line.push("read -r SPOOLS_SECRET && export SPOOLS_SECRET && ");
        }
        if let Some(dir) = what
            .wdir
            .map(std::path::Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
        {
            line.push("cd ");
            line.push(shell_quote(dir.as_os_str()));
            line.push(" && ");
        }
        line.push("exec");
        for w in &words {
            line.push(" ");
            line.push(shell_quote(w));
        }
        line
    };
    let mut argv: Vec<OsString> = Vec::new();
    let mut placed = false;
    let mut through_shell = false;
    for w in &plan.agent {
        match w.as_str() {
            "{cmd}" => {
                argv.extend(words.iter().cloned());
                placed = true;
            }
            "{shcmd}" => {
                argv.push(shell_line());
                placed = true;
                through_shell = true;
            }
            _ => argv.push(w.replace("{host}", host).into()),
        }
    }
    if !placed {
        argv.extend(words.iter().cloned());
    }
    let mut argv = argv.into_iter();
    let mut cmd = Command::new(argv.next().unwrap_or_default());
    cmd.args(argv);
    // An agent that execs its arguments passes its own directory on.
    if let (Some(w), false) = (what.wdir, through_shell) {
        cmd.current_dir(w);
    }
    let stdin = match secret {
        Some(s) if through_shell => Some(format!("{s}\n").into_bytes()),
        Some(s) => {
            cmd.env(SECRET_VAR, s);
            None
        }
        None => None,
    };
    RankCommand { cmd, stdin }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_parse_and_place_ranks_in_blocks() {
        let p = HostPlan::parse("h1:2, node-b.example:3", None, None).unwrap();
        assert_eq!(p.ranks(), 5);
        let placed: Vec<_> = (0..6).map(|r| p.host_of(r)).collect();
        assert_eq!(
            placed,
            [
                Some("h1"),
                Some("h1"),
                Some("node-b.example"),
                Some("node-b.example"),
                Some("node-b.example"),
                None
            ]
        );
        assert_eq!(p.check(5), Ok(()));
        assert_eq!(
            p.check(4),
            Err(HostsError::Count {
                given: 4,
                listed: 5
            })
        );
        assert_eq!(p.agent_line(), DEFAULT_AGENT);
    }

    #[test]
    fn malformed_host_lists_are_refused() {
        for bad in [
            "h1",
            "h1:",
            ":2",
            "h1:0",
            "h1:-1",
            "h1:x",
            "h 1:2",
            "-oProxy:1",
            "h1:2,,h2:1",
            "h1:4097",
            "h;rm:1",
            "h1:2:3",
        ] {
            assert!(
                matches!(parse_hosts(bad), Err(HostsError::BadEntry { .. })),
                "{bad}: {:?}",
                parse_hosts(bad)
            );
        }
        assert_eq!(parse_hosts(" "), Err(HostsError::Empty));
        assert_eq!(
            parse_hosts("a:1,b:1,a:2"),
            Err(HostsError::Duplicate { host: "a".into() })
        );
        let many = vec!["h:1"; MAX_HOSTS + 1].join(",");
        assert!(matches!(
            parse_hosts(&many),
            Err(HostsError::TooMany { .. })
        ));
    }

    #[test]
    fn agent_templates_need_a_host_and_one_command_at_most() {
        assert!(matches!(parse_agent("ssh"), Err(HostsError::NoHost { .. })));
        assert!(matches!(
            parse_agent("ssh {host} {cmd} {shcmd}"),
            Err(HostsError::TwoCommands { .. })
        ));
        assert_eq!(
            parse_agent(" ip  netns exec {host} ").unwrap(),
            ["ip", "netns", "exec", "{host}"]
        );
    }

    #[test]
    fn shell_quoting_survives_a_shell() {
        let tricky = [
            "plain",
            "",
            "a b",
            "it's",
            "$HOME",
            "x\"y",
            "tab\there",
            "*",
        ];
        let line = tricky
            .iter()
            .map(|w| shell_quote(OsStr::new(w)).to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {line}"))
            .output()
            .unwrap();
        let got = String::from_utf8(out.stdout).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), tricky);
    }

    fn spec(agent: &str) -> LaunchSpec {
        LaunchSpec {
            ranks: 3,
            program: "/bin/prog".into(),
            args: vec!["a b".into()],
            tag_output: false,
            timeout: None,
            grace: crate::GRACE,
            liveness: None,
            secret: None,
            hosts: Some(HostPlan::parse("h1:1,h2:2", Some(agent), None).unwrap()),
            keepalive: None,
            bind: crate::cpus::Bind::None,
        }
    }

    #[test]
    fn binding_is_refused_with_a_host_list() {
        let mut s = spec("ssh {host} {shcmd}");
        assert!(s.check().is_ok());
        s.bind = crate::cpus::Bind::Core;
        assert!(matches!(s.check(), Err(crate::LaunchError::BindWithHosts)));
    }

    fn argv(c: &Command) -> Vec<String> {
        std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_rank_command_goes_through_the_agent_with_its_variables() {
        let secret = "00112233445566778899aabbccddeeff";
        let vars = [
            ("SPOOLS_RANK", "2".to_string()),
            ("SPOOLS_SECRET", secret.to_string()),
        ];
        let env_of = |c: &Command| {
            c.get_envs()
                .find(|(k, _)| *k == "SPOOLS_SECRET")
                .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        };
        let r = rank_command(&spec("ip netns exec {host}"), 2, &vars);
        let a = argv(&r.cmd);
        assert_eq!(a[..5], ["ip", "netns", "exec", "h2", "env"]);
        assert_eq!(a[5], "SPOOLS_RANK=2");
        assert_eq!(a[a.len() - 2..], ["/bin/prog", "a b"]);
        // The secret is in the agent's environment, on no command line.
        assert!(a.iter().all(|w| !w.contains(secret)), "{a:?}");
        assert_eq!(env_of(&r.cmd).as_deref(), Some(secret));
        assert!(r.stdin.is_none());
        let r = rank_command(&spec("ssh -o BatchMode=yes {host} {shcmd}"), 0, &vars);
        let a = argv(&r.cmd);
        assert_eq!(a.len(), 5, "{a:?}");
        assert_eq!(a[3], "h1");
        assert!(
            a[4].starts_with("read -r SPOOLS_SECRET && export SPOOLS_SECRET && cd "),
            "{}",
            a[4]
        );
        assert!(a[4].contains(" && exec env SPOOLS_RANK=2 "), "{}", a[4]);
        assert!(a[4].ends_with(" /bin/prog 'a b'"), "{}", a[4]);
        // Through a shell, the secret goes on the agent's standard input.
        assert!(a.iter().all(|w| !w.contains(secret)), "{a:?}");
        assert_eq!(r.stdin, Some(format!("{secret}\n").into_bytes()));
        assert_eq!(env_of(&r.cmd), None);
        // Without hosts: the program itself, the variables in its environment.
        let mut local = spec("x {host}");
        local.hosts = None;
        let r = rank_command(&local, 0, &vars);
        assert_eq!(argv(&r.cmd), ["/bin/prog", "a b"]);
        assert_eq!(env_of(&r.cmd).as_deref(), Some(secret));
    }

    #[test]
    fn every_rank_is_given_its_hosts_rendezvous_address() {
        let server: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        let mut s = spec("ip netns exec {host}");
        let plan = s.hosts.as_mut().unwrap();
        plan.bootstrap_ip = Some(IpAddr::V4(Ipv4Addr::new(10, 9, 8, 7)));
        let want: SocketAddr = "10.9.8.7:4000".parse().unwrap();
        assert_eq!(bootstrap_addrs(&s, server), vec![want; 3]);
        // On this host alone: the server's own address, for every rank.
        s.hosts = None;
        assert_eq!(bootstrap_addrs(&s, server), vec![server; 3]);
    }

    #[test]
    fn the_bootstrap_address_is_the_one_given_or_a_routed_one() {
        let mut p = HostPlan::parse("localhost:1", None, None).unwrap();
        assert!(bootstrap_addr(&p, "localhost", 7).ip().is_loopback());
        assert_eq!(bootstrap_addr(&p, "localhost", 7).port(), 7);
        p.bootstrap_ip = Some(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(
            bootstrap_addr(&p, "localhost", 7),
            "10.1.2.3:7".parse::<SocketAddr>().unwrap()
        );
    }
}
