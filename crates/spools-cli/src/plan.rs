//! `spools plan --from SPEC --to SPEC [--unit K] [--json]`.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;
use spools_map::{Plan, PlanSummary};

use crate::out;

/// Matrices wider or taller than this are left to `--json`.
const MAX_MATRIX: u64 = 64;

/// Arguments of `spools plan`.
#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    /// Where the data is now (M1).
    #[arg(long)]
    from: String,
    /// Where it is to go (M2).
    #[arg(long)]
    to: String,
    /// Show only the runs this source unit sends.
    #[arg(long)]
    unit: Option<u64>,
    #[arg(
        long,
        help = "Print JSON. With --unit: {\"unit\",\"elem_size\",\"sends\":[{\"to\",\"runs\":[[src_local,dst_local,len],...]}]} in elements; without: the summary, with the traffic matrix in bytes"
    )]
    json: bool,
}

pub(crate) fn run(args: &PlanArgs) -> Result<()> {
    let from = crate::spec::parse("--from", &args.from)?;
    let to = crate::spec::parse("--to", &args.to)?;
    let plan = Plan::new(&from, &to).context("cannot plan this transfer")?;
    match args.unit {
        Some(unit) => sends(&plan, unit, args.json),
        None => summary(&plan, args.json),
    }
}

fn sends(plan: &Plan, unit: u64, json: bool) -> Result<()> {
    let part = plan.sends(unit)?;
    let g = plan.alignment();
    let mut w = out::stdout();
    if json {
        write!(w, "{{\"unit\":{unit},\"elem_size\":{g},\"sends\":[")?;
        for (i, peer) in part.peers.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            write!(w, "{{\"to\":{},\"runs\":[", peer.peer)?;
            out::triples(
                &mut w,
                peer.runs().map(|r| (r.src / g, r.dst / g, r.len / g)),
            )?;
            w.write_all(b"]}")?;
        }
        writeln!(w, "]}}")?;
    } else {
        writeln!(w, "{} -> {}", plan.src(), plan.dst())?;
        writeln!(
            w,
            "source unit {unit} sends to {} units (offsets and lengths in units of {g} bytes)",
            part.peers.len()
        )?;
        for peer in &part.peers {
            let (mut n, mut bytes) = (0u64, 0u64);
            writeln!(w, "to {}:", peer.peer)?;
            writeln!(w, "{:>16} {:>16} {:>16}", "src_local", "dst_local", "len")?;
            for r in peer.runs() {
                writeln!(w, "{:>16} {:>16} {:>16}", r.src / g, r.dst / g, r.len / g)?;
                n += 1;
                bytes += r.len;
            }
            writeln!(w, "  {n} runs, {bytes} bytes")?;
        }
    }
    w.flush()?;
    Ok(())
}

fn matrix(
    w: &mut impl Write,
    title: &str,
    s: &PlanSummary,
    cell: impl Fn(u64, u64) -> u64,
) -> std::io::Result<()> {
    writeln!(w, "{title} (rows: source unit, columns: destination unit)")?;
    let width = (0..s.src_units())
        .flat_map(|a| (0..s.dst_units()).map(move |b| (a, b)))
        .map(|(a, b)| cell(a, b).to_string().len())
        .max()
        .unwrap_or(1)
        .max(s.dst_units().to_string().len());
    let label = s.src_units().to_string().len().max(4);
    write!(w, "{:>label$}", "")?;
    for d in 0..s.dst_units() {
        write!(w, " {d:>width$}")?;
    }
    writeln!(w)?;
    for src in 0..s.src_units() {
        write!(w, "{src:>label$}")?;
        for d in 0..s.dst_units() {
            write!(w, " {:>width$}", cell(src, d))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

fn summary(plan: &Plan, json: bool) -> Result<()> {
    let s = plan.summary()?;
    let mut w = out::stdout();
    let rows = |f: &dyn Fn(u64, u64) -> u64| -> serde_json::Value {
        (0..s.src_units())
            .map(|a| (0..s.dst_units()).map(|b| f(a, b)).collect::<Vec<_>>())
            .collect()
    };
    if json {
        let doc = serde_json::json!({
            "from": plan.src().to_string(),
            "to": plan.dst().to_string(),
            "src_units": s.src_units(),
            "dst_units": s.dst_units(),
            "elem_size": plan.alignment(),
            "total_bytes": s.total_bytes(),
            "total_runs": s.total_runs(),
            "mean_run_bytes": s.mean_run_bytes(),
            "local_share": s.local_share(),
            "bytes": rows(&|a, b| s.bytes(a, b)),
            "runs": rows(&|a, b| s.runs(a, b)),
        });
        writeln!(w, "{doc}")?;
    } else {
        writeln!(w, "{} -> {}", plan.src(), plan.dst())?;
        writeln!(
            w,
            "{} bytes from {} source units to {} destination units",
            s.total_bytes(),
            s.src_units(),
            s.dst_units()
        )?;
        if s.src_units() <= MAX_MATRIX && s.dst_units() <= MAX_MATRIX {
            matrix(&mut w, "bytes", &s, |a, b| s.bytes(a, b))?;
            matrix(&mut w, "runs", &s, |a, b| s.runs(a, b))?;
        } else {
            writeln!(w, "(matrices omitted above {MAX_MATRIX} units; use --json)")?;
        }
        writeln!(
            w,
            "total: {} runs, mean run {:.1} bytes ({:.1} elements of {} bytes); {:.1}% of bytes stay on the same unit number",
            s.total_runs(),
            s.mean_run_bytes(),
            s.mean_run_bytes() / plan.alignment() as f64,
            plan.alignment(),
            100.0 * s.local_share()
        )?;
    }
    w.flush()?;
    Ok(())
}
