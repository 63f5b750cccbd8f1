//! `spools bench io`: the IOR-like checking and timing tool for parallel files. Run under
//! `spools run -n N`, it writes a dataset whose every element holds its own global index
//! (in the element type, wrapping for small types; plus `--seed`), and/or reads it back
//! with the same or another layout, `--verify` checking every element.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use spools::{
    Commit, FileStats, Format, Layout, ReadOptions, Reshuffle, Striping, World, WriteOptions,
};
use spools_map::{DType, Dist, Order};

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
    /// Whether the last repetition was a sieved read (every rank read the windows of the
    /// file that hold its runs).
    sieved: bool,
    /// Whether that sieved read shared its windows (each read once on the host).
    sieve_shared: bool,
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
    /// Whether writes went in place (`--in-place`) rather than replacing the file.
    in_place: bool,
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
    /// Each rank's memory at the end of the run, by rank.
    memory: Vec<RankMemory>,
}

/// One rank's memory: its peak resident set against the buffers the benchmark itself holds.
#[derive(Debug, Serialize)]
struct RankMemory {
    /// Peak resident set size (`VmHWM` of `/proc/self/status`) in KiB; absent where the
    /// kernel does not report it.
    peak_rss_kib: Option<u64>,
    /// Bytes of the rank's own data buffers (the dataset's share written, plus the buffer
    /// read into).
    buffer_bytes: u64,
}

fn format_of(a: &IoArgs) -> Result<Format, BenchError> {
    Ok(match a.format.as_str() {
        "canonical" => Format::Canonical,
        "npy" => Format::Npy,
        spec if spec.starts_with("zarr(") || spec.starts_with("hdf5") => {
            Format::parse(spec, Vec::new(), false)
                .map_err(|e| BenchError::Invalid(e.to_string()))?
        }
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

/// Removes a parallel file: the file itself, its checksum sidecar, and for a striped file
/// every unit of both slots.
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
    if path.join("zarr.json").is_file() {
        let _ = std::fs::remove_dir_all(path);
        return;
    }
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(spools_io::file::sidecar_path(path));
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
        sieved: last.sieved,
        sieve_shared: last.sieve_shared,
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
        in_place: a.in_place,
        file_existed: !fresh,
        reshuffle: &a.reshuffle,
        node_local: a.node_local,
        write: None,
        read: None,
        verified: None,
        memory: Vec::new(),
    };
    let mut buffer_bytes = 0u64;
    if a.write {
        let data = fill(&layout, me, a.seed)?;
        buffer_bytes += data.len() as u64;
        let opts = WriteOptions {
            format: format_of(a)?,
            sync: a.sync,
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
            checksums: a.checksums,
            commit: if a.in_place {
                Commit::InPlace
            } else {
                Commit::Replace
            },
            ..WriteOptions::default()
        };
        report.write = Some(timed(&w, reps, bytes, || {
            Ok(w.write_file(&a.file, &data, &layout, &opts)?)
        })?);
    }
    if a.read {
        // Touched before the timer (as the MPI peer's memset): a fresh buffer's first-touch
        // page faults (the kernel zeroing every page) are not the read.
        let mut buf = vec![0xa5u8; share(&read_layout, me)? as usize];
        buffer_bytes += buf.len() as u64;
        let opts = ReadOptions {
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
            checksums: a.checksums,
            ..ReadOptions::default()
        };
        report.read = Some(timed(&w, reps, bytes, || {
            Ok(w.read_file(&a.file, &mut buf, &read_layout, &opts)?)
        })?);
        if a.verify {
            // Through `Layout::extents` (as the plans), then again from the definitions.
            let bad = match check(&read_layout, me, &buf, a.seed)? {
                None => check_by_definition(&read_layout, me, &buf, a.seed),
                bad => bad,
            };
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
    report.memory = gather_memory(&w, buffer_bytes)?;
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

/// The `VmHWM` line of `/proc/self/status` (peak resident set, KiB), if there is one.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Every rank's memory, by rank (a collective: each rank sends its peak resident set and
/// buffer bytes, 16 bytes, `u64::MAX` standing for an unknown peak).
fn gather_memory(w: &World, buffer_bytes: u64) -> Result<Vec<RankMemory>, BenchError> {
    let mut mine = peak_rss_kib().unwrap_or(u64::MAX).to_le_bytes().to_vec();
    mine.extend_from_slice(&buffer_bytes.to_le_bytes());
    let all = w.allgather_bytes(&mine)?;
    let word = |b: &[u8], at: usize| -> Result<u64, BenchError> {
        match b.get(at..at + 8).map(<[u8; 8]>::try_from) {
            Some(Ok(x)) => Ok(u64::from_le_bytes(x)),
            _ => bail!("a rank sent {} bytes of memory figures, not 16", b.len()),
        }
    };
    all.iter()
        .map(|b| {
            let rss = word(b, 0)?;
            Ok(RankMemory {
                peak_rss_kib: (rss != u64::MAX).then_some(rss),
                buffer_bytes: word(b, 8)?,
            })
        })
        .collect()
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
                } else if t.sieve_shared {
                    "  (sieved, shared windows)"
                } else if t.sieved {
                    "  (sieved)"
                } else {
                    "  (direct)"
                }
            );
        }
    }
    if r.verified.is_some() {
        println!("  verified every element");
    }
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    for (rank, m) in r.memory.iter().enumerate() {
        let peak = m.peak_rss_kib.map_or_else(
            || "unknown".to_string(),
            |k| format!("{:.1} MiB", mib(k * 1024)),
        );
        println!(
            "  rank {rank}: peak RSS {peak}, own buffers {:.1} MiB",
            mib(m.buffer_bytes)
        );
    }
}

