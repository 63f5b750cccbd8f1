//! Deterministic in-memory tests of the protocol: two `Protocol`s play two ranks, and the
//! test carries their messages by hand, in any order, including ones hard to provoke
//! with real processes. (A little over 600 lines: one list of scenarios sharing the
//! two-rank helpers at the top; split by topic if it grows further.)

use super::events::SendProtocol;
use super::events::{Chunk, Cts, Incoming, Limits, MessageInfo, ProtocolError, RecvOutcome};
use super::machine::Protocol;
use super::matching::{Envelope, Pattern};
use super::recv::MAX_ALLOC;
use super::wire::{self, RPC_CTX, RPC_REPLY_CTX, SHORT_MAX};
use crate::buffer::{Buf, RecvBuf};

const SENDER: u32 = 0;
const RECEIVER: u32 = 1;

fn proto() -> Protocol {
    Protocol::new(Limits::new(8, 64))
}

fn env(ctx: u32, src: u32, tag: u32) -> Envelope {
    Envelope { ctx, src, tag }
}

fn pat(ctx: u32, src: Option<u32>, tag: Option<u32>) -> Pattern {
    Pattern { ctx, src, tag }
}

fn fixed(n: usize) -> RecvBuf {
    RecvBuf::Fixed(Buf::owned(vec![0; n]))
}

fn received(src: u32, tag: u32, len: usize) -> Option<RecvOutcome> {
    Some(RecvOutcome::Received(MessageInfo { src, tag, len }))
}

/// Posts a rendezvous send of `data` on `s` and delivers its RTS to `r`; the send's id.
fn send_rts(s: &mut Protocol, r: &mut Protocol, ctx: u32, tag: u32, data: &[u8]) -> u64 {
    let id = s.post_send(RECEIVER, Buf::owned(data.to_vec()), false, None);
    let rts = Incoming::Rts {
        len: data.len() as u64,
        send_id: id,
        at: None,
    };
    r.on_message(env(ctx, SENDER, tag), rts);
    id
}

/// Carries `r`'s queued CTS messages to `s`, asserting each is accepted.
fn carry_cts(r: &mut Protocol, s: &mut Protocol) -> Vec<Cts> {
    let mut out = Vec::new();
    while let Some(c) = r.front_cts() {
        r.pop_cts();
        assert_eq!(s.on_cts(RECEIVER, c.send_id, c.recv_id, c.discard), Ok(()));
        out.push(c);
    }
    out
}

/// Carries every data chunk of `s` (at most `frag` bytes each) to `r`; the chunk count.
fn carry_data(s: &mut Protocol, r: &mut Protocol, frag: usize) -> usize {
    let mut n = 0;
    while let Some(Chunk {
        slot,
        to,
        recv_id,
        offset,
        bytes,
    }) = s.next_chunk(0, |_| frag)
    {
        assert_eq!(to, RECEIVER);
        assert!(bytes.len() <= frag);
        let len = bytes.len();
        assert_eq!(r.on_data(SENDER, recv_id, offset as u64, bytes), Ok(()));
        s.chunk_sent(slot, len);
        n += 1;
    }
    n
}

// --- matching: posted receives, unexpected messages, order ------------------------------

#[test]
fn eager_message_lands_in_the_posted_receive() {
    let mut r = proto();
    let (id, cts) = r.post_recv(pat(0, Some(SENDER), Some(7)), fixed(8));
    assert!(!cts);
    assert_eq!(r.recv_outcome(id), None);
    r.on_message(env(0, SENDER, 7), Incoming::Data(b"abc"));
    assert_eq!(r.recv_outcome(id), received(SENDER, 7, 3));
    assert_eq!(r.take_completed(), 1);
    assert_eq!(r.take_completed(), 0);
    assert_eq!(r.release_recv(id), b"abc\0\0\0\0\0");
    assert_eq!(r.held(), (0, 0));
}

