//! `spools bench ...`: multi-process benchmarks, run under `spools run`.
//!
//! Every benchmark starts and ends with the raw probes (a flag bounced through one shared
//! cache line, a bare single-producer ring, memcpy) so that each report carries the
//! machine's limits measured in the same window.

mod coll;
mod idle;
mod io;
mod logp;
mod matmul;
mod overlap;
mod pingpong;
mod pipe;
mod plot;
mod probe;
mod rate;
mod redist;
mod ring;
mod tagged;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use spools::{Config, TransportChoice, World};

/// `spools bench` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum Bench {
    /// One-way latency and bandwidth, 8 B to 64 MiB, short/bulk/memory (2 ranks).
    Pingpong(PingpongArgs),
    /// The LogP signature (o_s, o_r, g, L) of the StarT-X paper, Table 1 (2 ranks).
    Logp(CommonArgs),
    /// Short-message rate, immediate against batched (2 ranks).
    Rate(RateArgs),
    /// A token passed around all ranks; time per hop.
    Ring(RingArgs),
    /// CPU use of a rank blocked in a receive, and its wake-up latency against a pipe's.
    Idle(CommonArgs),
    /// Time `init` takes on every rank.
    Init(CommonArgs),
    /// Latency of barrier, broadcast, allreduce and alltoall (any number of ranks).
    Coll(CollArgs),
    /// SCI-MPICH's overlap benchmark: a non-blocking send overlapped with computation
    /// (2 ranks; run once more with SPOOLS_PROGRESS_THREAD=1).
    Overlap(OverlapArgs),
    /// Column-distributed dense matrix multiply (StarT-X Table 2), any number of ranks.
    Matmul(MatmulArgs),
    /// Parallel-file write/read timing and checking, IOR-like (any number of ranks).
    Io(IoArgs),
    /// One end of a parallel pipe between two jobs (nCUBE Tables 1 and 2); reports go to
    /// stderr, so stdout can carry the byte stream.
    Pipe(PipeArgs),
    /// In-memory redistribution between two layouts against memcpy (any number of ranks).
    Redist(RedistArgs),
}

/// Options of `spools bench redist`.
#[derive(Args, Debug)]
pub(crate) struct RedistArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The source distribution (rank r holds unit r).
    #[arg(long)]
    from: String,
    /// The destination distribution.
    #[arg(long)]
    to: String,
    /// Checksum every transfer unit.
    #[arg(long)]
    integrity: bool,
}

/// Options of `spools bench pipe`.
#[derive(Args, Debug)]
pub(crate) struct PipeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// producer or consumer.
    #[arg(long)]
    role: String,
    /// This side's distribution of one record, e.g. "u8[1024,1024] block,* on 4x1".
    #[arg(long)]
    layout: String,
    /// pipe:NAME, tcp:HOST:PORT, stdout or stdin (default: what `spools run` chose, else
    /// stdout / stdin).
    #[arg(long)]
    name: Option<String>,
    /// Records to send (producer) or expect (consumer; 0 = any).
    #[arg(long, default_value_t = 10)]
    records: u64,
    /// Check every element of every record (consumer).
    #[arg(long)]
    verify: bool,
}

/// Options of `spools bench io`.
#[derive(Args, Debug)]
pub(crate) struct IoArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The dataset and its distribution over the ranks, e.g. "i32[512,512] block,block on 2x2".
    #[arg(long)]
    layout: String,
    /// The parallel file (for a striped file, its manifest).
    #[arg(long)]
    file: PathBuf,
    /// Write the dataset (every element holds its global index).
    #[arg(long)]
    write: bool,
    /// Read the dataset back.
    #[arg(long)]
    read: bool,
    /// Check every element read.
    #[arg(long)]
    verify: bool,
    /// Keep a file this run created by writing (otherwise rank 0 removes it; a file that
    /// existed before, or one that is only read, is never removed).
    #[arg(long)]
    keep: bool,
    /// Make every write durable before it returns (the sync is inside the timed region).
    #[arg(long)]
    sync: bool,
    /// Read with this layout instead of --layout (any number of units up to the ranks).
    #[arg(long)]
    read_layout: Option<String>,
    /// canonical, npy, stripe(unit=..,count=K) or raid5(unit=..,count=K).
    #[arg(long, default_value = "canonical")]
    format: String,
    /// Directories of a striped file's units, comma-separated (unit u in dir u % len).
    #[arg(long, value_delimiter = ',')]
    dirs: Vec<PathBuf>,
    /// Unit u is touched only by rank u % N (server-less node-local mode).
    #[arg(long)]
    node_local: bool,
    /// Reshuffle into an I/O distribution first: auto, always or never.
    #[arg(long, value_parser = ["auto", "always", "never"], default_value = "auto")]
    reshuffle: String,
    /// Added to every element's index (distinguishes versions).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not checksum the transfer units of the reshuffle.
    #[arg(long)]
    no_integrity: bool,
}

/// Options every benchmark takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct CommonArgs {
    /// Transport between the ranks (overrides SPOOLS_TRANSPORT for this run).
    #[arg(long, value_parser = ["shm", "tcp", "auto"])]
    transport: Option<String>,
    /// Print one JSON document (rank 0) instead of a table.
    #[arg(long)]
    json: bool,
    /// Repetitions whose median is reported (at least 1).
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    reps: usize,
}

