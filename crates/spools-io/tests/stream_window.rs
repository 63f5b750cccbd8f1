//! Flow control of a job's streams by the receiver's acks, with real processes and real
//! sockets: a receiver whose sink is slow (it blocks until the test releases it) holds a
//! job of 2 ranks (2 links) to its window, counted in ADUs the receiver handed out, and
//! nothing is lost; a stream the receiver holds back (sequenced after another still open)
//! whose window is full never holds back the stream it waits for.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, sync_channel};
use std::time::Duration;

use spools::Layout;
use spools_io::stream::{StreamConnection, StreamOptions};
use spools_stream::{Event, Limits, Receiver};
use spools_testkit::{assert_ok, e, rank_main, Job};

/// The generous failure bound of every wait.
const BOUND: Duration = Duration::from_secs(120);

/// The window of the held stream, in ADUs.
const WINDOW: u64 = 2;

/// ADUs of the held stream.
const ADUS: u64 = 12;

/// The ADUs' layout: 3000 bytes over the job's 2 ranks.
const LAYOUT: &str = "u8[3000] cyclic(7) on 2";

/// Byte `g` of ADU `a` of stream `s`.
fn byte(s: u32, a: u64, g: u64) -> u8 {
    (g.wrapping_mul(13) ^ a.wrapping_mul(71) ^ u64::from(s) ^ (g >> 5)) as u8
}

/// This rank's share of ADU `a` of stream `s` (`cyclic(7)`: element `g` on rank
/// `(g / 7) % 2`, in order).
fn share(me: u64, s: u32, a: u64) -> Vec<u8> {
    (0..3000u64)
        .filter(|g| (g / 7) % 2 == me)
        .map(|g| byte(s, a, g))
        .collect()
}

/// The whole ADU `a` of stream `s`.
fn whole(s: u32, a: u64) -> Vec<u8> {
    (0..3000u64).map(|g| byte(s, a, g)).collect()
}

#[test]
fn a_slow_receiver_holds_the_job_to_its_window_and_nothing_is_lost() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let l: Layout = LAYOUT.parse().unwrap();
        let me = u64::from(w.rank());
        // Rank 0 tells the test each ADU the job has sent.
        let mut note = (me == 0)
            .then(|| TcpStream::connect(std::env::var("SPOOLS_TEST_NOTE").unwrap()).unwrap());
        let mut c = e(StreamConnection::open(w.communicator(), dest, 2))?;
        let s = e(c.open_stream(StreamOptions {
            tu: 1000,
            window: WINDOW as u32,
            ..Default::default()
        }))?;
        for a in 0..ADUS {
            e(c.send_adu(s, &share(me, 1, a), &l))?;
            if let Some(n) = note.as_mut() {
                n.write_all(&[a as u8 + 1]).unwrap();
            }
        }
        e(c.close())?;
        e(w.finalize())
    });
    // The sink tells the test which ADU it holds, then waits for the test's release.
    let (seen_tx, seen) = channel();
    let (release, gate) = sync_channel::<()>(0);
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (done_tx, done) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(1, |d| {
            if let Event::Adu { adu, .. } = d.event {
                seen_tx.send(adu).unwrap();
                gate.recv_timeout(BOUND)
                    .expect("the test released the sink");
            }
            got.push(d.event);
            Ok(())
        });
        let _ = done_tx.send((s.map_err(|e| e.to_string()), got));
    });
    let notes = TcpListener::bind("127.0.0.1:0").unwrap();
    let job = Job::new(
        2,
        "a_slow_receiver_holds_the_job_to_its_window_and_nothing_is_lost",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .env("SPOOLS_TEST_NOTE", notes.local_addr().unwrap().to_string())
    .start();
    let (sent_tx, sent) = channel();
    std::thread::spawn(move || {
        let (mut n, _) = notes.accept().unwrap();
        let mut b = [0u8; 1];
        while n.read_exact(&mut b).is_ok() {
            if sent_tx.send(u64::from(b[0])).is_err() {
                return;
            }
        }
    });
    let mut progress = 0;
    for k in 0..ADUS {
        assert_eq!(seen.recv_timeout(BOUND).unwrap(), k);
        // The sink holds ADU k: the receiver acknowledged ADUs 0..k. Each link may have
        // sent ADUs up to k + WINDOW - 1 and hold WINDOW more queued: the job's sends
        // return for at most k + 2 WINDOW ADUs while the sink is held (TCP alone would
        // have taken all 12 at once: 36 KB).
        while progress < (k + 2 * WINDOW).min(ADUS) {
            progress = sent.recv_timeout(BOUND).unwrap();
        }
        while let Ok(p) = sent.try_recv() {
            progress = p;
        }
        assert!(
            progress <= k + 2 * WINDOW,
            "the job sent {progress} ADUs while the receiver held ADU {k}"
        );
        release.send(()).unwrap();
    }
    assert_ok(&job.wait(BOUND));
    let (summary, got) = done.recv_timeout(BOUND).expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(
        summary.broken.is_empty() && summary.refused.is_empty(),
        "{summary:?}"
    );
    let mut want: Vec<Event> = (0..ADUS)
        .map(|a| Event::Adu {
            stream: 1,
            adu: a,
            data: whole(1, a),
        })
        .collect();
    want.push(Event::Ended {
        stream: 1,
        adus: ADUS,
        complete: true,
    });
    assert_eq!(got, want);
}