#[test]
fn unexpected_message_waits_for_its_receive() {
    let mut r = proto();
    r.on_message(env(0, SENDER, 7), Incoming::Data(b"early"));
    assert_eq!(r.unexpected_len(), 1);
    assert_eq!(r.take_completed(), 0);
    let (id, _) = r.post_recv(pat(0, None, None), RecvBuf::Alloc(Vec::new()));
    assert_eq!(r.recv_outcome(id), received(SENDER, 7, 5));
    assert_eq!(r.unexpected_len(), 0);
    assert_eq!(r.release_recv(id), b"early");
}

#[test]
fn a_collectives_early_message_moves_the_generation_and_can_be_probed() {
    let mut r = proto();
    // A collective context (odd): waiting schedules look at it (`Schedule::spot_gone`).
    r.on_message(env(3, SENDER, 0x109), Incoming::Data(b""));
    assert_eq!(r.take_completed(), 1);
    let tags = 0x100..0x200;
    assert_eq!(
        r.probe_tags(3, SENDER, tags.clone()),
        Some((env(3, SENDER, 0x109), 0))
    );
    assert_eq!(r.probe_tags(3, RECEIVER, tags.clone()), None);
    assert_eq!(r.probe_tags(3, SENDER, 0x200..0x300), None);
    // A point-to-point context's early message wakes nobody.
    r.on_message(env(2, SENDER, 5), Incoming::Data(b"p2p"));
    assert_eq!(r.take_completed(), 0);
    assert_eq!(r.unexpected_len(), 2);
}

#[test]
fn unexpected_message_buffers_are_reused() {
    let mut r = proto();
    r.on_message(env(0, SENDER, 1), Incoming::Data(b"one"));
    assert_eq!(r.pool_len(), 0);
    let (id, _) = r.post_recv(pat(0, None, None), fixed(8));
    assert_eq!(r.recv_outcome(id), received(SENDER, 1, 3));
    assert_eq!(
        r.pool_len(),
        1,
        "the matched message's buffer goes back to the pool"
    );
    r.on_message(env(0, SENDER, 2), Incoming::Data(b"two"));
    assert_eq!(r.pool_len(), 0, "the next unexpected message takes it");
    // A buffer larger than an eager message is not kept.
    let (big, _) = r.post_recv(pat(0, None, Some(2)), fixed(8));
    assert_eq!(r.recv_outcome(big), received(SENDER, 2, 3));
    r.on_message(env(0, SENDER, 3), Incoming::Data(&[0; 200]));
    assert_eq!(r.pool_len(), 0);
    r.post_recv(pat(0, None, Some(3)), RecvBuf::Alloc(Vec::new()));
    assert_eq!(r.pool_len(), 0);
}

#[test]
fn any_source_receives_take_messages_in_arrival_order() {
    let mut r = proto();
    r.on_message(env(0, 2, 1), Incoming::Data(b"a"));
    r.on_message(env(0, 3, 1), Incoming::Data(b"b"));
    r.on_message(env(0, 2, 1), Incoming::Data(b"c"));
    let mut got = Vec::new();
    for _ in 0..3 {
        let (id, _) = r.post_recv(pat(0, None, Some(1)), RecvBuf::Alloc(Vec::new()));
        let Some(RecvOutcome::Received(m)) = r.recv_outcome(id) else {
            panic!("receive {id} did not complete");
        };
        got.push((m.src, r.release_recv(id)));
    }
    let want = [(2, b"a".to_vec()), (3, b"b".to_vec()), (2, b"c".to_vec())];
    assert_eq!(got, want);
}

