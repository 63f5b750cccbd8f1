//! A link owner's sending thread. The rank queues each stream's frames and goes on (the
//! next ADU is reshuffled while this one is on the wire: double buffering). Each stream
//! holds at most its *window* of ADUs on a link queued or being sent, which bounds what
//! the job buffers; and, when the receiver sends acks, at most its window of ADUs sent
//! beyond the last one the receiver acknowledged (handed out to its consumer), read by a
//! thread of their own. Among the queued ADUs of several streams, the thread sends the
//! highest priority stream's first whose window has room, keeping every stream's own
//! order: a stream the receiver holds back (sequenced after another, or waiting for its
//! group) never holds back the others. The stripes it sent go back to the rank to be
//! filled again, so that a stream of ADUs allocates no new memory.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use spools_msg::MsgError;

use spools_proto::stream::{su_range, tus, Close, Frame, Open, Su};
use spools_stream::{AckReader, LinkSender, SendError};

use super::CHECK_EVERY;

/// Stripes kept for reuse per link, at most.
const SPARES: usize = 4;

/// What the rank queues on its link thread.
#[derive(Clone)]
pub(crate) enum Item {
    /// Announce a stream.
    Open(Open),
    /// This link's SUs of ADU `adu` of `stream` (of `size` bytes, TUs of `tu`), in order.
    Adu {
        /// The stream.
        stream: u32,
        /// The ADU's number.
        adu: u64,
        /// Bytes of the whole ADU.
        size: u64,
        /// Bytes of a TU (for a variable-size ADU, its size).
        tu: u64,
        /// This link's SUs, back to back.
        stripe: Vec<u8>,
        /// The CRC32C of each of this link's SUs, in order ([`stripe_crcs`]), when the
        /// rank computed them; empty, the sending thread computes them.
        crcs: Vec<u32>,
    },
    /// End a stream.
    Close(Close),
}

impl Item {
    fn stream(&self) -> u32 {
        match self {
            Item::Open(o) => o.stream,
            Item::Adu { stream, .. } => *stream,
            Item::Close(c) => c.stream,
        }
    }
}

/// Why an item was not queued.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The thread has stopped: [`LinkThread::end`] tells why.
    Stopped,
    /// The interrupt check ended the wait for room in the window.
    Interrupted(MsgError),
}

/// A link thread's failure: what it was sending (stream, ADU), and why.
#[derive(Debug)]
pub(crate) struct LinkFailure {
    /// The stream and ADU being sent, if an ADU was.
    pub(crate) at: Option<(u32, u64)>,
    /// What happened.
    pub(crate) source: SendError,
}

/// What the rank, its link thread and the link's ack reader share.
#[derive(Default)]
struct State {
    /// Items waiting, with their stream's priority and window, in the order they were
    /// queued.
    queue: Vec<Queued>,
    /// Per stream: ADUs queued or being sent.
    held: HashMap<u32, u32>,
    /// Whether the receiver's acks bound what is in flight (it sends them).
    acks: bool,
    /// Per stream, ADUs the receiver acknowledged (`0..acked`).
    acked: HashMap<u32, u64>,
    /// The receiver closed the link (its ack reader saw the end).
    closed: bool,
    /// Reading the receiver's acks failed.
    ack_failure: Option<SendError>,
    /// Stripes sent, to be filled again.
    spare: Vec<Vec<u8>>,
    /// Send what is queued, then end the link.
    finish: bool,
    /// Stop now, sending nothing more (the connection was dropped after an error).
    abandon: bool,
    /// The thread has ended.
    done: bool,
}

