//! Several streams on one connection from a job of 4 ranks over 3 links, to a plain
//! `Receiver` in the test process: variable-size ADUs (each rank a different count, 0 too,
//! and an ADU of 0 bytes), a stream sequenced after another (sent first, handed out after
//! the other ended), a lock-step group (its ADU n handed out together); the sending errors
//! are typed and agreed on every rank: lock-step violation, a group sent incompletely, ADU
//! and buffer size mismatches, a layout of more units than ranks, a closed stream, an
//! unreachable destination.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc::channel;
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{StreamConnection, StreamOptions};
use spools_io::StreamError;
use spools_stream::{Event, Limits, Receiver};
use spools_testkit::{assert_ok, e, rank_main, Job};

/// Bytes rank `r` gives to variable ADU `a`.
const COUNTS: [[usize; 4]; 3] = [[0, 3, 6, 9], [0, 0, 0, 0], [5, 0, 1, 2]];

/// Byte `i` of rank `r`'s part of variable ADU `a`.
fn var_byte(r: usize, a: usize, i: usize) -> u8 {
    (r * 50 + a * 7 + i) as u8
}

/// Byte `g` of ADU `a` of fixed stream `s`.
fn byte(s: u32, a: u64, g: u64) -> u8 {
    (g * 3 + a * 11 + u64::from(s) * 64) as u8
}

/// This rank's share of ADU `a` of fixed stream `s` laid out as `l` (its local bytes, in
/// local order).
fn share(l: &Layout, me: u64, s: u32, a: u64) -> Vec<u8> {
    if me >= l.units() {
        return Vec::new();
    }
    l.extents(me)
        .unwrap()
        .flat_map(|x| (x.global..x.global + x.len).map(|g| byte(s, a, g)))
        .collect()
}

/// `Ok` when `r` is the error `want` says; else why not.
fn expect_err(
    r: Result<(), StreamError>,
    want: impl Fn(&StreamError) -> bool,
) -> Result<(), String> {
    match r {
        Err(err) if want(&err) => Ok(()),
        Err(err) => Err(format!("unexpected error: {err:?}")),
        Ok(()) => Err("no error".into()),
    }
}