#[test]
fn messages_of_one_sender_do_not_overtake_each_other() {
    let mut r = proto();
    // Two receives posted: any tag from rank 2, then tag 6 from rank 2.
    let (any, _) = r.post_recv(pat(0, Some(2), None), fixed(4));
    let (six, _) = r.post_recv(pat(0, Some(2), Some(6)), fixed(4));
    // Rank 2 sends tag 6 first: it goes to the first posted receive that fits.
    r.on_message(env(0, 2, 6), Incoming::Data(b"x"));
    r.on_message(env(0, 2, 5), Incoming::Data(b"y"));
    r.on_message(env(0, 2, 6), Incoming::Data(b"z"));
    assert_eq!(r.recv_outcome(any), received(2, 6, 1));
    assert_eq!(r.recv_outcome(six), received(2, 6, 1));
    assert_eq!(r.release_recv(six)[0], b'z');
    assert_eq!(r.unexpected_len(), 1);
    // A later any-source receive takes the one left (tag 5).
    let (next, _) = r.post_recv(pat(0, None, None), fixed(4));
    assert_eq!(r.recv_outcome(next), received(2, 5, 1));
}

#[test]
fn a_message_for_a_freed_communicator_matches_no_other() {
    let mut r = proto();
    // Communicator with context 2 posts a receive, then is freed (receive released).
    let (old, _) = r.post_recv(pat(2, None, None), fixed(4));
    assert_eq!(r.release_recv(old).len(), 4);
    assert_eq!(r.recv_outcome(old), Some(RecvOutcome::Cancelled));
    // A late message for it stays queued and never matches context 0 or 4.
    let (live, _) = r.post_recv(pat(0, None, None), fixed(4));
    r.on_message(env(2, SENDER, 0), Incoming::Data(b"late"));
    let (other, _) = r.post_recv(pat(4, None, None), fixed(4));
    assert_eq!(r.recv_outcome(live), None);
    assert_eq!(r.recv_outcome(other), None);
    assert_eq!(r.unexpected_len(), 1);
    assert!(r.probe(&pat(0, None, None)).is_none());
    assert_eq!(r.probe(&pat(2, None, None)), Some((env(2, SENDER, 0), 4)));
}

#[test]
fn probe_reports_eager_and_rendezvous_messages_without_taking_them() {
    let (mut s, mut r) = (proto(), proto());
    send_rts(&mut s, &mut r, 0, 3, &[1; 100]);
    r.on_message(env(0, SENDER, 4), Incoming::Data(b"hi"));
    assert_eq!(
        r.probe(&pat(0, None, Some(3))),
        Some((env(0, SENDER, 3), 100))
    );
    assert_eq!(
        r.probe(&pat(0, None, Some(4))),
        Some((env(0, SENDER, 4), 2))
    );
    assert_eq!(r.probe(&pat(0, Some(9), None)), None);
    assert_eq!(r.unexpected_len(), 2);
}

// --- truncation -----------------------------------------------------------------------------

#[test]
fn eager_truncation_writes_nothing() {
    let mut r = proto();
    let (id, _) = r.post_recv(pat(0, None, None), fixed(2));
    r.on_message(env(0, SENDER, 1), Incoming::Data(b"hello"));
    let msg = MessageInfo {
        src: SENDER,
        tag: 1,
        len: 5,
    };
    let want = RecvOutcome::Truncated { msg, capacity: 2 };
    assert_eq!(r.recv_outcome(id), Some(want));
    assert_eq!(r.release_recv(id), [0, 0]);
}

#[test]
fn rendezvous_truncation_tells_the_sender_to_discard() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(0, None, None), fixed(10));
    let sid = send_rts(&mut s, &mut r, 0, 1, &[7; 100]);
    let msg = MessageInfo {
        src: SENDER,
        tag: 1,
        len: 100,
    };
    let want = RecvOutcome::Truncated { msg, capacity: 10 };
    assert_eq!(r.recv_outcome(id), Some(want));
    let cts = carry_cts(&mut r, &mut s);
    assert!(cts.len() == 1 && cts[0].discard);
    assert!(s.send_complete(sid));
    assert_eq!(carry_data(&mut s, &mut r, 16), 0);
    assert_eq!(r.release_recv(id), [0; 10]);
}

