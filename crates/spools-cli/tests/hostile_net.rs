//! Hostile peers on the network against `spools recv`, `spools view` and `spools send`, as
//! real processes: a flood of links that never finish their hello, at a receiver whose
//! open-file limit is low, neither ends it nor grows its threads, and a real transfer still
//! completes; a silent link is closed at `--hello-timeout`; `spools send` to a receiver
//! that welcomes and then reads nothing fails after `--stall-timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::mpsc::{channel, Receiver as Rx};
use std::time::{Duration, Instant};

use common::{grouped, spools, spools_command, tempdir, without_ambient_spools_env, Spawned};

/// Every wait's bound.
const BOUND: Duration = Duration::from_secs(120);
/// The open-file limit the receivers run under.
const NOFILE: u32 = 256;
/// Silent links in a flood: more than the receiver can hold open under [`NOFILE`], and
/// than it holds pending ([`spools_stream::MAX_PENDING`]).
const FLOOD: usize = 300;
/// The most threads a flooded receiver may have: its pending links' and a few of its own.
const MOST_THREADS: u64 = spools_stream::MAX_PENDING as u64 + 48;

/// Starts `spools ARGS` under `ulimit -n NOFILE`, guarded, and returns it with its first
/// stderr line (bounded) and a channel giving the rest once it ends.
fn start_limited(args: &[&str]) -> (Spawned, String, Rx<String>) {
    let mut c = grouped("sh");
    without_ambient_spools_env(&mut c)
        .arg("-c")
        .arg(format!("ulimit -n {NOFILE} && exec \"$0\" \"$@\""))
        .arg(spools())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut p = Spawned::new(c.spawn().expect("start spools"));
    let err = p.child().stderr.take().expect("its stderr");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(err).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let _ = tx.send(rest.join("\n"));
    });
    let line = rx
        .recv_timeout(BOUND)
        .expect("spools printed where it listens");
    (p, line, rx)
}

/// `n` links to `addr`, each sending a partial hello (the magic and half the version)
/// and holding; links the receiver did not take (refused, or not accepted within the
/// bound) are left out.
fn silent_links(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).ok()?;
            s.write_all(b"SPSH\x01").ok()?;
            Some(s)
        })
        .collect()
}

