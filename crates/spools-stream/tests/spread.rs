//! A connection spread over several receivers, as a job's ranks receive one: the lead
//! moves the links it does not hold to the others (`welcome` with `WELCOME_MOVE`, then
//! `move`), a sender follows (with the secret's proof at both ends when required), each
//! receiver hands out its pieces (its links' SUs, link after link), and together they are
//! the ADUs. A sender that cannot move is refused a link it would have to move; a receiver
//! moved to that moves again is an error; garbage on either port is refused while the
//! sender is served; acks by the consumer hold a sender's window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::channel;

use common::{data, open, serve_with, BOUND};
use spools_proto::auth::Secret;
use spools_proto::stream::{su_range, tus, Frame, Hello, HELLO_CAN_PROVE, VERSION};
use spools_stream::{
    Admit, Delivery, Event, Limits, LinkSender, Receiver, SendError, Sender, Share, Stopper,
    Summary,
};

/// What one receiver saw, once it ended (within a bounded wait).
type Done = Box<dyn FnOnce() -> (Summary, Vec<Delivery>)>;

/// Receivers `0..p`, receiver `r` holding links `s % p == r` of a K-link connection;
/// receiver 0 (the lead) moves the other links to theirs.
fn spread(p: u16, secret: Option<Secret>) -> (SocketAddr, Vec<(Stopper, Done)>) {
    let mut rs: Vec<Receiver> = (0..p)
        .map(|_| {
            let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
            match &secret {
                Some(s) => r.require_proof(s.clone()),
                None => r,
            }
        })
        .collect();
    let addrs: Vec<SocketAddr> = rs.iter().map(|r| r.local_addr().unwrap()).collect();
    let mut done = Vec::new();
    for (me, r) in rs.drain(..).enumerate() {
        let me = me as u16;
        let addrs = addrs.clone();
        let r = r.admit(move |h: &Hello| {
            let share = Share::new((0..h.links).filter(|s| s % p == me).collect(), me == 0);
            match (me, h.link % p) {
                (_, owner) if owner == me => Admit::Serve(Some(share)),
                (0, owner) => Admit::Move(addrs[usize::from(owner)]),
                _ => Admit::Refuse("not a link of this receiver"),
            }
        });
        let stop = r.stopper().unwrap();
        done.push((stop, Box::new(serve_with(r, 1, |_| {}).1) as Done));
    }
    (addrs[0], done)
}

/// Puts the pieces of ADU `adu` the receivers handed out back together.
fn whole(k: u16, p: u16, size: u64, tu: u64, pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0u8; size as usize];
    for (r, piece) in pieces.iter().enumerate() {
        let share = Share::new((0..k).filter(|s| s % p == r as u16).collect(), r == 0);
        assert_eq!(piece.len() as u64, share.piece_bytes(size, tu, k));
        for t in 0..tus(size, tu) {
            for s in 0..k {
                if let (Some(at), Some((off, len))) = (
                    share.piece_offset(size, tu, k, t, s),
                    su_range(size, tu, k, t, s),
                ) {
                    out[off as usize..(off + len) as usize]
                        .copy_from_slice(&piece[at as usize..(at + len) as usize]);
                }
            }
        }
    }
    out
}

