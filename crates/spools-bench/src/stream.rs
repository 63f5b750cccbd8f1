//! `spools bench stream`: streams out of the job (the iWarp paper's streams device) to a
//! real `spools recv` process on the same machine, side by side with their limits, in
//! alternating runs (every configuration once per repetition, medians reported):
//!
//! - `links`: one stream of ADUs held `u8[ADU] block on 4` (or on all the ranks when
//!   fewer) over K links and TUs of several sizes, against iperf3 over loopback with 1 and
//!   K parallel streams moving the same bytes, at least 64 MiB (ratio of medians);
//! - `cyclic`: the paper's Figure 15 for streams: ADUs held `u8[ADU] cyclic(b) on P` (P
//!   the job's ranks), reshuffled into the links' stripes, against *raw* streaming, where
//!   every rank sends its local bytes as they lie (the same ADU held `block on P`: the
//!   reshuffle is the identity), both over P links with one TU per ADU.
//!
//! ```text
//! spools run -n 4 -- spools bench stream --parts links --json
//! spools run -n 8 -- spools bench stream --parts cyclic --json
//! ```
//!
//! Every run starts its own `spools recv --out /dev/null`, which reports the ADUs and
//! bytes it received whole; a run that did not deliver every byte it sent fails the
//! benchmark, and the document keeps both figures of every run.

use std::net::SocketAddr;
use std::time::Instant;

use serde::Serialize;
use spools::{Layout, StreamFormat, World};

use crate::args::StreamArgs;
use crate::dataset::{fill, parse_layout};
use crate::error::{bail, ensure, BenchError};
use crate::output::print_json;
use crate::series::{Point, Series};
use crate::session::start;
use crate::sizes::{parse_size, parse_sizes};
use crate::stats::{median, rounded};

mod common;
mod group;
mod peers;

use common::{agree, receiver_addr, Timing};
use group::{group_part, GroupPart, GroupSizes};
use peers::{iperf3, IperfRun, Received, SpoolsRecv};

/// Ranks holding the ADU in the `links` part (at most).
const HOLDERS: u32 = 4;

/// Bytes of an iperf3 run at least: below, its start dominates.
const IPERF_MIN: u64 = 64 << 20;

/// One timed run of a stream.
#[derive(Debug, Clone, Copy, Serialize)]
struct Run {
    /// Seconds from the first ADU (the stream open on every rank) to the receiver's end.
    #[serde(serialize_with = "rounded::<6, _>")]
    seconds: f64,
    /// Bytes the job sent (ADUs times their size).
    bytes: u64,
    /// ADUs the job sent.
    adus: u64,
    /// What `spools recv` received whole.
    received: Received,
}

/// One (K, TU) point of the `links` part.
#[derive(Debug, Serialize)]
struct LinksPoint {
    /// Links of the stream.
    links: u16,
    /// Bytes of a TU.
    tu: u64,
    /// The stream's runs.
    stream: Timing<Run>,
    /// The stream's median rate over iperf3's with one stream.
    #[serde(serialize_with = "rounded::<3, _>")]
    vs_iperf3_1: f64,
    /// The stream's median rate over iperf3's with K parallel streams.
    #[serde(serialize_with = "rounded::<3, _>")]
    vs_iperf3_k: f64,
}

/// iperf3 with some parallel streams.
#[derive(Debug, Serialize)]
struct IperfPoint {
    /// Parallel streams (`-P`).
    streams: u16,
    /// Its runs.
    runs: Vec<IperfRun>,
    /// The median of the runs' rates, MB/s.
    #[serde(serialize_with = "rounded::<1, _>")]
    mb_per_s: f64,
}

/// The `links` part.
#[derive(Debug, Serialize)]
struct LinksPart {
    /// Ranks holding the ADU (`block on H`).
    holders: u32,
    /// Bytes of one ADU.
    adu_bytes: u64,
    /// ADUs per run.
    adus: u64,
    /// The stream's points.
    points: Vec<LinksPoint>,
    /// iperf3 over loopback, moving the bytes of one run (at least 64 MiB).
    iperf3: Vec<IperfPoint>,
}

/// One block size of the `cyclic` part.
#[derive(Debug, Serialize)]
struct CyclicPoint {
    /// The block size `b` of `cyclic(b)`, bytes.
    block: u64,
    /// The ADU held `cyclic(b)`, reshuffled into the links' stripes.
    reshuffled: Timing<Run>,
    /// The same bytes held `block`, sent as they lie.
    raw: Timing<Run>,
    /// Median seconds reshuffled over raw.
    #[serde(serialize_with = "rounded::<3, _>")]
    ratio: f64,
}

