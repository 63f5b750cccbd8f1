//! Streams out of the job, with real processes and real sockets: a job of 4 ranks sends
//! ADUs laid out by any distribution over 1 to 5 links (and 8: two links on some ranks),
//! two streams per connection with TUs that do and do not divide the ADU, to a receiver (a
//! plain `Receiver` in the test process); every ADU arrives as its canonical byte stream,
//! checked byte by byte against an element model; a bad format is an error on every rank;
//! a destination or a rank that dies mid-stream is an error, never a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::sync::mpsc::channel;
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{StreamConnection, StreamFormat, StreamOptions, StreamWriter};
use spools_io::StreamError;
use spools_stream::{Event, Limits, Receiver};
use spools_testkit::{assert_ok, e, rank_main, Job};

/// The byte at canonical offset `g` of ADU `a` of stream `s` of connection `c`.
fn byte(c: u64, s: u32, a: u64, g: u64) -> u8 {
    (g.wrapping_mul(29) ^ (g >> 7) ^ a.wrapping_mul(101) ^ c.wrapping_mul(37) ^ u64::from(s)) as u8
}

/// Each ADU's layouts (the same dataset: odd ADUs go in the second), of 4200, 2244 and 7
/// bytes.
const LAYOUTS: [[&str; 2]; 3] = [
    [
        "u8[60,70] block,cyclic(3) on 2x2",
        "u8[4200] cyclic(5) on 4",
    ],
    [
        "i32[33,17] cyclic,* on 4x1 order=F",
        "i32[33,17] block,block on 2x2 order=F",
    ],
    ["u8[7] block on 4", "u8[7] cyclic on 3"],
];

/// SU sizes of the two streams: 35 x links divides 4200, 96 x links divides none.
const SUS: [u64; 2] = [35, 96];

/// The links of each connection the sweep opens (one per layout).
const LINKS: [u16; 6] = [1, 2, 3, 4, 5, 8];

/// The layout ADU `a` goes in.
fn layout_of(case: usize, a: u64) -> Layout {
    LAYOUTS[case][(a % 2) as usize].parse().unwrap()
}

