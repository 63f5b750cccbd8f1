//! The single-copy rendezvous between ranks of one host: a send whose buffer lies in the
//! shared heap announces where in its request-to-send, and the receiver copies the bytes
//! straight from the sender's segment into its receive, then answers with the
//! clear-to-send that completes the send without any data chunk.

use spools_fabric::heap::{self, HeapRef};

use super::state::Engine;
use crate::protocol::Protocol;

impl Engine {
    /// Where `bytes`, sent to job rank `dest`, lie in this rank's shared heap, if they do
    /// and `dest` runs on this host (it can then map them).
    pub(super) fn heap_source(&self, dest: u32, bytes: &[u8]) -> Option<HeapRef> {
        let me = self.worker.rank() as usize;
        if self.hosts.get(dest as usize) != self.hosts.get(me) {
            return None;
        }
        heap::lookup(bytes.as_ptr(), bytes.len())
    }

    /// Makes the copies from senders' shared heaps the protocol queued (under the
    /// engine's lock, as rendezvous data is written). A sender's segment that cannot be
    /// mapped makes its data stream instead. Returns the copies made.
    pub(super) fn run_pulls(&self, p: &mut Protocol) -> usize {
        let mut n = 0;
        let peers = heap::peers().ok();
        while let Some(pull) = p.pop_pull() {
            let src = peers
                .as_ref()
                .and_then(|h| h.bytes(&pull.heap, pull.len).ok());
            n += usize::from(src.is_some());
            p.pulled(pull, src.as_ref());
        }
        n
    }
}
