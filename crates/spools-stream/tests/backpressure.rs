//! Back-pressure at ADU granularity over real TCP: a receiver whose sink is slow (it blocks
//! until the test releases it) holds a sender with a window of `w` ADUs to at most `w` ADUs
//! beyond those acknowledged, and a sender without a window by its links' TCP, holding no
//! more than its limit of whole ADUs; nothing is lost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::mpsc::{channel, sync_channel};

use common::{data, open, serve_with, BOUND};
use spools_proto::stream::{Close, Frame, Su};
use spools_stream::{Delivery, Event, Limits, LinkSender, Receiver, Sender};

const WINDOW: u64 = 2;
const ADUS: u64 = 10;
const SIZE: usize = 3000;

#[test]
fn a_slow_receiver_holds_a_windowed_sender_and_loses_nothing() {
    // The sink tells the test which ADU it holds, then waits for the test's release.
    let (seen_tx, seen) = channel();
    let (release, gate) = sync_channel::<()>(0);
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let (addr, done) = serve_with(r, 1, move |d| {
        if let Event::Adu { adu, .. } = d.event {
            seen_tx.send(adu).unwrap();
            gate.recv_timeout(BOUND)
                .expect("the test released the sink");
        }
    });
    // The sender reports each ADU it sent, and how far beyond the acknowledged ADUs it got
    // (by its own count of acks, which can only lag the receiver's).
    let (sent_tx, sent) = channel();
    let sender = std::thread::spawn(move || {
        let mut s = Sender::connect(addr, 3).unwrap().with_window(WINDOW as u32);
        s.open(open(1, 1000, SIZE as u64)).unwrap();
        let mut ahead = 0;
        for n in 0..ADUS {
            s.send_adu(1, n, &data(n, SIZE)).unwrap();
            ahead = ahead.max(n + 1 - s.acked(1));
            sent_tx.send(n + 1).unwrap();
        }
        s.close(1, ADUS).unwrap();
        s.finish().unwrap();
        ahead
    });
    let mut progress = 0;
    for k in 0..ADUS {
        assert_eq!(seen.recv_timeout(BOUND).unwrap(), k);
        // The sink holds ADU k, so ADUs 0..k are all the receiver acknowledged: the sender
        // gets to k + WINDOW ADUs sent, and no further while the sink is held.
        while progress < (k + WINDOW).min(ADUS) {
            progress = sent.recv_timeout(BOUND).unwrap();
        }
        // Whatever else the sender reported by now counts too.
        while let Ok(p) = sent.try_recv() {
            progress = p;
        }
        assert!(
            progress <= k + WINDOW,
            "the sender sent {progress} ADUs while the receiver held ADU {k}"
        );
        release.send(()).unwrap();
    }
    let ahead = sender.join().unwrap();
    assert_eq!(ahead, WINDOW, "the sender filled its window, and no more");
    let (summary, got) = done();
    let adus: Vec<Event> = got
        .into_iter()
        .map(|d| d.event)
        .filter(|e| matches!(e, Event::Adu { .. }))
        .collect();
    let want: Vec<Event> = (0..ADUS)
        .map(|n| Event::Adu {
            stream: 1,
            adu: n,
            data: data(n, SIZE),
        })
        .collect();
    assert_eq!(adus, want);
    assert!(
        summary.broken.is_empty() && summary.refused.is_empty(),
        "{summary:?}"
    );
}

/// What the test hears of the transfer without a window.
enum Note {
    /// The sender sent this many ADUs.
    Sent(u64),
    /// The sender wrote everything (and closed its stream).
    AllSent,
    /// A link of the receiver stopped reading, with this many bytes of whole ADUs ready.
    Held(u64),
}

/// ADU `n` of the transfer without a window: 1 MiB, its number first.
fn big_adu(n: u64) -> Vec<u8> {
    let mut d = data(7, 1 << 20);
    d[..8].copy_from_slice(&n.to_le_bytes());
    d
}

