//! The sans-IO reassembly of a connection spread over several receivers, in memory: every
//! share of K links over P receivers (K < P and K > P) takes its links' frames in a
//! shuffled interleaving, and its pieces put back together are the sender's ADUs (fixed
//! and variable sizes, TUs that do and do not divide the ADU or divide by the links); the
//! lead orders ADUs and streams as a whole receiver does; a member refuses what the
//! consumer took, reports what its links lost and never reports ADUs missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_proto::stream::{su_range, tus, Close, Frame, Hello, Open, Su, NOT_SEQUENCED, VARIABLE};
use spools_stream::{Event, Limits, Reassembler, ReassemblyError, Share};

fn hello(links: u16, link: u16) -> Hello {
    Hello {
        version: 1,
        flags: 2,
        links,
        link,
        conn: 42,
    }
}

fn open(stream: u32, after: u32, tu: u64, adu: u64) -> Open {
    Open {
        stream,
        group: 0,
        after,
        flags: 0,
        tu,
        adu,
    }
}

fn data(stream: u32, adu: u64, size: u64) -> Vec<u8> {
    (0..size)
        .map(|i| (i * 7 + adu * 13 + u64::from(stream) * 31) as u8)
        .collect()
}

/// Every frame of `adus` ADUs (sizes) of stream `o` on each of `k` links, in link order.
fn frames(o: &Open, sizes: &[u64], k: u16) -> Vec<Vec<(u16, Frame<'static>)>> {
    let mut per = vec![vec![]; usize::from(k)];
    for (s, l) in per.iter_mut().enumerate() {
        l.push((s as u16, Frame::Open(*o)));
    }
    for (a, &size) in sizes.iter().enumerate() {
        let a = a as u64;
        let d: &'static [u8] = Box::leak(data(o.stream, a, size).into_boxed_slice());
        let tu = if o.adu == VARIABLE { size.max(1) } else { o.tu };
        if size == 0 {
            let su = Su {
                stream: o.stream,
                su: 0,
                link: 0,
                adu: a,
                tu: 0,
                offset: 0,
                size: 0,
                crc: 0,
            };
            per[0].push((0, Frame::Su(su, &[])));
        }
        for t in 0..tus(size, tu) {
            for s in 0..k {
                if let Some((off, len)) = su_range(size, tu, k, t, s) {
                    let p = &d[off as usize..(off + len) as usize];
                    let su = Su {
                        stream: o.stream,
                        su: s,
                        link: s,
                        adu: a,
                        tu: t,
                        offset: off,
                        size,
                        crc: crc32c::crc32c(p),
                    };
                    per[usize::from(s)].push((s, Frame::Su(su, p)));
                }
            }
        }
    }
    for (s, l) in per.iter_mut().enumerate() {
        l.push((
            s as u16,
            Frame::Close(Close {
                stream: o.stream,
                adus: sizes.len() as u64,
            }),
        ));
    }
    per
}

/// The links' frames interleaved pseudo-randomly (each link's own order kept).
fn shuffle(mut per: Vec<Vec<(u16, Frame<'static>)>>, seed: u64) -> Vec<(u16, Frame<'static>)> {
    let mut x = seed | 1;
    per.iter_mut().for_each(|l| l.reverse());
    let mut out = Vec::new();
    while per.iter().any(|l| !l.is_empty()) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let live: Vec<usize> = (0..per.len()).filter(|&i| !per[i].is_empty()).collect();
        let i = live[(x % live.len() as u64) as usize];
        out.extend(per[i].pop());
    }
    out
}

fn share(k: u16, r: u16, p: u16) -> Share {
    Share::new((0..k).filter(|s| s % p == r).collect(), r == 0)
}

