//! `spools send` to `spools recv`, two real processes over loopback: files come back
//! byte-identical over 1 to 5 links with TUs that do and don't divide them; a client
//! speaking garbage is refused while the sender is served; a receiver with a secret serves
//! only senders, and `spools run` jobs, that prove it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{e, rank_main, spools, spools_command, tempdir, Job, Spawned};

/// Starts `spools recv tcp:127.0.0.1:0 --out OUT`, guarded, and returns it with the address
/// it printed (read from its stderr, bounded) and the rest of its stderr once it ends.
fn receiver(out: &std::path::Path) -> (Spawned, String, std::sync::mpsc::Receiver<String>) {
    receiver_with(out, &[])
}

/// [`receiver`] with more arguments.
fn receiver_with(
    out: &std::path::Path,
    more: &[&str],
) -> (Spawned, String, std::sync::mpsc::Receiver<String>) {
    common::spools_recv(out.to_str().unwrap(), more)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

#[test]
fn send_to_recv_gives_the_file_back_byte_identical() {
    let d = tempdir("streams");
    for (links, tu, size) in [
        (1u16, "96KiB", 1 << 20),
        (3, "96KiB", 3_000_017),
        (5, "4KiB", 40_000),
        (2, "1MiB", 0),
    ] {
        let input = d.join(format!("in-{links}"));
        let output = d.join(format!("out-{links}"));
        std::fs::write(&input, pattern(size, links as u8)).unwrap();
        let (r, addr, _) = receiver(&output);
        let s = spools_command(
            &[
                "send",
                input.to_str().unwrap(),
                &format!("tcp:{addr}"),
                "--links",
                &links.to_string(),
                "--tu",
                tu,
            ],
            &[],
            Duration::from_secs(120),
        );
        common::assert_ok_as(&s, "spools send");
        let o = r.wait(Duration::from_secs(120));
        common::assert_ok_as(&o, "spools recv");
        assert!(
            std::fs::read(&output).unwrap() == std::fs::read(&input).unwrap(),
            "links {links}, TU {tu}, {size} bytes: not identical"
        );
    }
}

#[test]
fn a_garbage_client_is_refused_and_the_sender_is_served() {
    let d = tempdir("streams-garbage");
    let input = d.join("in");
    let output = d.join("out");
    std::fs::write(&input, pattern(100_000, 3)).unwrap();
    let (r, addr, rest) = receiver(&output);
    let mut junk = std::net::TcpStream::connect(&addr).unwrap();
    junk.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").unwrap();
    // The receiver hangs up on it without a word: then it has refused it (before the
    // sender below connects, so the refusal is reported whatever the timing).
    junk.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    junk.read_to_end(&mut answer).unwrap();
    assert!(answer.is_empty(), "{answer:?}");
    let s = spools_command(
        &[
            "send",
            input.to_str().unwrap(),
            &format!("tcp:{addr}"),
            "--links",
            "2",
        ],
        &[],
        Duration::from_secs(120),
    );
    common::assert_ok_as(&s, "spools send");
    let o = r.wait(Duration::from_secs(120));
    common::assert_ok_as(&o, "spools recv");
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(&input).unwrap()
    );
    let said = rest.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        said.contains("refused a client") && said.contains("not a Spools stream"),
        "{said}"
    );
}

/// `--out /dev/null` (a device, not a file: nothing to sync) is a success.
#[test]
fn recv_to_a_device_succeeds() {
    let d = tempdir("streams-null");
    let input = d.join("in");
    std::fs::write(&input, pattern(5000, 1)).unwrap();
    let (r, addr, _) = receiver(std::path::Path::new("/dev/null"));
    let s = spools_command(
        &["send", input.to_str().unwrap(), &format!("tcp:{addr}")],
        &[],
        Duration::from_secs(120),
    );
    common::assert_ok_as(&s, "spools send");
    common::assert_ok_as(&r.wait(Duration::from_secs(120)), "spools recv");
}

