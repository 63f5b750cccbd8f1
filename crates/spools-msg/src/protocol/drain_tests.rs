//! In-memory tests of a drained tag range (the messages of a collective this rank left):
//! what was queued and what comes later is dropped, a rendezvous sender is told to
//! discard and completes, and receives already posted or of other tags are untouched.

use super::events::{Incoming, Limits, MessageInfo, RecvOutcome};
use super::machine::Protocol;
use super::matching::{Envelope, Pattern};
use crate::buffer::{Buf, RecvBuf};

const SENDER: u32 = 0;
const RECEIVER: u32 = 1;
const CTX: u32 = 3;

fn proto() -> Protocol {
    Protocol::new(Limits::new(8, 64))
}

fn env(tag: u32) -> Envelope {
    Envelope {
        ctx: CTX,
        src: SENDER,
        tag,
    }
}

fn pat(tag: u32) -> Pattern {
    Pattern {
        ctx: CTX,
        src: Some(SENDER),
        tag: Some(tag),
    }
}

/// A rendezvous send from `s` whose RTS reaches `r` with `tag`; the send's id.
fn rts(s: &mut Protocol, r: &mut Protocol, tag: u32) -> u64 {
    let id = s.post_send(RECEIVER, Buf::owned(vec![7; 1000]), false, None);
    let inc = Incoming::Rts {
        len: 1000,
        send_id: id,
        at: None,
    };
    r.on_message(env(tag), inc);
    id
}

/// Carries `r`'s clear-to-send messages to `s`; whether each said discard.
fn carry_cts(r: &mut Protocol, s: &mut Protocol) -> Vec<bool> {
    let mut out = Vec::new();
    while let Some(c) = r.front_cts() {
        r.pop_cts();
        assert_eq!(s.on_cts(RECEIVER, c.send_id, c.recv_id, c.discard), Ok(()));
        out.push(c.discard);
    }
    out
}

#[test]
fn queued_messages_of_the_range_are_dropped_and_their_senders_complete() {
    let (mut s, mut r) = (proto(), proto());
    r.on_message(env(256), Incoming::Data(b"stale"));
    let inside = rts(&mut s, &mut r, 300);
    let outside = rts(&mut s, &mut r, 512);
    r.on_message(env(100), Incoming::Data(b"kept"));
    assert_eq!(r.unexpected_len(), 4);
    assert!(r.drain(CTX, 256..512), "a clear-to-send is queued");
    assert_eq!(r.unexpected_len(), 2, "the two of the range are gone");
    assert_eq!(
        carry_cts(&mut r, &mut s),
        [true],
        "one discard, for the RTS"
    );
    assert!(s.send_complete(inside));
    assert!(
        !s.send_complete(outside),
        "a send outside the range waits on"
    );
    // The messages outside the range are still there for their receives.
    let (id, _) = r.post_recv(pat(100), RecvBuf::Alloc(Vec::new()));
    let info = MessageInfo {
        src: SENDER,
        tag: 100,
        len: 4,
    };
    assert_eq!(r.recv_outcome(id), Some(RecvOutcome::Received(info)));
}

#[test]
fn later_messages_of_the_range_are_dropped_unless_a_receive_takes_them() {
    let (mut s, mut r) = (proto(), proto());
    // Posted before the drain: still matches.
    let (posted, _) = r.post_recv(pat(260), RecvBuf::Alloc(Vec::new()));
    assert!(!r.drain(CTX, 256..512), "nothing queued, no clear-to-send");
    r.on_message(env(260), Incoming::Data(b"mine"));
    assert!(
        r.recv_outcome(posted).is_some(),
        "the posted receive took it"
    );
    r.on_message(env(261), Incoming::Data(b"late"));
    let late = rts(&mut s, &mut r, 262);
    assert_eq!(r.unexpected_len(), 0, "nothing of the range is queued");
    assert_eq!(carry_cts(&mut r, &mut s), [true]);
    assert!(s.send_complete(late), "the late rendezvous completes");
    // Another context and the same tags: untouched.
    let other = Envelope {
        ctx: CTX + 1,
        ..env(261)
    };
    r.on_message(other, Incoming::Data(b"other"));
    assert_eq!(r.unexpected_len(), 1);
    // Draining twice keeps one range.
    assert!(!r.drain(CTX, 256..512));
    r.on_message(env(300), Incoming::Data(b"again"));
    assert_eq!(r.unexpected_len(), 1);
}