/// The `cyclic` part (Figure 15).
#[derive(Debug, Serialize)]
struct CyclicPart {
    /// Ranks holding the ADU, and links (one per rank).
    ranks: u32,
    /// Bytes of one ADU (and of its one TU).
    adu_bytes: u64,
    /// ADUs per run.
    adus: u64,
    /// One point per block size.
    points: Vec<CyclicPoint>,
}

/// The document of `spools bench stream --json`.
#[derive(Debug, Serialize)]
struct StreamReport {
    /// Always `stream`.
    benchmark: &'static str,
    /// Ranks of the job.
    ranks: u32,
    /// Whether the ranks' shares were held in the shared heap (`--heap`).
    heap: bool,
    /// Repetitions (alternating runs of every configuration).
    reps: usize,
    /// The `links` part, when run.
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<LinksPart>,
    /// The `cyclic` part, when run.
    #[serde(skip_serializing_if = "Option::is_none")]
    cyclic: Option<CyclicPart>,
    /// The `group` part, when run.
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<GroupPart>,
}

/// The sizes of a run, after `--quick`.
struct Sizes {
    links: Vec<u16>,
    tus: Vec<u64>,
    adu: u64,
    adus: u64,
    blocks: Vec<u64>,
    cyclic_adu: u64,
    group: GroupSizes,
}

fn sizes(a: &StreamArgs) -> Result<Sizes, BenchError> {
    let u64s = |v: Vec<usize>| v.into_iter().map(|x| x as u64).collect::<Vec<u64>>();
    let quick = |full: &Option<String>, q: &str, d: &str| -> Result<u64, BenchError> {
        let s = full.as_deref().unwrap_or(if a.quick { q } else { d });
        Ok(parse_size(s)? as u64)
    };
    let list = |given: &Option<Vec<String>>, q: &[&str], d: &[&str]| {
        let v: Vec<String> = match given {
            Some(g) => g.clone(),
            None => (if a.quick { q } else { d })
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
        };
        parse_sizes(&v).map(u64s)
    };
    let mut links = a.links.clone().unwrap_or_else(|| {
        if a.quick {
            vec![1, 2]
        } else {
            vec![1, 2, 4, 8]
        }
    });
    links.sort_unstable();
    links.dedup();
    Ok(Sizes {
        links,
        tus: list(&a.tus, &["64K", "256K"], &["64K", "256K", "1M", "4M"])?,
        adu: quick(&a.adu, "1M", "16M")?,
        adus: a.adus.unwrap_or(if a.quick { 2 } else { 16 }),
        blocks: list(&a.blocks, &["128", "8K"], &["128", "512", "2K", "8K"])?,
        cyclic_adu: quick(&a.cyclic_adu, "256K", "8M")?,
        group: GroupSizes {
            hw: frame_size(a)?,
            frames: a.frames.unwrap_or(if a.quick { 3 } else { 60 }),
            links: a.group_links,
            tu: quick(&a.group_tu, "64K", "1M")?,
        },
    })
}

/// `--frame HxW` (default 1080x1920; quick 120x160).
fn frame_size(a: &StreamArgs) -> Result<(u64, u64), BenchError> {
    let f = a
        .frame
        .as_deref()
        .unwrap_or(if a.quick { "120x160" } else { "1080x1920" });
    let parsed = f
        .split_once('x')
        .and_then(|(h, w)| Some((h.parse::<u64>().ok()?, w.parse::<u64>().ok()?)));
    match parsed {
        Some((h, w)) if h > 0 && w > 0 => Ok((h, w)),
        _ => bail!("--frame {f}: HEIGHTxWIDTH, both positive"),
    }
}

/// Sends `adus` ADUs, each `data` (this rank's share of `layout`), as one stream to
/// `dest`, and returns when the stream was open on every rank. The only use of the
/// job-side stream API in the benchmarks.
fn send_stream(
    w: &World,
    dest: SocketAddr,
    layout: &Layout,
    format: StreamFormat,
    data: &[u8],
    adus: u64,
) -> Result<Instant, BenchError> {
    let mut s = w.stream_open(dest, format)?;
    w.barrier()?;
    let t0 = Instant::now();
    for _ in 0..adus {
        s.send_adu(data, layout)?;
    }
    s.close()?;
    Ok(t0)
}

/// This rank's share of a dataset, where `--heap` puts it.
enum Held {
    /// Private memory.
    Private(Vec<u8>),
    /// A buffer of the shared heap.
    Heap(spools::SharedBuf<u8>),
}

impl std::ops::Deref for Held {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Held::Private(v) => v,
            Held::Heap(b) => b,
        }
    }
}

