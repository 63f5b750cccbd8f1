//! `spools bench io`: the IOR-like checking and timing tool for parallel files. Run under
//! `spools run -n N`, it writes a dataset whose every element holds its own global index
//! (in the element type, wrapping for small types; plus `--seed`), and/or reads it back
//! with the same or another layout, `--verify` checking every element.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;
use spools::{Format, Layout, ReadOptions, Reshuffle, Striping, WriteOptions};
use spools_map::DType;

use super::{median, start, IoArgs};

/// The bytes of element `idx` (plus `seed`) in `dtype`, little-endian.
fn value(dtype: DType, idx: u64, out: &mut [u8]) {
    let v = idx;
    match dtype {
        DType::U8 | DType::I8 => out[0] = v as u8,
        DType::U16 | DType::I16 => out.copy_from_slice(&(v as u16).to_le_bytes()),
        DType::U32 | DType::I32 => out.copy_from_slice(&(v as u32).to_le_bytes()),
        DType::U64 | DType::I64 => out.copy_from_slice(&v.to_le_bytes()),
        DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&(v as f64).to_le_bytes()),
        DType::C64 => {
            out[..4].copy_from_slice(&(v as f32).to_le_bytes());
            out[4..].fill(0);
        }
        DType::C128 => {
            out[..8].copy_from_slice(&(v as f64).to_le_bytes());
            out[8..].fill(0);
        }
        DType::Bytes(_) => {
            for (i, b) in out.iter_mut().enumerate() {
                *b = (v >> (8 * (i % 8))) as u8;
            }
        }
    }
}

fn dtype_of(l: &Layout) -> DType {
    match l {
        Layout::Array(a) => a.dtype(),
        _ => DType::U8,
    }
}

/// Calls `f(local offset, global element index)` for every element of this rank's part.
fn each_element(l: &Layout, me: u32, mut f: impl FnMut(usize, u64)) -> Result<()> {
    if u64::from(me) >= l.units() {
        return Ok(());
    }
    let es = l.elem_size().max(1);
    for e in l.extents(u64::from(me))? {
        for k in 0..e.len / es {
            f((e.local + k * es) as usize, e.global / es + k);
        }
    }
    Ok(())
}

/// Bytes of rank `me`'s share of `l` (rank r holds unit r; none beyond the units).
pub(crate) fn share(l: &Layout, me: u32) -> Result<u64> {
    Ok(if u64::from(me) < l.units() {
        l.local_bytes(u64::from(me))?
    } else {
        0
    })
}

/// This rank's part of the dataset, every element holding its index plus `seed`.
pub(crate) fn fill(l: &Layout, me: u32, seed: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; share(l, me)? as usize];
    let (d, es) = (dtype_of(l), l.elem_size() as usize);
    each_element(l, me, |at, idx| {
        value(d, idx.wrapping_add(seed), &mut buf[at..at + es])
    })?;
    Ok(buf)
}

/// The first element of this rank's part that does not hold its index plus `seed`.
pub(crate) fn check(l: &Layout, me: u32, buf: &[u8], seed: u64) -> Result<Option<String>> {
    let (d, es) = (dtype_of(l), l.elem_size() as usize);
    let mut want = vec![0u8; es];
    let mut bad = None;
    each_element(l, me, |at, idx| {
        if bad.is_none() {
            value(d, idx.wrapping_add(seed), &mut want);
            if buf[at..at + es] != want[..] {
                bad = Some(format!(
                    "rank {me}: element {idx} (local byte {at}) holds {:02x?}, expected {:02x?}",
                    &buf[at..at + es],
                    want
                ));
            }
        }
    })?;
    Ok(bad)
}