/// `Threads:` of process `pid` (its /proc status), or `None` once it is gone.
fn threads(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Asserts that `p` still runs and that its threads come down to at most
/// [`MOST_THREADS`] while the flood is held. The threads of evicted links end as their
/// sockets are shut, which a busy machine may delay for a moment: the count is looked at
/// until it is within the bound, for at most [`BOUND`]. The receivers run with a hello
/// timeout past that bound, so only the cap on pending links brings the count down: one
/// thread per held link, the unbounded growth this guards against, never gets there.
fn assert_alive_and_bounded(p: &mut Spawned, what: &str) {
    let start = Instant::now();
    let mut most = 0;
    loop {
        let exited = p.child().try_wait().unwrap();
        assert!(exited.is_none(), "{what} ended under the flood: {exited:?}");
        let n = threads(p.id()).expect("its /proc status");
        if n <= MOST_THREADS {
            return;
        }
        most = most.max(n);
        assert!(
            start.elapsed() < BOUND,
            "{what} kept {most} threads under a flood of {FLOOD} silent links for {BOUND:?} \
             (at most {MOST_THREADS})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13) ^ (i >> 11) as u8)
        .collect()
}

/// `spools send FILE tcp:ADDR` over 3 links, waited for within the bound.
fn send(file: &std::path::Path, addr: &str) -> common::Output {
    spools_command(
        &[
            "send",
            file.to_str().unwrap(),
            &format!("tcp:{addr}"),
            "--links",
            "3",
            "--tu",
            "96KiB",
        ],
        &[],
        BOUND,
    )
}

#[test]
fn recv_survives_a_flood_of_silent_links_and_finishes_a_transfer() {
    let d = tempdir("hostile-recv");
    let (input, output) = (d.join("in"), d.join("out"));
    std::fs::write(&input, pattern(3_000_017)).unwrap();
    let out = output.to_str().unwrap();
    // A hello timeout past the test's bound: only the cap on pending links can close the
    // flood's links while the test holds them.
    let (mut r, line, rest) = start_limited(&[
        "recv",
        "tcp:127.0.0.1:0",
        "--out",
        out,
        "--hello-timeout",
        "600",
    ]);
    let addr = line
        .strip_prefix("spools recv: listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    let flood = silent_links(addr.parse().unwrap(), FLOOD);
    assert_alive_and_bounded(&mut r, "spools recv");
    let s = send(&input, &addr);
    common::assert_ok_as(&s, "spools send, past the flood");
    // The flood is still held: the receiver ends with its one connection all the same.
    let o = r.wait(BOUND);
    let log = rest.recv_timeout(BOUND).unwrap_or_default();
    common::assert_ok_as(&o, "spools recv");
    assert!(
        std::fs::read(&output).unwrap() == std::fs::read(&input).unwrap(),
        "the file did not come back identical"
    );
    assert!(
        log.contains("closed before its hello"),
        "the evicted links are not named:\n{log}"
    );
    drop(flood);
}

#[test]
fn view_survives_a_flood_of_silent_links_and_takes_a_transfer() {
    let d = tempdir("hostile-view");
    let input = d.join("in");
    std::fs::write(&input, pattern(200_000)).unwrap();
    let (mut v, line, _rest) = start_limited(&[
        "view",
        "tcp:127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--hello-timeout",
        "600",
    ]);
    let addr = line
        .strip_prefix("spools view: frames to tcp:")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    let flood = silent_links(addr.parse().unwrap(), FLOOD);
    assert_alive_and_bounded(&mut v, "spools view");
    // Not a frame (the viewer names it on no panel), but a whole transfer all the same:
    // the viewer takes it and closes every link.
    let s = send(&input, &addr);
    common::assert_ok_as(&s, "spools send to the viewer, past the flood");
    assert_alive_and_bounded(&mut v, "spools view");
    drop(flood);
}

#[test]
fn recv_closes_a_link_silent_past_the_hello_timeout() {
    let d = tempdir("hostile-hello");
    let out = d.join("out");
    let (r, addr, _rest) = common::spools_recv(out.to_str().unwrap(), &["--hello-timeout", "1"]);
    let start = Instant::now();
    let mut s = silent_links(addr.parse().unwrap(), 1)
        .pop()
        .expect("a link");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut b = [0u8; 16];
    let closed = match s.read(&mut b) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(closed, "the silent link is still open after 30 s");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(20),
        "closed after {took:?} (the hello timeout is 1 s)"
    );
    drop(r);
}

#[test]
fn send_fails_after_its_stall_timeout_on_a_receiver_that_stops_reading() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (end, ended) = channel::<()>();
    let receiver = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        let mut hello = [0u8; 20];
        s.read_exact(&mut hello)?;
        // welcome: version 1, flags ACKS; then nothing is read.
        s.write_all(b"SPSW\x01\x00\x02\x00\x00\x00\x00\x00")?;
        let _ = ended.recv_timeout(BOUND);
        Ok(())
    });
    let d = tempdir("hostile-stall");
    let input = d.join("in");
    // Far more than the sockets' buffers hold.
    std::fs::write(&input, vec![5u8; 64 << 20]).unwrap();
    let start = Instant::now();
    let o = spools_command(
        &[
            "send",
            input.to_str().unwrap(),
            &format!("tcp:{addr}"),
            "--stall-timeout",
            "2",
        ],
        &[],
        BOUND,
    );
    let _ = end.send(());
    // A sender that never connected leaves the fake receiver in `accept`: woken here.
    let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(10));
    let _ = receiver.join();
    assert_ne!(
        o.code(),
        Some(0),
        "spools send succeeded on a receiver that reads nothing"
    );
    let err = &o.stderr;
    assert!(
        err.contains("the receiver took nothing for 2.0 s"),
        "spools send: {err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}
