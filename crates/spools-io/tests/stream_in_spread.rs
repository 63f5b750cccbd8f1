//! Streams into a job whose links are spread over its ranks, with real processes and real
//! sockets: link `s` of a K-link connection moves to rank `s % P` (every link count 1 to
//! 5 with 1 to 4 ranks, K < P and K > P, TUs that do and do not divide the ADU or divide
//! by the links), each rank receives its links' SUs and one exchange moves each ADU into
//! the job's layout, checked byte by byte against the element model. A sender that cannot
//! move is served whole by rank 0; garbage on a rank's moved-to port is refused while the
//! sender is served; a sender killed when only one rank's links got an ADU fails the
//! receive on every rank; a slow job holds a sender's window to what it consumed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::channel;
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{AduInfo, Limits, StreamReader};
use spools_io::StreamRecvError;
use spools_proto::stream::{
    decode, su_range, tus, Close, Frame, Hello, Open, Su, HELLO_CAN_MOVE, NOT_SEQUENCED, VERSION,
};
use spools_stream::{LinkSender, Sender};
use spools_testkit::{
    assert_ok, e, grouped, rank_main, self_args, signal_file, tempdir, wait_for_file,
    without_ambient_spools_env, Job, Spawned, ROLE_VAR,
};

/// A generous bound on waiting for the other side (a safety net, not a verdict).
const LIMIT: Duration = Duration::from_secs(120);

/// The byte at canonical offset `g` of ADU `a`.
fn byte(a: u64, g: u64) -> u8 {
    (g.wrapping_mul(29) ^ (g >> 5) ^ a.wrapping_mul(89)) as u8
}

fn canonical(a: u64, size: u64) -> Vec<u8> {
    (0..size).map(|g| byte(a, g)).collect()
}

/// Links, TU, ADU size: the links divide the TU or not, the TU divides the ADU or not, an
/// ADU shorter than a TU, an ADU of 3 bytes that most links carry nothing of.
const CASES: [(u16, u64, u64); 8] = [
    (1, 1000, 4200),
    (2, 1000, 4200),
    (3, 999, 4200),
    (4, 1000, 4000),
    (5, 100, 4200),
    (5, 64, 1001),
    (4, 4, 7),
    (5, 10, 3),
];
/// ADUs per case.
const ADUS: u64 = 2;

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap())
}

/// The job's layout of an ADU of `size` bytes over `p` ranks (block or cyclic).
fn layout(i: usize, size: u64, p: u32) -> Layout {
    let dist = if i % 2 == 0 { "block" } else { "cyclic(3)" };
    format!("u8[{size}] {dist} on {p}").parse().unwrap()
}

/// Listens on 127.0.0.1 and tells the test where (rank 0 writes `addr-NAME`).
fn listen(w: &spools::World, name: &str) -> Result<StreamReader, String> {
    let r = e(StreamReader::listen(
        w.communicator(),
        "127.0.0.1:0".parse().unwrap(),
        Limits::default(),
    ))?;
    if w.rank() == 0 {
        signal_file(
            &dir().join(format!("addr-{name}")),
            r.local_addr().to_string().as_bytes(),
        )?;
    }
    Ok(r)
}

