//! `spools bench osu ...` and `spools bench grim ...` under `spools run` with real ranks,
//! in short runs: the tables have the OSU programs' layout (`%-10d%20.2f`, the sizes OSU
//! uses), the documents have every point they should with positive values, the plots are
//! SVG, and a job of the wrong size or a bad size is refused with a message. No timing is
//! asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::spools_command;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// Runs `spools run -n N -- spools bench ARGS...` and returns its output.
fn bench(n: u32, args: &[&str]) -> common::Output {
    let spools = common::spools();
    let n = n.to_string();
    let mut all = vec!["run", "-n", &n, "--timeout", "240", "--"];
    all.push(spools.to_str().unwrap());
    all.push("bench");
    all.extend_from_slice(args);
    spools_command(&all, &[], LIMIT)
}

/// The rows of an OSU table: (size, value), each line exactly `%-10d%20.2f`.
fn osu_rows(stdout: &str) -> Vec<(usize, f64)> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            assert_eq!(l.len(), 30, "not %-10d%20.2f: {l:?}");
            let size = l[..10].trim_end().parse().expect(l);
            let value: f64 = l[10..].trim_start().parse().expect(l);
            let decimals = l.rsplit('.').next().unwrap();
            assert_eq!(decimals.len(), 2, "two decimals: {l:?}");
            (size, value)
        })
        .collect()
}

fn powers(from: usize, to: usize) -> Vec<usize> {
    std::iter::successors(Some(from), |s| Some(s * 2))
        .take_while(|&s| s <= to)
        .collect()
}

#[test]
fn osu_latency_prints_the_osu_table_from_zero_bytes() {
    let o = bench(
        2,
        &[
            "osu",
            "latency",
            "--max-size",
            "64",
            "--iterations",
            "20",
            "--warmup",
            "2",
        ],
    );
    common::assert_ok_as(&o, "spools bench osu latency");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(
        lines[0].starts_with("# OSU MPI Latency Test"),
        "{}",
        o.stdout
    );
    assert_eq!(lines[1], format!("{:<10}{:>20}", "# Size", "Latency (us)"));
    let rows = osu_rows(&o.stdout);
    let mut want = vec![0];
    want.extend(powers(1, 64));
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), want);
    assert!(rows.iter().all(|r| r.1 > 0.0), "{}", o.stdout);
}

#[test]
fn osu_bw_and_bibw_documents_have_every_size_and_a_bandwidth() {
    for test in ["bw", "bibw"] {
        let o = bench(
            2,
            &[
                "osu",
                test,
                "--max-size",
                "16K",
                "--iterations",
                "3",
                "--warmup",
                "1",
                "--json",
            ],
        );
        common::assert_ok_as(&o, test);
        let doc: Value = serde_json::from_str(o.stdout.trim()).expect("one JSON document");
        assert_eq!(doc["benchmark"], "osu");
        assert_eq!(doc["test"], test);
        assert_eq!(doc["unit"], "MB/s");
        let pts = doc["points"].as_array().unwrap();
        let sizes: Vec<usize> = pts
            .iter()
            .map(|p| p["bytes"].as_u64().unwrap() as usize)
            .collect();
        assert_eq!(sizes, powers(1, 16 << 10), "{test}");
        assert!(
            pts.iter()
                .all(|p| p["value"].as_f64().unwrap() > 0.0 && p["iterations"].as_u64() == Some(3)),
            "{test}: {doc}"
        );
    }
}