/// Holds `data` in private memory, or (`heap`) copied into the shared heap.
fn hold(w: &World, heap: bool, data: Vec<u8>) -> Result<Held, BenchError> {
    if !heap {
        return Ok(Held::Private(data));
    }
    let mut b = w
        .alloc::<u8>(data.len())
        .map_err(|e| BenchError::Invalid(format!("a shared-heap buffer: {e}")))?;
    b.copy_from_slice(&data);
    Ok(Held::Heap(b))
}

/// One run of a stream to a fresh `spools recv`: every rank calls it; rank 0 starts the
/// receiver, times the run up to the receiver's end, and checks it received every byte.
fn stream_run(
    w: &World,
    layout: &Layout,
    format: StreamFormat,
    data: &[u8],
    adus: u64,
) -> Result<Run, BenchError> {
    let recv = if w.rank() == 0 {
        Some(SpoolsRecv::start())
    } else {
        None
    };
    let dest = receiver_addr(
        w,
        recv.as_ref()
            .map(|r| r.as_ref().map(|r| r.addr).map_err(ToString::to_string)),
    )?;
    let t0 = send_stream(w, dest, layout, format, data, adus)?;
    let bytes = adus * layout.total_bytes().unwrap_or(0);
    let done = match recv {
        Some(Ok(r)) => r.finish().and_then(|got| {
            ensure!(
                got.bytes == bytes && got.adus == adus,
                "spools recv received {} ADUs of {} bytes, the job sent {adus} of {bytes}",
                got.adus,
                got.bytes
            );
            Ok(Some(got))
        }),
        _ => Ok(None),
    };
    let seconds = t0.elapsed().as_secs_f64();
    let received = done.as_ref().ok().copied().flatten().unwrap_or_default();
    agree(w, done.map(|_| ()))?;
    Ok(Run {
        seconds,
        bytes,
        adus,
        received,
    })
}

/// One iperf3 run on rank 0 (the others wait), agreed.
fn iperf_run(w: &World, streams: u16, bytes: u64) -> Result<Option<IperfRun>, BenchError> {
    let r = if w.rank() == 0 {
        iperf3(streams, bytes).map(Some)
    } else {
        Ok(None)
    };
    let run = r.as_ref().ok().copied().flatten();
    agree(w, r.map(|_| ()))?;
    Ok(run)
}

fn links_part(w: &World, a: &StreamArgs, s: &Sizes) -> Result<LinksPart, BenchError> {
    let holders = w.size().min(HOLDERS);
    let layout = parse_layout("--adu", &format!("u8[{}] block on {holders}", s.adu))?;
    let data = hold(w, a.heap, fill(&layout, w.rank(), 0)?)?;
    // Link `s` is owned by rank `s % P`: any number of links from any number of ranks.
    let ks = s.links.clone();
    let mut points: Vec<LinksPoint> = Vec::new();
    for &k in &ks {
        for &tu in &s.tus {
            ensure!(
                tu % u64::from(k) == 0,
                "TU {tu} is not a multiple of {k} links"
            );
            points.push(LinksPoint {
                links: k,
                tu,
                stream: Timing::new(),
                vs_iperf3_1: 0.0,
                vs_iperf3_k: 0.0,
            });
        }
    }
    let mut streams: Vec<u16> = std::iter::once(1).chain(ks.iter().copied()).collect();
    streams.sort_unstable();
    streams.dedup();
    let mut iperf: Vec<IperfPoint> = streams
        .iter()
        .filter(|_| !a.no_iperf3)
        .map(|&p| IperfPoint {
            streams: p,
            runs: Vec::new(),
            mb_per_s: 0.0,
        })
        .collect();
    let bytes = s.adu * s.adus;
    for _ in 0..a.common.reps {
        for p in &mut iperf {
            if let Some(r) = iperf_run(w, p.streams, bytes.max(IPERF_MIN))? {
                p.runs.push(r);
            }
        }
        for p in &mut points {
            let f = StreamFormat {
                links: p.links,
                tu: p.tu,
                ..StreamFormat::default()
            };
            p.stream
                .runs
                .push(stream_run(w, &layout, f, &data, s.adus)?);
        }
    }
    for p in &mut iperf {
        let mut rates: Vec<f64> = p.runs.iter().map(|r| r.mb_per_s).collect();
        p.mb_per_s = median(&mut rates);
    }
    let rate = |n: u16| {
        iperf
            .iter()
            .find(|p| p.streams == n)
            .map_or(0.0, |p| p.mb_per_s)
    };
    for p in &mut points {
        p.stream.summarise(|r| r.seconds, bytes);
        let ratio = |limit: f64| {
            if limit > 0.0 {
                p.stream.mb_per_s / limit
            } else {
                0.0
            }
        };
        p.vs_iperf3_1 = ratio(rate(1));
        p.vs_iperf3_k = ratio(rate(p.links));
    }
    Ok(LinksPart {
        holders,
        adu_bytes: s.adu,
        adus: s.adus,
        points,
        iperf3: iperf,
    })
}

