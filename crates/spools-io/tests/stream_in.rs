//! Streams into a job, with real processes and real sockets: a plain `spools_stream`
//! sender in the test process (or in a process of its own, killed mid-ADU) streams ADUs to
//! a job of 4 ranks, which receives each into its layout; every rank's share is checked
//! byte by byte against an element model. Errors (an ADU cut short, a corrupt frame, a
//! layout or buffer of the wrong size, an address in use) come out on every rank; a client
//! speaking another protocol is refused while the sender is served.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{AduInfo, Limits, StreamReader};
use spools_io::StreamRecvError;
use spools_proto::stream::{su_range, tus, Frame, Open, Su, NOT_SEQUENCED, VARIABLE};
use spools_stream::{LinkSender, Sender};
use spools_testkit::{
    assert_ok, e, grouped, rank_main, self_args, signal_file, tempdir, wait_for_file,
    without_ambient_spools_env, Job, Spawned, ROLE_VAR,
};

/// A generous bound on waiting for the other side (a safety net, not a verdict).
const LIMIT: Duration = Duration::from_secs(120);

/// The byte at canonical offset `g` of ADU `a`.
fn byte(a: u64, g: u64) -> u8 {
    (g.wrapping_mul(31) ^ (g >> 6) ^ a.wrapping_mul(97)) as u8
}

fn canonical(a: u64, size: u64) -> Vec<u8> {
    (0..size).map(|g| byte(a, g)).collect()
}

/// Links, TU and the job's layout of each ADU: 1 to 5 links, TUs that divide the ADU and
/// TUs that do not, block and cyclic layouts, odd sizes, a rank that holds nothing.
const CASES: [(u16, u64, &str); 6] = [
    (1, 1000, "u8[60,70] block,* on 4x1"),
    (2, 840, "u8[60,70] block,cyclic(3) on 2x2"),
    (3, 100, "i32[33,17] cyclic,* on 4x1 order=F"),
    (4, 4, "u8[7] block on 4"),
    (5, 840, "u8[60,70] cyclic(5),* on 4x1"),
    (2, 64, "u8[1001] cyclic(2) on 3"),
];
/// ADUs per case.
const ADUS: u64 = 3;
/// Sizes of the ADUs of the variable-size stream (over 3 links).
const VARIABLE_SIZES: [u64; 5] = [5, 0, 1000, 333, 1];

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap())
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

/// The address the job listens at for `name` (rank 0 writes it).
fn job_addr(d: &Path, name: &str, job: &mut Option<Spawned>) -> SocketAddr {
    wait_job(d, &format!("addr-{name}"), job).parse().unwrap()
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

/// Bytes of rank `me`'s share of `l` (none beyond its units).
fn share(l: &Layout, me: u64) -> usize {
    if me < l.units() {
        l.local_bytes(me).unwrap() as usize
    } else {
        0
    }
}

/// Receives ADU `a` into `l` and checks this rank's share against the model.
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
    let (want, count) = model::local_storage(l, me, len, |g| byte(a, g));
    if count != len as u64 || mine != want {
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

#[test]
fn a_job_receives_adus_into_its_layouts_over_1_to_5_links() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let me = u64::from(w.rank());
        for (i, (_, _, spec)) in CASES.iter().enumerate() {
            let l: Layout = e(spec.parse())?;
            let mut r = listen(&w, &i.to_string())?;
            for a in 0..ADUS {
                recv_checked(&mut r, &l, me, a)?;
            }
            // The sender closed its stream and its connection: the end, and again.
            for _ in 0..2 {
                let mut mine = vec![0u8; share(&l, me)];
                let end = e(r.recv_adu(&mut mine, &l))?;
                if end.is_some() {
                    return Err(format!("{spec}: an ADU after the end: {end:?}"));
                }
            }
        }
        variable_sizes(&w)?;
        // An address in use: rank 0 cannot listen there, the others learn it failed.
        let first = listen(&w, "unused")?;
        match StreamReader::listen(w.communicator(), first.local_addr(), Limits::default()) {
            Err(StreamRecvError::Bind { .. }) if me == 0 => {}
            Err(StreamRecvError::Remote { rank: 0, .. }) if me != 0 => {}
            Err(other) => return Err(format!("listening twice: {other}")),
            Ok(_) => return Err("listened twice at one address".into()),
        }
        // A reader no sender ever connected to ends when dropped.
        drop(first);
        println!("rank {me}: every case received");
        e(w.finalize())
    });
    let d = tempdir("stream-in");
    let job = Job::new(4, "a_job_receives_adus_into_its_layouts_over_1_to_5_links")
        .env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    for (i, (links, tu, spec)) in CASES.iter().enumerate() {
        let size = spec.parse::<Layout>().unwrap().total_bytes().unwrap();
        let addr = job_addr(&d, &i.to_string(), &mut job);
        if i == 0 {
            // A client speaking another protocol first: refused, and the sender served.
            use std::io::Write;
            let mut g = std::net::TcpStream::connect(addr).unwrap();
            g.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        }
        let mut s = Sender::connect(addr, *links).unwrap();
        s.open(open(*tu, size)).unwrap();
        for a in 0..ADUS {
            s.send_adu(1, a, &canonical(a, size)).unwrap();
        }
        s.close(1, ADUS).unwrap();
        s.finish().unwrap();
    }
    let mut s = Sender::connect(job_addr(&d, "variable", &mut job), 3).unwrap();
    s.open(open(1 << 20, VARIABLE)).unwrap();
    for (a, size) in VARIABLE_SIZES.iter().enumerate() {
        s.send_adu(1, a as u64, &canonical(a as u64, *size))
            .unwrap();
    }
    s.close(1, VARIABLE_SIZES.len() as u64).unwrap();
    s.finish().unwrap();
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for r in 0..4 {
        assert!(
            o.stdout.contains(&format!("rank {r}: every case received")),
            "{}",
            o.stdout
        );
    }
}