#[test]
fn a_job_streams_adus_of_any_distribution_over_1_to_8_links() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let me = u64::from(w.rank());
        let mut c = 0u64;
        for links in LINKS {
            for case in 0..LAYOUTS.len() {
                let mut conn = e(StreamConnection::open(w.communicator(), dest, links))?;
                let mut ids = Vec::new();
                for su in SUS {
                    let tu = su * u64::from(links);
                    ids.push(e(conn.open_stream(StreamOptions {
                        tu,
                        ..Default::default()
                    }))?);
                }
                for a in 0..3 {
                    for &id in &ids {
                        let l = layout_of(case, a);
                        let len = if me < l.units() {
                            l.local_bytes(me).unwrap() as usize
                        } else {
                            0
                        };
                        let (mine, _) =
                            model::local_storage(&l, me, len, |g| byte(c, id.get(), a, g));
                        e(conn.send_adu(id, &mine, &l))?;
                    }
                }
                e(conn.close())?;
                c += 1;
            }
        }
        // A TU the links do not divide: refused on every rank.
        match StreamWriter::open(
            w.communicator(),
            dest,
            StreamFormat {
                links: 3,
                tu: 100,
                ..Default::default()
            },
        ) {
            Err(StreamError::Format(_)) => {}
            Err(other) => return Err(format!("want a format error, got {other}")),
            Ok(_) => return Err("a TU of 100 over 3 links was accepted".into()),
        }
        e(w.finalize())
    });
    let conns = LINKS.len() * LAYOUTS.len();
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(conns, |d| {
            got.push(d);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    let o = Job::new(
        4,
        "a_job_streams_adus_of_any_distribution_over_1_to_8_links",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .run();
    assert_ok(&o);
    let (summary, got) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(
        summary.refused.is_empty() && summary.broken.is_empty(),
        "{summary:?}"
    );
    // Connections may interleave at the receiver: each is told by its content (the
    // connection's number is in every byte).
    let mut ids: Vec<u64> = Vec::new();
    for d in &got {
        if !ids.contains(&d.conn) {
            ids.push(d.conn);
        }
    }
    assert_eq!(ids.len(), conns);
    let mut seen = vec![false; conns];
    for id in ids {
        let events: Vec<&Event> = got
            .iter()
            .filter(|d| d.conn == id)
            .map(|d| &d.event)
            .collect();
        let c = (0..conns)
            .find(|&c| {
                let l = layout_of(c % LAYOUTS.len(), 0);
                let want: Vec<u8> = (0..l.total_bytes().unwrap())
                    .map(|g| byte(c as u64, 1, 0, g))
                    .collect();
                events
                    .iter()
                    .any(|e| matches!(e, Event::Adu { stream: 1, adu: 0, data } if *data == want))
            })
            .unwrap_or_else(|| panic!("a connection of no case: {events:?}"));
        assert!(!seen[c], "case {c} twice");
        seen[c] = true;
        let (case, links) = (c % LAYOUTS.len(), LINKS[c / LAYOUTS.len()]);
        let size = layout_of(case, 0).total_bytes().unwrap();
        for s in [1u32, 2] {
            let of: Vec<&Event> = events
                .iter()
                .copied()
                .filter(|e| match e {
                    Event::Adu { stream, .. } | Event::Ended { stream, .. } => *stream == s,
                    _ => true,
                })
                .collect();
            assert_eq!(
                of.len(),
                4,
                "case {case}, links {links}, stream {s}: {of:?}"
            );
            for (a, ev) in of[..3].iter().enumerate() {
                let Event::Adu { adu, data, .. } = ev else {
                    panic!("{ev:?}")
                };
                assert_eq!(*adu, a as u64);
                let want: Vec<u8> = (0..size).map(|g| byte(c as u64, s, a as u64, g)).collect();
                assert!(
                    *data == want,
                    "case {case}, links {links}, stream {s}, ADU {a}: not the canonical bytes"
                );
            }
            assert_eq!(
                of[3],
                &Event::Ended {
                    stream: s,
                    adus: 3,
                    complete: true
                }
            );
        }
        assert_eq!(events.len(), 8, "case {case}, links {links}: {events:?}");
    }
}

/// A destination that welcomes the links, takes a little, then goes away: every rank of
/// the job gets an error (the link owners their link closed in the middle of an ADU, the
/// others a remote one), no hang.
#[test]
fn a_destination_that_dies_mid_stream_is_an_error_on_every_rank() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let l: Layout = e("u8[1024,1024] block,* on 4x1".parse())?;
        let mine = vec![7u8; l.local_bytes(u64::from(w.rank())).unwrap() as usize];
        let mut s = e(StreamWriter::open(
            w.communicator(),
            dest,
            StreamFormat {
                links: 2,
                tu: 64 << 10,
                ..Default::default()
            },
        ))?;
        let mut what = None;
        for _ in 0..1000 {
            match s.send_adu(&mine, &l) {
                Ok(()) => {}
                Err(StreamError::PeerClosed { at: Some(_), .. }) => what = Some("link error"),
                Err(StreamError::Remote { .. }) => what = Some("remote error"),
                Err(other) => return Err(format!("unexpected {other}")),
            }
            if what.is_some() {
                break;
            }
        }
        drop(s);
        let Some(what) = what else {
            return Err("1000 ADUs of 1 MiB went to a destination that is gone".into());
        };
        println!("rank {}: {what}", w.rank());
        e(w.finalize())
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dying = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut socks = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = listener.accept().unwrap();
            let mut hello = [0u8; 20];
            s.read_exact(&mut hello).unwrap();
            s.write_all(b"SPSW\x01\x00\x00\x00\x00\x00\x00\x00")
                .unwrap();
            socks.push(s);
        }
        // Take some of the stream, then go away (both links closed).
        let mut buf = vec![0u8; 1 << 20];
        let _ = socks[0].read_exact(&mut buf);
        drop(socks);
    });
    let o = Job::new(
        4,
        "a_destination_that_dies_mid_stream_is_an_error_on_every_rank",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .run();
    dying.join().unwrap();
    assert_ok(&o);
    // Link owners (ranks 0 and 1) see their link fail, or the other owner's first; the
    // others learn of it from the owners.
    for r in 0..4 {
        let link = o.stdout.contains(&format!("rank {r}: link error"));
        let remote = o.stdout.contains(&format!("rank {r}: remote error"));
        assert!(
            if r < 2 { link || remote } else { remote },
            "rank {r}:\n{}",
            o.stdout
        );
    }
    assert!(
        o.stdout.contains(": link error"),
        "no link owner saw its link fail:\n{}",
        o.stdout
    );
}

