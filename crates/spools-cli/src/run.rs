//! `spools run -n N [--tag-output] [--timeout SECS] [--grace SECS] [--secret FILE] -- PROGRAM
//! ARGS...`.

use std::process::ExitCode;
use std::time::Duration;

use spools_boot::keepalive::{Keepalive, NET_TIMEOUT_DEFAULT_S};
use spools_launch::{launch, LaunchError};

pub(crate) use crate::run_args::RunArgs;

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let cfg = match spools_boot::config::Config::load() {
        Ok(c) => c,
        Err(e) => {
            spools_boot::logger::line(format_args!("spools run: {e}"));
            return ExitCode::from(2);
        }
    };
    let liveness =
        (cfg.liveness_timeout_s > 0).then(|| Duration::from_secs(cfg.liveness_timeout_s));
    // Two launchers joined by a Unix pipe connect their ranks directly (see unixpipe).
    for (k, v) in crate::unixpipe::env() {
        std::env::set_var(k, v);
    }
    // MPI programs (built by any mpicc_abi, or mpi4py) load Spools' libmpi_abi.so.1.
    crate::mpilib::put_first(args.command.first().map(|p| p.as_os_str()));
    let mut spec = match args.to_spec(liveness) {
        Ok(s) => s,
        Err(e) => {
            spools_boot::logger::line(format_args!("spools run: {e}"));
            return ExitCode::from(2);
        }
    };
    spec.keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
    if let Some(plan) = spec.hosts.as_mut().filter(|p| p.bootstrap_ip.is_none()) {
        if let Ok(ip) = std::env::var("SPOOLS_BOOTSTRAP_IP") {
            match ip.parse() {
                Ok(ip) => plan.bootstrap_ip = Some(ip),
                Err(_) => {
                    spools_boot::logger::line(format_args!(
                        "spools run: SPOOLS_BOOTSTRAP_IP={ip:?} is not an IP address"
                    ));
                    return ExitCode::from(2);
                }
            }
        }
    }
    if let Some(path) = &args.secret {
        match crate::streams::read_secret(path) {
            Ok(s) => spec.secret = Some(s),
            Err(e) => {
                spools_boot::logger::line(format_args!("spools run: {e:#}"));
                return ExitCode::from(2);
            }
        }
    }
    match launch(&spec) {
        Ok(report) => ExitCode::from(u8::try_from(report.exit_code.clamp(0, 255)).unwrap_or(1)),
        Err(e) => {
            spools_boot::logger::line(format_args!("spools run: {e}"));
            ExitCode::from(match e {
                LaunchError::Spawn { .. } => 127,
                LaunchError::Interrupted { number, .. } => u8::try_from(128 + number).unwrap_or(1),
                _ => 1,
            })
        }
    }
}

/// The keepalive of a job this program launches itself (a demo's): `net_timeout_s` of the
/// configuration, the default when it does not load (`spools run` reports that error).
pub(crate) fn job_keepalive() -> Option<Keepalive> {
    Keepalive::for_timeout(
        spools_boot::config::Config::load().map_or(NET_TIMEOUT_DEFAULT_S, |c| c.net_timeout_s),
    )
}
