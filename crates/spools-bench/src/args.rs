//! The command line of `spools bench ...`: one clap type per benchmark, embedded by the
//! `spools` command as its `bench` subcommand.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `spools bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum Bench {
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
    /// Streams out of the job to `spools recv`: throughput by links and TU against
    /// iperf3, and cyclic(b) ADUs reshuffled against raw streaming (paper Figure 15).
    Stream(StreamArgs),
    /// The OSU micro-benchmarks' measurements through the tagged API, printed in their
    /// format: latency, bw, bibw (2 ranks); allreduce, bcast, barrier, alltoall (2 or
    /// more). One timed loop per size, as OSU (--reps is not used).
    Osu(OsuArgs),
    /// The GRIM paper's experiments (section 6) with active messages (2 ranks): latency
    /// against logical channels, gap against burst length, cut-through against
    /// store-and-forward bandwidth.
    Grim(GrimArgs),
}

/// Options every benchmark takes.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Transport between the ranks (overrides SPOOLS_TRANSPORT for this run).
    #[arg(long, value_parser = ["shm", "tcp", "ofi", "auto"])]
    pub(crate) transport: Option<String>,
    /// Print one JSON document (rank 0) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Repetitions whose median is reported (at least 1).
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    pub(crate) reps: usize,
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
pub struct PingpongArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Message sizes (bytes, with optional K/M suffix), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) sizes: Option<Vec<String>>,
    /// Write an SVG plot of latency and bandwidth against size.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Which interface: active messages (short, bulk, memory) or tagged send/recv.
    #[arg(long, value_parser = ["am", "tagged"], default_value = "am")]
    pub(crate) api: String,
}

/// Options of `spools bench rate`.
#[derive(Args, Debug)]
pub struct RateArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Messages per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    pub(crate) messages: u64,
}

/// Options of `spools bench ring`.
#[derive(Args, Debug)]
pub struct RingArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Times the token goes around.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) rounds: u64,
}

/// Options of `spools bench coll`.
#[derive(Args, Debug)]
pub struct CollArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Collectives to time, comma-separated: barrier, bcast, allreduce, iallreduce
    /// (+ an immediate wait), alltoall.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "barrier,bcast,allreduce,alltoall"
    )]
    pub(crate) ops: Vec<String>,
    /// Sizes (bytes; per pair for alltoall), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,64,512,4K,32K,256K,4M")]
    pub(crate) sizes: Vec<String>,
    /// Timed batches per point (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub(crate) batches: usize,
    /// Milliseconds per batch.
    #[arg(long, default_value_t = 20)]
    pub(crate) batch_ms: u64,
}

/// Options of `spools bench overlap`.
#[derive(Args, Debug)]
pub struct OverlapArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Message sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1M,16M")]
    pub(crate) sizes: Vec<String>,
    /// Computation times in milliseconds, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,20,30,40,50,60")]
    pub(crate) compute_ms: Vec<u64>,
}

/// Options of `spools bench matmul`.
#[derive(Args, Debug)]
pub struct MatmulArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Matrix order (divisible by the number of ranks).
    #[arg(long, default_value_t = 1024)]
    pub(crate) n: usize,
}

