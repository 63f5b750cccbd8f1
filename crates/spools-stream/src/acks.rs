//! The receiver's acks of one link: the central thread posts "ADUs `0..=adu` of stream `s`
//! were handed out" and never blocks; a writer thread per link sends them. Acks are
//! cumulative, so a writer that is behind (its sender does not read them) sends only the
//! latest one per stream when it can: nothing grows, and no meaning is lost.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use spools_proto::stream::{Ack, Frame};

#[derive(Default)]
struct State {
    /// Per stream, the last ADU handed out, not written yet.
    pending: BTreeMap<u32, u64>,
    closed: bool,
}

/// One link's acks waiting for its writer.
#[derive(Default)]
pub(crate) struct AckBoard {
    state: Mutex<State>,
    cv: Condvar,
}

impl AckBoard {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// ADUs `0..=adu` of `stream` were handed out.
    pub(crate) fn post(&self, stream: u32, adu: u64) {
        let mut s = self.lock();
        let e = s.pending.entry(stream).or_insert(adu);
        *e = (*e).max(adu);
        self.cv.notify_one();
    }

    /// The link ended: the writer stops.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_one();
    }

    /// The acks to write next; `None` once the link ended.
    fn take(&self) -> Option<BTreeMap<u32, u64>> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if !s.pending.is_empty() {
                return Some(std::mem::take(&mut s.pending));
            }
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Writes the acks posted to `out` until the link ends or writing fails (the sender
    /// went away); the owner of the link shuts the socket down to wake a blocked write.
    pub(crate) fn write_to(&self, out: &TcpStream) {
        let mut b = Vec::new();
        while let Some(acks) = self.take() {
            b.clear();
            for (stream, adu) in acks {
                Frame::Ack(Ack { stream, adu }).encode(&mut b);
            }
            if (&*out).write_all(&b).is_err() {
                return;
            }
        }
    }
}

/// The acks of several links that acknowledge the same ADUs (a connection's links, or every
/// link a consumer acks on). Keeps the latest ack per stream, so that a link whose hello
/// comes after ADUs were acknowledged hears of them at once: an ADU small enough to travel
/// on one link can be taken, and acked, before another link of its connection said hello,
/// and that link's window would otherwise wait for an ack that never comes.
#[derive(Default)]
pub(crate) struct AckFan {
    boards: Vec<Arc<AckBoard>>,
    latest: BTreeMap<u32, u64>,
}

impl AckFan {
    /// A link joins: it is told every ack posted so far.
    pub(crate) fn add(&mut self, board: Arc<AckBoard>) {
        for (&stream, &adu) in &self.latest {
            board.post(stream, adu);
        }
        self.boards.push(board);
    }

    /// ADUs `0..=adu` of `stream` were handed out: posted on every link.
    pub(crate) fn post(&mut self, stream: u32, adu: u64) {
        let e = self.latest.entry(stream).or_insert(adu);
        *e = (*e).max(adu);
        for b in &self.boards {
            b.post(stream, adu);
        }
    }
}
