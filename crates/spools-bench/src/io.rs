//! `spools bench io`: the IOR-like checking and timing tool for parallel files. Run under
//! `spools run -n N`, it writes a dataset whose every element holds its own global index
//! (in the element type, wrapping for small types; plus `--seed`), and/or reads it back
//! with the same or another layout, `--verify` checking every element.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use spools::{FileStats, Format, Layout, ReadOptions, Reshuffle, Striping, World, WriteOptions};

use crate::args::IoArgs;
use crate::dataset::{check, fill, parse_layout, share};
use crate::error::{bail, BenchError};
use crate::output::print_json;
use crate::session::start;
use crate::stats::median;

/// The timing of one operation (write or read) over the repetitions.
#[derive(Debug, Serialize)]
struct Timing {
    /// Median seconds, barrier to barrier.
    median_s: f64,
    /// The dataset's bytes over the median, in MB/s.
    mb_per_s: f64,
    /// Seconds of every repetition, in order.
    runs_s: Vec<f64>,
    /// Whether the last repetition went through an I/O distribution (two-phase).
    reshuffled: bool,
    /// Aggregators of the last repetition.
    aggregators: u32,
    /// Blocks rebuilt from parity in the last repetition.
    rebuilt_blocks: u64,
    /// The file's version after the last repetition.
    version: u64,
}

/// The document of `spools bench io --json`.
#[derive(Debug, Serialize)]
struct IoReport<'a> {
    /// Always `io`.
    benchmark: &'static str,
    /// Ranks of the job.
    ranks: u32,
    /// `--layout` as given.
    layout: &'a str,
    /// The layout read with (`--read-layout`, else `--layout`), normalised.
    read_layout: String,
    /// The parallel file.
    file: &'a Path,
    /// `--format` as given.
    format: &'a str,
    /// The dataset's bytes.
    bytes: u64,
    /// Whether writes were durable.
    sync: bool,
    /// Whether anything was at the path before the run.
    file_existed: bool,
    /// `--reshuffle` as given.
    reshuffle: &'a str,
    /// Whether units were node-local.
    node_local: bool,
    /// The writes, with `--write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    write: Option<Timing>,
    /// The reads, with `--read`.
    #[serde(skip_serializing_if = "Option::is_none")]
    read: Option<Timing>,
    /// Present (true) when every element read was checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    verified: Option<bool>,
}

fn format_of(a: &IoArgs) -> Result<Format, BenchError> {
    Ok(match a.format.as_str() {
        "canonical" => Format::Canonical,
        "npy" => Format::Npy,
        spec => {
            let layout = parse_layout("--format", spec)?;
            if !matches!(layout, Layout::Stripe(_) | Layout::Raid5(_)) {
                bail!("--format must be canonical, npy, stripe(...) or raid5(...)");
            }
            Format::Striped(Striping {
                layout,
                dirs: a.dirs.clone(),
                node_local: a.node_local,
            })
        }
    })
}

fn reshuffle_of(s: &str) -> Reshuffle {
    match s {
        "always" => Reshuffle::Always,
        "never" => Reshuffle::Never,
        _ => Reshuffle::Auto,
    }
}

/// Removes a parallel file: the file itself, and for a striped file every unit of both
/// slots.
fn remove(path: &Path) {
    if let Ok(spools_io::file::tools::Opened::Striped(m)) = spools_io::file::tools::open(path) {
        for p in m.unit_paths(path) {
            let s = p.to_string_lossy().into_owned();
            let _ = std::fs::remove_file(&p);
            if let Some(base) = s.strip_suffix(&format!(".s{}", m.slot)) {
                let _ = std::fs::remove_file(format!("{base}.s{}", 1 - m.slot));
            }
        }
    }
    let _ = std::fs::remove_file(path);
}

