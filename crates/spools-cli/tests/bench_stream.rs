//! `spools bench stream --quick` under `spools run`, with its real `spools recv` processes
//! (and iperf3 when installed: `scripts/install-iperf3.sh`): the document has every part,
//! point and run it should, and every run delivered, by the receiver's own count, the
//! ADUs and bytes the job claims to have sent. No timing is asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::spools_command;
use serde_json::Value;

fn iperf3_installed() -> bool {
    Command::new("iperf3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn u(v: &Value, what: &str) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{what}: {v}"))
}

/// Checks the runs of one configuration: `reps` of them, each delivered whole.
fn check_runs(t: &Value, reps: u64, adu: u64, adus: u64, what: &str) {
    let runs = t["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {t}"));
    assert_eq!(runs.len() as u64, reps, "{what}: runs");
    for r in runs {
        assert_eq!(u(&r["adus"], what), adus, "{what}: {r}");
        assert_eq!(u(&r["bytes"], what), adu * adus, "{what}: {r}");
        assert_eq!(
            u(&r["received"]["bytes"], what),
            adu * adus,
            "{what}: the receiver's bytes: {r}"
        );
        assert_eq!(
            u(&r["received"]["adus"], what),
            adus,
            "{what}: the receiver's ADUs: {r}"
        );
        assert!(r["seconds"].as_f64().unwrap() > 0.0, "{what}: {r}");
    }
    assert!(t["median_s"].as_f64().unwrap() > 0.0, "{what}: {t}");
    assert!(t["mb_per_s"].as_f64().unwrap() > 0.0, "{what}: {t}");
}

#[test]
fn quick_stream_bench_reports_every_point_and_every_run_delivered_its_bytes() {
    let spools = common::spools();
    let mut args = vec![
        "run",
        "-n",
        "4",
        "--timeout",
        "300",
        "--",
        spools.to_str().unwrap(),
        "bench",
        "stream",
        "--quick",
        "--reps",
        "2",
        "--links",
        "1,2,8",
        "--json",
    ];
    let iperf = iperf3_installed();
    if !iperf {
        eprintln!("iperf3 is not installed (scripts/install-iperf3.sh): leaving it out");
        args.push("--no-iperf3");
    }
    let o = spools_command(&args, &[], Duration::from_secs(400));
    common::assert_ok_as(&o, "spools bench stream");
    let doc: Value = serde_json::from_str(o.stdout.trim()).expect("one JSON document");
    assert_eq!(doc["benchmark"], "stream");
    assert_eq!(doc["ranks"], 4);
    let reps = u(&doc["reps"], "reps");
    assert_eq!(reps, 2);

    let l = &doc["links"];
    let (adu, adus) = (u(&l["adu_bytes"], "adu"), u(&l["adus"], "adus"));
    assert_eq!((adu, adus, u(&l["holders"], "holders")), (1 << 20, 2, 4));
    let points = l["points"].as_array().unwrap();
    let got: Vec<(u64, u64)> = points
        .iter()
        .map(|p| (u(&p["links"], "links"), u(&p["tu"], "tu")))
        .collect();
    assert_eq!(
        got,
        [
            (1, 65536),
            (1, 262144),
            (2, 65536),
            (2, 262144),
            (8, 65536),
            (8, 262144)
        ]
    );
    for p in points {
        check_runs(&p["stream"], reps, adu, adus, &format!("links {p}"));
        let r = p["vs_iperf3_k"].as_f64().unwrap();
        assert_eq!(r > 0.0, iperf, "a ratio exactly when iperf3 ran: {p}");
    }
    let ip = l["iperf3"].as_array().unwrap();
    if iperf {
        let streams: Vec<u64> = ip.iter().map(|p| u(&p["streams"], "streams")).collect();
        assert_eq!(streams, [1, 2, 8]);
        for p in ip {
            let runs = p["runs"].as_array().unwrap();
            assert_eq!(runs.len() as u64, reps, "{p}");
            for r in runs {
                assert!(
                    u(&r["sent_bytes"], "sent") >= u(&r["bytes"], "bytes"),
                    "{r}"
                );
                assert!(u(&r["received_bytes"], "received") > 0, "{r}");
            }
            assert!(p["mb_per_s"].as_f64().unwrap() > 0.0, "{p}");
        }
    } else {
        assert!(ip.is_empty(), "{l}");
    }

    let c = &doc["cyclic"];
    assert_eq!(u(&c["ranks"], "ranks"), 4);
    let (adu, adus) = (u(&c["adu_bytes"], "adu"), u(&c["adus"], "adus"));
    assert_eq!((adu, adus), (256 << 10, 2));
    let points = c["points"].as_array().unwrap();
    let blocks: Vec<u64> = points.iter().map(|p| u(&p["block"], "block")).collect();
    assert_eq!(blocks, [128, 8192]);
    for p in points {
        check_runs(
            &p["reshuffled"],
            reps,
            adu,
            adus,
            &format!("reshuffled {p}"),
        );
        check_runs(&p["raw"], reps, adu, adus, &format!("raw {p}"));
        assert!(p["ratio"].as_f64().unwrap() > 0.0, "{p}");
    }

    // Four lock-step streams of 120x160 RGB frames, 3 per run: every ADU handed out whole
    // by the receiver, in lock step.
    let g = &doc["group"];
    let frame = 120 * 160 * 3;
    assert_eq!(
        (
            u(&g["ranks"], "ranks"),
            u(&g["streams"], "streams"),
            u(&g["frame_bytes"], "frame"),
            u(&g["frames"], "frames")
        ),
        (4, 4, frame, 3),
        "{g}"
    );
    assert_eq!(u(&g["skew"], "skew"), 0, "{g}");
    let runs = g["timing"]["runs"].as_array().unwrap();
    assert_eq!(runs.len() as u64, reps, "{g}");
    for r in runs {
        assert_eq!(
            (
                u(&r["adus"], "adus"),
                u(&r["bytes"], "bytes"),
                u(&r["skew"], "skew")
            ),
            (4 * 3, 4 * 3 * frame, 0),
            "{r}"
        );
    }
    assert!(g["frames_per_s"].as_f64().unwrap() > 0.0, "{g}");
}

#[test]
fn stream_bench_refuses_an_unknown_part_before_starting() {
    let o = spools_command(
        &["bench", "stream", "--parts", "links,nope"],
        &[],
        Duration::from_secs(60),
    );
    assert!(!o.status.success(), "{}", o.stderr);
    assert!(o.stderr.contains("--parts nope"), "{}", o.stderr);
}
