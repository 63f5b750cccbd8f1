//! A connection's reassembly, shared by its link threads (which place SUs and wait for
//! room) and the serving thread (which takes the events it made ready).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use spools_proto::stream::Su;

use crate::error::ReassemblyError;
use crate::reassembly::{Event, Placed, Reassembler};

/// Told the bytes of whole ADUs ready and not taken each time a link stops reading
/// because of them (see [`crate::Receiver::on_hold`]).
pub(crate) type OnHold = Arc<dyn Fn(u64) + Send + Sync>;

/// A connection's reassembly, shared by its link threads and the serving thread; `None`
/// once the connection was dropped (its links are then read to their end and ignored).
pub(crate) struct Shared {
    r: Mutex<Option<Reassembler>>,
    /// Signalled when the serving thread takes an ADU, and when the connection is dropped.
    room: Condvar,
    /// Bytes of whole ADUs ready and not taken above which the links stop reading.
    limit: u64,
    /// The reassembly's most ready bytes, once it was dropped.
    dropped_max: AtomicU64,
}

impl Shared {
    pub(crate) fn new(r: Reassembler, limit: u64) -> Shared {
        Shared {
            r: Mutex::new(Some(r)),
            room: Condvar::new(),
            limit,
            dropped_max: AtomicU64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Reassembler>> {
        self.r.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `f` on the reassembly, unless the connection was dropped.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Reassembler) -> T) -> Option<T> {
        self.lock().as_mut().map(f)
    }

    /// The events ready now, taken one at a time as the iterator is consumed (so that an
    /// ADU counts as ready until the serving thread hands it on), each take waking the
    /// links held for room.
    pub(crate) fn ready_events(&self) -> impl Iterator<Item = Event> + '_ {
        let n = self.with(|r| r.events_waiting()).unwrap_or(0);
        (0..n).map_while(|_| {
            let e = self.with(Reassembler::next_event).flatten();
            self.room.notify_all();
            e
        })
    }

    /// The most bytes of whole ADUs that were ready and not taken at once.
    pub(crate) fn max_ready(&self) -> u64 {
        self.lock().as_ref().map_or_else(
            || self.dropped_max.load(Ordering::SeqCst),
            |r| r.max_ready_bytes(),
        )
    }

    /// Drops the connection: the events it had made ready. Links held for room go on (and
    /// ignore what they read).
    pub(crate) fn drop_reassembly(&self) -> Vec<Event> {
        let mut g = self.lock();
        let events = g.take().as_mut().map_or_else(Vec::new, |r| {
            self.dropped_max
                .store(r.max_ready_bytes(), Ordering::SeqCst);
            events(r)
        });
        drop(g);
        self.room.notify_all();
        events
    }

    /// Places an SU in its ADU once there is room for it (see
    /// [`Reassembler::must_wait`]); `None` when the connection was dropped.
    pub(crate) fn place(
        &self,
        link: u16,
        s: &Su,
        len: u64,
    ) -> Option<Result<Placed, ReassemblyError>> {
        let mut g = self.lock();
        while g.as_ref().is_some_and(|r| r.must_wait(s)) {
            g = self.room.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        g.as_mut().map(|r| r.place(link, s, len))
    }

    /// Wakes the links waiting for room: ADUs completed, were handed out or were lost.
    pub(crate) fn changed(&self) {
        self.room.notify_all();
    }

    /// Returns once the whole ADUs ready and not taken are within the limit, or the
    /// connection was dropped; `on_hold` is told when it has to wait.
    pub(crate) fn wait_room(&self, on_hold: Option<&OnHold>) {
        let over = |g: &Option<Reassembler>| {
            g.as_ref()
                .map(Reassembler::ready_bytes)
                .filter(|&b| b > self.limit)
        };
        let g = self.lock();
        let Some(ready) = over(&g) else { return };
        drop(g);
        if let Some(f) = on_hold {
            f(ready);
        }
        let mut g = self.lock();
        while over(&g).is_some() {
            g = self.room.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn events(r: &mut Reassembler) -> Vec<Event> {
    std::iter::from_fn(|| r.next_event()).collect()
}