fn cyclic_part(w: &World, a: &StreamArgs, s: &Sizes) -> Result<CyclicPart, BenchError> {
    let p = w.size();
    let Ok(links) = u16::try_from(p) else {
        bail!(
            "the cyclic part takes one link per rank: at most {} ranks",
            u16::MAX
        );
    };
    // The default size is rounded down to a multiple of the ranks; a given one must be.
    let adu = if a.cyclic_adu.is_some() {
        s.cyclic_adu
    } else {
        s.cyclic_adu - s.cyclic_adu % u64::from(p)
    };
    ensure!(
        adu % u64::from(p) == 0 && adu > 0,
        "--cyclic-adu {adu} must be a positive multiple of the {p} ranks"
    );
    let format = StreamFormat {
        links,
        tu: adu,
        ..StreamFormat::default()
    };
    let raw = parse_layout(
        "--cyclic-adu",
        &format!("u8[{}] block on {p}", s.cyclic_adu),
    )?;
    let raw_data = hold(w, a.heap, fill(&raw, w.rank(), 0)?)?;
    let mut points = Vec::new();
    let mut layouts = Vec::new();
    for &b in &s.blocks {
        let l = parse_layout("--blocks", &format!("u8[{adu}] cyclic({b}) on {p}"))?;
        let d = hold(w, a.heap, fill(&l, w.rank(), 0)?)?;
        layouts.push((l, d));
        points.push(CyclicPoint {
            block: b,
            reshuffled: Timing::new(),
            raw: Timing::new(),
            ratio: 0.0,
        });
    }
    for _ in 0..a.common.reps {
        for (pt, (l, d)) in points.iter_mut().zip(&layouts) {
            pt.reshuffled
                .runs
                .push(stream_run(w, l, format, d, s.adus)?);
            pt.raw
                .runs
                .push(stream_run(w, &raw, format, &raw_data, s.adus)?);
        }
    }
    let bytes = adu * s.adus;
    for pt in &mut points {
        pt.reshuffled.summarise(|r| r.seconds, bytes);
        pt.raw.summarise(|r| r.seconds, bytes);
        pt.ratio = pt.reshuffled.median_s / pt.raw.median_s.max(1e-9);
    }
    Ok(CyclicPart {
        ranks: p,
        adu_bytes: adu,
        adus: s.adus,
        points,
    })
}

