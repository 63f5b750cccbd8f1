//! The arguments of `spools run` and their checks, without side effects: the CLI parses
//! with them, and the `launcher` fuzz target feeds them arbitrary command lines.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;
use spools_boot::launcher::LaunchSpec;
use thiserror::Error;

/// Arguments of `spools run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Number of ranks to start on this host.
    #[arg(short = 'n', long = "ranks", value_name = "N")]
    pub ranks: u32,
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
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub command: Vec<OsString>,
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
        Ok(LaunchSpec {
            ranks: self.ranks,
            program: program.clone(),
            args: rest.to_vec(),
            tag_output: self.tag_output,
            timeout,
            grace,
            liveness,
            // Read by the caller (`--secret FILE`): this stays free of side effects.
            secret: None,
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
}