/// ADUs of varying size: each is peeked at (`next_adu`), then received into a layout of
/// its size (block or cyclic, in turn); one of 0 bytes is skipped. A layout of the wrong
/// size fails on every rank and leaves the ADU next; so does a wrong buffer on one rank.
fn variable_sizes(w: &spools::World) -> Result<(), String> {
    let me = u64::from(w.rank());
    let mut r = listen(w, "variable")?;
    for (a, &size) in VARIABLE_SIZES.iter().enumerate() {
        let a = a as u64;
        let info = e(r.next_adu())?;
        if info
            != Some(AduInfo {
                stream: 1,
                adu: a,
                size,
            })
        {
            return Err(format!("ADU {a}: next_adu said {info:?}"));
        }
        if size == 0 {
            let l: Layout = e("u8[1] block on 4".parse())?;
            let mut b = vec![0u8; share(&l, me)];
            match r.recv_adu(&mut b, &l) {
                Err(StreamRecvError::AduSize {
                    expected: 0,
                    got: 1,
                }) => {}
                other => return Err(format!("a 0-byte ADU into 1 byte: {other:?}")),
            }
            if e(r.skip_adu())? != info {
                return Err("skip_adu skipped another ADU".into());
            }
            continue;
        }
        let dist = if a % 2 == 0 { "block" } else { "cyclic(3)" };
        let l: Layout = e(format!("u8[{size}] {dist} on 4").parse())?;
        if a == 0 {
            let wrong: Layout = e(format!("u8[{}] block on 4", size + 1).parse())?;
            let mut b = vec![0u8; share(&wrong, me)];
            match r.recv_adu(&mut b, &wrong) {
                Err(StreamRecvError::AduSize { expected, got })
                    if expected == size && got == size + 1 => {}
                other => return Err(format!("a layout of the wrong size: {other:?}")),
            }
            let extra = usize::from(me == 2);
            let mut b = vec![0u8; share(&l, me) + extra];
            match (me, r.recv_adu(&mut b, &l)) {
                (2, Err(StreamRecvError::BufferSize { need, got })) if got == need + 1 => {}
                (0 | 1 | 3, Err(StreamRecvError::Remote { rank: 2, .. })) => {}
                (_, other) => return Err(format!("a buffer of the wrong size: {other:?}")),
            }
        }
        let len = share(&l, me);
        let mut mine = vec![0xee_u8; len];
        if e(r.recv_adu(&mut mine, &l))? != info {
            return Err(format!("ADU {a}: recv_adu received another ADU"));
        }
        let (want, _) = model::local_storage(&l, me, len, |g| byte(a, g));
        if mine != want {
            return Err(format!(
                "variable ADU {a} ({l}): rank {me}'s share is not the model's"
            ));
        }
    }
    match e(r.next_adu())? {
        None => Ok(()),
        Some(i) => Err(format!("an ADU after the end: {i:?}")),
    }
}

