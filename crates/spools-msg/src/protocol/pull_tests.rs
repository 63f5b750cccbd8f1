//! In-memory tests of the rendezvous whose receiver takes the bytes itself: it copies a
//! sender's shared-heap bytes (a real segment of this process plays the sender's) or
//! reads a lent buffer (a filler plays the network), falls back to streaming when it
//! cannot, never leaves the sender waiting, and every loan ends exactly once.

use spools_am::RemoteRegion;
use spools_heap::{HeapRef, HeapSegment, PeerHeaps};
use spools_proto::auth::Secret;

use super::events::{DataAt, Incoming, Limits, MessageInfo, RecvOutcome};
use super::machine::Protocol;
use super::matching::{Envelope, Pattern};
use super::wire;
use crate::buffer::{Buf, RecvBuf};

const SENDER: u32 = 0;
const RECEIVER: u32 = 1;
const LEN: usize = 10_000;

fn proto() -> Protocol {
    Protocol::new(Limits::new(8, 64))
}

fn pat() -> Pattern {
    Pattern {
        ctx: 0,
        src: None,
        tag: None,
    }
}

fn env() -> Envelope {
    Envelope {
        ctx: 0,
        src: SENDER,
        tag: 5,
    }
}

fn received() -> Option<RecvOutcome> {
    Some(RecvOutcome::Received(MessageInfo {
        src: SENDER,
        tag: 5,
        len: LEN,
    }))
}

/// A sender's segment holding the message (job unique to this test process).
fn segment(n: u64) -> (HeapSegment, PeerHeaps) {
    let job = (u64::from(std::process::id()) << 16) | 0x7e00 | n;
    let secret = Secret::from_bytes([3; 16]);
    let seg = HeapSegment::create(job, SENDER, LEN, &secret).expect("segment");
    for i in 0..LEN {
        // SAFETY: i < LEN, inside the segment this test owns.
        unsafe { seg.data().add(i).write((i % 251) as u8) };
    }
    (seg, PeerHeaps::new(job, secret))
}

fn want() -> Vec<u8> {
    (0..LEN).map(|i| (i % 251) as u8).collect()
}

/// The sender posts its send, the RTS (naming `heap`) reaches the receiver.
fn rts(s: &mut Protocol, r: &mut Protocol, heap: Option<HeapRef>) -> u64 {
    rts_at(s, r, heap.map(DataAt::Heap), None)
}

/// The sender posts its send (lent as `loan`), the RTS (naming `at`, through the wire
/// encoding) reaches the receiver.
fn rts_at(s: &mut Protocol, r: &mut Protocol, at: Option<DataAt>, loan: Option<u32>) -> u64 {
    let sid = s.post_send(RECEIVER, Buf::owned(want()), false, loan);
    let at = at.and_then(|a| {
        let (payload, n) = wire::rts_payload(&a);
        let back = wire::rts_source(SENDER, &payload[..n]);
        assert_eq!(back, Some(a), "the payload decodes to what was encoded");
        back
    });
    let inc = Incoming::Rts {
        len: LEN as u64,
        send_id: sid,
        at,
    };
    r.on_message(env(), inc);
    sid
}

#[test]
fn the_receiver_copies_from_the_senders_heap_and_completes_the_send() {
    let (seg, peers) = segment(1);
    let heap = HeapRef {
        name: seg.name(),
        offset: 0,
    };
    for unexpected in [false, true] {
        let (mut s, mut r) = (proto(), proto());
        let mut id = None;
        if !unexpected {
            id = Some(
                r.post_recv(pat(), RecvBuf::Fixed(Buf::owned(vec![0; LEN])))
                    .0,
            );
        }
        let sid = rts(&mut s, &mut r, Some(heap));
        let id = id.unwrap_or_else(|| r.post_recv(pat(), RecvBuf::Alloc(Vec::new())).0);
        assert!(r.front_cts().is_none(), "no CTS before the copy");
        assert_eq!(r.recv_outcome(id), None);
        let pull = r.pop_pull().expect("a copy to make");
        let DataAt::Heap(at) = pull.at else {
            panic!("a copy from the heap")
        };
        let bytes = peers.bytes(&at, pull.len).expect("mapped");
        r.pulled(pull, |dst| bytes.copy_to(0, dst).is_ok());
        assert_eq!(r.recv_outcome(id), received());
        assert_eq!(r.release_recv(id)[..LEN], want()[..]);
        let cts = r.front_cts().expect("the CTS");
        assert!(cts.discard, "the send completes without data");
        s.on_cts(RECEIVER, cts.send_id, cts.recv_id, cts.discard)
            .expect("accepted");
        assert!(s.send_complete(sid));
        assert!(s.next_chunk(0, |_| 1 << 20).is_none(), "no data chunk");
    }
}

