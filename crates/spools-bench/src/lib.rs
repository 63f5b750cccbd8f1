//! Spools benchmarks: the multi-process measurements behind `spools bench ...`, run under
//! `spools run`.
//!
//! Every benchmark of the runtime starts and ends with the raw limits of the machine (a
//! flag bounced through one shared cache line, a bare single-producer ring, memcpy; see
//! `raw_limits`), so that each report carries the limits measured in the same window.
//! `--json` prints one document from rank 0, a typed report serialised by serde.

mod args;
mod error;
mod output;
mod plot;
mod raw_limits;
mod runner;
mod series;
mod session;
mod shared_mapping;
mod sizes;
mod stats;

mod dataset;

mod coll;
mod grim;
mod idle;
mod init;
mod io;
mod logp;
mod matmul;
mod osu;
mod overlap;
mod pingpong;
mod pipe;
mod rate;
mod redist;
mod ring;
mod stream;
mod tagged;

pub use args::{
    Bench, CollArgs, CommonArgs, GrimArgs, IoArgs, MatmulArgs, OsuArgs, OverlapArgs, PingpongArgs,
    PipeArgs, RateArgs, RedistArgs, RingArgs, StreamArgs,
};
pub use error::BenchError;
pub use runner::run;