/// Sends ADU `adu` of stream 1 over `links` (SU `s` on link `s`), at most `max` SUs; with
/// `corrupt`, the last SU sent carries a wrong CRC.
fn send_sus(links: &mut [LinkSender], tu: u64, adu: u64, max: usize, corrupt: bool) {
    let size = 4200;
    let data = canonical(adu, size);
    let k = links.len() as u16;
    let mut sent = 0;
    for t in 0..tus(size, tu) {
        for s in 0..k {
            let Some((offset, len)) = su_range(size, tu, k, t, s) else {
                break;
            };
            if sent == max {
                return;
            }
            sent += 1;
            let p = &data[offset as usize..(offset + len) as usize];
            let crc = spools_io::crc32c(p) ^ u32::from(corrupt && sent == max);
            let h = Su {
                stream: 1,
                su: s,
                link: s,
                adu,
                tu: t,
                offset,
                size,
                crc,
            };
            links[usize::from(s)].send_su(&h, p).unwrap();
        }
    }
}

/// `k` links of a connection to `addr`, with stream 1 (ADUs of 4200 bytes) open.
fn connect(addr: SocketAddr, k: u16, tu: u64) -> Vec<LinkSender> {
    (0..k)
        .map(|link| {
            let mut l = LinkSender::connect(addr, k, link, 0x5eed_0001).unwrap();
            l.send(&Frame::Open(open(tu, 4200))).unwrap();
            l
        })
        .collect()
}

/// The job's side of the failure tests: ADU 0 whole, then the error every rank must see,
/// twice (the end of a stream stays).
fn recv_then_fail(name: &str, expect: impl Fn(&StreamRecvError) -> bool) -> Result<(), String> {
    let w = e(spools::init())?;
    let me = u64::from(w.rank());
    let l: Layout = e("u8[60,70] block,cyclic(7) on 2x2".parse())?;
    let mut r = listen(&w, name)?;
    recv_checked(&mut r, &l, me, 0)?;
    if me == 0 {
        signal_file(&dir().join("got0"), b"")?;
    }
    for _ in 0..2 {
        let mut mine = vec![0u8; share(&l, me)];
        match r.recv_adu(&mut mine, &l) {
            Err(x) if expect(&x) => println!("rank {me}: {x}"),
            other => return Err(format!("rank {me}: got {other:?}")),
        }
    }
    e(w.finalize())
}