#[test]
fn unmappable_bytes_stream_instead() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(), RecvBuf::Fixed(Buf::owned(vec![0; LEN])));
    let (seg, _) = segment(2);
    let sid = rts(
        &mut s,
        &mut r,
        Some(HeapRef {
            name: seg.name(),
            offset: 0,
        }),
    );
    let pull = r.pop_pull().expect("a copy to make");
    r.pulled(pull, |_| false);
    let cts = r.front_cts().expect("the CTS");
    assert!(!cts.discard);
    r.pop_cts();
    s.on_cts(RECEIVER, cts.send_id, cts.recv_id, false)
        .expect("accepted");
    while let Some(c) = s.next_chunk(0, |_| 4096) {
        let (slot, off, bytes) = (c.slot, c.offset, c.bytes.to_vec());
        s.chunk_sent(slot, bytes.len());
        r.on_data(SENDER, id, off as u64, &bytes).expect("data");
    }
    assert!(s.send_complete(sid));
    assert_eq!(r.recv_outcome(id), received());
    assert_eq!(r.release_recv(id), want());
}

#[test]
fn a_receive_released_before_the_copy_still_completes_the_send() {
    let (seg, peers) = segment(3);
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(), RecvBuf::Fixed(Buf::owned(vec![0; LEN])));
    let heap = HeapRef {
        name: seg.name(),
        offset: 0,
    };
    let sid = rts(&mut s, &mut r, Some(heap));
    r.release_recv(id);
    let pull = r.pop_pull().expect("a copy to make");
    let DataAt::Heap(at) = pull.at else {
        panic!("a copy from the heap")
    };
    let bytes = peers.bytes(&at, pull.len).expect("mapped");
    let mut filled = false;
    r.pulled(pull, |dst| {
        filled = bytes.copy_to(0, dst).is_ok();
        filled
    });
    assert!(!filled, "a released receive takes nothing");
    let cts = r.front_cts().expect("the CTS");
    assert!(cts.discard);
    s.on_cts(RECEIVER, cts.send_id, cts.recv_id, true)
        .expect("accepted");
    assert!(s.send_complete(sid));
}

#[test]
fn a_truncated_receive_makes_no_copy() {
    let (seg, _) = segment(4);
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(), RecvBuf::Fixed(Buf::owned(vec![0; 10])));
    let heap = HeapRef {
        name: seg.name(),
        offset: 0,
    };
    rts(&mut s, &mut r, Some(heap));
    assert!(r.pop_pull().is_none());
    assert!(matches!(
        r.recv_outcome(id),
        Some(RecvOutcome::Truncated { capacity: 10, .. })
    ));
    assert!(r.front_cts().is_some_and(|c| c.discard));
}

const LENT: RemoteRegion = RemoteRegion {
    addr: 0x7f00_0000_1000,
    key: 77,
    len: LEN as u64,
};

/// The loans `p` says have ended.
fn ended(p: &mut Protocol) -> Vec<u32> {
    std::iter::from_fn(|| p.pop_ended_loan()).collect()
}

