//! The reassembly in memory: ADUs cut and striped by an independent sender model arrive on
//! K links in random interleavings and come out whole and in order; checksums, misplaced
//! and repeated SUs, lost links, sequencing, lock step and limits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use spools_proto::stream::{Close, Frame, Hello, Open, Su, NOT_SEQUENCED, VARIABLE, VERSION};
use spools_stream::{Event, Limits, Reassembler, ReassemblyError};

/// A frame a link carries, owned.
#[derive(Clone, Debug)]
enum Owned {
    Open(Open),
    Su(Su, Vec<u8>),
    Close(Close),
}

impl Owned {
    fn frame(&self) -> Frame<'_> {
        match self {
            Owned::Open(o) => Frame::Open(*o),
            Owned::Su(s, p) => Frame::Su(*s, p),
            Owned::Close(c) => Frame::Close(*c),
        }
    }
}

/// The sender model, written from the format's definition (not from `su_range`): TU `t`
/// is bytes `[t*tu, min((t+1)*tu, n))`; its SU `s` is the `s`-th piece of `ceil(tu/K)`
/// bytes (cut where the TU ends); an empty ADU is one empty SU on link 0.
fn send(
    stream: u32,
    group: u32,
    after: u32,
    tu: u64,
    fixed: Option<u64>,
    adus: &[Vec<u8>],
    k: u16,
) -> Vec<Vec<Owned>> {
    let open = Open {
        stream,
        group,
        after,
        flags: 0,
        tu,
        adu: fixed.unwrap_or(VARIABLE),
    };
    let mut links: Vec<Vec<Owned>> = (0..k).map(|_| vec![Owned::Open(open)]).collect();
    for (a, data) in adus.iter().enumerate() {
        let n = data.len() as u64;
        let tu = if fixed.is_some() { tu } else { n.max(1) };
        let su_hdr = |s: u16, t: u64, off: u64, p: &[u8]| Su {
            stream,
            su: s,
            link: s,
            adu: a as u64,
            tu: t,
            offset: off,
            size: n,
            crc: crc32c::crc32c(p),
        };
        if n == 0 {
            links[0].push(Owned::Su(su_hdr(0, 0, 0, &[]), Vec::new()));
        }
        let mut t = 0;
        while t * tu < n {
            let (lo, hi) = (t * tu, ((t + 1) * tu).min(n));
            let piece = tu.div_ceil(u64::from(k));
            for s in 0..k {
                let from = lo + piece * u64::from(s);
                if from >= hi {
                    break;
                }
                let to = (from + piece).min(hi);
                let p = data[from as usize..to as usize].to_vec();
                links[usize::from(s)].push(Owned::Su(su_hdr(s, t, from, &p), p));
            }
            t += 1;
        }
    }
    for l in &mut links {
        l.push(Owned::Close(Close {
            stream,
            adus: adus.len() as u64,
        }));
    }
    links
}

fn hello(k: u16, link: u16) -> Hello {
    Hello {
        version: VERSION,
        flags: 0,
        links: k,
        link,
        conn: 99,
    }
}

fn connection(k: u16) -> Reassembler {
    let mut r = Reassembler::new(&hello(k, 0), Limits::default()).unwrap();
    for l in 1..k {
        r.add_link(&hello(k, l)).unwrap();
    }
    r
}

/// Delivers every link's frames, interleaving links by `order` (link indices, consumed
/// round robin when exhausted), keeping each link's own order.
fn deliver(
    r: &mut Reassembler,
    links: &[Vec<Owned>],
    order: &[u16],
) -> Result<Vec<Event>, ReassemblyError> {
    let mut at = vec![0usize; links.len()];
    let mut events = Vec::new();
    let mut pick = order
        .iter()
        .copied()
        .chain((0..).map(|i| (i % links.len()) as u16));
    while at.iter().zip(links).any(|(&i, l)| i < l.len()) {
        let l = usize::from(pick.next().unwrap()) % links.len();
        if at[l] == links[l].len() {
            continue;
        }
        r.on_frame(l as u16, &links[l][at[l]].frame())?;
        at[l] += 1;
        while let Some(e) = r.next_event() {
            events.push(e);
        }
    }
    Ok(events)
}

fn data(seed: u64, n: usize) -> Vec<u8> {
    (0..n as u64)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed * 7) % 251) as u8)
        .collect()
}