#[test]
fn a_self_sizing_receive_refuses_an_absurd_length() {
    let mut r = proto();
    let (id, _) = r.post_recv(pat(0, None, None), RecvBuf::Alloc(Vec::new()));
    let len = MAX_ALLOC as u64 + 1;
    r.on_message(
        env(0, SENDER, 1),
        Incoming::Rts {
            len,
            send_id: 9,
            at: None,
        },
    );
    assert!(matches!(
        r.recv_outcome(id),
        Some(RecvOutcome::Truncated { capacity: 0, .. })
    ));
    assert!(r.front_cts().is_some_and(|c| c.discard && c.send_id == 9));
    // Not allocated.
    assert_eq!(r.release_recv(id).capacity(), 0);
}

// --- rendezvous -----------------------------------------------------------------------------

#[test]
fn rendezvous_streams_in_chunks_into_the_receive() {
    let (mut s, mut r) = (proto(), proto());
    let data: Vec<u8> = (0..100).collect();
    let (id, cts) = r.post_recv(pat(0, Some(SENDER), Some(3)), fixed(128));
    assert!(!cts);
    let sid = send_rts(&mut s, &mut r, 0, 3, &data);
    assert!(r.take_new_output(), "the CTS must wake the poller");
    assert_eq!(r.pending_output(), 1);
    assert!(!s.send_complete(sid));
    carry_cts(&mut r, &mut s);
    assert!(s.take_new_output(), "the stream must wake the poller");
    assert_eq!(r.recv_outcome(id), None);
    assert_eq!(carry_data(&mut s, &mut r, 16), 7);
    assert!(s.send_complete(sid));
    assert_eq!(s.take_completed(), 1);
    assert_eq!(r.recv_outcome(id), received(SENDER, 3, 100));
    assert_eq!(r.release_recv(id)[..100], data[..]);
    assert_eq!(s.release_send(sid), data);
    assert_eq!(s.pending_output(), 0);
}

#[test]
fn unexpected_rts_is_answered_when_the_receive_is_posted() {
    let (mut s, mut r) = (proto(), proto());
    let sid = send_rts(&mut s, &mut r, 0, 3, &[5; 70]);
    assert!(r.front_cts().is_none());
    let (id, cts) = r.post_recv(pat(0, None, None), RecvBuf::Alloc(Vec::new()));
    assert!(
        cts,
        "posting must report the queued CTS (to wake the poller)"
    );
    assert_eq!(
        carry_cts(&mut r, &mut s),
        [Cts {
            to: SENDER,
            send_id: sid,
            recv_id: id,
            discard: false
        }]
    );
    carry_data(&mut s, &mut r, 64);
    assert_eq!(r.release_recv(id), [5; 70]);
}

#[test]
fn a_full_transport_skips_to_the_next_stream() {
    let (mut s, mut r) = (proto(), proto());
    let (a, _) = r.post_recv(pat(0, None, Some(1)), fixed(100));
    let (b, _) = r.post_recv(pat(0, None, Some(2)), fixed(100));
    send_rts(&mut s, &mut r, 0, 1, &[1; 100]);
    send_rts(&mut s, &mut r, 0, 2, &[2; 100]);
    carry_cts(&mut r, &mut s);
    // The first stream's peer is full: ask from the next slot.
    let c = s
        .next_chunk(1, |_| 100)
        .map(|c| (c.slot, c.recv_id, c.bytes.len()));
    assert_eq!(c, Some((1, b, 100)));
    let (slot, recv_id, offset, bytes) = {
        let c = s.next_chunk(1, |_| 100).expect("second stream");
        (c.slot, c.recv_id, c.offset, c.bytes.to_vec())
    };
    assert_eq!(r.on_data(SENDER, recv_id, offset as u64, &bytes), Ok(()));
    s.chunk_sent(slot, bytes.len());
    assert_eq!(r.recv_outcome(b), received(SENDER, 2, 100));
    assert_eq!(r.recv_outcome(a), None);
    assert!(s.next_chunk(1, |_| 100).is_none());
    assert_eq!(carry_data(&mut s, &mut r, 100), 1);
    assert_eq!(r.recv_outcome(a), received(SENDER, 1, 100));
}