/// A repetition count: a whole number, at least 1.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("--reps 0: say how many times to run, at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("expected a whole number of repetitions: {e}")),
    }
}

/// Options of `spools bench pingpong`.
#[derive(Args, Debug)]
pub(crate) struct PingpongArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Message sizes (bytes, with optional K/M suffix), comma-separated.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Write an SVG plot of latency and bandwidth against size.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
    /// Which interface: active messages (short, bulk, memory) or tagged send/recv.
    #[arg(long, value_parser = ["am", "tagged"], default_value = "am")]
    api: String,
}

/// Options of `spools bench coll`.
#[derive(Args, Debug)]
pub(crate) struct CollArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Collectives to time, comma-separated: barrier, bcast, allreduce, alltoall.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "barrier,bcast,allreduce,alltoall"
    )]
    ops: Vec<String>,
    /// Sizes (bytes; per pair for alltoall), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,64,512,4K,32K,256K,4M")]
    sizes: Vec<String>,
    /// Timed batches per point (the median is reported).
    #[arg(long, default_value_t = 7)]
    batches: usize,
    /// Milliseconds per batch.
    #[arg(long, default_value_t = 20)]
    batch_ms: u64,
}

/// Options of `spools bench overlap`.
#[derive(Args, Debug)]
pub(crate) struct OverlapArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Message sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1M,16M")]
    sizes: Vec<String>,
    /// Computation times in milliseconds, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,20,30,40,50,60")]
    compute_ms: Vec<u64>,
}

/// Options of `spools bench matmul`.
#[derive(Args, Debug)]
pub(crate) struct MatmulArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Matrix order (divisible by the number of ranks).
    #[arg(long, default_value_t = 1024)]
    n: usize,
}

/// Options of `spools bench rate`.
#[derive(Args, Debug)]
pub(crate) struct RateArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Messages per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    messages: u64,
}

/// Options of `spools bench ring`.
#[derive(Args, Debug)]
pub(crate) struct RingArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Times the token goes around.
    #[arg(long, default_value_t = 10_000)]
    rounds: u64,
}

pub(crate) fn run(b: &Bench) -> Result<()> {
    match b {
        Bench::Pingpong(a) => pingpong::run(a),
        Bench::Logp(a) => logp::run(a),
        Bench::Rate(a) => rate::run(a),
        Bench::Ring(a) => ring::run(a),
        Bench::Idle(a) => idle::run(a),
        Bench::Init(a) => init_bench(a),
        Bench::Coll(a) => coll::run(a),
        Bench::Overlap(a) => overlap::run(a),
        Bench::Matmul(a) => matmul::run(a),
        Bench::Io(a) => io::run(a),
        Bench::Pipe(a) => pipe::run(a),
        Bench::Redist(a) => redist::run(a),
    }
}

/// Starts the runtime with the benchmark's transport.
fn start(c: &CommonArgs) -> Result<World> {
    let mut cfg = Config::load().context("configuration")?;
    match c.transport.as_deref() {
        Some("shm") => cfg.transport = TransportChoice::Shm,
        Some("tcp") => cfg.transport = TransportChoice::Tcp,
        Some(_) => cfg.transport = TransportChoice::Auto,
        None => {}
    }
    let env = spools_boot::identity::JobEnv::from_env().context("job environment")?;
    spools::init_with(cfg, env).context("starting the runtime")
}

/// The transport that carries traffic to `peer`, by name.
fn transport_name(w: &World, peer: u32) -> &'static str {
    match w.worker().route(peer) {
        Ok(spools::Route::Shm) => "shm",
        Ok(spools::Route::Tcp) => "tcp",
        _ => "self",
    }
}

/// Median of a non-empty sample (0 for an empty one).
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Parses `8`, `64K`, `1M`, `1MiB`.
fn parse_size(s: &str) -> Result<usize> {
    let n = spools_boot::config::parse_size(s).map_err(|e| anyhow::anyhow!("size {s:?}: {e}"))?;
    usize::try_from(n).context("size too large")
}

fn need_two(w: &World, what: &str) -> Result<()> {
    anyhow::ensure!(
        w.size() == 2,
        "`spools bench {what}` needs exactly 2 ranks: spools run -n 2 -- spools bench {what}"
    );
    Ok(())
}

fn init_bench(c: &CommonArgs) -> Result<()> {
    let w = start(c)?;
    let mine = w.init_time().as_secs_f64() * 1e3;
    let all = w.allgather_bytes(&mine.to_le_bytes())?;
    if w.rank() == 0 {
        let ms: Vec<f64> = all
            .iter()
            .map(|b| f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])))
            .collect();
        if c.json {
            println!(
                "{}",
                serde_json::json!({"benchmark": "init", "ranks": w.size(), "init_ms": ms})
            );
        } else {
            for (r, t) in ms.iter().enumerate() {
                println!("rank {r}: init {t:.2} ms");
            }
        }
    }
    w.finalize()?;
    Ok(())
}

/// Spins `d` without calling into Spools.
fn busy(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