/// The bytes of element value `v` in `dtype` (little-endian, wrapping; complex numbers
/// with a zero imaginary part; `bytes(n)` the value's bytes repeated): the dataset's
/// definition, written again here for [`check_by_definition`].
fn encode(dtype: DType, v: u64) -> Vec<u8> {
    match dtype {
        DType::U8 | DType::I8 => vec![v as u8],
        DType::U16 | DType::I16 => (v as u16).to_le_bytes().to_vec(),
        DType::U32 | DType::I32 => (v as u32).to_le_bytes().to_vec(),
        DType::U64 | DType::I64 => v.to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => (v as f64).to_le_bytes().to_vec(),
        DType::C64 => [(v as f32).to_le_bytes(), [0; 4]].concat(),
        DType::C128 => [(v as f64).to_le_bytes(), [0; 8]].concat(),
        DType::Bytes(n) => (0..n).map(|i| (v >> (8 * (i % 8))) as u8).collect(),
    }
}

/// `--verify` from the definitions of the distributions, sharing no code with
/// `Layout::extents` (which the plans use): for every element of this rank's part, its
/// global index computed directly (HPF block-cyclic per dimension, units numbered
/// row-major over the grid; RAID-0; md left-symmetric RAID-5) and its value checked. The
/// first element found wrong, if any; bit-map and irregular layouts are not modelled.
fn check_by_definition(l: &Layout, me: u32, buf: &[u8], seed: u64) -> Option<String> {
    let me64 = u64::from(me);
    let bad = |what: String| Some(format!("rank {me}: {what} (checked from the definition)"));
    match l {
        Layout::Array(a) => {
            let (shape, grid, d) = (a.shape(), a.grid(), a.shape().len());
            if me64 >= grid.iter().product::<u64>() {
                return None;
            }
            let mut coord = vec![0u64; d];
            let mut rest = me64;
            for k in (0..d).rev() {
                coord[k] = rest % grid[k];
                rest /= grid[k];
            }
            // Per dimension: block size, and how many indices this coordinate holds.
            let mut block = vec![0u64; d];
            let mut held = vec![0u64; d];
            for k in 0..d {
                let (n, p) = (shape[k], grid[k]);
                let b = match a.dists()[k] {
                    Dist::Block(None) => n.div_ceil(p).max(1),
                    Dist::Block(Some(b)) | Dist::Cyclic(b) => b,
                    Dist::Whole => n.max(1),
                };
                let (full, rem) = (n / (b * p), n % (b * p));
                block[k] = b;
                held[k] = full * b + b.min(rem.saturating_sub(coord[k] * b));
            }
            let fast: Vec<usize> = match a.order() {
                Order::C => (0..d).rev().collect(),
                Order::F => (0..d).collect(),
            };
            let es = a.dtype().size() as usize;
            let count: u64 = held.iter().product();
            let mut lidx = vec![0u64; d];
            for local in 0..count as usize {
                // The global index of local index i along dimension k: its block's
                // position in the cycle, then the offset in the block.
                let mut global = 0u64;
                let mut stride = 1u64;
                for &k in &fast {
                    let (b, p, i) = (block[k], grid[k], lidx[k]);
                    global += ((i / b) * b * p + coord[k] * b + i % b) * stride;
                    stride *= shape[k];
                }
                let want = encode(a.dtype(), global.wrapping_add(seed));
                let got = buf.get(local * es..(local + 1) * es).unwrap_or(&[]);
                if got != &want[..] {
                    return bad(format!(
                        "element {global} (local element {local}) holds {got:02x?}, expected {want:02x?}"
                    ));
                }
                for &k in &fast {
                    lidx[k] += 1;
                    if lidx[k] < held[k] {
                        break;
                    }
                    lidx[k] = 0;
                }
            }
            None
        }
        Layout::Stripe(_) | Layout::Raid5(_) => {
            let (unit, k, size, raid5) = match l {
                Layout::Stripe(s) => (s.unit(), s.count(), s.size()?, false),
                Layout::Raid5(r) => (r.unit(), r.count(), r.size()?, true),
                _ => return None,
            };
            // Local block j of unit `me`: RAID-0 holds stream block j*k + me; RAID-5 row j
            // holds its parity on unit k-1 - j mod k and data block i of the row on the
            // i-th unit after it.
            for (j, got) in buf.chunks(unit as usize).enumerate() {
                let j = j as u64;
                let block = if raid5 {
                    let parity = k - 1 - j % k;
                    if parity == me64 {
                        continue;
                    }
                    j * (k - 1) + (me64 + k - parity - 1) % k
                } else {
                    j * k + me64
                };
                for (x, &b) in got.iter().enumerate() {
                    let g = block * unit + x as u64;
                    if g >= size {
                        break;
                    }
                    if b != g.wrapping_add(seed) as u8 {
                        return bad(format!("byte {g} holds {b:#04x}"));
                    }
                }
            }
            None
        }
        _ => None,
    }
}
