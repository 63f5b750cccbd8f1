//! A link owner's sending thread. The rank queues each stream's frames and goes on (the
//! next ADU is reshuffled while this one is on the wire: double buffering). Each stream
//! holds at most its *window* of ADUs on a link (queued or being sent), which bounds what
//! a stream buffers; among the queued ADUs of several streams, the thread sends the
//! highest priority stream's first, keeping every stream's own order.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use spools_msg::MsgError;

use spools_proto::stream::{su_range, tus, Close, Frame, Open, Su};
use spools_stream::{LinkSender, SendError};

use super::CHECK_EVERY;

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

/// What the rank and its link thread share.
#[derive(Default)]
struct State {
    /// Items waiting, with their stream's priority, in the order they were queued.
    queue: Vec<(u8, Item)>,
    /// Per stream: ADUs queued or being sent.
    held: HashMap<u32, u32>,
    /// Send what is queued, then end the link.
    finish: bool,
    /// Stop now, sending nothing more (the connection was dropped after an error).
    abandon: bool,
    /// The thread has ended.
    done: bool,
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
    pub(crate) fn start(sender: LinkSender, links: u16) -> std::io::Result<LinkThread> {
        let link = sender.link();
        let shared: Shared = Arc::default();
        let handle = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("spools-stream-link-{link}"))
                .spawn(move || {
                    let _done = Done(Arc::clone(&shared));
                    run(sender, links, &shared)
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
        st.queue.push((priority, item));
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
/// priority (the earliest queued among equals); every stream's items keep their order.
fn pick(queue: &[(u8, Item)]) -> Option<usize> {
    let mut seen: Vec<u32> = Vec::new();
    let mut best: Option<(usize, u8)> = None;
    for (i, (p, item)) in queue.iter().enumerate() {
        let s = item.stream();
        if seen.contains(&s) {
            continue;
        }
        seen.push(s);
        if best.is_none_or(|(_, bp)| *p > bp) {
            best = Some((i, *p));
        }
    }
    best.map(|(i, _)| i)
}

/// The thread: sends items as they come, by priority, until told to finish or abandon.
fn run(mut l: LinkSender, links: u16, shared: &Shared) -> Result<(), LinkFailure> {
    let fail = |at| move |source| LinkFailure { at, source };
    loop {
        let item = {
            let mut st = lock(shared);
            loop {
                if st.abandon {
                    return Ok(());
                }
                if let Some(i) = pick(&st.queue) {
                    break Some(st.queue.remove(i).1);
                }
                if st.finish {
                    break None;
                }
                st = shared
                    .1
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        match item {
            None => return l.finish().map_err(fail(None)),
            Some(Item::Open(o)) => l.send(&Frame::Open(o)).map_err(fail(None))?,
            Some(Item::Close(c)) => l.send(&Frame::Close(c)).map_err(fail(None))?,
            Some(Item::Adu {
                stream,
                adu,
                size,
                tu,
                stripe,
            }) => {
                send_sus(&mut l, links, stream, adu, size, tu, &stripe)
                    .map_err(fail(Some((stream, adu))))?;
                let mut st = lock(shared);
                if let Some(h) = st.held.get_mut(&stream) {
                    *h = h.saturating_sub(1);
                }
                shared.1.notify_all();
            }
        }
    }
}

/// Sends this link's SUs of one ADU: SU `s` of every TU, taken in order from `stripe`.
/// An ADU of 0 bytes is one empty SU on link 0.
fn send_sus(
    l: &mut LinkSender,
    links: u16,
    stream: u32,
    adu: u64,
    size: u64,
    tu: u64,
    stripe: &[u8],
) -> Result<(), SendError> {
    let s = l.link();
    let su = |t, offset, p: &[u8]| Su {
        stream,
        su: s,
        link: s,
        adu,
        tu: t,
        offset,
        size,
        crc: crc32c::crc32c(p),
    };
    if size == 0 {
        return if s == 0 {
            l.send_su(&su(0, 0, &[]), &[])
        } else {
            Ok(())
        };
    }
    let mut at = 0usize;
    for t in 0..tus(size, tu) {
        let Some((off, len)) = su_range(size, tu, links, t, s) else {
            continue;
        };
        let p = stripe
            .get(at..at + len as usize)
            .ok_or(SendError::Format("the stripe is shorter than its SUs"))?;
        l.send_su(&su(t, off, p), p)?;
        at += len as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adu(stream: u32) -> Item {
        Item::Adu {
            stream,
            adu: 0,
            size: 0,
            tu: 1,
            stripe: Vec::new(),
        }
    }

    #[test]
    fn the_higher_priority_stream_goes_first_each_in_its_own_order() {
        // Stream 1 (priority 0) queued first, then stream 2 (priority 5) twice.
        let q = vec![(0, adu(1)), (5, adu(2)), (5, adu(2)), (0, adu(3))];
        assert_eq!(pick(&q), Some(1));
        // Equal priorities: the earliest queued.
        let q = vec![(1, adu(1)), (1, adu(2))];
        assert_eq!(pick(&q), Some(0));
        // A later item of a stream never overtakes its first.
        let q = vec![(0, adu(1)), (0, adu(2)), (9, adu(1))];
        assert_eq!(pick(&q), Some(0));
        assert_eq!(pick(&[]), None);
    }
}
