//! `spools run -n N [--tag-output] [--timeout SECS] -- PROGRAM ARGS...`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use spools_boot::launcher::{launch, LaunchSpec};

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
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<OsString>,
}

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("spools run: no program given");
        return ExitCode::from(2);
    };
    let timeout = match args.timeout {
        Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
        Some(t) => {
            eprintln!("spools run: --timeout {t}: expected a positive number of seconds");
            return ExitCode::from(2);
        }
        None => None,
    };
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
    };
    match launch(&spec) {
        Ok(report) => ExitCode::from(u8::try_from(report.exit_code.clamp(0, 255)).unwrap_or(1)),
        Err(e) => {
            eprintln!("spools run: {e}");
            ExitCode::from(
                if matches!(e, spools_boot::launcher::LaunchError::Spawn { .. }) {
                    127
                } else {
                    1
                },
            )
        }
    }
}
