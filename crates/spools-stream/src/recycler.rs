//! ADU buffers handed back by the consumer, for the receiver to fill again: a fresh buffer
//! for every ADU costs the kernel's zeroing of its pages, which is most of a receiver's
//! time at memory speed.

use std::sync::{Arc, Mutex, PoisonError};

/// Buffers kept at most.
const KEEP: usize = 4;

/// A place to hand whole ADUs' buffers back to a [`crate::Receiver`] once consumed
/// ([`crate::Receiver::recycler`]): the receiver fills them again for ADUs of the same
/// size instead of allocating. A buffer is reused only once every byte of the new ADU was
/// written into it, so nothing of an old ADU can show through.
///
/// ```
/// use spools_stream::{Limits, Receiver};
/// let r = Receiver::bind("127.0.0.1:0", Limits::default())?;
/// let bin = r.recycler();
/// bin.give(vec![0u8; 1 << 20]); // e.g. an ADU's `data` once written out
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Recycler {
    kept: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recycler {
    /// Hands a buffer back (the oldest kept is dropped beyond a few).
    pub fn give(&self, buf: Vec<u8>) {
        if buf.is_empty() || buf.len() != buf.capacity() {
            return;
        }
        let mut k = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if k.len() == KEEP {
            k.remove(0);
        }
        k.push(buf);
    }

    /// A kept buffer of exactly `size` bytes, if there is one.
    pub(crate) fn take(&self, size: usize) -> Option<Vec<u8>> {
        let mut k = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let i = k.iter().position(|b| b.len() == size)?;
        Some(k.swap_remove(i))
    }
}
