//! Runs the benchmark a `spools bench ...` command line names.

use crate::args::Bench;
use crate::error::BenchError;
use crate::{
    coll, grim, idle, init, io, logp, matmul, osu, overlap, pingpong, pipe, rate, redist, ring,
    stream, tagged,
};

/// Runs `spools bench ...` on this rank (every rank of the job calls it; rank 0 reports).
///
/// # Errors
/// [`BenchError`]: the runtime failed to start or failed during the run, the options do
/// not fit the job, or a result failed its check.
pub fn run(b: &Bench) -> Result<(), BenchError> {
    match b {
        Bench::Pingpong(a) if a.api == "tagged" => tagged::run(a),
        Bench::Pingpong(a) => pingpong::run(a),
        Bench::Logp(a) => logp::run(a),
        Bench::Rate(a) => rate::run(a),
        Bench::Ring(a) => ring::run(a),
        Bench::Idle(a) => idle::run(a),
        Bench::Init(a) => init::run(a),
        Bench::Coll(a) => coll::run(a),
        Bench::Overlap(a) => overlap::run(a),
        Bench::Matmul(a) => matmul::run(a),
        Bench::Io(a) => io::run(a),
        Bench::Pipe(a) => pipe::run(a),
        Bench::Redist(a) => redist::run(a),
        Bench::Stream(a) => stream::run(a),
        Bench::Osu(a) => osu::run(a),
        Bench::Grim(a) => grim::run(a),
    }
}
