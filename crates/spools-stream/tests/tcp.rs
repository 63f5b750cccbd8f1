//! Sender and receiver over real TCP connections on loopback: every link count 1..5, TUs
//! that do and don't divide the ADU, empty and odd-sized ADUs, several streams; a client
//! speaking garbage is refused while the others are served.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{data, serve};
use spools_proto::stream::{Open, NOT_SEQUENCED};
use spools_stream::{Event, ReassemblyError, Sender};

#[test]
fn every_link_count_and_tu_gives_the_adus_back_whole() {
    for links in 1..=5u16 {
        for (tu, size) in [(4096u64, 4096 * 6), (1000, 4096 * 6 + 7), (64 << 10, 1)] {
            let (addr, done) = serve(1);
            let mut s = Sender::connect(addr, links).unwrap();
            let adus: Vec<Vec<u8>> = (0..3).map(|i| data(i, size as usize)).collect();
            s.open(Open {
                stream: 1,
                group: 0,
                after: NOT_SEQUENCED,
                flags: 0,
                tu,
                adu: size,
            })
            .unwrap();
            for (i, a) in adus.iter().enumerate() {
                s.send_adu(1, i as u64, a).unwrap();
            }
            s.close(1, 3).unwrap();
            // A second stream, sequenced after the first, of variable-size ADUs (empty,
            // odd).
            let var = [Vec::new(), data(9, 12345), data(8, 1)];
            s.open(Open {
                stream: 2,
                group: 0,
                after: 1,
                flags: 0,
                tu: 1,
                adu: u64::MAX,
            })
            .unwrap();
            for (i, a) in var.iter().enumerate() {
                s.send_adu(2, i as u64, a).unwrap();
            }
            s.close(2, 3).unwrap();
            s.finish().unwrap();
            let (summary, got) = done();
            let events: Vec<Event> = got.into_iter().map(|d| d.event).collect();
            let mut want: Vec<Event> = adus
                .iter()
                .enumerate()
                .map(|(i, d)| Event::Adu {
                    stream: 1,
                    adu: i as u64,
                    data: d.clone(),
                })
                .collect();
            want.push(Event::Ended {
                stream: 1,
                adus: 3,
                complete: true,
            });
            want.extend(var.iter().enumerate().map(|(i, d)| Event::Adu {
                stream: 2,
                adu: i as u64,
                data: d.clone(),
            }));
            want.push(Event::Ended {
                stream: 2,
                adus: 3,
                complete: true,
            });
            assert_eq!(events, want, "links {links}, TU {tu}, ADU {size}");
            assert_eq!(summary.connections, 1);
            assert!(
                summary.refused.is_empty() && summary.broken.is_empty(),
                "{summary:?}"
            );
        }
    }
}

#[test]
fn a_client_speaking_garbage_is_refused_and_the_others_are_served() {
    let (addr, done) = serve(1);
    let mut junk = TcpStream::connect(addr).unwrap();
    junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    // Hung up on without a word: refused, before the sender connects.
    junk.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    junk.read_to_end(&mut answer).unwrap();
    assert!(answer.is_empty(), "{answer:?}");
    let mut s = Sender::connect(addr, 2).unwrap();
    s.open(Open {
        stream: 1,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 10,
        adu: 25,
    })
    .unwrap();
    s.send_adu(1, 0, &data(1, 25)).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let (summary, got) = done();
    assert_eq!(
        got[0].event,
        Event::Adu {
            stream: 1,
            adu: 0,
            data: data(1, 25)
        }
    );
    assert!(
        summary
            .refused
            .iter()
            .any(|r| r.contains("not a Spools stream")),
        "{:?}",
        summary.refused
    );
}

#[test]
fn a_sender_that_dies_mid_adu_leaves_the_whole_adus_and_names_the_incomplete_one() {
    let (addr, done) = serve(1);
    let mut s = Sender::connect(addr, 2).unwrap();
    s.open(Open {
        stream: 1,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 8,
        adu: 32,
    })
    .unwrap();
    s.send_adu(1, 0, &data(1, 32)).unwrap();
    // Dropped without closing: both links end; ADU 1 was never sent.
    drop(s);
    let (summary, got) = done();
    let events: Vec<Event> = got.into_iter().map(|d| d.event).collect();
    assert_eq!(
        events,
        vec![
            Event::Adu {
                stream: 1,
                adu: 0,
                data: data(1, 32)
            },
            Event::Ended {
                stream: 1,
                adus: 1,
                complete: false
            },
        ]
    );
    assert_eq!(summary.connections, 1);
}

/// A raw connection of one link to `addr`, and its hello (for connection `conn`) encoded
/// in the bytes to send.
fn one_link(addr: std::net::SocketAddr, conn: u64) -> (TcpStream, Vec<u8>) {
    use spools_proto::stream::{Frame, Hello, VERSION};
    let mut b = Vec::new();
    Frame::Hello(Hello {
        version: VERSION,
        flags: 0,
        links: 1,
        link: 0,
        conn,
    })
    .encode(&mut b);
    (TcpStream::connect(addr).unwrap(), b)
}