proptest! {
    #[test]
    fn any_interleaving_gives_every_adu_whole_and_in_order(
        k in 1u16..6,
        tu in 1u64..40,
        sizes in prop::collection::vec(0usize..150, 0..6),
        variable in any::<bool>(),
        order in prop::collection::vec(0u16..6, 0..400),
    ) {
        let adus: Vec<Vec<u8>> = if variable {
            sizes.iter().enumerate().map(|(i, &n)| data(i as u64, n)).collect()
        } else {
            // A fixed size: every ADU has the first one's.
            let n = sizes.first().copied().unwrap_or(0);
            (0..sizes.len()).map(|i| data(i as u64, n)).collect()
        };
        let fixed = (!variable).then(|| adus.first().map_or(0, |a| a.len() as u64));
        let links = send(1, 0, NOT_SEQUENCED, tu, fixed, &adus, k);
        let mut r = connection(k);
        let events = deliver(&mut r, &links, &order).unwrap();
        let mut want: Vec<Event> = adus.iter().enumerate()
            .map(|(i, d)| Event::Adu { stream: 1, adu: i as u64, data: d.clone() }).collect();
        want.push(Event::Ended { stream: 1, adus: adus.len() as u64, complete: true });
        prop_assert_eq!(events, want);
    }
}

#[test]
fn a_corrupt_su_is_named() {
    let mut links = send(3, 0, NOT_SEQUENCED, 8, Some(16), &[data(1, 16)], 2);
    if let Owned::Su(_, p) = &mut links[1][1] {
        p[0] ^= 1;
    }
    let mut r = connection(2);
    let e = deliver(&mut r, &links, &[1, 1]).unwrap_err();
    assert!(
        matches!(
            e,
            ReassemblyError::Checksum {
                stream: 3,
                adu: 0,
                tu: 0,
                su: 1,
                link: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("stream 3, ADU 0, TU 0, SU 1 on link 1: checksum mismatch"),
        "{e}"
    );
}

#[test]
fn misplaced_and_repeated_sus_are_refused() {
    let links = send(1, 0, NOT_SEQUENCED, 8, Some(16), &[data(1, 16)], 2);
    let Owned::Su(su, p) = links[0][1].clone() else {
        panic!()
    };
    let mut r = connection(2);
    r.on_frame(0, &links[0][0].frame()).unwrap();
    // On the wrong link, at the wrong offset, twice.
    let e = r.on_frame(1, &Frame::Su(su, &p)).unwrap_err();
    assert!(e.to_string().contains("SU s must travel on link s"), "{e}");
    let moved = Su { offset: 1, ..su };
    let e = r.on_frame(0, &Frame::Su(moved, &p)).unwrap_err();
    assert!(
        e.to_string()
            .contains("not where the stream's format puts it"),
        "{e}"
    );
    r.on_frame(0, &Frame::Su(su, &p)).unwrap();
    let e = r.on_frame(0, &Frame::Su(su, &p)).unwrap_err();
    assert!(e.to_string().contains("received twice"), "{e}");
    // A stream never opened, a frame before a link's hello.
    let other = Su { stream: 9, ..su };
    assert!(matches!(
        r.on_frame(0, &Frame::Su(other, &p)),
        Err(ReassemblyError::Stream { stream: 9, .. })
    ));
    let mut lone = Reassembler::new(&hello(2, 0), Limits::default()).unwrap();
    assert!(matches!(
        lone.on_frame(1, &links[1][0].frame()),
        Err(ReassemblyError::Links { link: 1, .. })
    ));
    assert!(matches!(
        lone.add_link(&hello(2, 0)),
        Err(ReassemblyError::Links { .. })
    ));
    assert!(matches!(
        lone.add_link(&Hello {
            conn: 1,
            ..hello(2, 1)
        }),
        Err(ReassemblyError::Links { .. })
    ));
}

#[test]
fn a_lost_link_reports_the_incomplete_adu_and_keeps_the_whole_ones() {
    let adus = [data(0, 20), data(1, 20), data(2, 20)];
    let links = send(1, 0, NOT_SEQUENCED, 10, Some(20), &adus, 2);
    let mut r = connection(2);
    // Link 0 delivers everything but its close; link 1 only its open and ADU 0's two SUs
    // and ADU 1's first, then dies.
    for f in &links[0][..links[0].len() - 1] {
        r.on_frame(0, &f.frame()).unwrap();
    }
    for f in &links[1][..4] {
        r.on_frame(1, &f.frame()).unwrap();
    }
    r.link_lost(1);
    // Link 0 may still deliver: nothing is judged lost yet.
    let events: Vec<Event> = std::iter::from_fn(|| r.next_event()).collect();
    assert_eq!(
        events,
        vec![Event::Adu {
            stream: 1,
            adu: 0,
            data: adus[0].clone()
        }]
    );
    r.link_lost(0);
    let events: Vec<Event> = std::iter::from_fn(|| r.next_event()).collect();
    assert_eq!(
        events,
        vec![
            Event::Incomplete {
                stream: 1,
                adu: 1,
                have: 15,
                size: 20
            },
            Event::Incomplete {
                stream: 1,
                adu: 2,
                have: 10,
                size: 20
            },
            Event::Ended {
                stream: 1,
                adus: 3,
                complete: false
            },
        ]
    );
}

#[test]
fn a_closed_stream_reports_what_never_came() {
    let adus = [data(0, 4), data(1, 4), data(2, 4), data(3, 4)];
    let mut links = send(1, 0, NOT_SEQUENCED, 4, Some(4), &adus, 1);
    // ADUs 1 and 2 never sent (frames 2 and 3 after the open).
    links[0].drain(2..4);
    let mut r = connection(1);
    let events = deliver(&mut r, &links, &[]).unwrap();
    assert_eq!(
        events,
        vec![
            Event::Adu {
                stream: 1,
                adu: 0,
                data: adus[0].clone()
            },
            Event::Missing {
                stream: 1,
                from: 1,
                to: 3
            },
            Event::Adu {
                stream: 1,
                adu: 3,
                data: adus[3].clone()
            },
            Event::Ended {
                stream: 1,
                adus: 4,
                complete: false
            },
        ]
    );
}

#[test]
fn a_sequenced_stream_waits_for_the_one_before() {
    let first = send(1, 0, NOT_SEQUENCED, 4, Some(4), &[data(1, 4)], 1);
    let second = send(2, 0, 1, 4, Some(4), &[data(2, 4)], 1);
    let mut r = connection(1);
    // The second stream arrives whole first: nothing comes out before stream 1 ends.
    for f in &second[0] {
        r.on_frame(0, &f.frame()).unwrap();
    }
    assert_eq!(r.next_event(), None);
    for f in &first[0] {
        r.on_frame(0, &f.frame()).unwrap();
    }
    let order: Vec<(u32, &str)> = std::iter::from_fn(|| r.next_event())
        .map(|e| match e {
            Event::Adu { stream, .. } => (stream, "adu"),
            Event::Ended { stream, .. } => (stream, "end"),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(order, vec![(1, "adu"), (1, "end"), (2, "adu"), (2, "end")]);
}

#[test]
fn a_group_hands_out_each_adu_number_together() {
    let a = send(
        1,
        7,
        NOT_SEQUENCED,
        4,
        Some(4),
        &[data(1, 4), data(2, 4)],
        1,
    );
    let b = send(
        2,
        7,
        NOT_SEQUENCED,
        4,
        Some(4),
        &[data(3, 4), data(4, 4)],
        1,
    );
    let mut r = connection(1);
    // Both open; stream 1 sends both ADUs before stream 2 sends any.
    r.on_frame(0, &a[0][0].frame()).unwrap();
    r.on_frame(0, &b[0][0].frame()).unwrap();
    r.on_frame(0, &a[0][1].frame()).unwrap();
    r.on_frame(0, &a[0][2].frame()).unwrap();
    assert_eq!(
        r.next_event(),
        None,
        "ADU 0 of stream 1 waits for stream 2's"
    );
    r.on_frame(0, &b[0][1].frame()).unwrap();
    let got: Vec<(u32, u64)> = std::iter::from_fn(|| r.next_event())
        .map(|e| match e {
            Event::Adu { stream, adu, .. } => (stream, adu),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, vec![(1, 0), (2, 0)], "ADU 1 of stream 1 still waits");
    r.on_frame(0, &b[0][2].frame()).unwrap();
    let got: Vec<(u32, u64)> = std::iter::from_fn(|| r.next_event())
        .filter_map(|e| match e {
            Event::Adu { stream, adu, .. } => Some((stream, adu)),
            _ => None,
        })
        .collect();
    assert_eq!(got, vec![(1, 1), (2, 1)]);
}

#[test]
fn limits_refuse_before_allocating() {
    let limits = Limits {
        max_adu: 100,
        max_buffered: 150,
    };
    let mut r = Reassembler::new(&hello(2, 0), limits).unwrap();
    r.add_link(&hello(2, 1)).unwrap();
    let big = Open {
        stream: 1,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu: 1 << 40,
        adu: 1 << 50,
    };
    assert!(matches!(
        r.on_frame(0, &Frame::Open(big)),
        Err(ReassemblyError::TooLarge { .. })
    ));
    let var = Open {
        adu: VARIABLE,
        ..big
    };
    r.on_frame(0, &Frame::Open(var)).unwrap();
    let half = vec![5u8; 50];
    let su = |adu, size| Su {
        stream: 1,
        su: 0,
        link: 0,
        adu,
        tu: 0,
        offset: 0,
        size,
        crc: crc32c::crc32c(&half),
    };
    // An ADU of 2^64-1 bytes: refused from its first SU, nothing allocated.
    assert!(matches!(
        r.on_frame(0, &Frame::Su(su(0, u64::MAX), &half)),
        Err(ReassemblyError::TooLarge { what: "an ADU", .. })
    ));
    // Half of a 100-byte ADU is held (100 bytes); a second one would hold 200 > 150.
    r.on_frame(0, &Frame::Su(su(0, 100), &half)).unwrap();
    let e = r.on_frame(0, &Frame::Su(su(1, 100), &half)).unwrap_err();
    assert!(
        matches!(
            e,
            ReassemblyError::TooLarge {
                what: "the ADUs held",
                bytes: 200,
                limit: 150,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_group_member_that_ends_keeps_its_whole_adu_for_the_group() {
    // Group 9 of streams 3 (ADUs 0..4) and 4 (ADUs 0..5), one SU per link and ADU.
    let adus = |seed: u64, n: u64| (0..n).map(|i| data(seed + i, 4)).collect::<Vec<_>>();
    let (a3, a4) = (adus(30, 4), adus(40, 5));
    let s3 = send(3, 9, NOT_SEQUENCED, 4, Some(4), &a3, 2);
    let s4 = send(4, 9, NOT_SEQUENCED, 4, Some(4), &a4, 2);
    // On each link: both opens, ADUs 0..3 of both in turn, then stream 3's ADU 3 and its
    // close (on every link, before anything else), then the rest of stream 4.
    let links: Vec<Vec<Owned>> = (0..2)
        .map(|l| {
            let (f3, f4) = (&s3[l], &s4[l]);
            let mut v = vec![f3[0].clone(), f4[0].clone()];
            for n in 1..4 {
                v.extend([f3[n].clone(), f4[n].clone()]);
            }
            v.extend(f3[4..].iter().cloned());
            v.extend(f4[4..].iter().cloned());
            v
        })
        .collect();
    let mut r = connection(2);
    let events = deliver(&mut r, &links, &[]).unwrap();
    let adu = |stream, n: u64, data: &[Vec<u8>]| Event::Adu {
        stream,
        adu: n,
        data: data[n as usize].clone(),
    };
    let mut want = Vec::new();
    for n in 0..3 {
        want.extend([adu(3, n, &a3), adu(4, n, &a4)]);
    }
    // Stream 3's ADU 3 waited, whole, for stream 4's: it goes out with it, then stream 3
    // ends complete.
    want.extend([
        adu(3, 3, &a3),
        adu(4, 3, &a4),
        Event::Ended {
            stream: 3,
            adus: 4,
            complete: true,
        },
        adu(4, 4, &a4),
        Event::Ended {
            stream: 4,
            adus: 5,
            complete: true,
        },
    ]);
    assert_eq!(events, want);
}

#[test]
fn a_whole_adu_held_for_its_group_goes_once_the_others_end_without_it() {
    // Group 9: stream 3 has ADUs 0..2, stream 4 only ADU 0; stream 3 closes first.
    let (a3, a4) = ([data(1, 4), data(2, 4)], [data(3, 4)]);
    let s3 = send(3, 9, NOT_SEQUENCED, 4, Some(4), &a3, 1);
    let s4 = send(4, 9, NOT_SEQUENCED, 4, Some(4), &a4, 1);
    let mut r = connection(1);
    r.on_frame(0, &s4[0][0].frame()).unwrap();
    for f in &s3[0] {
        r.on_frame(0, &f.frame()).unwrap();
    }
    assert_eq!(
        r.next_event(),
        None,
        "stream 3's ADU 0 waits for stream 4's"
    );
    for f in &s4[0][1..] {
        r.on_frame(0, &f.frame()).unwrap();
    }
    let got: Vec<Event> = std::iter::from_fn(|| r.next_event()).collect();
    let adu = |stream, adu, data: &Vec<u8>| Event::Adu {
        stream,
        adu,
        data: data.clone(),
    };
    let ended = |stream, adus| Event::Ended {
        stream,
        adus,
        complete: true,
    };
    assert_eq!(
        got,
        vec![
            adu(3, 0, &a3[0]),
            adu(4, 0, &a4[0]),
            ended(4, 1),
            adu(3, 1, &a3[1]),
            ended(3, 2)
        ]
    );
}
