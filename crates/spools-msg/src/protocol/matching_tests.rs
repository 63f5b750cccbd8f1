//! Deterministic in-memory tests of matching through the whole protocol: receives posted
//! for one source (the per-source queues) interleaved with wildcard receives, messages
//! that arrive before their receive (the unexpected queue) racing with ones that find it
//! posted, cancellation amid both, and the one-step finish of a completed receive.

use super::events::{Incoming, Limits, MessageInfo, RecvOutcome};
use super::machine::Protocol;
use super::matching::{Envelope, Pattern};
use crate::buffer::{Buf, RecvBuf};

const A: u32 = 0;
const B: u32 = 2;

fn proto() -> Protocol {
    Protocol::new(Limits::new(8, 64))
}

fn env(src: u32, tag: u32) -> Envelope {
    Envelope { ctx: 4, src, tag }
}

fn pat(src: Option<u32>, tag: Option<u32>) -> Pattern {
    Pattern { ctx: 4, src, tag }
}

fn post(r: &mut Protocol, src: Option<u32>, tag: Option<u32>) -> u64 {
    r.post_recv(pat(src, tag), RecvBuf::Fixed(Buf::owned(vec![0; 8])))
        .0
}

/// The message receive `id` got: its sender, tag and bytes; `None` while pending.
fn got(r: &mut Protocol, id: u64) -> Option<(u32, u32, Vec<u8>)> {
    let (o, mut buf) = r.finish_recv(id)?;
    match o {
        RecvOutcome::Received(MessageInfo { src, tag, len }) => {
            buf.truncate(len);
            Some((src, tag, buf))
        }
        other => panic!("receive {id} ended {other:?}"),
    }
}

fn msg(src: u32, tag: u32, data: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    Some((src, tag, data.to_vec()))
}

#[test]
fn wildcards_interleaved_with_specific_receives_keep_posting_order() {
    let mut r = proto();
    let a1 = post(&mut r, Some(A), Some(1));
    let any = post(&mut r, None, None);
    let a_any_tag = post(&mut r, Some(A), None);
    let any_src_1 = post(&mut r, None, Some(1));
    let b9 = post(&mut r, Some(B), Some(9));
    r.on_message(env(A, 1), Incoming::Data(b"m1"));
    r.on_message(env(B, 1), Incoming::Data(b"m2"));
    r.on_message(env(A, 5), Incoming::Data(b"m3"));
    r.on_message(env(B, 1), Incoming::Data(b"m4"));
    r.on_message(env(A, 1), Incoming::Data(b"m5"));
    // m1 takes the first receive; m2 the wildcard posted before any other fitting one;
    // m3 the receive for A of any tag; m4 the any-source receive for tag 1 (posted
    // before the one for B and tag 9, which it does not fit anyway); m5 finds nothing.
    assert_eq!(got(&mut r, a1), msg(A, 1, b"m1"));
    assert_eq!(got(&mut r, any), msg(B, 1, b"m2"));
    assert_eq!(got(&mut r, a_any_tag), msg(A, 5, b"m3"));
    assert_eq!(got(&mut r, any_src_1), msg(B, 1, b"m4"));
    assert_eq!(got(&mut r, b9), None);
    assert_eq!(r.unexpected_len(), 1);
    let late = post(&mut r, None, Some(1));
    assert_eq!(got(&mut r, late), msg(A, 1, b"m5"));
    assert_eq!(r.held(), (0, 1), "only the receive for B and tag 9 is left");
}

#[test]
fn a_specific_receive_posted_before_a_wildcard_wins_even_if_its_queue_is_longer() {
    let mut r = proto();
    let a2 = post(&mut r, Some(A), Some(2));
    let a1 = post(&mut r, Some(A), Some(1));
    let any = post(&mut r, None, None);
    r.on_message(env(A, 1), Incoming::Data(b"x"));
    assert_eq!(got(&mut r, a1), msg(A, 1, b"x"));
    assert_eq!(got(&mut r, any), None);
    r.on_message(env(A, 3), Incoming::Data(b"y"));
    assert_eq!(got(&mut r, any), msg(A, 3, b"y"));
    assert_eq!(got(&mut r, a2), None);
}

