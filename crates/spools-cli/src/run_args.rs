//! The arguments of `spools run` and their checks, without side effects: the CLI parses
//! with them, and the `launcher` fuzz target feeds them arbitrary command lines.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;
use spools_launch::hosts::{HostPlan, HostsError};
use spools_launch::LaunchSpec;
use thiserror::Error;

/// Arguments of `spools run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Number of ranks (on this host; with --hosts, optional: the sum of the list).
    #[arg(
        short = 'n',
        long = "ranks",
        value_name = "N",
        required_unless_present = "hosts"
    )]
    pub ranks: Option<u32>,
    /// Prefix every output line with the rank that wrote it, as `[rank] `.
    #[arg(long)]
    pub tag_output: bool,
    /// Stop the whole job after this many seconds (exit status 124).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Seconds the other ranks get to report a failing rank before they are killed.
    #[arg(long, value_name = "SECS", default_value_t = 0.5)]
    pub grace: f64,
    /// The job secret in FILE (as `spools secret` prints it) instead of a fresh one, so
    /// that the job can prove it to a stream receiver started with the same secret
    /// (`spools recv --secret FILE`).
    #[arg(long, value_name = "FILE")]
    pub secret: Option<std::path::PathBuf>,
    /// Start the ranks on these hosts, in blocks: HOST:RANKS[,HOST:RANKS...] (e.g.
    /// h1:2,h2:2), each through the agent.
    #[arg(long, value_name = "LIST")]
    pub hosts: Option<String>,
    /// How a rank is started on a host (with --hosts): a template split on whitespace,
    /// {host} the host, {cmd} the rank's command as words, {shcmd} as one shell string
    /// (default `ssh -o BatchMode=yes {host} {shcmd}`).
    #[arg(long, value_name = "TEMPLATE", requires = "hosts")]
    pub agent: Option<String>,
    /// The address the hosts reach this launcher at (with --hosts; default: per host, the
    /// address of the interface routing to it; also SPOOLS_BOOTSTRAP_IP).
    #[arg(long, value_name = "IP", requires = "hosts")]
    pub bootstrap_ip: Option<std::net::IpAddr>,
    /// Bind each rank to CPUs of this host: `core`, a core of its own (all its hardware
    /// threads; one hardware thread each once the ranks outnumber the cores), placed in
    /// the order socket, L3 group, core as /sys gives them, so that consecutive ranks
    /// share a cache; more ranks than CPUs are not bound (said on stderr). `none` (the
    /// default) leaves them to the scheduler. Not with --hosts: bind through the agent.
    #[arg(
        long,
        value_name = "HOW",
        value_enum,
        default_value_t = BindArg::None,
        conflicts_with = "hosts"
    )]
    pub bind: BindArg,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub command: Vec<OsString>,
}

/// `spools run --bind`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindArg {
    /// Not bound.
    None,
    /// A core each.
    Core,
}

/// Longest `--timeout` or `--grace` taken: a year.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// Why `spools run`'s arguments do not make a job.
#[derive(Debug, Error, PartialEq)]
pub enum RunArgsError {
    /// No program to run.
    #[error("no program given")]
    NoProgram,
    /// `--timeout` is not a positive number of seconds up to a year.
    #[error("--timeout {0}: expected a positive number of seconds, at most {MAX_SECONDS}")]
    Timeout(f64),
    /// `--grace` is not a number of seconds from 0 to a year.
    #[error("--grace {0}: expected a number of seconds from 0 to {MAX_SECONDS}")]
    Grace(f64),
    /// `--hosts` or `--agent` is malformed, or disagrees with `-n`.
    #[error(transparent)]
    Hosts(#[from] HostsError),
    /// Neither `-n` nor `--hosts`.
    #[error("no rank count: give -n N or --hosts")]
    NoRanks,
}

/// A number of seconds as a duration, if it is one (finite, not negative, at most a year).
fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && (0.0..=MAX_SECONDS).contains(&s)).then(|| Duration::from_secs_f64(s))
}

