//! The `spools` binary, run as a separate process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use common::Output;
use serde_json::Value;

/// The `spools` binary with `args` (none of the caller's `SPOOLS_*` variables), bounded.
fn spools(args: &[&str]) -> Output {
    let mut c = common::grouped(common::spools());
    common::without_ambient_spools_env(&mut c)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::Spawned::new(c.spawn().expect("run spools")).wait(Duration::from_secs(60))
}

fn ok_json(args: &[&str]) -> Value {
    let out = spools(args);
    assert!(out.status.success(), "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("valid JSON")
}

fn fails(args: &[&str], needle: &str) {
    let out = spools(args);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout on error");
    let err = &out.stderr;
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} lacks {needle:?}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

#[test]
fn map_json_has_the_fixed_form() {
    let out = spools(&["map", "u8[9] block on 4", "--unit", "1", "--json"]);
    assert_eq!(
        out.stdout,
        "{\"unit\":1,\"units\":4,\"elem_size\":1,\"extents\":[[3,0,3]]}\n"
    );
    let v = ok_json(&["map", "u8[9] block on 4", "--unit", "3", "--json"]);
    assert_eq!(v["extents"], serde_json::json!([]));
    // elements, not bytes, for arrays; maximal runs in local order
    let v = ok_json(&[
        "map",
        "f64[4,6] cyclic(2),block on 2x2",
        "--unit",
        "3",
        "--json",
    ]);
    assert_eq!(v["elem_size"], 8);
    // unit 3 is grid coordinate (1,1): rows 2-3, columns 3-5
    assert_eq!(v["extents"], serde_json::json!([[15, 0, 3], [21, 3, 3]]));
    // bytes for byte streams
    let v = ok_json(&[
        "map",
        "stripe(unit=1KiB,count=3,size=5000)",
        "--unit",
        "1",
        "--json",
    ]);
    assert_eq!(
        v["extents"],
        serde_json::json!([[1024, 0, 1024], [4096, 1024, 904]])
    );
}

#[test]
fn plan_unit_json_lists_sends_in_elements() {
    let v = ok_json(&[
        "plan",
        "--from",
        "i32[4,4] block,* on 2x1",
        "--to",
        "i32[4,4] *,block on 1x2",
        "--unit",
        "0",
        "--json",
    ]);
    assert_eq!(v["unit"], 0);
    assert_eq!(
        v["sends"],
        serde_json::json!([
            {"to": 0, "runs": [[0, 0, 2], [4, 2, 2]]},
            {"to": 1, "runs": [[2, 0, 2], [6, 2, 2]]}
        ])
    );
}

#[test]
fn plan_summary_json_and_text() {
    let v = ok_json(&[
        "plan",
        "--from",
        "f64[1000,1000] block,block on 2x2",
        "--to",
        "raid5(unit=64KiB,count=5)",
        "--json",
    ]);
    assert_eq!(v["total_bytes"], 8_000_000);
    let rows = v["bytes"].as_array().expect("matrix");
    assert_eq!(rows.len(), 4);
    let sum: u64 = rows
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(sum, 8_000_000);
    let out = spools(&[
        "plan",
        "--from",
        "u8[8] block on 2",
        "--to",
        "u8[8] cyclic on 2",
    ]);
    let text = &out.stdout;
    assert!(text.contains("8 runs"), "{text}");
    assert!(text.contains("50.0% of bytes stay"), "{text}");
}

#[test]
fn bad_input_is_a_clear_error() {
    fails(
        &["map", "f64[3] blok on 1", "--unit", "0"],
        "column 8: expected a distribution",
    );
    fails(
        &["map", "u8[10] block(2) on 4", "--unit", "0"],
        "block(2) over 4 units covers only 8 of 10",
    );
    fails(
        &["map", "u8[9] block on 4", "--unit", "4"],
        "unit 4 is out of range",
    );
    fails(
        &["map", "stripe(unit=4KiB,count=2)", "--unit", "0"],
        "needs a size",
    );
    fails(
        &[
            "plan",
            "--from",
            "f64[10] block on 2",
            "--to",
            "f32[10] block on 2",
        ],
        "80 bytes but destination holds 40",
    );
    fails(
        &[
            "plan",
            "--from",
            "u8[4] block on 2",
            "--to",
            "u8[4] block on 2",
            "--unit",
            "9",
        ],
        "source unit 9 is out of range",
    );
    fails(
        &[
            "plan",
            "--from",
            "stripe(unit=1,count=2)",
            "--to",
            "raid5(unit=1,count=2)",
        ],
        "neither layout gives the dataset size",
    );
    fails(&["map", "--unit", "0"], "SPEC");
    fails(
        &[
            "plan",
            "--from",
            "u8[100000] block on 100000",
            "--to",
            "u8[100000] cyclic on 100000",
        ],
        "ask for one unit's sends instead",
    );
}

#[test]
fn help_explains_the_spec_syntax() {
    let out = spools(&["plan", "--help"]);
    let text = &out.stdout;
    assert!(out.status.success());
    for needle in [
        "block(B)",
        "raid5(unit=SIZE",
        "bits(n=N",
        "order=C",
        "EXAMPLES",
    ] {
        assert!(text.contains(needle), "help lacks {needle}");
    }
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let mut c = common::grouped(common::spools());
    common::without_ambient_spools_env(&mut c)
        .args(["map", "u8[4000000] cyclic on 2", "--unit", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = common::Spawned::new(c.spawn().expect("spawn"));
    let mut first = [0u8; 100];
    child
        .child()
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("read");
    // stdout is dropped here: the reader has gone away, like `| head -c 100`.
    let out = child.wait(Duration::from_secs(60));
    assert!(out.status.success(), "exit {:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}