#[test]
fn streams_on_one_connection_keep_their_order_and_their_group_in_step() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let dead = std::env::var("SPOOLS_TEST_DEAD").unwrap().parse().unwrap();
        let me = w.rank();
        let m = u64::from(me);
        let mut c = e(StreamConnection::open(w.communicator(), dest, 3))?;
        let var = e(c.open_stream(StreamOptions {
            variable: true,
            ..Default::default()
        }))?;
        let late = e(c.open_stream(StreamOptions {
            tu: 6,
            after: Some(var),
            ..Default::default()
        }))?;
        let eye = StreamOptions {
            tu: 24,
            group: 7,
            ..Default::default()
        };
        let left = e(c.open_stream(eye))?;
        let right = e(c.open_stream(StreamOptions { priority: 9, ..eye }))?;
        // The sequenced stream goes first: the receiver must hold it back. Its first try
        // is a layout of more units than ranks: refused, and the stream goes on.
        let six: Layout = e("u8[6] block on 4".parse())?;
        let too_many: Layout = e("u8[6] block on 6".parse())?;
        expect_err(
            c.send_adu(late, &share(&too_many, m, late.get(), 0), &too_many),
            |x| matches!(x, StreamError::Exchange(_)),
        )?;
        for a in 0..2 {
            e(c.send_adu(late, &share(&six, m, late.get(), a), &six))?;
        }
        // Its ADUs are 6 bytes; its buffers are the layout's.
        let seven: Layout = e("u8[7] block on 4".parse())?;
        expect_err(
            c.send_adu(late, &share(&seven, m, late.get(), 2), &seven),
            |x| {
                matches!(
                    x,
                    StreamError::AduSize {
                        want: 6,
                        got: 7,
                        ..
                    }
                )
            },
        )?;
        let bad = if me == 2 {
            vec![0u8; 5]
        } else {
            share(&six, m, late.get(), 2)
        };
        expect_err(c.send_adu(late, &bad, &six), |x| match x {
            StreamError::BufferSize { need: 2, got: 5 } => me == 2,
            StreamError::Remote { rank: 2, .. } => me != 2,
            _ => false,
        })?;
        expect_err(c.send_var(late, b"x"), |x| {
            matches!(x, StreamError::Format(_))
        })?;
        // Variable-size ADUs: rank r's bytes, in rank order.
        for (a, counts) in COUNTS.iter().enumerate() {
            let r = me as usize;
            let mine: Vec<u8> = (0..counts[r]).map(|i| var_byte(r, a, i)).collect();
            e(c.send_var(var, &mine))?;
        }
        e(c.close_stream(var))?;
        expect_err(c.send_var(var, b""), |x| {
            matches!(x, StreamError::UnknownStream { stream: 1 })
        })?;
        // The group: ADU 0 together; ADU 1 one by one (the left eye cannot run two ahead);
        // ADU 2 together again. Two layouts of one 24-byte frame.
        let rows: Layout = e("u8[4,6] block,* on 4x1".parse())?;
        let cols: Layout = e("u8[4,6] *,cyclic on 1x3".parse())?;
        let frame = |s: u32, a: u64, l: &Layout| share(l, m, s, a);
        let (l0, r0) = (frame(left.get(), 0, &rows), frame(right.get(), 0, &cols));
        e(c.send_group(7, &[(left, &l0, &rows), (right, &r0, &cols)]))?;
        expect_err(c.send_group(7, &[(left, &l0, &rows)]), |x| {
            matches!(x, StreamError::Group { group: 7, .. })
        })?;
        e(c.send_adu(left, &frame(left.get(), 1, &rows), &rows))?;
        expect_err(c.send_adu(left, &frame(left.get(), 2, &rows), &rows), |x| {
            matches!(
                x,
                StreamError::LockStep {
                    stream: 3,
                    adu: 2,
                    behind: 4,
                    sent: 1
                }
            )
        })?;
        e(c.send_adu(right, &frame(right.get(), 1, &cols), &cols))?;
        let (l2, r2) = (frame(left.get(), 2, &cols), frame(right.get(), 2, &rows));
        e(c.send_group(7, &[(right, &r2, &rows), (left, &l2, &cols)]))?;
        // The left eye ends; the right one then goes on alone.
        e(c.close_stream(left))?;
        for a in 3..5 {
            e(c.send_adu(right, &frame(right.get(), a, &cols), &cols))?;
        }
        e(c.close())?;
        // A destination nobody listens on: the link owners (ranks 0, 1) cannot reach it,
        // the others learn it from them.
        let r = StreamConnection::open(w.communicator(), dead, 2).map(|_| ());
        expect_err(r, |x| match x {
            StreamError::Unreachable { link, .. } => u32::from(*link) == me,
            StreamError::Remote { rank: 0, .. } => me >= 2,
            _ => false,
        })?;
        e(w.finalize())
    });
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(1, |d| {
            got.push(d.event);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    let o = Job::new(
        4,
        "streams_on_one_connection_keep_their_order_and_their_group_in_step",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .env("SPOOLS_TEST_DEAD", dead.to_string())
    .run();
    assert_ok(&o);
    let (summary, got) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(summary.broken.is_empty(), "{summary:?}");
    let pos = |s: u32, a: u64| {
        got.iter()
            .position(|e| matches!(e, Event::Adu { stream, adu, .. } if *stream == s && *adu == a))
            .unwrap_or_else(|| panic!("stream {s} ADU {a} never handed out: {got:?}"))
    };
    let ended = |s: u32, n: u64| {
        got.iter()
            .position(|e| {
                *e == Event::Ended {
                    stream: s,
                    adus: n,
                    complete: true,
                }
            })
            .unwrap_or_else(|| panic!("stream {s} did not end whole: {got:?}"))
    };
    // Variable ADUs, the ranks' bytes in rank order (the second of 0 bytes).
    for (a, counts) in COUNTS.iter().enumerate() {
        let want: Vec<u8> = (0..4)
            .flat_map(|r| (0..counts[r]).map(move |i| var_byte(r, a, i)))
            .collect();
        let Event::Adu { data, .. } = &got[pos(1, a as u64)] else {
            unreachable!()
        };
        assert_eq!(*data, want, "variable ADU {a}");
    }
    // The sequenced stream, sent first, handed out after the other ended.
    let var_end = ended(1, 3);
    for a in 0..2 {
        assert!(
            pos(2, a) > var_end,
            "stream 2 ADU {a} before stream 1 ended: {got:?}"
        );
        let Event::Adu { data, .. } = &got[pos(2, a)] else {
            unreachable!()
        };
        assert_eq!(*data, (0..6).map(|g| byte(2, a, g)).collect::<Vec<_>>());
    }
    ended(2, 2);
    // The group: ADU n of both eyes before ADU n + 1 of either, and the bytes whole.
    for a in 0..3 {
        for s in [3, 4] {
            let Event::Adu { data, .. } = &got[pos(s, a)] else {
                unreachable!()
            };
            assert_eq!(
                *data,
                (0..24).map(|g| byte(s, a, g)).collect::<Vec<_>>(),
                "stream {s} ADU {a}"
            );
        }
        if a < 2 {
            assert!(
                pos(3, a).max(pos(4, a)) < pos(3, a + 1).min(pos(4, a + 1)),
                "the group out of step at ADU {a}: {got:?}"
            );
        }
    }
    ended(3, 3);
    for a in 3..5 {
        let Event::Adu { data, .. } = &got[pos(4, a)] else {
            unreachable!()
        };
        assert_eq!(*data, (0..24).map(|g| byte(4, a, g)).collect::<Vec<_>>());
    }
    ended(4, 5);
    assert_eq!(got.len(), 3 + 1 + 2 + 1 + 4 + 6, "{got:?}");
}