#[test]
fn osu_collectives_print_the_osu_tables_on_three_ranks() {
    for (test, first) in [("allreduce", 4), ("bcast", 1), ("alltoall", 1)] {
        let o = bench(
            3,
            &[
                "osu",
                test,
                "--max-size",
                "256",
                "--iterations",
                "10",
                "--warmup",
                "2",
            ],
        );
        common::assert_ok_as(&o, test);
        assert!(o.stdout.contains("Latency Test"), "{}", o.stdout);
        assert!(
            o.stdout
                .contains(&format!("{:<10}{:>20}", "# Size", "Avg Latency(us)")),
            "{}",
            o.stdout
        );
        let rows = osu_rows(&o.stdout);
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            powers(first, 256),
            "{test}"
        );
        assert!(rows.iter().all(|r| r.1 > 0.0), "{test}: {}", o.stdout);
    }
    let o = bench(
        3,
        &["osu", "barrier", "--iterations", "10", "--warmup", "2"],
    );
    common::assert_ok_as(&o, "barrier");
    let lines: Vec<&str> = o.stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    assert!(lines[0].starts_with("# OSU MPI Barrier Latency Test"));
    assert_eq!(lines[1], "# Avg Latency(us)");
    assert_eq!(lines[2].len(), 17, "%17.2f: {:?}", lines[2]);
    assert!(lines[2].trim().parse::<f64>().unwrap() > 0.0);
}

#[test]
fn osu_refuses_a_point_to_point_test_on_three_ranks_and_a_bad_size() {
    let o = bench(3, &["osu", "latency", "--max-size", "8"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(o.stderr.contains("needs exactly 2 ranks"), "{o:?}");
    let o = bench(2, &["osu", "allreduce", "--max-size", "2"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(o.stderr.contains("smallest size"), "{o:?}");
    let o = bench(2, &["osu", "bw", "--max-size", "lots"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(o.stderr.contains("lots"), "{o:?}");
}

#[test]
fn grim_experiments_report_every_point_and_plot_it() {
    let dir = common::tempdir("bench-grim");
    let cases: [(&str, &[&str], &str, usize); 3] = [
        (
            "channels",
            &[
                "--channels",
                "1,8,64",
                "--iterations",
                "20",
                "--backlog",
                "16",
            ],
            "channels",
            3,
        ),
        (
            "burst",
            &["--bursts", "10,200", "--iterations", "5"],
            "bursts",
            2,
        ),
        ("bulk", &["--sizes", "4K,100K"], "bulk", 2),
    ];
    for (exp, more, key, points) in cases {
        let plot = dir.path().join(format!("{exp}.svg"));
        let plot_s = plot.to_str().unwrap().to_string();
        let mut args = vec!["grim", exp, "--reps", "1", "--json", "--plot", &plot_s];
        args.extend_from_slice(more);
        let o = bench(2, &args);
        common::assert_ok_as(&o, exp);
        let doc: Value = serde_json::from_str(o.stdout.trim()).expect("one JSON document");
        assert_eq!(doc["benchmark"], "grim");
        assert_eq!(doc["experiment"], exp);
        let pts = doc[key]
            .as_array()
            .unwrap_or_else(|| panic!("{exp}: {doc}"));
        assert_eq!(pts.len(), points, "{exp}: {doc}");
        match exp {
            "channels" => {
                assert_eq!(doc["backlog"], 16);
                assert_eq!(pts[0]["ratio_to_one"].as_f64(), Some(1.0), "{doc}");
                assert!(pts.iter().all(|p| p["latency_us"].as_f64().unwrap() > 0.0));
                assert_eq!(pts[2]["channels"], 64);
            }
            "burst" => {
                assert!(pts.iter().all(|p| p["burst_us"].as_f64().unwrap() > 0.0
                    && p["gap_us"].as_f64().unwrap() >= 0.0));
                assert_eq!(pts[1]["burst"], 200);
            }
            _ => {
                assert!(pts.iter().all(|p| {
                    p["cut_through_MBps"].as_f64().unwrap() > 0.0
                        && p["store_and_forward_MBps"].as_f64().unwrap() > 0.0
                }));
                assert_eq!(pts[1]["bytes"], 100 << 10);
            }
        }
        let svg = std::fs::read_to_string(&plot).expect("the plot was written");
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{exp}: {svg}"
        );
    }
    let o = bench(2, &["grim", "burst", "--bursts", "1"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(o.stderr.contains("at least 2 messages"), "{o:?}");
}