/// An item in a link's queue.
struct Queued {
    /// Its stream's priority.
    priority: u8,
    /// Its stream's window.
    window: u32,
    item: Item,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    // A poisoned lock only means the other side panicked: its state is still whole.
    s.0.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The sending thread of one link this rank owns.
pub(crate) struct LinkThread {
    link: u16,
    shared: Shared,
    handle: Option<JoinHandle<Result<(), LinkFailure>>>,
}

impl LinkThread {
    /// Starts sending on `sender` (link `s` of `links`).
    pub(crate) fn start(mut sender: LinkSender, links: u16) -> std::io::Result<LinkThread> {
        let link = sender.link();
        let shared: Shared = Arc::default();
        let handle = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("spools-stream-link-{link}"))
                .spawn(move || {
                    let _done = Done(Arc::clone(&shared));
                    let reader = start_reader(&mut sender, &shared);
                    let r = match &reader {
                        Ok(_) => run(&mut sender, links, &shared),
                        Err(_) => Err(LinkFailure {
                            at: None,
                            source: SendError::Format(
                                "the thread reading the link's acks could not start",
                            ),
                        }),
                    };
                    // However the thread ends, the ack reader returns: the socket is shut
                    // in both directions (after an orderly end, the receiver has closed it
                    // already).
                    sender.abort();
                    if let Ok(Some(h)) = reader {
                        let _ = h.join();
                    }
                    r
                })?
        };
        Ok(LinkThread {
            link,
            shared,
            handle: Some(handle),
        })
    }

    /// The link's index.
    pub(crate) fn link(&self) -> u16 {
        self.link
    }

    /// Whether the thread has stopped before it was told to end (it failed: its error
    /// comes from [`LinkThread::end`]).
    pub(crate) fn failed(&self) -> bool {
        lock(&self.shared).done
    }

    /// A buffer for this link's next stripe of `len` bytes: one the thread sent, or a new
    /// one. Its bytes are whatever they were: the caller overwrites every one.
    pub(crate) fn stripe(&self, len: usize) -> Vec<u8> {
        let spare = {
            let mut st = lock(&self.shared);
            match st.spare.iter().position(|b| b.capacity() >= len) {
                Some(i) => Some(st.spare.swap_remove(i)),
                None => st.spare.pop(),
            }
        };
        let mut b = spare.unwrap_or_default();
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    /// Queues `item` of a stream of priority `priority`. An ADU waits while its stream
    /// holds `window` ADUs on this link, asking `check` (the interrupt check) at least
    /// every [`CHECK_EVERY`]. [`Refused::Stopped`] when the thread has stopped
    /// ([`LinkThread::end`] tells why), [`Refused::Interrupted`] when `check` failed (the
    /// item is not queued).
    pub(crate) fn queue(
        &self,
        priority: u8,
        window: u32,
        item: Item,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<(), Refused> {
        let (_, cv) = &*self.shared;
        let mut st = lock(&self.shared);
        if let Item::Adu { stream, .. } = &item {
            let mut asked = Instant::now();
            while !st.done && st.held.get(stream).copied().unwrap_or(0) >= window.max(1) {
                st = cv
                    .wait_timeout(st, CHECK_EVERY)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
                if asked.elapsed() >= CHECK_EVERY {
                    // Asked without the lock, which the thread needs to make room.
                    drop(st);
                    check().map_err(Refused::Interrupted)?;
                    asked = Instant::now();
                    st = lock(&self.shared);
                }
            }
            if !st.done {
                *st.held.entry(*stream).or_insert(0) += 1;
            }
        }
        if st.done {
            return Err(Refused::Stopped);
        }
        st.queue.push(Queued {
            priority,
            window,
            item,
        });
        cv.notify_all();
        Ok(())
    }

    /// Tells the thread to send what is queued and end the link (without waiting).
    pub(crate) fn finish(&self) {
        lock(&self.shared).finish = true;
        self.shared.1.notify_all();
    }

    /// Waits until the thread has ended (after [`LinkThread::finish`]), asking `check`
    /// (the interrupt check) at least every [`CHECK_EVERY`]: a receiver that does not read
    /// holds the thread in its last sends.
    ///
    /// # Errors
    /// `check`'s; the thread then goes on (it is abandoned if the link is dropped).
    pub(crate) fn wait_ended(
        &self,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<(), MsgError> {
        let mut st = lock(&self.shared);
        let mut asked = Instant::now();
        while !st.done {
            st = self
                .shared
                .1
                .wait_timeout(st, CHECK_EVERY)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            if asked.elapsed() >= CHECK_EVERY {
                drop(st);
                check()?;
                asked = Instant::now();
                st = lock(&self.shared);
            }
        }
        Ok(())
    }

    /// Sends what is queued, ends the link and waits for the thread: its outcome.
    pub(crate) fn end(&mut self) -> Result<(), LinkFailure> {
        lock(&self.shared).finish = true;
        self.shared.1.notify_all();
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(LinkFailure {
                at: None,
                source: SendError::Format("the link thread panicked"),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for LinkThread {
    fn drop(&mut self) {
        // Abandoned (an error elsewhere): the thread stops without sending more and drops
        // its link; it is not waited for, since its socket may be stuck.
        if self.handle.is_some() {
            lock(&self.shared).abandon = true;
            self.shared.1.notify_all();
        }
    }
}

/// Marks the thread done when it ends, however it ends, and wakes a waiting rank.
struct Done(Shared);

impl Drop for Done {
    fn drop(&mut self) {
        lock(&self.0).done = true;
        self.0 .1.notify_all();
    }
}

/// The index of the item to send next: the first queued item of the stream of highest
/// priority (the earliest queued among equals) whose window has room; every stream's items
/// keep their order. With `acked` (the receiver's acks, per stream), an ADU is sent only
/// once the receiver acknowledged the ADU `window` before it.
fn pick(queue: &[Queued], acked: Option<&HashMap<u32, u64>>) -> Option<usize> {
    let mut seen: Vec<u32> = Vec::new();
    let mut best: Option<(usize, u8)> = None;
    for (i, q) in queue.iter().enumerate() {
        let s = q.item.stream();
        if seen.contains(&s) {
            continue;
        }
        seen.push(s);
        let room = match (&q.item, acked) {
            (Item::Adu { adu, .. }, Some(acked)) => {
                let done = acked.get(&s).copied().unwrap_or(0);
                *adu < done.saturating_add(u64::from(q.window.max(1)))
            }
            _ => true,
        };
        if room && best.is_none_or(|(_, bp)| q.priority > bp) {
            best = Some((i, q.priority));
        }
    }
    best.map(|(i, _)| i)
}

/// Starts the thread that reads the receiver's acks on `sender`, when the receiver sends
/// them.
fn start_reader(
    sender: &mut LinkSender,
    shared: &Shared,
) -> std::io::Result<Option<JoinHandle<()>>> {
    let Some(acks) = sender.take_acks() else {
        return Ok(None);
    };
    lock(shared).acks = true;
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(format!("spools-stream-acks-{}", acks.link()))
        .spawn(move || read_acks(acks, &shared))
        .map(Some)
}

/// The ack reader's thread: the receiver's acks into the shared state, until the receiver
/// closes the link or reading fails.
fn read_acks(mut acks: AckReader, shared: &Shared) {
    loop {
        let next = acks.next_ack();
        let mut st = lock(shared);
        match next {
            Ok(Some(a)) => {
                let n = st.acked.entry(a.stream).or_insert(0);
                *n = (*n).max(a.adu.saturating_add(1));
            }
            Ok(None) => st.closed = true,
            Err(e) => st.ack_failure = Some(e),
        }
        let ended = st.closed || st.ack_failure.is_some();
        drop(st);
        shared.1.notify_all();
        if ended {
            return;
        }
    }
}

/// The thread: sends items as they come, by priority and as the windows allow, until told
/// to finish or abandon.
fn run(l: &mut LinkSender, links: u16, shared: &Shared) -> Result<(), LinkFailure> {
    let fail = |at| move |source| LinkFailure { at, source };
    loop {
        let item = {
            let mut st = lock(shared);
            loop {
                if st.abandon {
                    return Ok(());
                }
                if let Some(e) = st.ack_failure.take() {
                    return Err(fail(None)(e));
                }
                let acked = st.acks.then_some(&st.acked);
                if let Some(i) = pick(&st.queue, acked) {
                    break Some(st.queue.remove(i).item);
                }
                if st.finish && st.queue.is_empty() {
                    break None;
                }
                if st.closed {
                    // ADUs wait for acks the receiver, gone, will never send.
                    return Err(fail(None)(SendError::Closed { link: l.link() }));
                }
                st = shared
                    .1
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        match item {
            None => return finish(l, shared).map_err(fail(None)),
            Some(Item::Open(o)) => l.send(&Frame::Open(o)).map_err(fail(None))?,
            Some(Item::Close(c)) => l.send(&Frame::Close(c)).map_err(fail(None))?,
            Some(Item::Adu {
                stream,
                adu,
                size,
                tu,
                stripe,
                crcs,
            }) => {
                let crcs = if crcs.is_empty() {
                    stripe_crcs(links, l.link(), size, tu, &stripe)
                        .map_err(fail(Some((stream, adu))))?
                } else {
                    crcs
                };
                send_sus(l, links, stream, adu, size, tu, &stripe, &crcs)
                    .map_err(fail(Some((stream, adu))))?;
                let mut st = lock(shared);
                if let Some(h) = st.held.get_mut(&stream) {
                    *h = h.saturating_sub(1);
                }
                if st.spare.len() < SPARES {
                    st.spare.push(stripe);
                }
                drop(st);
                shared.1.notify_all();
            }
        }
    }
}

/// Ends the link once everything queued was sent: its sending side shut, then (when the
/// receiver sends acks) a wait until the receiver closed it, having read all of it.
fn finish(l: &mut LinkSender, shared: &Shared) -> Result<(), SendError> {
    if !lock(shared).acks {
        // Nothing is read: the link's own end (`LinkSender::finish`) is the whole of it.
        return l.shutdown();
    }
    l.shutdown()?;
    let mut st = lock(shared);
    loop {
        if let Some(e) = st.ack_failure.take() {
            return Err(e);
        }
        if st.closed || st.abandon {
            return Ok(());
        }
        st = shared
            .1
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// The CRC32C of each SU of link `s` of `links` in one ADU of `size` bytes and TUs of
/// `tu`, whose SUs lie back to back in `stripe` (an ADU of 0 bytes: one empty SU on link
/// 0).
pub(crate) fn stripe_crcs(
    links: u16,
    s: u16,
    size: u64,
    tu: u64,
    stripe: &[u8],
) -> Result<Vec<u32>, SendError> {
    if size == 0 {
        return Ok(if s == 0 {
            vec![crc32c::crc32c(&[])]
        } else {
            Vec::new()
        });
    }
    let mut crcs = Vec::new();
    let mut at = 0usize;
    for t in 0..tus(size, tu) {
        let Some((_, len)) = su_range(size, tu, links, t, s) else {
            continue;
        };
        let p = stripe
            .get(at..at + len as usize)
            .ok_or(SendError::Format("the stripe is shorter than its SUs"))?;
        crcs.push(crc32c::crc32c(p));
        at += len as usize;
    }
    Ok(crcs)
}

/// Sends this link's SUs of one ADU: SU `s` of every TU, taken in order from `stripe`,
/// with their CRCs `crcs`, gathered into as few writes as the socket takes. An ADU of 0
/// bytes is one empty SU on link 0.
#[allow(clippy::too_many_arguments)]
fn send_sus(
    l: &mut LinkSender,
    links: u16,
    stream: u32,
    adu: u64,
    size: u64,
    tu: u64,
    stripe: &[u8],
    crcs: &[u32],
) -> Result<(), SendError> {
    let s = l.link();
    let su = |t, offset, crc| Su {
        stream,
        su: s,
        link: s,
        adu,
        tu: t,
        offset,
        size,
        crc,
    };
    let short = SendError::Format("the stripe is shorter than its SUs");
    if size == 0 {
        return if s == 0 {
            let crc = crcs.first().copied().ok_or(short)?;
            l.send_su(&su(0, 0, crc), &[])
        } else {
            Ok(())
        };
    }
    let mut sus: Vec<(Su, &[u8])> = Vec::new();
    let mut at = 0usize;
    for t in 0..tus(size, tu) {
        let Some((off, len)) = su_range(size, tu, links, t, s) else {
            continue;
        };
        let (Some(p), Some(&crc)) = (stripe.get(at..at + len as usize), crcs.get(sus.len())) else {
            return Err(short);
        };
        sus.push((su(t, off, crc), p));
        at += len as usize;
    }
    l.send_sus(&sus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adu_n(priority: u8, stream: u32, adu: u64) -> Queued {
        Queued {
            priority,
            window: 2,
            item: Item::Adu {
                stream,
                adu,
                size: 0,
                tu: 1,
                stripe: Vec::new(),
                crcs: Vec::new(),
            },
        }
    }

    fn adu(priority: u8, stream: u32) -> Queued {
        adu_n(priority, stream, 0)
    }

    #[test]
    fn the_higher_priority_stream_goes_first_each_in_its_own_order() {
        // Stream 1 (priority 0) queued first, then stream 2 (priority 5) twice.
        let q = vec![adu(0, 1), adu(5, 2), adu(5, 2), adu(0, 3)];
        assert_eq!(pick(&q, None), Some(1));
        // Equal priorities: the earliest queued.
        let q = vec![adu(1, 1), adu(1, 2)];
        assert_eq!(pick(&q, None), Some(0));
        // A later item of a stream never overtakes its first.
        let q = vec![adu(0, 1), adu(0, 2), adu(9, 1)];
        assert_eq!(pick(&q, None), Some(0));
        assert_eq!(pick(&[], None), None);
    }

    #[test]
    fn a_stream_whose_window_is_full_lets_the_others_pass() {
        // Stream 1 (priority 9) has ADU 2 next with a window of 2: it waits for the ack of
        // ADU 0; stream 2 (priority 0) is sequenced before it at the receiver and goes.
        let q = vec![adu_n(9, 1, 2), adu_n(9, 1, 3), adu_n(0, 2, 0)];
        let mut acked = HashMap::new();
        assert_eq!(pick(&q, Some(&acked)), Some(2));
        // Without acks from the receiver, there is no such window.
        assert_eq!(pick(&q, None), Some(0));
        // Once ADU 0 of stream 1 is acknowledged, its ADU 2 has room and goes first.
        acked.insert(1, 1);
        assert_eq!(pick(&q, Some(&acked)), Some(0));
        // Every window full: nothing to send yet.
        let q = vec![adu_n(0, 1, 5), adu_n(0, 2, 2)];
        assert_eq!(pick(&q, Some(&acked)), None);
        // Opens and closes never wait for acks.
        let q = vec![Queued {
            priority: 0,
            window: 1,
            item: Item::Close(Close { stream: 3, adus: 9 }),
        }];
        assert_eq!(pick(&q, Some(&acked)), Some(0));
    }
}