#[test]
fn a_corrupt_frame_is_named_with_its_stream_adu_tu_and_link() {
    use spools_proto::stream::{Close, Frame, Su};
    let (addr, done) = serve(1);
    let (mut link, mut b) = one_link(addr, 5);
    Frame::Open(Open {
        stream: 4,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 8,
        adu: 16,
    })
    .encode(&mut b);
    let su = |tu: u64, crc| Su {
        stream: 4,
        su: 0,
        link: 0,
        adu: 0,
        tu,
        offset: tu * 8,
        size: 16,
        crc,
    };
    Frame::Su(su(0, crc32c::crc32c(b"01234567")), b"01234567").encode(&mut b);
    // TU 1's payload changed after its CRC was computed.
    Frame::Su(su(1, crc32c::crc32c(b"89abcdef")), b"89abcdeX").encode(&mut b);
    Frame::Close(Close { stream: 4, adus: 1 }).encode(&mut b);
    link.write_all(&b).unwrap();
    link.shutdown(std::net::Shutdown::Write).unwrap();
    let (summary, got) = done();
    assert!(
        got.iter().all(|d| !matches!(d.event, Event::Adu { .. })),
        "{got:?}"
    );
    assert!(
        summary
            .broken
            .iter()
            .any(|m| m.contains("stream 4, ADU 0, TU 1, SU 0 on link 0: checksum mismatch")),
        "{summary:?}"
    );
    // The same, typed.
    assert!(
        matches!(
            summary.faults.as_slice(),
            [(
                _,
                ReassemblyError::Checksum {
                    stream: 4,
                    adu: 0,
                    tu: 1,
                    su: 0,
                    link: 0,
                    ..
                }
            )]
        ),
        "{summary:?}"
    );
}

/// An ADU large enough for huge pages at the receiver and for a sending thread per link
/// arrives byte-exact.
#[test]
fn a_large_adu_arrives_whole() {
    let size = 40 << 20;
    let (addr, done) = serve(1);
    let adu = data(7, size);
    let mut s = Sender::connect(addr, 3).unwrap();
    s.open(common::open(1, 4 << 20, size as u64)).unwrap();
    s.send_adu(1, 0, &adu).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let (summary, got) = done();
    assert_eq!(summary.adus, 1, "{summary:?}");
    let Event::Adu { data: back, .. } = &got[0].event else {
        panic!("{:?}", got[0].event)
    };
    assert!(back == &adu, "the ADU came back different");
}

/// A connection dropped for a bad frame still hands out the ADUs that were whole before it.
#[test]
fn the_whole_adus_before_a_corrupt_frame_are_handed_out() {
    use spools_proto::stream::{Frame, Su};
    let (addr, done) = serve(1);
    let (mut link, mut b) = one_link(addr, 6);
    Frame::Open(common::open(2, 8, 8)).encode(&mut b);
    let su = |adu, crc| Su {
        stream: 2,
        su: 0,
        link: 0,
        adu,
        tu: 0,
        offset: 0,
        size: 8,
        crc,
    };
    Frame::Su(su(0, crc32c::crc32c(b"01234567")), b"01234567").encode(&mut b);
    Frame::Su(su(1, crc32c::crc32c(b"89abcdef")), b"89abcdeX").encode(&mut b);
    link.write_all(&b).unwrap();
    link.shutdown(std::net::Shutdown::Write).unwrap();
    let (summary, got) = done();
    assert_eq!(
        got.first().map(|d| &d.event),
        Some(&Event::Adu {
            stream: 2,
            adu: 0,
            data: b"01234567".to_vec()
        }),
        "{got:?}"
    );
    assert!(
        summary
            .broken
            .iter()
            .any(|m| m.contains("stream 2, ADU 1, TU 0, SU 0 on link 0: checksum mismatch")),
        "{summary:?}"
    );
}

/// Buffers handed back through the receiver's `Recycler` are filled again for the next ADU
/// of the same size, and nothing of the old ADU shows through: the sender sends ADU n + 1
/// only once the sink has checked ADU n and handed its buffer back.
#[test]
fn a_buffer_handed_back_is_filled_again_with_nothing_of_the_old_adu() {
    const SIZE: usize = 300_001;
    const ADUS: u64 = 6;
    let r = spools_stream::Receiver::bind("127.0.0.1:0", spools_stream::Limits::default()).unwrap();
    let bin = r.recycler();
    let (taken_tx, taken) = std::sync::mpsc::channel();
    let (addr, done) = common::serve_with(r, 1, move |d| {
        if let Event::Adu { adu, data: b, .. } = &d.event {
            assert!(*b == data(*adu, SIZE), "ADU {adu} is not what was sent");
            // The test's serve keeps the delivery itself: hand back a copy, and say where
            // its buffer lives.
            let back = b.clone();
            let at = back.as_ptr() as usize;
            bin.give(back);
            taken_tx.send((*adu, at)).unwrap();
        }
    });
    let mut s = Sender::connect(addr, 3).unwrap();
    s.open(common::open(1, 99_999, SIZE as u64)).unwrap();
    let mut given = Vec::new();
    for n in 0..ADUS {
        s.send_adu(1, n, &data(n, SIZE)).unwrap();
        let (adu, at) = taken.recv_timeout(common::BOUND).unwrap();
        assert_eq!(adu, n);
        given.push(at);
    }
    s.close(1, ADUS).unwrap();
    s.finish().unwrap();
    let (summary, got) = done();
    assert_eq!(summary.adus, ADUS, "{summary:?}");
    // ADU n + 1 was received into the buffer handed back after ADU n.
    let reused = got
        .iter()
        .filter_map(|d| match &d.event {
            Event::Adu { adu, data: b, .. } if *adu > 0 => {
                Some(b.as_ptr() as usize == given[*adu as usize - 1])
            }
            _ => None,
        })
        .filter(|&same| same)
        .count();
    assert_eq!(reused, ADUS as usize - 1, "buffers were not reused");
}