#[test]
fn a_slow_receiver_holds_a_sender_without_a_window_within_its_limit() {
    const MIB: u64 = 1 << 20;
    const BIG_ADUS: u64 = 48;
    let limit = 2 * MIB;
    let limits = Limits {
        max_buffered: limit,
        ..Limits::default()
    };
    let (notes_tx, notes) = channel();
    let held = notes_tx.clone();
    let r = Receiver::bind("127.0.0.1:0", limits)
        .unwrap()
        .on_hold(move |bytes| {
            let _ = held.send(Note::Held(bytes));
        });
    // The sink checks every ADU's bytes, and holds ADU 0 until the test releases it.
    let (seen_tx, seen) = channel();
    let (release, gate) = sync_channel::<()>(0);
    let (addr, done) = serve_with(r, 1, move |d: &Delivery| {
        if let Event::Adu { adu, data, .. } = &d.event {
            assert!(*data == big_adu(*adu), "ADU {adu} arrived altered");
            if *adu == 0 {
                seen_tx.send(()).unwrap();
                gate.recv_timeout(BOUND)
                    .expect("the test released the sink");
            }
        }
    });
    let sender = std::thread::spawn(move || {
        let mut s = Sender::connect(addr, 2).unwrap();
        s.open(open(1, MIB, MIB)).unwrap();
        for n in 0..BIG_ADUS {
            s.send_adu(1, n, &big_adu(n)).unwrap();
            let _ = notes_tx.send(Note::Sent(n + 1));
        }
        s.close(1, BIG_ADUS).unwrap();
        let _ = notes_tx.send(Note::AllSent);
        s.finish().unwrap();
    });
    seen.recv_timeout(BOUND).expect("the sink holds ADU 0");
    // The sender goes on while the receiver takes its ADUs; with the sink held, the whole
    // ADUs ready pile up until a link stops reading.
    let (mut sent, mut all_sent) = (0, false);
    let held = loop {
        match notes.recv_timeout(BOUND).expect("a link stopped reading") {
            Note::Sent(n) => sent = n,
            Note::AllSent => all_sent = true,
            Note::Held(bytes) => break bytes,
        }
    };
    assert!(
        held > limit && held <= limit + MIB,
        "a link stopped with {held} bytes of whole ADUs ready (limit {limit})"
    );
    eprintln!("held with {held} bytes ready, the sender at {sent} ADUs (all sent: {all_sent})");
    release.send(()).unwrap();
    sender.join().unwrap();
    let (summary, got) = done();
    let adus: Vec<u64> = got
        .iter()
        .filter_map(|d| match d.event {
            Event::Adu { adu, .. } => Some(adu),
            _ => None,
        })
        .collect();
    assert_eq!(adus, (0..BIG_ADUS).collect::<Vec<_>>(), "{summary:?}");
    assert_eq!(summary.bytes, BIG_ADUS * MIB);
    // Many times the limit went through, and no more than the limit and one ADU was ever
    // ready and not taken.
    assert!(
        summary.max_pending > limit && summary.max_pending <= limit + MIB,
        "{} bytes were ready at once (limit {limit})",
        summary.max_pending
    );
    assert!(
        summary.broken.is_empty() && summary.refused.is_empty(),
        "{summary:?}"
    );
}

