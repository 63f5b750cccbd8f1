//! `spools run -n N [--tag-output] [--timeout SECS] [--grace SECS] -- PROGRAM ARGS...`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use spools_boot::launcher::{launch, LaunchError, LaunchSpec};

/// Arguments of `spools run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Number of ranks to start on this host.
    #[arg(short = 'n', long = "ranks", value_name = "N")]
    ranks: u32,
    /// Prefix every output line with the rank that wrote it, as `[rank] `.
    #[arg(long)]
    tag_output: bool,
    /// Stop the whole job after this many seconds (exit status 124).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Seconds the other ranks get to report a failing rank before they are killed.
    #[arg(long, value_name = "SECS", default_value_t = 0.5)]
    grace: f64,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<OsString>,
}

/// Longest `--timeout` or `--grace` taken: a year.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// A number of seconds as a duration, if it is one (finite, not negative, at most a year).
fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && (0.0..=MAX_SECONDS).contains(&s)).then(|| Duration::from_secs_f64(s))
}

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("spools run: no program given");
        return ExitCode::from(2);
    };
    let timeout = match args.timeout.map(seconds) {
        Some(Some(t)) if !t.is_zero() => Some(t),
        Some(_) => {
            eprintln!(
                "spools run: --timeout {}: expected a positive number of seconds, at most {MAX_SECONDS}",
                args.timeout.unwrap_or_default()
            );
            return ExitCode::from(2);
        }
        None => None,
    };
    let Some(grace) = seconds(args.grace) else {
        eprintln!(
            "spools run: --grace {}: expected a number of seconds from 0 to {MAX_SECONDS}",
            args.grace
        );
        return ExitCode::from(2);
    };
    let cfg = match spools_boot::config::Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("spools run: {e}");
            return ExitCode::from(2);
        }
    };
    let liveness =
        (cfg.liveness_timeout_s > 0).then(|| Duration::from_secs(cfg.liveness_timeout_s));
    // Two launchers joined by a Unix pipe connect their ranks directly (see unixpipe).
    for (k, v) in crate::unixpipe::env() {
        std::env::set_var(k, v);
    }
    let spec = LaunchSpec {
        ranks: args.ranks,
        program: program.clone(),
        args: rest.to_vec(),
        tag_output: args.tag_output,
        timeout,
        grace,
        liveness,
    };
    match launch(&spec) {
        Ok(report) => ExitCode::from(u8::try_from(report.exit_code.clamp(0, 255)).unwrap_or(1)),
        Err(e) => {
            eprintln!("spools run: {e}");
            ExitCode::from(match e {
                LaunchError::Spawn { .. } => 127,
                LaunchError::Interrupted { number, .. } => u8::try_from(128 + number).unwrap_or(1),
                _ => 1,
            })
        }
    }
}