/// Options of `spools bench io`.
#[derive(Args, Debug)]
pub struct IoArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The dataset and its distribution over the ranks, e.g. "i32[512,512] block,block on 2x2".
    #[arg(long)]
    pub(crate) layout: String,
    /// The parallel file (for a striped file, its manifest).
    #[arg(long)]
    pub(crate) file: PathBuf,
    /// Write the dataset (every element holds its global index).
    #[arg(long)]
    pub(crate) write: bool,
    /// Read the dataset back.
    #[arg(long)]
    pub(crate) read: bool,
    /// Check every element read.
    #[arg(long)]
    pub(crate) verify: bool,
    /// Keep a file this run created by writing (otherwise rank 0 removes it; a file that
    /// existed before, or one that is only read, is never removed).
    #[arg(long)]
    pub(crate) keep: bool,
    /// Make every write durable before it returns (the sync is inside the timed region).
    #[arg(long)]
    pub(crate) sync: bool,
    /// Read with this layout instead of --layout (any number of units up to the ranks).
    #[arg(long)]
    pub(crate) read_layout: Option<String>,
    /// canonical, npy, stripe(unit=..,count=K), raid5(unit=..,count=K) or zarr(chunk=AxB,[shard=CxD,][codec=zstd|gzip|none,][level=N]).
    #[arg(long, default_value = "canonical")]
    pub(crate) format: String,
    /// Directories of a striped file's units, comma-separated (unit u in dir u % len).
    #[arg(long, value_delimiter = ',')]
    pub(crate) dirs: Vec<PathBuf>,
    /// Unit u is touched only by rank u % N (server-less node-local mode).
    #[arg(long)]
    pub(crate) node_local: bool,
    /// Reshuffle into an I/O distribution first: auto, always or never.
    #[arg(long, value_parser = ["auto", "always", "never"], default_value = "auto")]
    pub(crate) reshuffle: String,
    /// Added to every element's index (distinguishes versions).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Do not checksum the transfer units of the reshuffle.
    #[arg(long)]
    pub(crate) no_integrity: bool,
    /// Canonical and .npy files: write a checksum sidecar (NAME.spools-sums) with the data,
    /// and verify the blocks read against it.
    #[arg(long)]
    pub(crate) checksums: bool,
    /// Canonical and .npy files: write in place (as MPI-IO does) instead of replacing the
    /// file atomically (a temporary file renamed over it).
    #[arg(long)]
    pub(crate) in_place: bool,
}

/// Options of `spools bench pipe`.
#[derive(Args, Debug)]
pub struct PipeArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// producer or consumer.
    #[arg(long)]
    pub(crate) role: String,
    /// This side's distribution of one record, e.g. "u8[1024,1024] block,* on 4x1".
    #[arg(long)]
    pub(crate) layout: String,
    /// pipe:NAME, tcp:HOST:PORT, stdout or stdin (default: what `spools run` chose, else
    /// stdout / stdin).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Records to send (producer) or expect (consumer; 0 = any).
    #[arg(long, default_value_t = 10)]
    pub(crate) records: u64,
    /// Check every element of every record (consumer).
    #[arg(long)]
    pub(crate) verify: bool,
}

/// Options of `spools bench redist`.
#[derive(Args, Debug)]
pub struct RedistArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The source distribution (rank r holds unit r).
    #[arg(long)]
    pub(crate) from: String,
    /// The destination distribution.
    #[arg(long)]
    pub(crate) to: String,
    /// Checksum every transfer unit.
    #[arg(long)]
    pub(crate) integrity: bool,
    /// Allocate both buffers in the shared heap (`World::alloc`).
    #[arg(long)]
    pub(crate) heap: bool,
    /// Move every stream through transfer units (the single copy between same-host
    /// ranks off).
    #[arg(long)]
    pub(crate) no_single_copy: bool,
}