/// A link-owning rank killed in the middle of a stream: the job fails, and the receiver
/// keeps the whole ADUs (checked byte by byte), reports the stream incomplete and ends.
#[test]
fn a_rank_killed_mid_stream_leaves_the_whole_adus_at_the_receiver() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let seen = std::path::PathBuf::from(std::env::var("SPOOLS_TEST_SEEN").unwrap());
        let l: Layout = e(LAYOUTS[0][0].parse())?;
        let me = u64::from(w.rank());
        let mut s = e(StreamWriter::open(
            w.communicator(),
            dest,
            StreamFormat {
                links: 2,
                tu: 192,
                ..Default::default()
            },
        ))?;
        for a in 0..1000 {
            let len = l.local_bytes(me).unwrap() as usize;
            let (mine, _) = model::local_storage(&l, me, len, |g| byte(0, 1, a, g));
            e(s.send_adu(&mine, &l))?;
            if a == 3 && me == 1 {
                // Once the receiver has handed out ADU 2, die with ADU 3 handed over.
                spools_testkit::wait_for_file(&seen, Duration::from_secs(60))?;
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &std::process::id().to_string()])
                    .status();
            }
        }
        Err("rank 1 never died".into())
    });
    let d = spools_testkit::tempdir("stream-kill");
    let seen = d.join("seen");
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (tx, rx) = channel();
    {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let s = r.serve(1, |d| {
                if matches!(d.event, Event::Adu { adu: 2, .. }) {
                    spools_testkit::signal_file(&seen, b"").map_err(std::io::Error::other)?;
                }
                got.push(d.event);
                Ok(())
            });
            let _ = tx.send((s.map_err(|e| e.to_string()), got));
        });
    }
    let o = Job::new(
        4,
        "a_rank_killed_mid_stream_leaves_the_whole_adus_at_the_receiver",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .env("SPOOLS_TEST_SEEN", &seen)
    .run();
    assert!(
        !o.status.success(),
        "the job survived a killed rank:\n{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("rank 1 was killed by signal 9"),
        "{}",
        o.stderr
    );
    let (summary, got) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the receiver ended");
    summary.unwrap();
    let size = LAYOUTS[0][0]
        .parse::<Layout>()
        .unwrap()
        .total_bytes()
        .unwrap();
    let whole: Vec<u64> = got
        .iter()
        .filter_map(|e| match e {
            Event::Adu { adu, data, .. } => {
                let want: Vec<u8> = (0..size).map(|g| byte(0, 1, *adu, g)).collect();
                assert!(*data == want, "ADU {adu} handed out with wrong bytes");
                Some(*adu)
            }
            _ => None,
        })
        .collect();
    // ADUs 0..=2 at least (3 may have made it whole), in order; then an incomplete end.
    assert!(
        whole.len() >= 3 && whole.iter().enumerate().all(|(i, &a)| a == i as u64),
        "{whole:?}"
    );
    assert!(
        matches!(
            got.last(),
            Some(Event::Ended {
                complete: false,
                ..
            })
        ),
        "{:?}",
        got.last()
    );
}