/// `spools recv --secret`: `spools send` without the secret fails with a clear message and
/// is refused; with it (cut in ADUs, with a window), the file arrives byte-identical.
#[test]
fn a_receiver_with_a_secret_serves_only_senders_that_prove_it() {
    let d = tempdir("streams-secret");
    let input = d.join("in");
    let output = d.join("out");
    let secret = d.join("secret");
    std::fs::write(&input, pattern(300_000, 5)).unwrap();
    std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
    let (r, addr, rest) = receiver_with(&output, &["--secret", secret.to_str().unwrap()]);
    let dest = format!("tcp:{addr}");
    let send = |more: &[&str]| {
        let mut args = vec![
            "send",
            input.to_str().unwrap(),
            &dest,
            "--links",
            "2",
            "--tu",
            "64KiB",
        ];
        args.extend_from_slice(more);
        spools_command(&args, &[], Duration::from_secs(120))
    };
    let denied = send(&[]);
    assert!(!denied.status.success(), "{denied:?}");
    assert!(
        denied.stderr.contains("requires the job secret's proof"),
        "{}",
        denied.stderr
    );
    // In ADUs of 7 KiB, at most one of them beyond those written.
    let s = send(&[
        "--secret",
        secret.to_str().unwrap(),
        "--adu",
        "7KiB",
        "--window",
        "1",
    ]);
    common::assert_ok_as(&s, "spools send");
    common::assert_ok_as(&r.wait(Duration::from_secs(120)), "spools recv");
    assert!(
        std::fs::read(&output).unwrap() == std::fs::read(&input).unwrap(),
        "not identical"
    );
    let said = rest.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        said.contains("refused a client") && said.contains("requires the job secret's proof"),
        "{said}"
    );
}

/// A rank of a job streaming two ADUs of `u8[3001] cyclic(7) on 2` to `SPOOLS_TEST_DEST`.
fn stream_two_adus() -> Result<(), String> {
    let w = e(spools::init())?;
    let dest = e(std::env::var("SPOOLS_TEST_DEST"))?;
    let l: spools::Layout = e("u8[3001] cyclic(7) on 2".parse())?;
    let me = u64::from(w.rank());
    let mut s = e(w.stream_open(
        e(dest.parse())?,
        spools::StreamFormat {
            links: 2,
            tu: 1000,
            ..Default::default()
        },
    ))?;
    for a in 0..2u8 {
        // Element g of cyclic(7) on 2 is on rank (g / 7) % 2: this rank's in order.
        let mine: Vec<u8> = (0..3001u64)
            .filter(|g| (g / 7) % 2 == me)
            .map(|g| pattern(3001, a)[g as usize])
            .collect();
        e(s.send_adu(&mine, &l))?;
    }
    e(s.close())?;
    e(w.finalize())
}

#[test]
fn a_spools_run_job_given_the_secret_proves_it_to_spools_recv() {
    rank_main(|_| stream_two_adus());
    let d = tempdir("streams-job-secret");
    let output = d.join("out");
    let secret = d.join("secret");
    let s = spools_command(&["secret"], &[], Duration::from_secs(60));
    common::assert_ok_as(&s, "spools secret");
    std::fs::write(&secret, &s.stdout).unwrap();
    let (r, addr, rest) = receiver_with(&output, &["--secret", secret.to_str().unwrap()]);
    let test = "a_spools_run_job_given_the_secret_proves_it_to_spools_recv";
    let job = Job::new(2, test)
        .env("SPOOLS_TEST_DEST", &addr)
        .via_cli(spools());
    // A job with a secret of its own (the usual fresh one) is refused, on every rank.
    let o = job.run();
    assert!(!o.status.success(), "{o:?}");
    assert!(
        o.stdout.contains("prove") || o.stderr.contains("prove"),
        "{o:?}"
    );
    // The same job given the receiver's secret is served.
    let o = job.cli_args(&["--secret", secret.to_str().unwrap()]).run();
    common::assert_ok(&o);
    common::assert_ok_as(&r.wait(Duration::from_secs(120)), "spools recv");
    let want: Vec<u8> = [pattern(3001, 0), pattern(3001, 1)].concat();
    assert!(std::fs::read(&output).unwrap() == want, "not the two ADUs");
    let said = rest.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(said.contains("refused a client"), "{said}");
}