/// The receivers of a spread connection, each fed its links' frames.
fn receive(k: u16, p: u16, frames: &[(u16, Frame<'static>)]) -> Vec<(Share, Vec<Event>)> {
    (0..p.min(k))
        .map(|r| {
            let sh = share(k, r, p);
            let links = sh.links().to_vec();
            let mut re =
                Reassembler::new_shared(&hello(k, links[0]), Limits::default(), sh.clone())
                    .unwrap();
            for &l in &links[1..] {
                re.add_link(&hello(k, l)).unwrap();
            }
            for (l, f) in frames.iter().filter(|(l, _)| sh.holds(*l)) {
                re.on_frame(*l, f).unwrap();
            }
            (sh, std::iter::from_fn(|| re.next_event()).collect())
        })
        .collect()
}

/// ADU `a` of a stream put back together from the receivers' pieces.
fn put_together(
    got: &[(Share, Vec<Event>)],
    k: u16,
    stream: u32,
    a: u64,
    size: u64,
    tu: u64,
) -> Vec<u8> {
    let mut out = vec![0u8; size as usize];
    for (sh, events) in got {
        let Some(piece) = events.iter().find_map(|e| match e {
            Event::Adu {
                stream: s,
                adu,
                data,
            } if *s == stream && *adu == a => Some(data),
            _ => None,
        }) else {
            assert_eq!(sh.piece_bytes(size, tu, k), 0, "no piece of ADU {a}");
            continue;
        };
        assert_eq!(piece.len() as u64, sh.piece_bytes(size, tu, k));
        for t in 0..tus(size, tu) {
            for s in 0..k {
                if let (Some(at), Some((off, len))) = (
                    sh.piece_offset(size, tu, k, t, s),
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

#[test]
fn the_pieces_of_every_share_are_the_adus() {
    for k in 1..=5u16 {
        for p in 1..=4u16 {
            for (tu, sizes) in [
                (60, vec![600, 600, 600]),
                (70, vec![1000, 1000]),
                (7, vec![10, 10]),
                (1 << 20, vec![3, 0, 1000, 1]),
            ] {
                let variable = sizes.windows(2).any(|w| w[0] != w[1]);
                let o = open(
                    1,
                    NOT_SEQUENCED,
                    tu,
                    if variable { VARIABLE } else { sizes[0] },
                );
                let got = receive(k, p, &shuffle(frames(&o, &sizes, k), u64::from(k * 10 + p)));
                for (a, &size) in sizes.iter().enumerate() {
                    let tu = if variable { size.max(1) } else { tu };
                    assert_eq!(
                        put_together(&got, k, 1, a as u64, size, tu),
                        data(1, a as u64, size),
                        "k {k} p {p} ADU {a}"
                    );
                }
                // Every share ends its stream complete.
                for (sh, events) in &got {
                    assert!(
                        events.contains(&Event::Ended {
                            stream: 1,
                            adus: sizes.len() as u64,
                            complete: true
                        }),
                        "k {k} p {p} {sh:?}: {events:?}"
                    );
                }
            }
        }
    }
}

/// The lead keeps the streams' order (stream 2 sequenced after stream 1 comes out after
/// it however its frames came), and remembers each piece's ADU size until it is taken.
#[test]
fn the_lead_orders_and_knows_the_sizes() {
    let (k, p) = (3u16, 2u16);
    let o1 = open(1, NOT_SEQUENCED, 9, 20);
    let o2 = open(2, 1, 9, VARIABLE);
    let mut all = frames(&o2, &[5, 17], k);
    for (l, f) in frames(&o1, &[20], k).into_iter().enumerate() {
        all[l].extend(f);
    }
    let lead_share = share(k, 0, p);
    let mut lead = Reassembler::new_shared(&hello(k, 0), Limits::default(), lead_share).unwrap();
    lead.add_link(&hello(k, 2)).unwrap();
    for (l, f) in shuffle(all, 7).iter().filter(|(l, _)| l % p == 0) {
        lead.on_frame(*l, f).unwrap();
    }
    let order: Vec<(u32, u64)> = std::iter::from_fn(|| lead.next_event())
        .filter_map(|e| match e {
            Event::Adu { stream, adu, .. } => Some((stream, adu)),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec![(1, 0), (2, 0), (2, 1)]);
    assert_eq!(lead.piece_of(2, 1), Some(17));
    lead.taken(2, 1);
    assert_eq!(lead.piece_of(2, 1), None);
}

/// A member: a link not held is refused, SUs of an ADU the consumer took are refused, a
/// lost link reports its pieces incomplete (never missing) and ends the stream.
#[test]
fn a_member_refuses_what_was_taken_and_reports_what_was_lost() {
    let (k, p) = (2u16, 2u16);
    assert!(matches!(
        Reassembler::new_shared(&hello(k, 0), Limits::default(), share(k, 1, p)),
        Err(ReassemblyError::Links { link: 0, .. })
    ));
    assert!(
        Reassembler::new_shared(&hello(k, 1), Limits::default(), Share::new(vec![1], true))
            .is_err(),
        "a lead must hold link 0"
    );
    let o = open(1, NOT_SEQUENCED, 8, 8);
    let per = frames(&o, &[8, 8, 8], k);
    let mut m = Reassembler::new_shared(&hello(k, 1), Limits::default(), share(k, 1, p)).unwrap();
    // Open, ADU 0's SU, then ADU 2's (ADU 1's is held back): pieces 0 and 2 come out.
    let link1 = &per[1];
    for i in [0, 1, 3] {
        m.on_frame(1, &link1[i].1).unwrap();
    }
    let adus: Vec<u64> = std::iter::from_fn(|| m.next_event())
        .filter_map(|e| match e {
            Event::Adu { adu, data, .. } => {
                assert_eq!(data, data_of(adu));
                Some(adu)
            }
            _ => None,
        })
        .collect();
    assert_eq!(adus, vec![0, 2]);
    assert_eq!(m.piece_of(1, 2), Some(8));
    m.taken(1, 0);
    assert!(matches!(
        m.on_frame(1, &link1[1].1),
        Err(ReassemblyError::Misplaced { adu: 0, .. })
    ));
    // ADU 1's SU again would be new; the link is lost instead: nothing of ADU 1 here is
    // reported (a member need not see every ADU), and the stream ends incomplete.
    m.link_lost(1);
    let rest: Vec<Event> = std::iter::from_fn(|| m.next_event()).collect();
    assert_eq!(
        rest,
        vec![Event::Ended {
            stream: 1,
            adus: 3,
            complete: false
        }]
    );
}

fn data_of(adu: u64) -> Vec<u8> {
    data(1, adu, 8)[4..].to_vec()
}
