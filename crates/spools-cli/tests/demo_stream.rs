//! `spools demo heat --stream` to a real `spools recv --out DIR`: the receiver gets one
//! ADU per snapshot the demo writes, each the size of the grid and byte-identical to the
//! data of the demo's .npy snapshot of the same step (which the demo's own checking job
//! compares, bit for bit, with a one-process computation).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{spools_command, tempdir};

const LIMIT: Duration = Duration::from_secs(300);

/// The data of a .npy file (after its header; format versions 1 to 3).
fn npy_data(b: &[u8]) -> &[u8] {
    assert_eq!(&b[..6], b"\x93NUMPY", "not a .npy file");
    let start = if b[6] == 1 {
        10 + usize::from(u16::from_le_bytes([b[8], b[9]]))
    } else {
        12 + u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize
    };
    &b[start..]
}

#[test]
fn heat_demo_streams_every_snapshot_to_spools_recv() {
    let d = tempdir("demo-stream");
    let frames = d.path().join("frames");
    let heat = d.path().join("heat");
    let (recv, addr, rx) = common::spools_recv(&format!("{}/", frames.display()), &[]);

    // 7 steps, a snapshot every 3: steps 3, 6 and the last, 7. Three links over four ranks.
    let n = 40u64;
    let dest = format!("tcp:{addr}");
    let heat_dir = heat.to_str().unwrap();
    let o = spools_command(
        &[
            "demo",
            "heat",
            "--n",
            "40",
            "--steps",
            "7",
            "--every",
            "3",
            "--ranks",
            "4",
            "--readers",
            "2",
            "--dir",
            heat_dir,
            "--stream",
            &dest,
            "--links",
            "3",
        ],
        &[],
        LIMIT,
    );
    common::assert_ok_as(&o, "spools demo heat --stream");
    assert!(
        o.stdout.contains("3 frames streamed (3 links)"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("bit-identical"), "{}", o.stdout);

    let done = recv.wait(LIMIT);
    let said = rx.recv_timeout(LIMIT).unwrap_or_default();
    assert!(done.status.success(), "spools recv: {said}");
    let bytes = n * n * 8;
    assert!(
        said.contains(&format!("3 ADUs, {} bytes", 3 * bytes)),
        "{said}"
    );

    let mut names: Vec<String> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["s1-a0", "s1-a1", "s1-a2"]);
    for (adu, step) in [3u64, 6, 7].into_iter().enumerate() {
        let got = std::fs::read(frames.join(format!("s1-a{adu}"))).unwrap();
        let npy = std::fs::read(heat.join(format!("heat-{step:05}.npy"))).unwrap();
        assert_eq!(got.len() as u64, bytes, "ADU {adu}");
        assert!(
            got == npy_data(&npy),
            "ADU {adu} differs from the snapshot of step {step}"
        );
    }
}

#[test]
fn heat_demo_refuses_a_stream_that_is_not_tcp_before_starting() {
    let d = tempdir("demo-stream-bad");
    let dir = d.path().join("heat");
    let o = spools_command(
        &[
            "demo",
            "heat",
            "--dir",
            dir.to_str().unwrap(),
            "--stream",
            "udp:127.0.0.1:9",
        ],
        &[],
        LIMIT,
    );
    assert!(!o.status.success(), "{}", o.stdout);
    assert!(o.stderr.contains("expected tcp:HOST:PORT"), "{}", o.stderr);
    assert!(!dir.exists(), "nothing was started");
}
