//! The one plotter of the benchmarks: SVG panels, log-log, one line per series: latency
//! and bandwidth against message size ([`write`]), or any measure against any count
//! ([`write_xy`]).

use std::fmt::Write as _;
use std::path::Path;

use crate::error::BenchError;
use crate::series::{Point, Series};

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

/// Writes latency (us) and bandwidth (MB/s) panels side by side to `file`.
pub(crate) fn write(file: &Path, title: &str, series: &[Series]) -> Result<(), BenchError> {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="900" height="380" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>"##
    );
    let lines = |y: fn(&Point) -> f64| -> Vec<Line> {
        series
            .iter()
            .map(|s| Line {
                name: s.path,
                points: s.points.iter().map(|p| (p.bytes as f64, y(p))).collect(),
            })
            .collect()
    };
    let size = "message size (bytes)";
    panel(
        &mut svg,
        0.0,
        &format!("{title}: one-way latency (us)"),
        size,
        &lines(|p| p.latency_us),
    );
    panel(
        &mut svg,
        450.0,
        &format!("{title}: bandwidth (MB/s)"),
        size,
        &lines(|p| p.mbps),
    );
    svg.push_str("</svg>\n");
    std::fs::write(file, svg).map_err(BenchError::io(format!("writing {}", file.display())))
}

/// One line of a panel: its name and its (x, y) points.
pub(crate) struct Line<'a> {
    /// Shown in the legend.
    pub(crate) name: &'a str,
    /// The points; those with x or y not above 0 are left out (log axes).
    pub(crate) points: Vec<(f64, f64)>,
}

/// Writes one panel of `lines` against `xlabel` to `file`.
pub(crate) fn write_xy(
    file: &Path,
    title: &str,
    xlabel: &str,
    lines: &[Line<'_>],
) -> Result<(), BenchError> {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="450" height="380" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>"##
    );
    panel(&mut svg, 0.0, title, xlabel, lines);
    svg.push_str("</svg>\n");
    std::fs::write(file, svg).map_err(BenchError::io(format!("writing {}", file.display())))
}

fn panel(svg: &mut String, x0: f64, title: &str, xlabel: &str, lines: &[Line<'_>]) {
    let (w, h, m) = (440.0, 320.0, 55.0);
    let pts: Vec<(f64, f64)> = lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|(a, b)| *a > 0.0 && *b > 0.0)
        .collect();
    if pts.is_empty() {
        return;
    }
    let lx = |v: f64| v.log10();
    let (xmin, xmax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(lx(p.0)), b.max(lx(p.0)))
    });
    let (ymin, ymax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(lx(p.1)), b.max(lx(p.1)))
    });
    let (xmin, xmax) = (xmin.floor(), xmax.ceil().max(xmin.floor() + 1.0));
    let (ymin, ymax) = (ymin.floor(), ymax.ceil().max(ymin.floor() + 1.0));
    let sx = |v: f64| x0 + m + (lx(v) - xmin) / (xmax - xmin) * (w - 1.5 * m);
    let sy = |v: f64| 30.0 + (h - m) - (lx(v) - ymin) / (ymax - ymin) * (h - m - 10.0);
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="20" font-size="14" text-anchor="middle">{title}</text>"##,
        x0 + w / 2.0
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{}" y="30" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        x0 + m,
        w - 1.5 * m,
        h - m
    );
    for e in xmin as i32..=xmax as i32 {
        let x = sx(10f64.powi(e));
        let _ = writeln!(
            svg,
            r##"<line x1="{x}" y1="30" x2="{x}" y2="{}" stroke="#eee"/><text x="{x}" y="{}" font-size="10" text-anchor="middle">1e{e}</text>"##,
            30.0 + h - m,
            45.0 + h - m
        );
    }
    for e in ymin as i32..=ymax as i32 {
        let y = sy(10f64.powi(e));
        let _ = writeln!(
            svg,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" font-size="10" text-anchor="end">1e{e}</text>"##,
            x0 + m,
            x0 + w - 0.5 * m,
            x0 + m - 4.0,
            y + 3.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" font-size="11" text-anchor="middle">{xlabel}</text>"##,
        x0 + w / 2.0,
        h + 30.0
    );
    for (i, l) in lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = l
            .points
            .iter()
            .filter(|(a, b)| *a > 0.0 && *b > 0.0)
            .map(|&(a, b)| format!("{:.1},{:.1}", sx(a), sy(b)))
            .collect();
        if path.is_empty() {
            continue;
        }
        let _ = writeln!(
            svg,
            r##"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"##,
            path.join(" ")
        );
        for xy in &path {
            let (a, b) = xy.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(svg, r##"<circle cx="{a}" cy="{b}" r="3" fill="{c}"/>"##);
        }
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" font-size="11" fill="{c}">{}</text>"##,
            x0 + m + 8.0,
            48.0 + 14.0 * i as f64,
            l.name
        );
    }
}