/// Runs the stream benchmarks.
pub(crate) fn run(a: &StreamArgs) -> Result<(), BenchError> {
    for part in &a.parts {
        ensure!(
            part == "links" || part == "cyclic" || part == "group",
            "--parts {part}: links, cyclic or group"
        );
    }
    let s = sizes(a)?;
    ensure!(
        !s.links.contains(&0) && s.tus.iter().all(|&t| t > 0) && s.blocks.iter().all(|&b| b > 0),
        "links, TUs and blocks must be positive"
    );
    let w = start(&a.common)?;
    let links = if a.parts.iter().any(|p| p == "links") {
        Some(links_part(&w, a, &s)?)
    } else {
        None
    };
    let cyclic = if a.parts.iter().any(|p| p == "cyclic") {
        Some(cyclic_part(&w, a, &s)?)
    } else {
        None
    };
    let group = if a.parts.iter().any(|p| p == "group") {
        Some(group_part(&w, a.common.reps, &s.group)?)
    } else {
        None
    };
    w.barrier()?;
    if w.rank() == 0 {
        let report = StreamReport {
            benchmark: "stream",
            ranks: w.size(),
            heap: a.heap,
            reps: a.common.reps,
            links,
            cyclic,
            group,
        };
        if let Some(file) = &a.plot {
            plot(file, &report)?;
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

/// The plotted series' names for K links and iperf3 with K streams (static, as the
/// plotter wants them; "more" beyond 8).
fn series_names(k: u16) -> (&'static str, &'static str) {
    const NAMES: [(&str, &str); 8] = [
        ("stream, 1 link", "iperf3 -P 1"),
        ("stream, 2 links", "iperf3 -P 2"),
        ("stream, 3 links", "iperf3 -P 3"),
        ("stream, 4 links", "iperf3 -P 4"),
        ("stream, 5 links", "iperf3 -P 5"),
        ("stream, 6 links", "iperf3 -P 6"),
        ("stream, 7 links", "iperf3 -P 7"),
        ("stream, 8 links", "iperf3 -P 8"),
    ];
    NAMES
        .get(usize::from(k).wrapping_sub(1))
        .copied()
        .unwrap_or(("stream, more links", "iperf3 -P more"))
}

/// A point of a plot: at `x`, one ADU in `adu_s` seconds and a rate of `mbps`.
fn point(x: u64, adu_s: f64, mbps: f64) -> Point {
    Point {
        bytes: x as usize,
        latency_us: adu_s * 1e6,
        mbps,
    }
}

/// `--plot FILE`: the links part against the TU (FILE), the cyclic part against the block
/// size (FILE with `-cyclic` before its extension).
fn plot(file: &std::path::Path, r: &StreamReport) -> Result<(), BenchError> {
    if let Some(l) = &r.links {
        let mut series: Vec<Series> = Vec::new();
        let mut ks: Vec<u16> = l.points.iter().map(|p| p.links).collect();
        ks.dedup();
        for k in ks {
            let points = l
                .points
                .iter()
                .filter(|p| p.links == k)
                .map(|p| point(p.tu, p.stream.median_s / l.adus as f64, p.stream.mb_per_s))
                .collect();
            series.push(Series {
                path: series_names(k).0,
                points,
            });
        }
        // iperf3 does not cut into TUs: a flat line over the TUs measured.
        let mut tus: Vec<u64> = l.points.iter().map(|p| p.tu).collect();
        tus.sort_unstable();
        tus.dedup();
        for i in &l.iperf3 {
            let adu_s = l.adu_bytes as f64 / i.mb_per_s.max(1e-9) / 1e6;
            series.push(Series {
                path: series_names(i.streams).1,
                points: tus.iter().map(|&tu| point(tu, adu_s, i.mb_per_s)).collect(),
            });
        }
        crate::plot::write(file, "stream by TU (per ADU)", &series)?;
    }
    if let Some(c) = &r.cyclic {
        let per_adu = |t: &Timing<Run>| t.median_s / c.adus as f64;
        let series = [
            Series {
                path: "reshuffled cyclic(b)",
                points: c
                    .points
                    .iter()
                    .map(|p| point(p.block, per_adu(&p.reshuffled), p.reshuffled.mb_per_s))
                    .collect(),
            },
            Series {
                path: "raw (as held)",
                points: c
                    .points
                    .iter()
                    .map(|p| point(p.block, per_adu(&p.raw), p.raw.mb_per_s))
                    .collect(),
            },
        ];
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        let ext = file
            .extension()
            .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
        let other = file.with_file_name(format!("{stem}-cyclic{ext}"));
        crate::plot::write(&other, "stream by block b (per ADU)", &series)?;
    }
    Ok(())
}

fn print_table(r: &StreamReport) {
    if let Some(l) = &r.links {
        println!(
            "stream links: {} ADUs of {} bytes held block on {}, median of {} runs",
            l.adus, l.adu_bytes, l.holders, r.reps
        );
        for i in &l.iperf3 {
            println!(
                "  iperf3 -P {:<2}              {:>9.1} MB/s",
                i.streams, i.mb_per_s
            );
        }
        for p in &l.points {
            println!(
                "  K={:<2} TU={:<9} {:>9.1} MB/s  x{:.2} of iperf3 -P 1, x{:.2} of -P {}",
                p.links, p.tu, p.stream.mb_per_s, p.vs_iperf3_1, p.vs_iperf3_k, p.links
            );
        }
    }
    if let Some(c) = &r.cyclic {
        println!(
            "stream cyclic: {} ADUs of {} bytes on {} ranks and links, median of {} runs",
            c.adus, c.adu_bytes, c.ranks, r.reps
        );
        for p in &c.points {
            println!(
                "  b={:<6} reshuffled {:>9.1} MB/s  raw {:>9.1} MB/s  ratio {:.2}",
                p.block, p.reshuffled.mb_per_s, p.raw.mb_per_s, p.ratio
            );
        }
    }
    if let Some(g) = &r.group {
        println!(
            "stream group: {} lock-step streams of {} frames of {} bytes from {} ranks over {} links, median of {} runs",
            g.streams, g.frames, g.frame_bytes, g.ranks, g.links, r.reps
        );
        println!(
            "  {:.1} frames/s of the group ({:.1} MB/s), skew {}",
            g.frames_per_s, g.timing.mb_per_s, g.skew
        );
    }
}