#[test]
fn the_receiver_reads_a_lent_buffer_and_the_loan_ends_with_the_send() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(), RecvBuf::Alloc(Vec::new()));
    let sid = rts_at(&mut s, &mut r, Some(DataAt::Net(LENT)), Some(9));
    assert!(r.front_cts().is_none(), "no CTS before the read");
    let pull = r.pop_pull().expect("a read to make");
    assert_eq!(pull.at, DataAt::Net(LENT));
    r.pulled(pull, |dst| {
        dst.copy_from_slice(&want());
        true
    });
    assert_eq!(r.recv_outcome(id), received());
    assert_eq!(r.release_recv(id), want());
    let cts = r.front_cts().expect("the CTS");
    assert!(cts.discard, "the send completes without data");
    assert!(ended(&mut s).is_empty(), "lent until the CTS");
    s.on_cts(RECEIVER, cts.send_id, cts.recv_id, true)
        .expect("accepted");
    assert!(s.send_complete(sid));
    assert_eq!(ended(&mut s), [9]);
    s.release_send(sid);
    assert!(ended(&mut s).is_empty(), "a loan ends once");
}

#[test]
fn a_refused_read_streams_and_the_loan_ends_after_the_last_chunk() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(), RecvBuf::Fixed(Buf::owned(vec![0; LEN])));
    let sid = rts_at(&mut s, &mut r, Some(DataAt::Net(LENT)), Some(4));
    let pull = r.pop_pull().expect("a read to make");
    r.pulled(pull, |_| false);
    let cts = r.front_cts().expect("the CTS");
    assert!(!cts.discard, "the data streams");
    s.on_cts(RECEIVER, cts.send_id, cts.recv_id, false)
        .expect("accepted");
    while let Some(c) = s.next_chunk(0, |_| 4096) {
        let (slot, off, bytes) = (c.slot, c.offset, c.bytes.to_vec());
        assert!(ended(&mut s).is_empty(), "lent while streaming");
        s.chunk_sent(slot, bytes.len());
        r.on_data(SENDER, id, off as u64, &bytes).expect("data");
    }
    assert!(s.send_complete(sid));
    assert_eq!(ended(&mut s), [4]);
    assert_eq!(r.release_recv(id), want());
}

#[test]
fn a_send_removed_early_ends_its_loan() {
    let (mut s, mut r) = (proto(), proto());
    // Its RTS never left.
    let sid = rts_at(&mut s, &mut r, Some(DataAt::Net(LENT)), Some(1));
    assert!(s.abort_send(sid).is_some());
    assert_eq!(ended(&mut s), [1]);
    // Released while waiting for its CTS (its blocking call failed).
    let sid = rts_at(&mut s, &mut r, Some(DataAt::Net(LENT)), Some(2));
    s.release_send(sid);
    assert_eq!(ended(&mut s), [2]);
    // Detached, then completed by a discarding CTS: removed, loan ended.
    let sid = rts_at(&mut s, &mut r, Some(DataAt::Net(LENT)), Some(3));
    s.detach_send(sid);
    assert!(ended(&mut s).is_empty());
    s.on_cts(RECEIVER, sid, 0, true).expect("accepted");
    assert_eq!(ended(&mut s), [3]);
    assert_eq!(s.held().0, 0, "the detached send is gone");
}

#[test]
fn malformed_rts_payloads_are_ignored() {
    let (payload, n) = wire::rts_payload(&DataAt::Net(LENT));
    let good = &payload[..n];
    assert_eq!(wire::rts_source(SENDER, good), Some(DataAt::Net(LENT)));
    assert_eq!(wire::rts_source(SENDER, &[]), None);
    assert_eq!(wire::rts_source(SENDER, &good[..n - 1]), None, "short");
    let mut long = good.to_vec();
    long.push(0);
    assert_eq!(wire::rts_source(SENDER, &long), None, "long");
    let mut kind = good.to_vec();
    kind[0] = 0xEE;
    assert_eq!(wire::rts_source(SENDER, &kind), None, "unknown kind");
    let (seg, _) = segment(5);
    let heap = DataAt::Heap(HeapRef {
        name: seg.name(),
        offset: 0,
    });
    let (payload, n) = wire::rts_payload(&heap);
    assert_eq!(wire::rts_source(SENDER, &payload[..n]), Some(heap));
    assert_eq!(
        wire::rts_source(RECEIVER, &payload[..n]),
        None,
        "a segment that is not the sender's"
    );
}