/// One link far ahead of the other: link 0 sends its half of every ADU (many times the
/// receiver's bound) before link 1 sends anything. The receiver's link 0 waits for link 1
/// instead of dropping the connection, and every ADU arrives whole.
#[test]
fn a_link_far_ahead_of_the_other_waits_for_it_and_nothing_is_lost() {
    const ADUS: u64 = 40;
    const SIZE: u64 = 64 << 10;
    let limits = Limits {
        max_buffered: 2 * SIZE,
        ..Limits::default()
    };
    let (addr, done) = serve_with(Receiver::bind("127.0.0.1:0", limits).unwrap(), 1, |_| {});
    let mut links: Vec<LinkSender> = (0..2)
        .map(|l| LinkSender::connect(addr, 2, l, 77).unwrap())
        .collect();
    for l in &mut links {
        l.send(&Frame::Open(open(1, SIZE, SIZE))).unwrap();
    }
    let half = SIZE / 2;
    for (link, l) in links.iter_mut().enumerate() {
        let link = link as u16;
        for n in 0..ADUS {
            let d = data(n, SIZE as usize);
            let off = u64::from(link) * half;
            let p = &d[off as usize..(off + half) as usize];
            let su = Su {
                stream: 1,
                su: link,
                link,
                adu: n,
                tu: 0,
                offset: off,
                size: SIZE,
                crc: crc32c::crc32c(p),
            };
            l.send_su(&su, p).unwrap();
        }
        l.send(&Frame::Close(Close {
            stream: 1,
            adus: ADUS,
        }))
        .unwrap();
    }
    for l in links {
        l.finish().unwrap();
    }
    let (summary, got) = done();
    let adus: Vec<(u64, bool)> = got
        .iter()
        .filter_map(|d| match &d.event {
            Event::Adu { adu, data: b, .. } => Some((*adu, *b == data(*adu, SIZE as usize))),
            _ => None,
        })
        .collect();
    assert_eq!(
        adus,
        (0..ADUS).map(|n| (n, true)).collect::<Vec<_>>(),
        "{summary:?}"
    );
    assert!(summary.broken.is_empty(), "{summary:?}");
}

/// A link that says hello after ADUs were acknowledged hears of them at once: ADUs of one
/// byte travel on link 0 only, so the receiver takes and acks them before link 1 of the
/// same connection joins, and link 1's window must not wait for an ack already given. With
/// the receiver's auto acks, and with consumer acks (a job's receive).
#[test]
fn a_late_link_hears_the_acks_given_before_it_joined() {
    for consumer in [false, true] {
        late_link_hears_earlier_acks(consumer);
    }
}

fn late_link_hears_earlier_acks(consumer: bool) {
    const ADUS: u64 = 3;
    let (took_tx, took) = channel();
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let (r, acker) = if consumer {
        let (r, a) = r.consumer_acks();
        (r, Some(a))
    } else {
        (r, None)
    };
    let (addr, done) = serve_with(r, 1, move |d| {
        if let Event::Adu { adu, .. } = d.event {
            took_tx.send(adu).unwrap();
        }
    });
    let mut first = LinkSender::connect(addr, 2, 0, 78).unwrap();
    first.send(&Frame::Open(open(1, 8, 1))).unwrap();
    for n in 0..ADUS {
        let d = data(n, 1);
        let su = Su {
            stream: 1,
            su: 0,
            link: 0,
            adu: n,
            tu: 0,
            offset: 0,
            size: 1,
            crc: crc32c::crc32c(&d),
        };
        first.send_su(&su, &d).unwrap();
        assert_eq!(
            took.recv_timeout(BOUND).unwrap(),
            n,
            "link 0 alone carries ADU {n}"
        );
        if let Some(a) = &acker {
            a.ack(1, n);
        }
    }
    let mut late = LinkSender::connect(addr, 2, 1, 78).unwrap();
    let mut acks = late.take_acks().expect("the receiver sends acks");
    // Read on a thread: without the fix, no ack ever comes on the late link.
    let (heard_tx, heard) = channel();
    std::thread::spawn(move || {
        let _ = heard_tx.send(acks.next_ack().map_err(|e| e.to_string()));
    });
    let ack = heard
        .recv_timeout(BOUND)
        .expect("the late link heard an ack")
        .unwrap()
        .expect("an ack, not the end of the link");
    assert_eq!(
        (ack.stream, ack.adu),
        (1, ADUS - 1),
        "consumer acks: {consumer}"
    );
    late.send(&Frame::Open(open(1, 8, 1))).unwrap();
    for l in [&mut first, &mut late] {
        l.send(&Frame::Close(Close {
            stream: 1,
            adus: ADUS,
        }))
        .unwrap();
    }
    first.finish().unwrap();
    late.finish().unwrap();
    let (summary, _) = done();
    assert_eq!(summary.adus, ADUS);
    assert!(summary.broken.is_empty(), "{summary:?}");
}
