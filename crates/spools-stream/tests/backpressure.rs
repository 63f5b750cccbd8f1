//! Back-pressure at ADU granularity over real TCP: a receiver whose sink is slow (it blocks
//! until the test releases it) holds a sender with a window of `w` ADUs to at most `w` ADUs
//! beyond those acknowledged, and nothing is lost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::mpsc::{channel, sync_channel};

use common::{data, open, serve_with, BOUND};
use spools_stream::{Event, Limits, Receiver, Sender};

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