#[test]
fn zero_length_messages_complete_by_every_protocol() {
    let (mut s, mut r) = (proto(), proto());
    let (eager, _) = r.post_recv(pat(0, None, Some(1)), fixed(0));
    r.on_message(env(0, SENDER, 1), Incoming::Data(&[]));
    assert_eq!(r.recv_outcome(eager), received(SENDER, 1, 0));
    // A zero-length rendezvous (possible with tiny limits): no data will follow.
    let (rdv, _) = r.post_recv(pat(0, None, Some(2)), RecvBuf::Alloc(Vec::new()));
    let sid = send_rts(&mut s, &mut r, 0, 2, &[]);
    assert_eq!(r.recv_outcome(rdv), received(SENDER, 2, 0));
    let cts = carry_cts(&mut r, &mut s);
    assert!(!cts[0].discard);
    assert_eq!(carry_data(&mut s, &mut r, 16), 0);
    assert!(s.send_complete(sid));
}

// --- unexpected and malformed wire messages -------------------------------------------------

#[test]
fn a_cts_before_the_send_exists_is_refused_then_the_real_one_works() {
    let (mut s, mut r) = (proto(), proto());
    // A CTS naming send 1 arrives before this rank posted any send.
    assert_eq!(
        s.on_cts(RECEIVER, 1, 77, false),
        Err(ProtocolError::UnknownSend {
            peer: RECEIVER,
            send_id: 1
        })
    );
    assert_eq!(s.pending_output(), 0);
    let (id, _) = r.post_recv(pat(0, None, None), fixed(100));
    let sid = send_rts(&mut s, &mut r, 0, 1, &[3; 100]);
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 50);
    assert!(s.send_complete(sid));
    assert_eq!(r.recv_outcome(id), received(SENDER, 1, 100));
}

#[test]
fn wrong_peer_and_duplicate_cts_are_typed_errors() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(0, None, None), fixed(100));
    let sid = send_rts(&mut s, &mut r, 0, 1, &[3; 100]);
    assert_eq!(
        s.on_cts(5, sid, id, false),
        Err(ProtocolError::CtsFromWrongPeer {
            peer: 5,
            send_id: sid,
            dest: RECEIVER
        })
    );
    assert!(
        !s.send_complete(sid),
        "a stray CTS must not complete the send"
    );
    carry_cts(&mut r, &mut s);
    assert_eq!(
        s.on_cts(RECEIVER, sid, id, true),
        Err(ProtocolError::DuplicateCts {
            peer: RECEIVER,
            send_id: sid
        })
    );
    assert!(
        !s.send_complete(sid),
        "a duplicate discard must not end the stream"
    );
    carry_data(&mut s, &mut r, 100);
    assert_eq!(r.recv_outcome(id), received(SENDER, 1, 100));
}

#[test]
fn stray_data_is_a_typed_error_and_changes_nothing() {
    let (mut s, mut r) = (proto(), proto());
    assert_eq!(
        r.on_data(SENDER, 42, 0, b"x"),
        Err(ProtocolError::UnknownRecv {
            peer: SENDER,
            recv_id: 42
        })
    );
    let (id, _) = r.post_recv(pat(0, None, None), fixed(100));
    // Not matched yet.
    assert_eq!(
        r.on_data(SENDER, id, 0, b"x"),
        Err(ProtocolError::NotStreaming {
            peer: SENDER,
            recv_id: id
        })
    );
    send_rts(&mut s, &mut r, 0, 1, &[3; 100]);
    // Matched with rank 0: data from rank 4 is refused.
    assert!(matches!(
        r.on_data(4, id, 0, b"x"),
        Err(ProtocolError::NotStreaming { peer: 4, .. })
    ));
    // Past the end, and an offset that overflows.
    assert!(matches!(
        r.on_data(SENDER, id, 99, b"xy"),
        Err(ProtocolError::OutOfBounds { total: 100, .. })
    ));
    assert!(matches!(
        r.on_data(SENDER, id, u64::MAX, b"x"),
        Err(ProtocolError::OutOfBounds { .. })
    ));
    assert_eq!(r.recv_outcome(id), None);
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 100);
    assert_eq!(r.release_recv(id), [3; 100]);
}