#[test]
fn unexpected_messages_race_with_posted_receives_in_order() {
    let mut r = proto();
    // Two messages from A arrive before any receive; a receive posted then takes the
    // first, and a message arriving after it was posted goes to the next receive only
    // once the queued one is taken: nothing overtakes.
    r.on_message(env(A, 1), Incoming::Data(b"u1"));
    r.on_message(env(A, 1), Incoming::Data(b"u2"));
    let first = post(&mut r, Some(A), Some(1));
    assert_eq!(got(&mut r, first), msg(A, 1, b"u1"));
    let second = post(&mut r, None, Some(1));
    let third = post(&mut r, Some(A), None);
    r.on_message(env(A, 1), Incoming::Data(b"p3"));
    assert_eq!(got(&mut r, second), msg(A, 1, b"u2"));
    assert_eq!(got(&mut r, third), msg(A, 1, b"p3"));
    assert_eq!(r.unexpected_len(), 0);
    // A rendezvous announced before an eager message of the same sender is received
    // first by a wildcard, whichever protocol each took.
    r.on_message(
        env(A, 7),
        Incoming::Rts {
            len: 100,
            send_id: 42,
            at: None,
        },
    );
    r.on_message(env(A, 7), Incoming::Data(b"e"));
    let (rdv, cts) = r.post_recv(pat(None, Some(7)), RecvBuf::Alloc(Vec::new()));
    assert!(cts, "the receive matched the request to send");
    assert!(r
        .front_cts()
        .is_some_and(|c| c.send_id == 42 && c.recv_id == rdv));
    let eager = post(&mut r, Some(A), Some(7));
    assert_eq!(got(&mut r, eager), msg(A, 7, b"e"));
    assert_eq!(r.finish_recv(rdv).map(|x| x.0), None, "still streaming");
}

#[test]
fn cancelled_receives_of_either_kind_leave_the_order_of_the_others() {
    let mut r = proto();
    let any = post(&mut r, None, None);
    let a1 = post(&mut r, Some(A), Some(1));
    let b_any = post(&mut r, Some(B), None);
    let a_again = post(&mut r, Some(A), Some(1));
    assert!(r.cancel_recv(any));
    assert!(r.cancel_recv(a1));
    assert!(!r.cancel_recv(a1), "a receive cancels once");
    r.on_message(env(A, 1), Incoming::Data(b"k"));
    r.on_message(env(B, 3), Incoming::Data(b"l"));
    assert_eq!(got(&mut r, a_again), msg(A, 1, b"k"));
    assert_eq!(got(&mut r, b_any), msg(B, 3, b"l"));
    assert_eq!(
        r.finish_recv(any).map(|x| x.0),
        Some(RecvOutcome::Cancelled)
    );
}

#[test]
fn a_finished_receive_is_gone_and_its_id_is_never_reused() {
    let mut r = proto();
    let id = post(&mut r, Some(A), Some(1));
    assert!(r.finish_recv(id).is_none(), "pending: nothing changes");
    assert_eq!(r.held(), (0, 1));
    r.on_message(env(A, 1), Incoming::Data(b"z"));
    assert_eq!(got(&mut r, id), msg(A, 1, b"z"));
    assert_eq!(r.held(), (0, 0));
    // The freed slot is reused by the next receive under another id; the old id reads
    // as cancelled (not held) and never sees the new receive's message.
    let next = post(&mut r, Some(A), Some(1));
    assert_ne!(next, id);
    r.on_message(env(A, 1), Incoming::Data(b"w"));
    assert_eq!(r.recv_outcome(id), Some(RecvOutcome::Cancelled));
    assert_eq!(r.release_recv(id), Vec::<u8>::new());
    assert_eq!(got(&mut r, next), msg(A, 1, b"w"));
    // Data for a made-up receive id is a typed error.
    assert!(r.on_data(A, next ^ (1 << 40), 0, b"?").is_err());
}
