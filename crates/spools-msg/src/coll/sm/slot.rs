//! A communicator's segment slot: undecided, off or on. It sits below the communicator's
//! core (which holds one) and knows nothing of how a segment is set up ([`super::setup`]).

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::{SmComm, FIRST_SEQ};
use crate::error::MsgError;

/// A communicator's segment on this host: not yet decided, off (a single member here,
/// shared memory not in use, or creation failed: the message algorithms serve), or on.
#[derive(Debug, Default)]
pub(crate) struct SmSlot(OnceLock<Option<SmComm>>);

impl SmSlot {
    /// The segment if it is decided; otherwise decides it with `setup` (collectives of
    /// one communicator do not run concurrently, so nobody decides it meanwhile).
    ///
    /// # Errors
    /// `setup`'s.
    pub(crate) fn get_or_try_init(
        &self,
        setup: impl FnOnce() -> Result<Option<SmComm>, MsgError>,
    ) -> Result<Option<&SmComm>, MsgError> {
        if let Some(s) = self.0.get() {
            return Ok(s.as_ref());
        }
        let made = setup()?;
        let _ = self.0.set(made);
        Ok(self.0.get().and_then(Option::as_ref))
    }

    /// The segment if it is set up already (never sets one up).
    pub(crate) fn ready(&self) -> Option<&SmComm> {
        self.0.get().and_then(Option::as_ref)
    }

    /// Whether it was decided that this communicator has no segment here.
    pub(crate) fn is_off(&self) -> bool {
        matches!(self.0.get(), Some(None))
    }

    /// Collectives run through the segment so far.
    pub(crate) fn count(&self) -> u32 {
        self.0.get().and_then(Option::as_ref).map_or(0, |s| {
            s.next.load(Ordering::Relaxed).wrapping_sub(FIRST_SEQ)
        })
    }
}