#[test]
fn a_held_back_stream_with_a_full_window_lets_the_stream_before_it_pass() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dest = std::env::var("SPOOLS_TEST_DEST").unwrap().parse().unwrap();
        let l: Layout = LAYOUT.parse().unwrap();
        let me = u64::from(w.rank());
        let mut c = e(StreamConnection::open(w.communicator(), dest, 2))?;
        let one = StreamOptions {
            tu: 1000,
            window: 1,
            ..Default::default()
        };
        let a = e(c.open_stream(one))?;
        // B is handed out only once A ended, and has the higher priority: its link threads
        // would send it first if its window let them.
        let b = e(c.open_stream(StreamOptions {
            after: Some(a),
            priority: 9,
            ..one
        }))?;
        e(c.send_adu(a, &share(me, 1, 0), &l))?;
        e(c.send_adu(b, &share(me, 2, 0), &l))?;
        // B's ADU 1 waits for the ack of its ADU 0, which waits for A's end: A's ADUs
        // pass it.
        e(c.send_adu(b, &share(me, 2, 1), &l))?;
        e(c.send_adu(a, &share(me, 1, 1), &l))?;
        e(c.send_adu(a, &share(me, 1, 2), &l))?;
        e(c.close_stream(a))?;
        e(c.send_adu(b, &share(me, 2, 2), &l))?;
        e(c.close())?;
        e(w.finalize())
    });
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let (done_tx, done) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(1, |d| {
            got.push(d.event);
            Ok(())
        });
        let _ = done_tx.send((s.map_err(|e| e.to_string()), got));
    });
    let o = Job::new(
        2,
        "a_held_back_stream_with_a_full_window_lets_the_stream_before_it_pass",
    )
    .env("SPOOLS_TEST_DEST", addr.to_string())
    .timeout(BOUND)
    .run();
    assert_ok(&o);
    let (summary, got) = done.recv_timeout(BOUND).expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(
        summary.broken.is_empty() && summary.refused.is_empty(),
        "{summary:?}"
    );
    let adu = |s, a| Event::Adu {
        stream: s,
        adu: a,
        data: whole(s, a),
    };
    let ended = |s| Event::Ended {
        stream: s,
        adus: 3,
        complete: true,
    };
    assert_eq!(
        got,
        vec![
            adu(1, 0),
            adu(1, 1),
            adu(1, 2),
            ended(1),
            adu(2, 0),
            adu(2, 1),
            adu(2, 2),
            ended(2)
        ]
    );
}