impl RunArgs {
    /// The job these arguments describe (`liveness` comes from the configuration).
    ///
    /// # Errors
    /// [`RunArgsError`] for a missing program or a duration out of range.
    pub fn to_spec(&self, liveness: Option<Duration>) -> Result<LaunchSpec, RunArgsError> {
        let (program, rest) = self.command.split_first().ok_or(RunArgsError::NoProgram)?;
        let timeout = match self.timeout {
            Some(t) => Some(
                seconds(t)
                    .filter(|d| !d.is_zero())
                    .ok_or(RunArgsError::Timeout(t))?,
            ),
            None => None,
        };
        let grace = seconds(self.grace).ok_or(RunArgsError::Grace(self.grace))?;
        let hosts = match &self.hosts {
            Some(list) => Some(HostPlan::parse(
                list,
                self.agent.as_deref(),
                self.bootstrap_ip,
            )?),
            None => None,
        };
        let ranks = match (self.ranks, &hosts) {
            (Some(n), Some(plan)) => {
                plan.check(n)?;
                n
            }
            (Some(n), None) => n,
            (None, Some(plan)) => u32::try_from(plan.ranks()).unwrap_or(u32::MAX),
            (None, None) => return Err(RunArgsError::NoRanks),
        };
        Ok(LaunchSpec {
            ranks,
            program: program.clone(),
            args: rest.to_vec(),
            tag_output: self.tag_output,
            timeout,
            grace,
            liveness,
            // Read by the caller (`--secret FILE`): this stays free of side effects.
            secret: None,
            hosts,
            // Set by the caller from its configuration (`net_timeout_s`).
            keepalive: None,
            bind: match self.bind {
                BindArg::None => spools_launch::cpus::Bind::None,
                BindArg::Core => spools_launch::cpus::Bind::Core,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn spec(args: &[&str]) -> Result<LaunchSpec, RunArgsError> {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .map_err(|_| RunArgsError::NoProgram)?;
        cli.run.to_spec(None)
    }

    #[test]
    fn durations_out_of_range_are_errors_not_panics() {
        for t in ["1e20", "-1", "NaN", "inf", "0"] {
            let r = spec(&["-n", "2", "--timeout", t, "--", "true"]);
            assert!(
                matches!(r, Err(RunArgsError::Timeout(_))),
                "--timeout {t}: {r:?}"
            );
        }
        for g in ["1e20", "-0.1", "NaN"] {
            let r = spec(&["-n", "2", "--grace", g, "--", "true"]);
            assert!(
                matches!(r, Err(RunArgsError::Grace(_))),
                "--grace {g}: {r:?}"
            );
        }
        let s = spec(&[
            "-n",
            "2",
            "--timeout",
            "1.5",
            "--grace",
            "0",
            "--",
            "true",
            "x",
        ])
        .unwrap();
        assert_eq!(s.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(s.grace, Duration::ZERO);
        assert_eq!(s.args, vec![OsString::from("x")]);
    }

    #[test]
    fn rank_counts_are_checked_before_anything_starts() {
        for (n, ok) in [("0", false), ("1", true), ("4096", true), ("4097", false)] {
            let s = spec(&["-n", n, "--", "true"]).unwrap();
            assert_eq!(s.check().is_ok(), ok, "-n {n}");
        }
    }

    #[test]
    fn host_lists_make_the_rank_count_or_must_agree_with_it() {
        let s = spec(&["--hosts", "h1:2,h2:3", "--", "true"]).unwrap();
        assert_eq!(s.ranks, 5);
        let plan = s.hosts.unwrap();
        assert_eq!(plan.host_of(4), Some("h2"));
        assert_eq!(plan.agent_line(), spools_launch::hosts::DEFAULT_AGENT);
        let s = spec(&[
            "-n",
            "2",
            "--hosts",
            "a:2",
            "--agent",
            "ip netns exec {host}",
            "--bootstrap-ip",
            "10.0.0.1",
            "--",
            "true",
        ])
        .unwrap();
        let plan = s.hosts.unwrap();
        assert_eq!(plan.agent, ["ip", "netns", "exec", "{host}"]);
        assert_eq!(plan.bootstrap_ip, Some([10, 0, 0, 1].into()));
        assert_eq!(
            spec(&["-n", "3", "--hosts", "a:2", "--", "true"]).unwrap_err(),
            RunArgsError::Hosts(HostsError::Count {
                given: 3,
                listed: 2
            })
        );
        for bad in ["a", "a:0", "a:1,a:1", ""] {
            assert!(
                matches!(
                    spec(&["--hosts", bad, "--", "true"]),
                    Err(RunArgsError::Hosts(_))
                ),
                "--hosts {bad:?}"
            );
        }
        assert!(matches!(
            spec(&["--hosts", "a:1", "--agent", "ssh", "--", "true"]),
            Err(RunArgsError::Hosts(HostsError::NoHost { .. }))
        ));
        // --agent without --hosts, and no rank count at all, are refused by the parser.
        assert!(spec(&["-n", "1", "--agent", "x {host}", "--", "true"]).is_err());
        assert!(spec(&["--", "true"]).is_err());
    }
}
