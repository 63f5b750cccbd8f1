//! A communicator's segment slot: undecided, off or on. It sits below the communicator's
//! core (which holds one) and knows nothing of how a segment is set up ([`super::setup`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

use super::{no_ge, SmComm};
use crate::error::MsgError;

/// A communicator's segment on this host: not yet decided, off (a single member here,
/// shared memory not in use, or creation failed: the message algorithms serve), or on.
/// In a communicator's non-blocking core, also the first collective number it serves and
/// whether a collective of that number or later came (see [`super::inflight`]).
#[derive(Debug, Default)]
pub(crate) struct SmSlot {
    segment: OnceLock<Option<SmComm>>,
    from: AtomicU32,
    reached: AtomicBool,
    /// No segment is set up for a collective numbered before `due` (see
    /// [`SmSlot::defer`]), where `deferred`.
    due: AtomicU32,
    deferred: AtomicBool,
}

impl SmSlot {
    /// Sets up no segment before collective number `due` (modulo 2^24): those before it
    /// go through the messages. Every member sets the same number before the
    /// communicator's first collective, so every member decides alike at each one.
    pub(crate) fn defer(&self, due: u32) {
        self.due.store(due, Ordering::Relaxed);
        self.deferred.store(true, Ordering::Relaxed);
    }

    /// Whether collective number `no` may set the segment up (see [`SmSlot::defer`]).
    pub(crate) fn due(&self, no: u32) -> bool {
        !self.deferred.load(Ordering::Relaxed) || no_ge(no, self.due.load(Ordering::Relaxed))
    }

    /// Decides the segment of a non-blocking core: `sm`, serving collectives numbered
    /// `from` (modulo 2^24) and later.
    pub(crate) fn set_nonblocking(&self, sm: Option<SmComm>, from: u32) {
        self.from.store(from, Ordering::Relaxed);
        let _ = self.segment.set(sm);
    }

    /// The segment of a non-blocking core if it serves collective number `no`: it is set
    /// up, and `no` is its first number or later. Called for each collective that could
    /// use it, in the order of their numbers (the same on every member): from the first
    /// that may, every later one may too.
    pub(crate) fn serving(&self, no: u32) -> Option<&SmComm> {
        let sm = self.ready()?;
        if !self.reached.load(Ordering::Relaxed) {
            if !no_ge(no, self.from.load(Ordering::Relaxed)) {
                return None;
            }
            self.reached.store(true, Ordering::Relaxed);
        }
        Some(sm)
    }

    /// The segment if it is decided; otherwise decides it with `setup` (collectives of
    /// one communicator do not run concurrently, so nobody decides it meanwhile).
    ///
    /// # Errors
    /// `setup`'s.
    pub(crate) fn get_or_try_init(
        &self,
        setup: impl FnOnce() -> Result<Option<SmComm>, MsgError>,
    ) -> Result<Option<&SmComm>, MsgError> {
        if let Some(s) = self.segment.get() {
            return Ok(s.as_ref());
        }
        let made = setup()?;
        let _ = self.segment.set(made);
        Ok(self.segment.get().and_then(Option::as_ref))
    }

    /// The segment if it is set up already (never sets one up).
    pub(crate) fn ready(&self) -> Option<&SmComm> {
        self.segment.get().and_then(Option::as_ref)
    }

    /// Whether it was decided that this communicator has no segment here.
    pub(crate) fn is_off(&self) -> bool {
        matches!(self.segment.get(), Some(None))
    }

    /// Collectives run through the segment so far.
    pub(crate) fn count(&self) -> u32 {
        self.segment
            .get()
            .and_then(Option::as_ref)
            .map_or(0, SmComm::ran)
    }
}
