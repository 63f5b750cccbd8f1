//! The `spools` command.

mod demo;
mod filetools;
mod info;
mod map;
mod mpilib;
mod out;
mod plan;
mod run;
// Public items: the `launcher` fuzz target includes this file as its own module.
#[allow(unreachable_pub)]
mod run_args;
mod spec;
mod streams;
mod unixpipe;
mod vcr;
mod view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

const SPEC_HELP: &str = "\
SPECS
  An array distributed over a grid of units (MPI darray semantics):
    DTYPE[N0,N1,...] DIST0,DIST1,... on P0xP1x... [order=C|F]
    DTYPE: u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 c64 c128 bytes(N)
    DIST:  block (block size ceil(n/p)) | block(B) (needs B*p >= n)
           | cyclic | cyclic(B) (block-cyclic) | * (not distributed; grid extent 1)
    Units are numbered row-major over the grid; order=C (default) puts the last
    dimension fastest, globally and in each unit's storage; order=F the first.
  A byte stream striped over K units:
    stripe(unit=SIZE,count=K[,size=SIZE])   RAID-0
    raid5(unit=SIZE,count=K[,size=SIZE])    RAID-5, Linux md left-symmetric parity
    SIZE: an integer with an optional B, KiB, MiB, GiB or TiB; without size= the
    stream takes the size of the layout it is planned against.
  A bit permutation of 2^N bytes (nCUBE mapping function):
    bits(n=N,unit=[i,j,...][,local=[...]])  unit number from the listed index bits,
    most significant first; bit 0 is the least significant bit of the byte index.

EXAMPLES
  spools map 'f64[1000,1000] cyclic(2),cyclic(2) on 8x8' --unit 9
  spools map 'raid5(unit=64KiB,count=5,size=1MiB)' --unit 0 --json
  spools plan --from 'f64[1000,1000] block,block on 2x2' --to 'raid5(unit=64KiB,count=5)'
  spools plan --from 'i32[64,64] block,* on 4x1' --to 'i32[64,64] *,cyclic(4) on 1x3' --unit 0 --json";

/// Spools: communication and parallel I/O for clusters.
#[derive(Parser, Debug)]
#[command(
    name = "spools",
    version,
    about = "Spools: communication and parallel I/O for clusters. Launch jobs, plan transfers, benchmark.",
    after_help = SPEC_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the extents one unit owns under a layout, in its local storage order.
    #[command(after_help = SPEC_HELP)]
    Map(map::MapArgs),
    /// Plan moving a dataset from one layout to another (the composite M1^-1 o M2).
    #[command(after_help = SPEC_HELP)]
    Plan(plan::PlanArgs),
    /// Start N ranks of a program on this host (see `spools run --help`).
    Run(run::RunArgs),
    /// Print the effective configuration, the transports and their capabilities.
    Info,
    /// Benchmarks of the runtime (run them under `spools run`).
    #[command(subcommand)]
    Bench(spools_bench::Bench),
    /// Print a fresh random job secret (for SPOOLS_SECRET under another launcher).
    Secret,
    /// Demonstrations: `spools demo heat` simulates, snapshots and checks (the README's
    /// main job).
    #[command(subcommand)]
    Demo(DemoCommand),
    /// Write a parallel file's logical byte stream to stdout (verifying checksums).
    Cat(filetools::FileArg),
    /// Describe a parallel file: format, size, layout, version, units.
    Ls(filetools::FileArg),
    /// Verify every block checksum and parity block of a striped parallel file.
    Fsck(filetools::FileArg),
    /// Rebuild lost or corrupt units of a RAID-5 parallel file from parity.
    Repair(filetools::FileArg),
    /// Receive streams (from a job, or `spools send`) at tcp:HOST:PORT and write their ADUs.
    Recv(streams::RecvArgs),
    /// Send files as streams to tcp:HOST:PORT over several links.
    Send(streams::SendArgs),
    /// Show frame streams arriving at tcp:HOST:PORT live in a browser (the page's URL is
    /// printed).
    View(view::ViewArgs),
}

/// `spools demo` programs.
#[derive(Subcommand, Debug)]
enum DemoCommand {
    /// 2-D heat diffusion with halo exchange and parallel-file snapshots, then a reader job
    /// with another rank count and distribution checking them against one process.
    Heat(demo::HeatArgs),
    /// The "digital VCR": four synchronised camera streams of moving images from 8 ranks,
    /// shown in lock step by `spools view` (`--view` starts one).
    Vcr(vcr::VcrArgs),
}

fn secret() -> anyhow::Result<()> {
    let bytes = spools_boot::random::random()?;
    println!("{}", spools_proto::auth::Secret::from_bytes(bytes).to_hex());
    Ok(())
}

fn main() -> ExitCode {
    spools_boot::logger::install();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Map(args) => map::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Run(args) => return run::run(&args),
        Command::Info => info::run(),
        Command::Secret => secret(),
        Command::Bench(b) => spools_bench::run(&b).map_err(anyhow::Error::from),
        Command::Demo(DemoCommand::Heat(a)) => demo::heat(&a),
        Command::Demo(DemoCommand::Vcr(a)) => vcr::vcr(&a),
        Command::Cat(a) => filetools::cat(&a),
        Command::Ls(a) => filetools::ls(&a),
        Command::Fsck(a) => filetools::fsck(&a),
        Command::Repair(a) => filetools::repair(&a),
        Command::Recv(a) => streams::recv(&a),
        Command::Send(a) => streams::send(&a),
        Command::View(a) => view::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            spools_boot::logger::line(format_args!("spools: error: {}", report(&e)));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each said once: a cause whose text its outer
/// error already ends with (many errors show their source in their own message) is
/// skipped.
fn report(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::report;

    #[test]
    fn a_cause_is_printed_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("writing x: {source}")]
        struct Shown {
            source: std::io::Error,
        }
        let io = std::io::Error::from_raw_os_error(30);
        let text = io.to_string();
        let e = anyhow::Error::new(Shown { source: io }).context("saving");
        assert_eq!(report(&e), format!("saving: writing x: {text}"));
        assert_eq!(report(&e).matches(&text).count(), 1);
    }
}
