//! Streams out of a job, with real processes and real sockets: a job of 4 ranks sends ADUs
//! laid out by any distribution over 1 to 4 links to a receiver (a plain `Receiver` in the
//! test process); every ADU arrives as its canonical byte stream, checked byte by byte
//! against an element model; a format the job cannot send is an error on every rank.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::sync::mpsc::channel;
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{StreamFormat, StreamWriter};
use spools_io::StreamError;
use spools_stream::{Event, Limits, Receiver};
use spools_testkit::{assert_ok, e, rank_main, Job};

/// The byte at canonical offset `g` of ADU `a`.
fn byte(a: u64, g: u64) -> u8 {
    (g.wrapping_mul(29) ^ (g >> 7) ^ a.wrapping_mul(101)) as u8
}

const LAYOUTS: [&str; 3] = [
    "u8[60,70] block,cyclic(3) on 2x2",
    "i32[33,17] cyclic,* on 4x1 order=F",
    "u8[7] block on 4",
];

#[test]
fn a_job_streams_adus_of_any_distribution_over_several_links() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let links: u16 = std::env::var("SPOOLS_TEST_LINKS").unwrap().parse().unwrap();
        let me = u64::from(w.rank());
        for spec in LAYOUTS {
            let l: Layout = e(spec.parse())?;
            let tu = 96 * u64::from(links);
            let mut s = e(StreamWriter::open(
                w.communicator(),
                dest,
                &l,
                StreamFormat { links, tu },
            ))?;
            for a in 0..3 {
                let len = l.local_bytes(me).unwrap() as usize;
                let (mine, _) = model::local_storage(&l, me, len, |g| byte(a, g));
                e(s.write(&mine))?;
            }
            e(s.close())?;
        }
        // A TU the links do not divide: refused on every rank.
        let l: Layout = e(LAYOUTS[0].parse())?;
        match StreamWriter::open(
            w.communicator(),
            dest,
            &l,
            StreamFormat { links: 3, tu: 100 },
        ) {
            Err(StreamError::Format(_)) => {}
            Err(other) => return Err(format!("want a format error, got {other}")),
            Ok(_) => return Err("a TU of 100 over 3 links was accepted".into()),
        }
        e(w.finalize())
    });
    for links in [1u16, 3, 4] {
        let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
        let addr = r.local_addr().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let s = r.serve(LAYOUTS.len(), |d| {
                got.push(d);
                Ok(())
            });
            let _ = tx.send((s.map_err(|e| e.to_string()), got));
        });
        let o = Job::new(
            4,
            "a_job_streams_adus_of_any_distribution_over_several_links",
        )
        .env("SPOOLS_TEST_DEST", addr.to_string())
        .env("SPOOLS_TEST_LINKS", links.to_string())
        .run();
        assert_ok(&o);
        let (summary, got) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the receiver ended");
        let summary = summary.unwrap();
        assert!(
            summary.refused.is_empty() && summary.broken.is_empty(),
            "{summary:?}"
        );
        // Per connection (one per layout, told apart by the ADU size: connections may
        // interleave at the receiver), three whole ADUs then a complete end.
        let mut conns: Vec<u64> = Vec::new();
        for d in &got {
            if !conns.contains(&d.conn) {
                conns.push(d.conn);
            }
        }
        assert_eq!(conns.len(), LAYOUTS.len(), "links {links}");
        for c in &conns {
            let first = got.iter().find_map(|d| match &d.event {
                Event::Adu { data, .. } if d.conn == *c => Some(data.len() as u64),
                _ => None,
            });
            let spec = LAYOUTS
                .iter()
                .find(|s| s.parse::<Layout>().unwrap().total_bytes() == first)
                .unwrap_or_else(|| panic!("no layout of {first:?} bytes"));
            let l: Layout = spec.parse().unwrap();
            let size = l.total_bytes().unwrap();
            let events: Vec<&Event> = got
                .iter()
                .filter(|d| d.conn == *c)
                .map(|d| &d.event)
                .collect();
            assert_eq!(events.len(), 4, "{spec}, links {links}: {events:?}");
            for (a, ev) in events[..3].iter().enumerate() {
                let Event::Adu { adu, data, .. } = ev else {
                    panic!("{ev:?}")
                };
                assert_eq!(*adu, a as u64);
                let want: Vec<u8> = (0..size).map(|g| byte(a as u64, g)).collect();
                assert!(
                    *data == want,
                    "{spec}, links {links}, ADU {a}: not the canonical bytes"
                );
            }
            assert_eq!(
                events[3],
                &Event::Ended {
                    stream: 1,
                    adus: 3,
                    complete: true
                }
            );
        }
    }
}

/// A destination that welcomes the links, takes a little, then goes away: every rank of
/// the job gets an error (the link owners their link's, the others a remote one), no hang.
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
            &l,
            StreamFormat {
                links: 2,
                tu: 64 << 10,
            },
        ))?;
        let mut what = None;
        for _ in 0..1000 {
            match s.write(&mine) {
                Ok(()) => {}
                Err(StreamError::Link { .. }) => what = Some("link error"),
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
        let l: Layout = e(LAYOUTS[0].parse())?;
        let me = u64::from(w.rank());
        let mut s = e(StreamWriter::open(
            w.communicator(),
            dest,
            &l,
            StreamFormat { links: 2, tu: 192 },
        ))?;
        for a in 0..1000 {
            let len = l.local_bytes(me).unwrap() as usize;
            let (mine, _) = model::local_storage(&l, me, len, |g| byte(a, g));
            e(s.write(&mine))?;
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
    let size = LAYOUTS[0].parse::<Layout>().unwrap().total_bytes().unwrap();
    let whole: Vec<u64> = got
        .iter()
        .filter_map(|e| match e {
            Event::Adu { adu, data, .. } => {
                let want: Vec<u8> = (0..size).map(|g| byte(*adu, g)).collect();
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