/// A sender (a process of its own) that dies in the middle of ADU 1: every rank of the
/// job gets the ADU reported incomplete (ADU 0 was received whole), and the job ends.
#[test]
fn a_sender_that_dies_mid_adu_is_an_error_on_every_rank() {
    const NAME: &str = "a_sender_that_dies_mid_adu_is_an_error_on_every_rank";
    rank_main(|role| {
        if role != "sender" {
            return recv_then_fail("dies", |x| {
                matches!(
                    x,
                    StreamRecvError::Incomplete {
                        stream: 1,
                        adu: 1,
                        have: 500,
                        size: 4200
                    }
                )
            });
        }
        let addr: SocketAddr = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let mut links = connect(addr, 2, 1000);
        send_sus(&mut links, 1000, 0, usize::MAX, false);
        wait_for_file(&dir().join("got0"), LIMIT)?;
        send_sus(&mut links, 1000, 1, 1, false);
        signal_file(&dir().join("half"), b"")?;
        // Killed here by the test.
        wait_for_file(&dir().join("never"), LIMIT)?;
        Err("the sender was not killed".into())
    });
    let d = tempdir("stream-in-dies");
    let job = Job::new(4, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let addr = job_addr(&d, "dies", &mut job);
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
    for r in 0..4 {
        let line = format!("rank {r}: stream 1: ADU 1 incomplete (500 of 4200 bytes arrived)");
        assert_eq!(o.stdout.matches(&line).count(), 2, "{}", o.stdout);
    }
}

/// An SU whose header does not decode (ADU 1 at offset 2^63): on the lead's link (link
/// 0, where the first SU of every ADU travels) the sender's frames are refused on every
/// rank, naming why, not reported as a stream the sender did not close; on a member's
/// link every rank gets the same error (the lead's view: ADU 1 never arrived, or the
/// refusal).
#[test]
fn an_su_that_does_not_decode_is_refused_on_every_rank() {
    const NAME: &str = "an_su_that_does_not_decode_is_refused_on_every_rank";
    rank_main(|_| {
        let lead = std::env::var("SPOOLS_TEST_LINK").as_deref() == Ok("0");
        recv_then_fail("undecodable", |x| match x {
            StreamRecvError::Refused { reason } => reason.contains("invalid SU offset"),
            StreamRecvError::Missing {
                stream: 1,
                from: 1,
                to: 2,
            } => !lead,
            _ => false,
        })
    });
    for link in 0..2u16 {
        let d = tempdir("stream-in-undecodable");
        let job = Job::new(4, NAME)
            .env("SPOOLS_TEST_DIR", &d)
            .env("SPOOLS_TEST_LINK", link.to_string());
        let wait = job.wait_limit();
        let mut job = Some(job.start());
        let mut links = connect(job_addr(&d, "undecodable", &mut job), 2, 1000);
        send_sus(&mut links, 1000, 0, usize::MAX, false);
        wait_job(&d, "got0", &mut job);
        let p = [7u8; 100];
        let h = Su {
            stream: 1,
            su: link,
            link,
            adu: 1,
            tu: 0,
            offset: 1 << 63,
            size: 4200,
            crc: spools_io::crc32c(&p),
        };
        // The job may close the links as soon as the frame arrives: a reset is its right.
        let _ = links[usize::from(link)].send_su(&h, &p);
        for mut l in links {
            let _ = l.send(&Frame::Close(spools_proto::stream::Close {
                stream: 1,
                adus: 2,
            }));
            let _ = l.finish();
        }
        let o = job.take().unwrap().wait(wait);
        assert_ok(&o);
        // Every rank reports the same error, twice.
        let said = |r: u32| {
            o.stdout
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("rank {r}: ")))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let first = said(0);
        assert_eq!(first.len(), 2, "link {link}: {}", o.stdout);
        assert_eq!(first[0], first[1], "link {link}: {}", o.stdout);
        for r in 1..4 {
            assert_eq!(said(r), first, "link {link}: {}", o.stdout);
        }
        if link == 0 {
            assert!(
                first[0].starts_with("the sender's frames were refused"),
                "{}",
                o.stdout
            );
        }
    }
}

/// A frame whose CRC does not match its payload (in ADU 1): a typed checksum error naming
/// where, on every rank; ADU 0 came whole.
#[test]
fn a_corrupt_frame_is_a_checksum_error_on_every_rank() {
    const NAME: &str = "a_corrupt_frame_is_a_checksum_error_on_every_rank";
    rank_main(|_| {
        recv_then_fail("corrupt", |x| {
            matches!(
                x,
                StreamRecvError::Checksum {
                    stream: 1,
                    adu: 1,
                    tu: 1,
                    su: 0,
                    link: 0
                }
            )
        })
    });
    let d = tempdir("stream-in-corrupt");
    let job = Job::new(4, NAME).env("SPOOLS_TEST_DIR", &d);
    let wait = job.wait_limit();
    let mut job = Some(job.start());
    let mut links = connect(job_addr(&d, "corrupt", &mut job), 3, 999);
    send_sus(&mut links, 999, 0, usize::MAX, false);
    // Once the job has ADU 0 (the links are read independently: a corrupt frame on one
    // could otherwise overtake the end of ADU 0 on another), TU 0 of ADU 1 fine, then SU
    // 0 of TU 1 corrupt.
    wait_job(&d, "got0", &mut job);
    send_sus(&mut links, 999, 1, 4, true);
    // The job may refuse the connection as soon as the corrupt frame arrives and close
    // every link: ending the links then meets a reset, which is the job's right (what is
    // checked is what every rank reports).
    for mut l in links {
        let _ = l.send(&Frame::Close(spools_proto::stream::Close {
            stream: 1,
            adus: 2,
        }));
        let _ = l.finish();
    }
    let o = job.take().unwrap().wait(wait);
    assert_ok(&o);
    for r in 0..4 {
        assert_eq!(
            o.stdout
                .matches(&format!(
                    "rank {r}: stream 1, ADU 1, TU 1, SU 0 on link 0: checksum mismatch"
                ))
                .count(),
            2,
            "{}",
            o.stdout
        );
    }
}