/// The pieces of stream 1's ADUs each receiver handed out, by ADU.
fn pieces(got: &[Delivery]) -> Vec<(u64, Vec<u8>)> {
    got.iter()
        .filter_map(|d| match &d.event {
            Event::Adu {
                stream: 1,
                adu,
                data,
            } => Some((*adu, data.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn links_spread_over_receivers_give_back_every_adu() {
    for p in 1..=4u16 {
        for k in 1..=5u16 {
            for (tu, size) in [(60, 600), (70, 1000), (7, 10)] {
                let (addr, done) = spread(p, None);
                let mut s = Sender::connect(addr, k).unwrap();
                s.open(open(1, tu, size)).unwrap();
                for a in 0..3 {
                    s.send_adu(1, a, &data(a, size as usize)).unwrap();
                }
                s.close(1, 3).unwrap();
                s.finish().unwrap();
                let mut by_rank = Vec::new();
                for (r, (stop, d)) in done.into_iter().enumerate() {
                    // A receiver that holds no link (K < P) sees no connection: stopped.
                    let holds = (r as u16) < k;
                    if !holds {
                        stop.stop();
                    }
                    let (summary, got) = d();
                    assert!(summary.refused.is_empty(), "{:?}", summary.refused);
                    assert!(summary.broken.is_empty(), "{:?}", summary.broken);
                    let ends = got.iter().filter(|d| {
                        matches!(
                            d.event,
                            Event::Ended {
                                stream: 1,
                                complete: true,
                                ..
                            }
                        )
                    });
                    assert_eq!(ends.count(), usize::from(holds), "p {p} k {k} rank {r}");
                    by_rank.push(pieces(&got));
                }
                for a in 0..3u64 {
                    let ps: Vec<Vec<u8>> = by_rank
                        .iter()
                        .map(|ps| {
                            ps.iter()
                                .find(|(n, _)| *n == a)
                                .map_or_else(Vec::new, |(_, d)| d.clone())
                        })
                        .collect();
                    assert_eq!(
                        whole(k, p, size, tu, &ps),
                        data(a, size as usize),
                        "p {p} k {k} tu {tu} ADU {a}"
                    );
                }
            }
        }
    }
}

#[test]
fn moved_links_prove_the_secret_at_both_ends() {
    let key = Secret::from_bytes([9; 16]);
    let (addr, done) = spread(2, Some(key.clone()));
    // Without the secret: refused at the first receiver, before any move.
    let e = Sender::connect(addr, 2).err().expect("no secret");
    assert!(matches!(e, SendError::ProofRequired { link: 0 }), "{e}");
    let mut s = Sender::connect_proving(addr, 2, &key).unwrap();
    s.open(open(1, 10, 25)).unwrap();
    s.send_adu(1, 0, &data(5, 25)).unwrap();
    s.close(1, 1).unwrap();
    s.finish().unwrap();
    let got: Vec<_> = done.into_iter().map(|(_, d)| pieces(&d().1)).collect();
    let ps: Vec<Vec<u8>> = got.iter().map(|p| p[0].1.clone()).collect();
    assert_eq!(whole(2, 2, 25, 10, &ps), data(5, 25));
}

/// A sender that does not say it can move (an older one): the lead refuses the links it
/// would have to move, and serves the others.
#[test]
fn a_sender_that_cannot_move_is_refused_a_moved_link() {
    let (addr, done) = spread(2, None);
    let mut sock = TcpStream::connect(addr).unwrap();
    let mut b = Vec::new();
    Frame::Hello(Hello {
        version: VERSION,
        flags: HELLO_CAN_PROVE,
        links: 2,
        link: 1,
        conn: 5,
    })
    .encode(&mut b);
    sock.write_all(&b).unwrap();
    sock.set_read_timeout(Some(BOUND)).unwrap();
    let mut rest = Vec::new();
    sock.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "no welcome: {rest:?}");
    // A sender that moves: served.
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut s = Sender::connect(addr, 2).unwrap();
        s.open(open(1, 4, 4)).unwrap();
        s.send_adu(1, 0, b"abcd").unwrap();
        s.close(1, 1).unwrap();
        s.finish().unwrap();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(BOUND).unwrap();
    let mut it = done.into_iter();
    let (lead, got) = (it.next().unwrap().1)();
    assert_eq!(lead.refused.len(), 1, "{:?}", lead.refused);
    assert!(
        lead.refused[0].contains("cannot move"),
        "{:?}",
        lead.refused
    );
    assert_eq!(pieces(&got), vec![(0, b"ab".to_vec())]);
    let (_, got) = (it.next().unwrap().1)();
    assert_eq!(pieces(&got), vec![(0, b"cd".to_vec())]);
}

/// A receiver that moves a link that was moved to it: the sender fails, naming it.
#[test]
fn a_link_moves_at_most_once() {
    let a = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let b = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let (to_a, to_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let a = a.admit(move |_| Admit::Move(to_b));
    let b = b.admit(move |_| Admit::Move(to_a));
    let stop = (a.stopper().unwrap(), b.stopper().unwrap());
    let (_, da) = serve_with(a, 1, |_| {});
    let (_, db) = serve_with(b, 1, |_| {});
    let e = LinkSender::connect(to_a, 1, 0, 1)
        .err()
        .expect("moved twice");
    assert!(
        matches!(e, SendError::MovedAgain { link: 0, addr } if addr == to_b),
        "{e}"
    );
    // Stopping ends a receiver that never served a connection.
    stop.0.stop();
    stop.1.stop();
    assert_eq!(da().0.connections, 0);
    assert_eq!(db().0.connections, 0);
}

/// Acks sent by the consumer: a sender with a window of 1 is held until the consumer says
/// it is done with each ADU, on every link (the lead's and the moved one).
#[test]
fn consumer_acks_hold_a_window() {
    let lead = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let member = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    let to_member = member.local_addr().unwrap();
    let addr = lead.local_addr().unwrap();
    let share = |r: u16| Share::new(vec![r], r == 0);
    let lead = lead.admit(move |h| match h.link {
        0 => Admit::Serve(Some(share(0))),
        _ => Admit::Move(to_member),
    });
    let member = member.admit(move |_| Admit::Serve(Some(share(1))));
    let (lead, lead_acks) = lead.consumer_acks();
    let (member, member_acks) = member.consumer_acks();
    let (took0, took0_rx) = channel();
    let (took1, took1_rx) = channel();
    let (_, d0) = serve_with(lead, 1, move |d| {
        if let Event::Adu { adu, .. } = d.event {
            took0.send(adu).unwrap();
        }
    });
    let (_, d1) = serve_with(member, 1, move |d| {
        if let Event::Adu { adu, .. } = d.event {
            took1.send(adu).unwrap();
        }
    });
    let (sent_tx, sent) = channel();
    let sender = std::thread::spawn(move || {
        let mut s = Sender::connect(addr, 2).unwrap().with_window(1);
        s.open(open(1, 8, 8)).unwrap();
        for a in 0..4u64 {
            s.send_adu(1, a, &data(a, 8)).unwrap();
            sent_tx.send((a, s.acked(1))).unwrap();
        }
        s.close(1, 4).unwrap();
        s.finish().unwrap();
    });
    for a in 0..4u64 {
        // ADU a is sent once ADU a-1 was acked (window 1): no further.
        let (n, acked) = sent.recv_timeout(BOUND).unwrap();
        assert_eq!((n, acked), (a, a), "ADU {a}");
        assert!(sent.try_recv().is_err(), "ran past the window at ADU {a}");
        assert_eq!(took0_rx.recv_timeout(BOUND).unwrap(), a);
        assert_eq!(took1_rx.recv_timeout(BOUND).unwrap(), a);
        lead_acks.ack(1, a);
        member_acks.ack(1, a);
    }
    sender.join().unwrap();
    assert_eq!(d0().0.adus, 4);
    assert_eq!(d1().0.adus, 4);
}