/// Waits for the job to write `file` in `d`, and reads it; a job that ended before it
/// did fails the test with what it printed.
fn wait_job(d: &Path, file: &str, job: &mut Option<Spawned>) -> String {
    let p = d.join(file);
    let start = std::time::Instant::now();
    while !p.exists() {
        let ended = job
            .as_mut()
            .map(|j| j.child().try_wait().unwrap().is_some());
        if ended == Some(true) || start.elapsed() > LIMIT {
            let o = job.take().unwrap().wait(LIMIT);
            panic!(
                "the job never wrote {file}: {:?}\nstdout:\n{}\nstderr:\n{}",
                o.status, o.stdout, o.stderr
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::read_to_string(&p).unwrap()
}

fn job_addr(d: &Path, name: &str, job: &mut Option<Spawned>) -> SocketAddr {
    wait_job(d, &format!("addr-{name}"), job).parse().unwrap()
}

fn share(l: &Layout, me: u64) -> usize {
    if me < l.units() {
        l.local_bytes(me).unwrap() as usize
    } else {
        0
    }
}

/// Receives ADU `a` of stream 1 into `l` and checks this rank's share against the model.
fn recv_checked(r: &mut StreamReader, l: &Layout, me: u64, a: u64) -> Result<(), String> {
    let len = share(l, me);
    let mut mine = vec![0xee_u8; len];
    let got = e(r.recv_adu(&mut mine, l))?;
    let size = l.total_bytes().unwrap();
    if got
        != Some(AduInfo {
            stream: 1,
            adu: a,
            size,
        })
    {
        return Err(format!("{l}: ADU {a}: got {got:?}"));
    }
    let (want, _) = model::local_storage(l, me, len, |g| byte(a, g));
    if mine != want {
        return Err(format!(
            "{l}: ADU {a}: rank {me}'s share is not the model's"
        ));
    }
    Ok(())
}

fn open(tu: u64, adu: u64) -> Open {
    Open {
        stream: 1,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu,
        adu,
    }
}

/// The job's side of every case: each ADU received and checked, the end, and the links
/// this rank held (printed for the test).
fn receive_cases(w: &spools::World) -> Result<(), String> {
    let (me, p) = (u64::from(w.rank()), w.size());
    for (i, &(_, _, size)) in CASES.iter().enumerate() {
        let l = layout(i, size, p);
        let mut r = listen(w, &i.to_string())?;
        for a in 0..ADUS {
            recv_checked(&mut r, &l, me, a)?;
        }
        let mut mine = vec![0u8; share(&l, me)];
        if let Some(x) = e(r.recv_adu(&mut mine, &l))? {
            return Err(format!("case {i}: an ADU after the end: {x:?}"));
        }
        println!("case {i} rank {me}: links {:?}", r.links_here());
    }
    Ok(())
}

/// The links rank `r` of `p` holds of `k`.
fn owned(k: u16, r: u32, p: u32) -> Vec<u16> {
    (0..k).filter(|&s| u32::from(s) % p == r).collect()
}

fn every_case_over(p: u32, name: &str) {
    let d = tempdir("stream-spread");
    let job = Job::new(p, name).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    for (i, &(links, tu, size)) in CASES.iter().enumerate() {
        let addr = job_addr(&d, &i.to_string(), &mut job);
        let mut s = Sender::connect(addr, links).unwrap();
        s.open(open(tu, size)).unwrap();
        for a in 0..ADUS {
            s.send_adu(1, a, &canonical(a, size)).unwrap();
        }
        s.close(1, ADUS).unwrap();
        s.finish().unwrap();
    }
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for (i, &(links, _, _)) in CASES.iter().enumerate() {
        for r in 0..p {
            let line = format!("case {i} rank {r}: links {:?}", owned(links, r, p));
            assert!(o.stdout.contains(&line), "{line}\n{}", o.stdout);
        }
    }
}

#[test]
fn links_spread_over_1_rank() {
    rank_main(|_| {
        let w = e(spools::init())?;
        receive_cases(&w)?;
        e(w.finalize())
    });
    every_case_over(1, "links_spread_over_1_rank");
}

#[test]
fn links_spread_over_2_ranks() {
    rank_main(|_| {
        let w = e(spools::init())?;
        receive_cases(&w)?;
        e(w.finalize())
    });
    every_case_over(2, "links_spread_over_2_ranks");
}

#[test]
fn links_spread_over_3_ranks() {
    rank_main(|_| {
        let w = e(spools::init())?;
        receive_cases(&w)?;
        e(w.finalize())
    });
    every_case_over(3, "links_spread_over_3_ranks");
}

#[test]
fn links_spread_over_4_ranks() {
    rank_main(|_| {
        let w = e(spools::init())?;
        receive_cases(&w)?;
        e(w.finalize())
    });
    every_case_over(4, "links_spread_over_4_ranks");
}

/// Frames of a sender written by hand from the wire format (as an older sender or the
/// docs' Python client): a hello without `HELLO_CAN_MOVE` (or with it, `flags`).
fn raw_hello(addr: SocketAddr, links: u16, link: u16, conn: u64, flags: u16) -> TcpStream {
    let mut sock = TcpStream::connect(addr).unwrap();
    let mut b = Vec::new();
    Frame::Hello(Hello {
        version: VERSION,
        flags,
        links,
        link,
        conn,
    })
    .encode(&mut b);
    sock.write_all(&b).unwrap();
    sock.set_read_timeout(Some(LIMIT)).unwrap();
    sock
}

/// A sender that cannot move (its hello does not say so) has every link on rank 0, which
/// receives each ADU whole; the job gets it all the same. Then garbage on a rank's
/// moved-to port (the address a `move` frame named) is refused there, and a sender that
/// moves is served.
#[test]
fn a_sender_that_cannot_move_is_served_by_rank_0() {
    const NAME: &str = "a_sender_that_cannot_move_is_served_by_rank_0";
    rank_main(|_| {
        let w = e(spools::init())?;
        let me = u64::from(w.rank());
        let l = layout(1, 4200, 3);
        for name in ["old", "garbage"] {
            let mut r = listen(&w, name)?;
            for a in 0..ADUS {
                recv_checked(&mut r, &l, me, a)?;
            }
            let mut mine = vec![0u8; share(&l, me)];
            if e(r.recv_adu(&mut mine, &l))?.is_some() {
                return Err("an ADU after the end".into());
            }
            println!("{name} rank {me}: links {:?}", r.links_here());
        }
        e(w.finalize())
    });
    let d = tempdir("stream-spread-old");
    let job = Job::new(3, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let addr = job_addr(&d, "old", &mut job);
    let (k, tu, size) = (3u16, 999u64, 4200u64);
    let mut socks: Vec<TcpStream> = (0..k).map(|s| raw_hello(addr, k, s, 0x01d, 0)).collect();
    for sock in &mut socks {
        // welcome, with acks (no move: the sender cannot).
        let mut w = [0u8; 12];
        sock.read_exact(&mut w).unwrap();
        assert_eq!(w, *b"SPSW\x01\x00\x02\x00\x00\x00\x00\x00");
        let mut b = Vec::new();
        Frame::Open(open(tu, size)).encode(&mut b);
        sock.write_all(&b).unwrap();
    }
    for a in 0..ADUS {
        let data = canonical(a, size);
        for t in 0..tus(size, tu) {
            for s in 0..k {
                if let Some((off, len)) = su_range(size, tu, k, t, s) {
                    let p = &data[off as usize..(off + len) as usize];
                    let h = Su {
                        stream: 1,
                        su: s,
                        link: s,
                        adu: a,
                        tu: t,
                        offset: off,
                        size,
                        crc: spools_io::crc32c(p),
                    };
                    let mut b = Vec::new();
                    Frame::Su(h, p).encode(&mut b);
                    socks[usize::from(s)].write_all(&b).unwrap();
                }
            }
        }
    }
    for sock in &mut socks {
        let mut b = Vec::new();
        Frame::Close(Close {
            stream: 1,
            adus: ADUS,
        })
        .encode(&mut b);
        sock.write_all(&b).unwrap();
        sock.shutdown(std::net::Shutdown::Write).unwrap();
    }
    for mut sock in socks {
        let mut rest = Vec::new();
        sock.read_to_end(&mut rest).unwrap();
    }
    // Link 2 of a sender that can move: rank 0 names rank 2's port, where garbage goes.
    let addr = job_addr(&d, "garbage", &mut job);
    let mut probe = raw_hello(addr, 3, 2, 0xbad, HELLO_CAN_MOVE);
    let mut got = vec![0u8; 12 + spools_proto::stream::MOVE_LEN];
    probe.read_exact(&mut got).unwrap();
    // Hang up as a moved sender does: rank 0 then sees the link's end.
    probe.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(
        probe.read(&mut [0u8; 8]).unwrap(),
        0,
        "rank 0 closes a moved link"
    );
    let (Frame::Welcome(w), used) = decode(&got).unwrap().unwrap() else {
        panic!("no welcome: {got:?}");
    };
    assert_ne!(w.flags & spools_proto::stream::WELCOME_MOVE, 0);
    let Some((Frame::Move(m), _)) = decode(&got[used..]).unwrap() else {
        panic!("no move: {got:?}");
    };
    let mut g = TcpStream::connect(m.addr).unwrap();
    g.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut s = Sender::connect(addr, 3).unwrap();
    s.open(open(tu, size)).unwrap();
    for a in 0..ADUS {
        s.send_adu(1, a, &canonical(a, size)).unwrap();
    }
    s.close(1, ADUS).unwrap();
    s.finish().unwrap();
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for (r, old, moved) in [(0, "[0, 1, 2]", "[0]"), (1, "[]", "[1]"), (2, "[]", "[2]")] {
        assert!(
            o.stdout.contains(&format!("old rank {r}: links {old}")),
            "{}",
            o.stdout
        );
        assert!(
            o.stdout
                .contains(&format!("garbage rank {r}: links {moved}")),
            "{}",
            o.stdout
        );
    }
}

/// A sender (a process of its own) killed when link 0 (rank 0's) carried all of ADU 1
/// and link 1 (rank 1's) none of it: rank 0 names ADU 1, rank 1's piece never comes, and
/// every rank gets ADU 1 incomplete (as rank 1 saw it: 0 bytes), twice; the job ends.
#[test]
fn a_sender_killed_when_one_rank_has_its_piece_fails_every_rank() {
    const NAME: &str = "a_sender_killed_when_one_rank_has_its_piece_fails_every_rank";
    rank_main(|role| {
        if role == "sender" {
            let addr: SocketAddr = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
            let mut links: Vec<LinkSender> = (0..2)
                .map(|s| {
                    // A window of 1 reads link 0's ack of ADU 0 before ADU 1: no unread
                    // ack turns the kill into a reset that could drop ADU 1's SUs.
                    let mut l = LinkSender::connect(addr, 2, s, 0x5eed_0002)
                        .unwrap()
                        .with_window(1);
                    l.send(&Frame::Open(open(1000, 4200))).unwrap();
                    l
                })
                .collect();
            for a in 0..2u64 {
                let data = canonical(a, 4200);
                for t in 0..tus(4200, 1000) {
                    for s in 0..2u16 {
                        // ADU 1: link 0's SUs only.
                        if a == 1 && s == 1 {
                            continue;
                        }
                        if let Some((off, len)) = su_range(4200, 1000, 2, t, s) {
                            let p = &data[off as usize..(off + len) as usize];
                            let h = Su {
                                stream: 1,
                                su: s,
                                link: s,
                                adu: a,
                                tu: t,
                                offset: off,
                                size: 4200,
                                crc: spools_io::crc32c(p),
                            };
                            links[usize::from(s)].send_su(&h, p).unwrap();
                        }
                    }
                }
                if a == 0 {
                    wait_for_file(&dir().join("got0"), LIMIT)?;
                }
            }
            signal_file(&dir().join("half"), b"")?;
            wait_for_file(&dir().join("never"), LIMIT)?;
            return Err("the sender was not killed".into());
        }
        let w = e(spools::init())?;
        let me = u64::from(w.rank());
        let l = layout(0, 4200, 3);
        let mut r = listen(&w, "killed")?;
        recv_checked(&mut r, &l, me, 0)?;
        if me == 0 {
            signal_file(&dir().join("got0"), b"")?;
        }
        for _ in 0..2 {
            let mut mine = vec![0u8; share(&l, me)];
            match r.recv_adu(&mut mine, &l) {
                Err(
                    x @ StreamRecvError::Incomplete {
                        stream: 1,
                        adu: 1,
                        have: 0,
                        size: 4200,
                    },
                ) => println!("rank {me}: {x}"),
                other => return Err(format!("rank {me}: got {other:?}")),
            }
        }
        e(w.finalize())
    });
    let d = tempdir("stream-spread-killed");
    let job = Job::new(3, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let addr = job_addr(&d, "killed", &mut job);
    let mut c = grouped(spools_testkit::current_exe());
    without_ambient_spools_env(&mut c)
        .args(&self_args(NAME)[1..])
        .env(ROLE_VAR, "sender")
        .env("SPOOLS_TEST_DIR", &d)
        .env("SPOOLS_TEST_DEST", addr.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let sender = Spawned::new(c.spawn().unwrap());
    wait_job(&d, "half", &mut job);
    sender.signal("-KILL");
    let s = sender.wait(LIMIT);
    assert!(
        !s.status.success(),
        "the sender was not killed: {}",
        s.stderr
    );
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for r in 0..3 {
        let line = format!("rank {r}: stream 1: ADU 1 incomplete (0 of 4200 bytes arrived)");
        assert_eq!(o.stdout.matches(&line).count(), 2, "{}", o.stdout);
    }
}

/// A job slower than its sender: the sender (a window of 1 ADU) sends ADU `a + 1` only
/// once the job received ADU `a` (acked on both ranks' links after the collective receive
/// returned), which the test lets it do one ADU at a time; nothing is lost.
#[test]
fn a_slow_job_holds_the_senders_window() {
    const NAME: &str = "a_slow_job_holds_the_senders_window";
    const N: u64 = 5;
    rank_main(|_| {
        let w = e(spools::init())?;
        let me = u64::from(w.rank());
        let l = layout(1, 6000, 2);
        let mut r = listen(&w, "slow")?;
        for a in 0..N {
            // The test says when the job may take ADU `a` (the job is busy until then).
            wait_for_file(&dir().join(format!("go{a}")), LIMIT)?;
            recv_checked(&mut r, &l, me, a)?;
        }
        let mut mine = vec![0u8; share(&l, me)];
        if e(r.recv_adu(&mut mine, &l))?.is_some() {
            return Err("an ADU after the end".into());
        }
        println!("rank {me}: links {:?}", r.links_here());
        e(w.finalize())
    });
    let d = tempdir("stream-spread-slow");
    let job = Job::new(2, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let addr = job_addr(&d, "slow", &mut job);
    let (sent_tx, sent) = channel();
    let sender = std::thread::spawn(move || {
        let mut s = Sender::connect(addr, 2).unwrap().with_window(1);
        s.open(open(1000, 6000)).unwrap();
        for a in 0..N {
            s.send_adu(1, a, &canonical(a, 6000)).unwrap();
            sent_tx.send((a, s.acked(1))).unwrap();
        }
        s.close(1, N).unwrap();
        s.finish().unwrap();
    });
    for a in 0..N {
        // ADU `a` goes out once ADU `a - 1` was consumed (and acked), not before.
        let (n, acked) = sent.recv_timeout(LIMIT).unwrap();
        assert_eq!((n, acked), (a, a), "ADU {a}");
        // The job has not received ADU `a` yet: the sender is held at ADU `a + 1`.
        assert!(
            sent.try_recv().is_err(),
            "the sender ran past its window at ADU {a}"
        );
        signal_file(&d.join(format!("go{a}")), b"").unwrap();
    }
    sender.join().unwrap();
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    assert!(o.stdout.contains("rank 0: links [0]"), "{}", o.stdout);
    assert!(o.stdout.contains("rank 1: links [1]"), "{}", o.stdout);
}

/// A job of 3 ranks requiring a secret's proof: a sender without the secret, and one with
/// another, are refused at rank 0 (typed errors); one with it proves it at rank 0 and
/// again at ranks 1 and 2 for the links moved there, and every ADU arrives.
#[test]
fn moved_links_prove_the_secret_to_every_rank() {
    const NAME: &str = "moved_links_prove_the_secret_to_every_rank";
    let key = spools_proto::auth::Secret::from_bytes([5; 16]);
    let key2 = key.clone();
    rank_main(move |_| {
        let w = e(spools::init())?;
        let me = u64::from(w.rank());
        let l = layout(0, 4200, 3);
        let mut r = e(StreamReader::listen_requiring(
            w.communicator(),
            "127.0.0.1:0".parse().unwrap(),
            Limits::default(),
            &key2,
        ))?;
        if me == 0 {
            signal_file(
                &dir().join("addr-proof"),
                r.local_addr().to_string().as_bytes(),
            )?;
        }
        for a in 0..ADUS {
            recv_checked(&mut r, &l, me, a)?;
        }
        let mut mine = vec![0u8; share(&l, me)];
        if e(r.recv_adu(&mut mine, &l))?.is_some() {
            return Err("an ADU after the end".into());
        }
        println!("proven rank {me}: links {:?}", r.links_here());
        e(w.finalize())
    });
    let d = tempdir("stream-spread-proof");
    let job = Job::new(3, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let addr = job_addr(&d, "proof", &mut job);
    let none = Sender::connect(addr, 3)
        .err()
        .expect("refused without a secret");
    assert!(
        matches!(none, spools_stream::SendError::ProofRequired { link: 0 }),
        "{none}"
    );
    let other = spools_proto::auth::Secret::from_bytes([6; 16]);
    let wrong = Sender::connect_proving(addr, 3, &other)
        .err()
        .expect("refused with another secret");
    assert!(
        matches!(wrong, spools_stream::SendError::Handshake { link: 0, .. }),
        "{wrong}"
    );
    let mut s = Sender::connect_proving(addr, 3, &key).unwrap();
    s.open(open(999, 4200)).unwrap();
    for a in 0..ADUS {
        s.send_adu(1, a, &canonical(a, 4200)).unwrap();
    }
    s.close(1, ADUS).unwrap();
    s.finish().unwrap();
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for r in 0..3 {
        let line = format!("proven rank {r}: links [{r}]");
        assert!(o.stdout.contains(&line), "{line}\n{}", o.stdout);
    }
}
