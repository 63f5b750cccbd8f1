//! The keys that name this rank's regions and loans to its peers ([`Keys`]): one 32-bit
//! space, never handing out a key that is still in use, so that a counter that wraps (4
//! billion loans: hours of rendezvous over a network with remote memory access) can never
//! make a new loan replace a live region's or loan's registration.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The keys in use and the next one to try.
#[derive(Debug)]
pub(crate) struct Keys {
    state: Mutex<KeyState>,
}

#[derive(Debug)]
struct KeyState {
    next: u32,
    live: HashSet<u32>,
}

impl Keys {
    /// No key in use; the first handed out is 1 (0 names nothing).
    pub(crate) fn new() -> Keys {
        Keys::starting_at(1)
    }

    /// No key in use; the first handed out is `next` (tests start near the wrap).
    fn starting_at(next: u32) -> Keys {
        Keys {
            state: Mutex::new(KeyState {
                next: next.max(1),
                live: HashSet::new(),
            }),
        }
    }

    /// A key no region or loan holds, in use until [`Keys::release`]; `None` only when
    /// every key is in use.
    pub(crate) fn take(&self) -> Option<u32> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.live.len() >= u32::MAX as usize {
            return None;
        }
        loop {
            let k = st.next;
            st.next = st.next.checked_add(1).unwrap_or(1);
            if st.live.insert(k) {
                return Some(k);
            }
        }
    }

    /// Key `k` is free again (its region or loan was withdrawn).
    pub(crate) fn release(&self, k: u32) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .live
            .remove(&k);
    }
}

/// A key in use until dropped (a region's: dropped with its memory, after the exposure is
/// withdrawn).
#[derive(Debug)]
pub(crate) struct KeyHold {
    keys: Arc<Keys>,
    key: u32,
}

impl KeyHold {
    /// A key of `keys`, held until the hold drops.
    pub(crate) fn take(keys: &Arc<Keys>) -> Option<KeyHold> {
        keys.take().map(|key| KeyHold {
            keys: Arc::clone(keys),
            key,
        })
    }

    /// The key.
    pub(crate) fn key(&self) -> u32 {
        self.key
    }
}

impl Drop for KeyHold {
    fn drop(&mut self) {
        self.keys.release(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_counter_skips_the_keys_still_in_use() {
        // Wrapped: 0 is never handed out; keys 1 and 2 are held, so 3 comes next.
        let held = Arc::new(Keys::starting_at(u32::MAX));
        // (Dropped at once: u32::MAX is free again.)
        let h1 = KeyHold::take(&held).map(|h| h.key());
        assert_eq!(h1, Some(u32::MAX));
        let one = KeyHold::take(&held);
        let two = KeyHold::take(&held);
        assert_eq!(one.as_ref().map(KeyHold::key), Some(1));
        assert_eq!(two.as_ref().map(KeyHold::key), Some(2));
        // Go around once more with 1 and 2 still held: they are skipped.
        held.state.lock().unwrap().next = u32::MAX;
        let again = KeyHold::take(&held);
        assert_eq!(again.as_ref().map(KeyHold::key), Some(u32::MAX));
        let next = KeyHold::take(&held);
        assert_eq!(next.as_ref().map(KeyHold::key), Some(3));
        // Released, a key is handed out again.
        drop(one);
        held.state.lock().unwrap().next = 1;
        assert_eq!(KeyHold::take(&held).map(|h| h.key()), Some(1));
    }
}
