//! `spools bench pipe`: one end of a parallel pipe (nCUBE Tables 1 and 2). Run the
//! producer and the consumer as two jobs, with their own rank counts and layouts:
//!
//! ```text
//! spools run -n 4 -- spools bench pipe --role producer --layout "u8[1024,1024] block,* on 4x1" --name pipe:t &
//! spools run -n 3 -- spools bench pipe --role consumer --layout "u8[1024,1024] *,block on 1x3" --name pipe:t --verify
//! ```
//!
//! or joined by a Unix pipe (`... --role producer ... | spools run ... --role consumer ...`,
//! without `--name`). Record `k` holds every element's global index plus `k`; the consumer
//! checks every element with `--verify` and reports the aggregate bandwidth.

use std::time::Instant;

use serde::Serialize;
use spools_io::pipe::{PipeName, PipeReader, PipeWriter};

use crate::args::PipeArgs;
use crate::dataset::{check, fill, parse_layout, share};
use crate::error::{bail, BenchError};
use crate::output::eprint_json;
use crate::session::start;

/// The document of `spools bench pipe --json` (on stderr).
#[derive(Debug, Serialize)]
struct PipeReport<'a> {
    /// Always `pipe`.
    benchmark: &'static str,
    /// `producer` or `consumer`.
    role: &'a str,
    /// Ranks of this end's job.
    ranks: u32,
    /// `--layout` as given.
    layout: &'a str,
    /// The pipe's name.
    name: String,
    /// Records sent or received.
    records: u64,
    /// Bytes of one record.
    record_bytes: u64,
    /// Seconds timed (the consumer from its first record on).
    seconds: f64,
    /// Aggregate MB/s over the records timed.
    mb_per_s: f64,
    /// Seconds before the timed part (opening the pipe).
    setup_s: f64,
    /// Whether the consumer checked every element.
    verified: bool,
}

/// Runs one end of the pipe benchmark.
pub(crate) fn run(a: &PipeArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    let layout = parse_layout("--layout", &a.layout)?;
    let Some(bytes) = layout.total_bytes() else {
        bail!("--layout must give the dataset's size");
    };
    let me = w.rank();
    let io = w.io_communicator()?;
    let t0 = Instant::now();
    let (records, secs, name) = match a.role.as_str() {
        "producer" => {
            let name = match &a.name {
                Some(n) => n.parse()?,
                None => PipeName::output_from_env()?,
            };
            let mut out = PipeWriter::open(io, &name, &layout)?;
            let t = Instant::now();
            // Records are made before the clock starts: only the pipe is timed.
            let data: Vec<Vec<u8>> = (0..a.records.min(4))
                .map(|k| fill(&layout, me, k))
                .collect::<Result<_, _>>()?;
            for k in 0..a.records {
                let d = match data.get(k as usize) {
                    Some(d) => d.clone(),
                    None => fill(&layout, me, k)?,
                };
                out.write(&d)?;
            }
            out.close()?;
            (a.records, t.elapsed().as_secs_f64(), name)
        }
        "consumer" => {
            let name = match &a.name {
                Some(n) => n.parse()?,
                None => PipeName::input_from_env()?,
            };
            let mut input = PipeReader::open(io, &name, &layout)?;
            let mut buf = vec![0u8; share(&layout, me)? as usize];
            let mut k = 0u64;
            let mut t = None;
            while input.read(&mut buf)? {
                t.get_or_insert_with(Instant::now);
                if a.verify {
                    if let Some(bad) = check(&layout, me, &buf, k)? {
                        bail!("record {k}: {bad}");
                    }
                }
                k += 1;
            }
            // The first record includes the connection's slow start; time from it on.
            let secs = t.map_or(0.0, |t| t.elapsed().as_secs_f64());
            if a.records > 0 && k != a.records {
                bail!("received {k} records, expected {}", a.records);
            }
            (k, secs, name)
        }
        r => bail!("--role {r}: producer or consumer"),
    };
    w.barrier()?;
    if me == 0 {
        let timed = if a.role == "consumer" {
            records.saturating_sub(1)
        } else {
            records
        };
        let mbps = if secs > 0.0 {
            (timed * bytes) as f64 / secs / 1e6
        } else {
            0.0
        };
        let verified = a.verify && a.role == "consumer";
        if a.common.json {
            eprint_json(&PipeReport {
                benchmark: "pipe",
                role: &a.role,
                ranks: w.size(),
                layout: &a.layout,
                name: name.to_string(),
                records,
                record_bytes: bytes,
                seconds: secs,
                mb_per_s: mbps,
                setup_s: t0.elapsed().as_secs_f64() - secs,
                verified,
            })?;
        } else {
            eprintln!(
                "pipe {}: {} ranks, {} records of {} bytes via {}, {:.1} MB/s{}",
                a.role,
                w.size(),
                records,
                bytes,
                name,
                mbps,
                if verified { ", verified" } else { "" }
            );
        }
    }
    w.finalize()?;
    Ok(())
}
