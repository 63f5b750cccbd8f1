//! Fuzzes what a user or a foreign launcher hands to a job: `spools run`'s command line
//! (split on NUL bytes: the same parser and checks as the CLI) and a launcher's environment
//! (lines `KEY=VALUE`: the job identity and the configuration). Any input must give a
//! value or an error, never a panic.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use clap::Parser;
use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/spools-cli/src/run_args.rs"]
mod run_args;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: run_args::RunArgs,
}

fuzz_target!(|data: &[u8]| {
    let argv = std::iter::once(OsString::from("run")).chain(
        data.split(|b| *b == 0)
            .map(|a| OsString::from_vec(a.to_vec())),
    );
    if let Ok(cli) = Cli::try_parse_from(argv) {
        if let Ok(spec) = cli.run.to_spec(None) {
            let _ = spec.check();
        }
    }
    let text = String::from_utf8_lossy(data);
    let env: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let _ = spools_boot::identity::JobEnv::from_lookup(|k| {
        env.iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.to_string())
    });
    let _ = spools_boot::config::Config::from_sources(None, env.iter().copied());
});
