//! Frames out of a job (the framebuffer protocol on streams), with real processes and real
//! sockets: 4 ranks send RGB, grey and f32 frames laid out block, cyclic and block-cyclic
//! over 1 and 3 links (TUs that do not divide the frame), and a lock-step group of two; the
//! receiver (a plain `Receiver` in the test process) decodes every ADU as a frame header
//! followed by the frame's canonical bytes, checked byte by byte, with its number, group
//! and style; a layout that is no frame, and a style one rank gets wrong, are refused on
//! every rank.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::sync::mpsc::channel;
use std::time::Duration;

use spools::{ColorMap, FrameHeader, FrameStyle, Layout, PixelFormat};
use spools_io::stream::{StreamConnection, StreamOptions};
use spools_io::{Cause, ErrorKind, StreamError};
use spools_stream::{Event, Limits, Receiver};
use spools_testkit::{assert_ok, e, rank_main, Job};

/// The byte at canonical offset `g` of frame `f` of stream `s`.
fn byte(s: u32, f: u64, g: u64) -> u8 {
    (g.wrapping_mul(13) ^ (g >> 8) ^ f.wrapping_mul(41) ^ (u64::from(s) * 7)) as u8
}

/// Stream `s`'s layouts (frames alternate between the two) and its style.
fn layouts(s: u32) -> [&'static str; 2] {
    match s {
        1 => [
            "u8[30,50,3] block,cyclic(3),* on 2x2x1",
            "u8[30,50,3] cyclic,*,* on 4x1x1",
        ],
        2 => [
            "u8[17,9] cyclic(2),block on 2x2",
            "u8[17,9] *,cyclic on 1x3",
        ],
        _ => [
            "f32[20,16] block,block on 2x2",
            "f32[20,16] cyclic,* on 3x1",
        ],
    }
}

fn style(s: u32) -> FrameStyle {
    FrameStyle {
        title: format!("stream {s}"),
        colormap: ColorMap::Viridis,
        lo: -1.0,
        hi: 2.5,
    }
}

const FRAMES: u64 = 3;

#[test]
fn a_job_streams_frames_of_any_distribution() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let me = u64::from(w.rank());
        let mine = |s: u32, f: u64| {
            let l: Layout = layouts(s)[(f % 2) as usize].parse().unwrap();
            let len = if me < l.units() {
                l.local_bytes(me).unwrap() as usize
            } else {
                0
            };
            (model::local_storage(&l, me, len, |g| byte(s, f, g)).0, l)
        };
        for links in [1u16, 3] {
            let mut c = e(StreamConnection::open(w.communicator(), dest, links))?;
            // Stream 1 alone; streams 2 and 3 in lock-step group 5.
            let tu = 160 * u64::from(links);
            let one = e(c.open_stream(StreamOptions {
                tu,
                ..Default::default()
            }))?;
            let g = StreamOptions {
                tu,
                group: 5,
                ..Default::default()
            };
            let (two, three) = (e(c.open_stream(g))?, e(c.open_stream(g))?);
            for f in 0..FRAMES {
                let (d1, l1) = mine(1, f);
                e(c.send_frame(one, &style(1), &d1, &l1))?;
                let ((d2, l2), (d3, l3)) = (mine(2, f), mine(3, f));
                let items = [
                    (two, &style(2), &d2[..], &l2),
                    (three, &style(3), &d3[..], &l3),
                ];
                e(c.send_frames(5, &items))?;
            }
            // No frame: refused on every rank, the connection still usable.
            let bad: Layout = "i32[4,4] block,* on 2x1".parse().unwrap();
            let none = vec![0u8; if me < 2 { 32 } else { 0 }];
            match c.send_frame(one, &style(1), &none, &bad) {
                Err(StreamError::Format(_)) => {}
                other => return Err(format!("an i32 frame: {other:?}")),
            }
            // A style only rank 1 gets wrong (lo == hi): refused on every rank, as agreed,
            // and nothing is sent.
            let (d3, l3) = mine(3, FRAMES);
            let odd = if me == 1 {
                FrameStyle {
                    lo: 1.0,
                    hi: 1.0,
                    ..style(3)
                }
            } else {
                style(3)
            };
            match (me, c.send_frame(three, &odd, &d3, &l3)) {
                (1, Err(StreamError::Frame(_))) => {}
                (_, Err(StreamError::Remote { rank: 1, .. })) if me != 1 => {}
                (_, other) => return Err(format!("a style rank 1 got wrong: {other:?}")),
            }
            // Rank 2 declines its part of a group send (its binding's own check failed):
            // every rank fails before anything is sent, with its cause.
            let why = Cause::new(ErrorKind::BadArgument, "frame share of 3 bytes");
            let ((d2, l2), (d3, l3)) = (mine(2, FRAMES), mine(3, FRAMES));
            let items = [
                (two, &style(2), &d2[..], &l2),
                (three, &style(3), &d3[..], &l3),
            ];
            let r = if me == 2 {
                Err(c.decline_send(why.clone()))
            } else {
                c.send_frames(5, &items)
            };
            match (me, r) {
                (2, Err(StreamError::Declined(x))) if x == why => {}
                (_, Err(StreamError::Remote { rank: 2, cause })) if me != 2 && cause == why => {}
                (_, other) => return Err(format!("a declined group send: {other:?}")),
            }
            e(c.close())?;
        }
        e(w.finalize())
    });
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(2, |d| {
            got.push(d);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    let o = Job::new(4, "a_job_streams_frames_of_any_distribution")
        .env("SPOOLS_TEST_DEST", addr.to_string())
        .run();
    assert_ok(&o);
    let (summary, got) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(summary.broken.is_empty(), "{summary:?}");
    let mut frames = 0;
    for d in &got {
        let Event::Adu { stream, adu, data } = &d.event else {
            assert!(
                matches!(d.event, Event::Ended { complete: true, .. }),
                "{:?}",
                d.event
            );
            continue;
        };
        let (h, px) = FrameHeader::decode(data).unwrap();
        let want_format = [PixelFormat::Rgb8, PixelFormat::Grey8, PixelFormat::F32];
        assert_eq!(h.format, want_format[*stream as usize - 1]);
        assert_eq!(h.frame, *adu);
        assert_eq!(h.title, format!("stream {stream}"));
        assert_eq!(
            (h.group, h.members),
            if *stream == 1 { (0, 0) } else { (5, 2) }
        );
        if h.format == PixelFormat::F32 {
            assert_eq!((h.colormap, h.lo, h.hi), (ColorMap::Viridis, -1.0, 2.5));
        } else {
            assert_eq!(h.colormap, ColorMap::None);
        }
        let l: Layout = layouts(*stream)[0].parse().unwrap();
        let Layout::Array(a) = &l else { unreachable!() };
        assert_eq!(
            (u64::from(h.height), u64::from(h.width)),
            (a.shape()[0], a.shape()[1])
        );
        let want: Vec<u8> = (0..px.len() as u64)
            .map(|g| byte(*stream, *adu, g))
            .collect();
        assert_eq!(px, &want[..], "stream {stream}, frame {adu}");
        frames += 1;
    }
    assert_eq!(frames, 2 * 3 * FRAMES);
}
