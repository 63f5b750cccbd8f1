//! In-memory tests of the single-copy rendezvous: the receiver copies a sender's
//! shared-heap bytes itself (a real segment of this process plays the sender's), falls
//! back to streaming when it cannot map them, and never leaves the sender waiting.

use spools_fabric::heap::{HeapRef, HeapSegment, PeerHeaps};
use spools_proto::auth::Secret;

use super::events::{Incoming, Limits, MessageInfo, RecvOutcome};
use super::machine::Protocol;
use super::matching::{Envelope, Pattern};
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
    let sid = s.post_send(RECEIVER, Buf::owned(want()), false);
    let inc = Incoming::Rts {
        len: LEN as u64,
        send_id: sid,
        heap,
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
        let bytes = peers.bytes(&pull.heap, pull.len).expect("mapped");
        r.pulled(pull, Some(&bytes));
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
    r.pulled(pull, None);
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
    let bytes = peers.bytes(&pull.heap, pull.len).expect("mapped");
    r.pulled(pull, Some(&bytes));
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