#[test]
fn data_for_a_receive_released_mid_stream_is_refused() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(0, None, None), fixed(100));
    let sid = send_rts(&mut s, &mut r, 0, 1, &[3; 100]);
    carry_cts(&mut r, &mut s);
    // The blocking receive failed and released its buffer.
    assert_eq!(r.release_recv(id).len(), 100);
    let c = s
        .next_chunk(0, |_| 100)
        .map(|c| (c.slot, c.recv_id, c.bytes.to_vec()));
    let Some((slot, recv_id, bytes)) = c else {
        panic!("no chunk");
    };
    assert!(matches!(
        r.on_data(SENDER, recv_id, 0, &bytes),
        Err(ProtocolError::UnknownRecv { .. })
    ));
    s.chunk_sent(slot, bytes.len());
    assert!(s.send_complete(sid));
}

// --- cancel ---------------------------------------------------------------------------------

#[test]
fn cancel_of_a_posted_receive_completes_it_cancelled() {
    let mut r = proto();
    let (id, _) = r.post_recv(pat(0, None, None), fixed(4));
    assert!(r.cancel_recv(id));
    assert!(!r.cancel_recv(id), "a second cancel must fail");
    assert_eq!(r.recv_outcome(id), Some(RecvOutcome::Cancelled));
    assert_eq!(r.take_completed(), 1);
    // The next message does not match the cancelled receive.
    r.on_message(env(0, SENDER, 0), Incoming::Data(b"m"));
    assert_eq!(r.unexpected_len(), 1);
    assert_eq!(r.recv_outcome(id), Some(RecvOutcome::Cancelled));
}

#[test]
fn cancel_after_an_rts_matched_fails_and_the_receive_completes() {
    let (mut s, mut r) = (proto(), proto());
    let (id, _) = r.post_recv(pat(0, None, None), fixed(100));
    send_rts(&mut s, &mut r, 0, 1, &[9; 100]);
    assert!(!r.cancel_recv(id));
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 30);
    assert_eq!(r.recv_outcome(id), received(SENDER, 1, 100));
    assert_eq!(r.release_recv(id), [9; 100]);
}

#[test]
fn cancel_of_a_completed_receive_fails_and_keeps_the_message() {
    let mut r = proto();
    let (id, _) = r.post_recv(pat(0, None, None), fixed(4));
    r.on_message(env(0, SENDER, 0), Incoming::Data(b"ok"));
    assert!(!r.cancel_recv(id));
    assert_eq!(r.recv_outcome(id), received(SENDER, 0, 2));
    assert!(!r.cancel_recv(12345), "unknown ids are not cancelled");
}

// --- detached operations (dropped requests) -------------------------------------------------

#[test]
fn a_detached_receive_is_cancelled_or_removed_when_it_completes() {
    let (mut s, mut r) = (proto(), proto());
    let (unmatched, _) = r.post_recv(pat(0, None, Some(1)), fixed(4));
    r.detach_recv(unmatched);
    assert_eq!(r.held(), (0, 0));
    let (streaming, _) = r.post_recv(pat(0, None, Some(2)), fixed(100));
    send_rts(&mut s, &mut r, 0, 2, &[1; 100]);
    r.detach_recv(streaming);
    assert_eq!(r.held(), (0, 1));
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 100);
    assert_eq!(r.held(), (0, 0));
}

#[test]
fn a_detached_rpc_reply_receive_still_takes_its_reply() {
    let mut r = proto();
    let (id, _) = r.post_recv(
        pat(RPC_REPLY_CTX, Some(SENDER), Some(4)),
        RecvBuf::Alloc(Vec::new()),
    );
    r.detach_recv(id);
    assert_eq!(r.held(), (0, 1));
    r.on_message(env(RPC_REPLY_CTX, SENDER, 4), Incoming::Data(b"reply"));
    assert_eq!(r.held(), (0, 0));
    assert_eq!(
        r.unexpected_len(),
        0,
        "the reply must not linger as unexpected"
    );
}