fn format_of(a: &IoArgs) -> Result<Format> {
    Ok(match a.format.as_str() {
        "canonical" => Format::Canonical,
        "npy" => Format::Npy,
        spec => {
            let layout: Layout = spec.parse().with_context(|| format!("--format {spec}"))?;
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
pub(crate) fn remove(path: &Path) {
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

/// Runs `op` `reps` times between barriers; returns the timings as JSON with the last
/// run's statistics added.
fn timed(
    w: &spools::World,
    reps: usize,
    bytes: u64,
    mut op: impl FnMut() -> Result<spools::FileStats>,
) -> Result<serde_json::Value> {
    let mut secs = Vec::new();
    let mut last = spools::FileStats::default();
    for _ in 0..reps {
        w.barrier()?;
        let t0 = Instant::now();
        last = op()?;
        w.barrier()?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    let mut s = secs.clone();
    let med = median(&mut s);
    Ok(json!({
        "median_s": med, "mb_per_s": bytes as f64 / med / 1e6, "runs_s": secs,
        "reshuffled": last.reshuffled, "aggregators": last.aggregators,
        "rebuilt_blocks": last.rebuilt, "version": last.version,
    }))
}

pub(crate) fn run(a: &IoArgs) -> Result<()> {
    if !a.write && !a.read {
        bail!("say --write, --read or both");
    }
    let w = start(&a.common)?;
    let layout: Layout = a
        .layout
        .parse()
        .with_context(|| format!("--layout {}", a.layout))?;
    let read_layout: Layout = match &a.read_layout {
        Some(s) => s.parse().with_context(|| format!("--read-layout {s}"))?,
        None => layout.clone(),
    };
    let bytes = layout
        .total_bytes()
        .context("--layout must give the dataset's size")?;
    // Whether anything (even a dangling symlink) was at the path before: only a file the
    // benchmark created itself is ever removed.
    let fresh = std::fs::symlink_metadata(&a.file).is_err();
    let me = w.rank();
    let reps = a.common.reps;
    let mut report = json!({
        "benchmark": "io", "ranks": w.size(), "layout": a.layout, "read_layout": read_layout.to_string(),
        "file": a.file, "format": a.format, "bytes": bytes, "sync": a.sync,
        "file_existed": !fresh, "reshuffle": a.reshuffle, "node_local": a.node_local,
    });
    if a.write {
        let data = fill(&layout, me, a.seed)?;
        let opts = WriteOptions {
            format: format_of(a)?,
            sync: a.sync,
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
        };
        report["write"] = timed(&w, reps, bytes, || {
            Ok(w.write_file(&a.file, &data, &layout, &opts)?)
        })?;
    }
    if a.read {
        let mut buf = vec![0u8; share(&read_layout, me)? as usize];
        let opts = ReadOptions {
            integrity: !a.no_integrity,
            reshuffle: reshuffle_of(&a.reshuffle),
        };
        report["read"] = timed(&w, reps, bytes, || {
            Ok(w.read_file(&a.file, &mut buf, &read_layout, &opts)?)
        })?;
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
            report["verified"] = json!(true);
        }
    }
    w.barrier()?;
    if me == 0 {
        // A read never deletes anything; a write cleans up only a file it created.
        if !a.keep && a.write && fresh {
            remove(&a.file);
        }
        if a.common.json {
            println!("{report}");
        } else {
            print_table(&report);
        }
    }
    w.finalize()?;
    Ok(())
}

fn print_table(r: &serde_json::Value) {
    println!(
        "io: {} bytes, {} ranks, layout {}, file {} ({}{})",
        r["bytes"],
        r["ranks"],
        r["layout"].as_str().unwrap_or(""),
        r["file"].as_str().unwrap_or(""),
        r["format"].as_str().unwrap_or(""),
        match (
            r["file_existed"].as_bool() == Some(true),
            r.get("write").is_some(),
        ) {
            (true, true) => ", replacing an existing file",
            (true, false) => ", existing file",
            (false, _) => ", fresh file",
        }
    );
    for op in ["write", "read"] {
        if let Some(o) = r.get(op) {
            println!(
                "  {op:5} median {:.4} s  {:.1} MB/s{}",
                o["median_s"].as_f64().unwrap_or(0.0),
                o["mb_per_s"].as_f64().unwrap_or(0.0),
                if o["reshuffled"].as_bool() == Some(true) {
                    "  (two-phase)"
                } else {
                    "  (direct)"
                }
            );
        }
    }
    if r.get("verified").is_some() {
        println!("  verified every element");
    }
}
