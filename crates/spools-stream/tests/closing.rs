//! The closing rule (docs/streams.md, "Ending a connection"): a receiver may close its
//! links only once every link of the connection ended. `Sender::finish` shuts every link
//! down before it waits on any, and waits on them concurrently, so such a receiver costs
//! time, never a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use spools_proto::stream::{decode, Frame, Open, Welcome, NOT_SEQUENCED, VERSION, WELCOME_ACKS};
use spools_stream::Sender;

/// Long enough for a loaded machine; only a hang reaches it.
const BOUND: Duration = Duration::from_secs(120);

/// A receiver that reads each of `links` links to its end and closes them all only once
/// every one ended: the bytes read per link.
fn late_closer(links: u16) -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<usize>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let all_ended = Arc::new(Barrier::new(usize::from(links)));
        let readers: Vec<_> = (0..links)
            .map(|_| {
                let (mut s, _) = l.accept().unwrap();
                let all_ended = all_ended.clone();
                std::thread::spawn(move || {
                    let mut hello = [0u8; 20];
                    s.read_exact(&mut hello).unwrap();
                    assert!(matches!(decode(&hello), Ok(Some((Frame::Hello(_), 20)))));
                    let mut w = Vec::new();
                    Frame::Welcome(Welcome {
                        version: VERSION,
                        flags: WELCOME_ACKS,
                    })
                    .encode(&mut w);
                    s.write_all(&w).unwrap();
                    let mut rest = Vec::new();
                    s.read_to_end(&mut rest).unwrap();
                    // Every link's end read before any is closed.
                    all_ended.wait();
                    drop(s);
                    rest.len()
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    (addr, h)
}

#[test]
fn a_receiver_that_closes_its_links_last_costs_no_hang() {
    for links in [1u16, 2, 3] {
        let (addr, receiver) = late_closer(links);
        let (done, finished) = channel();
        std::thread::spawn(move || {
            let r = (|| {
                let mut s = Sender::connect(addr, links)?;
                s.open(Open {
                    stream: 1,
                    group: 0,
                    after: NOT_SEQUENCED,
                    flags: 0,
                    tu: 6,
                    adu: 10,
                })?;
                s.send_adu(1, 0, b"0123456789")?;
                s.close(1, 1)?;
                s.finish()
            })();
            let _ = done.send(r.map_err(|e| e.to_string()));
        });
        let r = finished
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("{links} link(s): the sender hung in finish"));
        r.unwrap();
        let read = receiver.join().unwrap();
        assert_eq!(read.len(), usize::from(links));
        // Every link carried its open and close; link 0 the most SUs.
        assert!(read.iter().all(|&n| n >= 36 + 20), "{read:?}");
    }
}

#[test]
fn finish_returns_once_each_link_is_closed_by_a_receiver_that_closes_early() {
    // The receiver closes each link as soon as it ended (the implementation's own).
    let r = spools_stream::Receiver::bind("127.0.0.1:0", spools_stream::Limits::default()).unwrap();
    let addr = r.local_addr().unwrap();
    let serving = std::thread::spawn(move || r.serve(1, |_| Ok(())).unwrap());
    let mut s = Sender::connect(addr, 3).unwrap();
    s.open(Open {
        stream: 1,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 3,
        adu: 4,
    })
    .unwrap();
    s.send_adu(1, 0, b"abcd").unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let summary = serving.join().unwrap();
    assert_eq!((summary.adus, summary.bytes), (1, 4));
}