/// Runs `op` `reps` times between barriers; returns the timings with the last run's
/// statistics.
fn timed(
    w: &World,
    reps: usize,
    bytes: u64,
    mut op: impl FnMut() -> Result<FileStats, BenchError>,
) -> Result<Timing, BenchError> {
    let mut secs = Vec::new();
    let mut last = FileStats::default();
    for _ in 0..reps {
        w.barrier()?;
        let t0 = Instant::now();
        last = op()?;
        w.barrier()?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    let mut s = secs.clone();
    let med = median(&mut s);
    Ok(Timing {
        median_s: med,
        mb_per_s: bytes as f64 / med / 1e6,
        runs_s: secs,
        reshuffled: last.reshuffled,
        aggregators: last.aggregators,
        rebuilt_blocks: last.rebuilt,
        version: last.version,
    })
}

/// Runs the parallel-file benchmark.
pub(crate) fn run(a: &IoArgs) -> Result<(), BenchError> {
    if !a.write && !a.read {
        bail!("say --write, --read or both");
    }
    let w = start(&a.common)?;
    let layout = parse_layout("--layout", &a.layout)?;
    let read_layout = match &a.read_layout {
        Some(s) => parse_layout("--read-layout", s)?,
        None => layout.clone(),
    };
    let Some(bytes) = layout.total_bytes() else {
        bail!("--layout must give the dataset's size");
    };
    // Whether anything (even a dangling symlink) was at the path before: only a file the
    // benchmark created itself is ever removed.
    let fresh = std::fs::symlink_metadata(&a.file).is_err();
    let me = w.rank();
    let reps = a.common.reps;
    let mut report = IoReport {
        benchmark: "io",
        ranks: w.size(),
        layout: &a.layout,
        read_layout: read_layout.to_string(),
        file: &a.file,
        format: &a.format,
        bytes,
        sync: a.sync,
        file_existed: !fresh,
        reshuffle: &a.reshuffle,
        node_local: a.node_local,
        write: None,
        read: None,
        verified: None,
    };
    if a.write {
        let data = fill(&layout, me, a.seed)?;
        let opts = WriteOptions {
            format: format_of(a)?,
            sync: a.sync,
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
        };
        report.write = Some(timed(&w, reps, bytes, || {
            Ok(w.write_file(&a.file, &data, &layout, &opts)?)
        })?);
    }
    if a.read {
        let mut buf = vec![0u8; share(&read_layout, me)? as usize];
        let opts = ReadOptions {
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
        };
        report.read = Some(timed(&w, reps, bytes, || {
            Ok(w.read_file(&a.file, &mut buf, &read_layout, &opts)?)
        })?);
        if a.verify {
            let bad = check(&read_layout, me, &buf, a.seed)?;
            let flags = w.allgather_bytes(bad.as_deref().unwrap_or("").as_bytes())?;
            let errs: Vec<String> = flags
                .into_iter()
                .filter(|f| !f.is_empty())
                .map(|f| String::from_utf8_lossy(&f).into_owned())
                .collect();
            if !errs.is_empty() {
                bail!("verification failed: {}", errs.join("; "));
            }
            report.verified = Some(true);
        }
    }
    w.barrier()?;
    if me == 0 {
        // A read never deletes anything; a write cleans up only a file it created.
        if !a.keep && a.write && fresh {
            remove(&a.file);
        }
        if a.common.json {
            print_json(&report)?;
        } else {
            print_table(&report);
        }
    }
    w.finalize()?;
    Ok(())
}

fn print_table(r: &IoReport<'_>) {
    println!(
        "io: {} bytes, {} ranks, layout {}, file {} ({}{})",
        r.bytes,
        r.ranks,
        r.layout,
        r.file.display(),
        r.format,
        match (r.file_existed, r.write.is_some()) {
            (true, true) => ", replacing an existing file",
            (true, false) => ", existing file",
            (false, _) => ", fresh file",
        }
    );
    for (op, t) in [("write", &r.write), ("read", &r.read)] {
        if let Some(t) = t {
            println!(
                "  {op:5} median {:.4} s  {:.1} MB/s{}",
                t.median_s,
                t.mb_per_s,
                if t.reshuffled {
                    "  (two-phase)"
                } else {
                    "  (direct)"
                }
            );
        }
    }
    if r.verified.is_some() {
        println!("  verified every element");
    }
}