#[test]
fn a_detached_send_is_removed_when_its_stream_ends() {
    let (mut s, mut r) = (proto(), proto());
    r.post_recv(pat(0, None, None), fixed(100));
    let sid = send_rts(&mut s, &mut r, 0, 1, &[1; 100]);
    s.detach_send(sid);
    assert_eq!(s.held(), (1, 0));
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 40);
    assert_eq!(s.held(), (0, 0));
}

#[test]
fn an_aborted_send_gives_its_buffer_back() {
    let mut s = proto();
    let id = s.post_send(RECEIVER, Buf::owned(vec![1, 2, 3]), false, None);
    assert_eq!(s.abort_send(id).map(Buf::take), Some(vec![1, 2, 3]));
    assert!(s.abort_send(id).is_none());
    assert_eq!(s.held(), (0, 0));
}

// --- RPC calls ------------------------------------------------------------------------------

#[test]
fn rpc_calls_are_received_by_the_protocol_itself() {
    let (mut s, mut r) = (proto(), proto());
    r.on_message(env(RPC_CTX, SENDER, 11), Incoming::Data(b"\x01fargs"));
    assert!(r.take_new_output());
    assert_eq!(r.pending_output(), 1);
    // A large call by rendezvous.
    let sid = send_rts(&mut s, &mut r, RPC_CTX, 12, &[4; 100]);
    carry_cts(&mut r, &mut s);
    carry_data(&mut s, &mut r, 64);
    assert!(s.send_complete(sid));
    let calls: Vec<_> = r
        .take_rpc_calls()
        .into_iter()
        .map(|c| (c.caller, c.call, c.body.len()))
        .collect();
    assert_eq!(calls, [(SENDER, 11, 6), (SENDER, 12, 100)]);
    assert_eq!(r.held(), (0, 0));
    assert_eq!(r.unexpected_len(), 0);
}

// --- limits and wire encoding ---------------------------------------------------------------

#[test]
fn limits_choose_the_protocol_by_size() {
    let l = Limits::new(100, 64);
    assert_eq!(l.short_limit, SHORT_MAX);
    assert_eq!(l.protocol_for(0), SendProtocol::Short);
    assert_eq!(l.protocol_for(SHORT_MAX), SendProtocol::Short);
    assert_eq!(l.protocol_for(SHORT_MAX + 1), SendProtocol::Eager);
    assert_eq!(l.protocol_for(64), SendProtocol::Eager);
    assert_eq!(l.protocol_for(65), SendProtocol::Rendezvous);
}

#[test]
fn wire_arguments_round_trip() {
    let args = wire::short_args(3, 9, b"0123456789");
    assert_eq!(wire::envelope(5, &args), env(3, 5, 9));
    let (inline, len) = wire::short_payload(&args, 10);
    assert_eq!(&inline[..len], b"0123456789");
    // A length field past the inline bytes is clamped, never read past them.
    assert_eq!(wire::short_payload(&args, u16::MAX).1, SHORT_MAX);
    let rts = wire::rts_args(u32::MAX, u32::MAX - 1, 1 << 40, 17);
    assert_eq!(wire::unpack_ctx_tag(rts[0]), (u32::MAX, u32::MAX - 1));
    assert_eq!(wire::rts_fields(&rts), (1 << 40, 17));
    let c = Cts {
        to: 2,
        send_id: 8,
        recv_id: 9,
        discard: true,
    };
    assert_eq!(
        wire::cts_fields(&wire::cts_args(c.send_id, c.recv_id, c.discard)),
        (8, 9, true)
    );
    assert_eq!(wire::data_fields(&wire::data_args(4, 4096)), (4, 4096));
}