/// Options of `spools bench stream`.
#[derive(Args, Debug)]
pub struct StreamArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Parts to run, comma-separated: links (throughput against iperf3), cyclic (Figure 15),
    /// group (four lock-step streams of RGB frames: frames/s and skew).
    #[arg(long, value_delimiter = ',', default_value = "links,cyclic,group")]
    pub(crate) parts: Vec<String>,
    /// Small sizes (a test's): every size not given is taken small.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Link counts of the links part, comma-separated (default 1,2,4,8; quick 1,2).
    #[arg(long, value_delimiter = ',')]
    pub(crate) links: Option<Vec<u16>>,
    /// TU sizes of the links part (default 64K,256K,1M,4M; quick 64K,256K).
    #[arg(long, value_delimiter = ',')]
    pub(crate) tus: Option<Vec<String>>,
    /// Bytes of one ADU of the links part (default 16M; quick 1M).
    #[arg(long)]
    pub(crate) adu: Option<String>,
    /// ADUs per run (default 16; quick 2).
    #[arg(long)]
    pub(crate) adus: Option<u64>,
    /// Block sizes b of the cyclic part (default 128,512,2K,8K; quick 128,8K).
    #[arg(long, value_delimiter = ',')]
    pub(crate) blocks: Option<Vec<String>>,
    /// Bytes of one ADU of the cyclic part, a multiple of the ranks (default 8M; quick 256K).
    #[arg(long)]
    pub(crate) cyclic_adu: Option<String>,
    /// Frame size of the group part, HEIGHTxWIDTH of RGB bytes (default 1080x1920; quick
    /// 120x160).
    #[arg(long)]
    pub(crate) frame: Option<String>,
    /// Frames per run of the group part (default 60; quick 3).
    #[arg(long)]
    pub(crate) frames: Option<u64>,
    /// Links of the group part's connection.
    #[arg(long, default_value_t = 4)]
    pub(crate) group_links: u16,
    /// TU of the group part's streams, a multiple of its links (default 1M; quick 64K).
    #[arg(long)]
    pub(crate) group_tu: Option<String>,
    /// Leave iperf3 out (it is the limit the links part is compared against).
    #[arg(long)]
    pub(crate) no_iperf3: bool,
    /// Hold every rank's share of the links and cyclic parts in the shared heap
    /// (`World::alloc`) instead of its private memory: the reshuffle then copies runs of
    /// any length straight out of the other ranks' buffers.
    #[arg(long)]
    pub(crate) heap: bool,
    /// Write SVG plots: the links part to FILE, the cyclic part to FILE-cyclic.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
}

/// Options of `spools bench osu`.
#[derive(Args, Debug)]
pub struct OsuArgs {
    /// The test: latency, bw, bibw, allreduce, bcast, barrier or alltoall.
    #[arg(value_parser = ["latency", "bw", "bibw", "allreduce", "bcast", "barrier", "alltoall"])]
    pub(crate) test: String,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Largest message size (default 4M for latency, bw and bibw, 1M for collectives);
    /// sizes are the powers of two up to it.
    #[arg(long)]
    pub(crate) max_size: Option<String>,
    /// Timed iterations per size (default OSU's: by test and size).
    #[arg(long)]
    pub(crate) iterations: Option<u64>,
    /// Warm-up iterations per size (default OSU's).
    #[arg(long)]
    pub(crate) warmup: Option<u64>,
}

/// Options of `spools bench grim`.
#[derive(Args, Debug)]
pub struct GrimArgs {
    /// The experiment: channels (latency against logical channels with traffic pending on
    /// all of them), burst (gap against burst length), bulk (cut-through against
    /// store-and-forward bandwidth).
    #[arg(value_parser = ["channels", "burst", "bulk"])]
    pub(crate) experiment: String,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// channels: channel counts, comma-separated (default 1,2,4,8,16,32,64).
    #[arg(long, value_delimiter = ',')]
    pub(crate) channels: Option<Vec<u16>>,
    /// channels: messages pending ahead of every ping, spread over the channels.
    #[arg(long, default_value_t = 64)]
    pub(crate) backlog: u32,
    /// burst: burst lengths, comma-separated (default 10,20,50,100,200,500,1000,2000,5000,10000).
    #[arg(long, value_delimiter = ',')]
    pub(crate) bursts: Option<Vec<u64>>,
    /// bulk: message sizes, comma-separated (default 4K to 16M by powers of 4).
    #[arg(long, value_delimiter = ',')]
    pub(crate) sizes: Option<Vec<String>>,
    /// Round trips (channels) or bursts (burst) per repetition; bulk scales by size.
    #[arg(long, default_value_t = 2_000)]
    pub(crate) iterations: u64,
    /// Write an SVG plot of the experiment.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
}
