//! The rendezvous whose receiver takes the bytes itself. A send whose buffer lies in the
//! shared heap, to a rank of this host, says where in its request-to-send, and the
//! receiver copies the bytes straight from the sender's segment into its receive. A
//! send to a rank reached through a network with remote memory access, or to a rank of
//! this host where single copy is cross-memory attach, lends its buffer to that rank
//! ([`spools_am::Worker::lend`]), and the receiver reads it one-sidedly into its receive
//! (`process_vm_readv` within a host). Either way the receiver then answers with the clear-to-send that
//! completes the send without any data chunk, and the loan ends when the send does.

use spools_heap as heap;

use super::state::Engine;
use crate::protocol::{wire, DataAt, Protocol};

/// Where a rendezvous send's receiver may take the bytes, and the loan that lets it.
pub(super) struct Source {
    /// What the request-to-send says.
    pub(super) at: DataAt,
    /// The loan to end when the send completes (for [`DataAt::Net`]).
    pub(super) loan: Option<u32>,
}

impl Engine {
    /// Where the receiver of `bytes`, sent to job rank `dest` by rendezvous, may take them
    /// itself: from this rank's shared heap when they lie there and `dest` runs on this
    /// host, else lent when `dest` is reached through a network with remote memory access
    /// (also on this host, under `SPOOLS_TRANSPORT=ofi`) or runs on this host with
    /// cross-memory reads (for a collective's context `ctx`, or every one, as the
    /// transport's single copy says); `None`: the bytes stream.
    ///
    /// # Safety
    /// `bytes` must be the buffer of the send operation that the returned loan is given
    /// to ([`Protocol::post_send`]): it stays in place, unchanged, until the protocol
    /// removes that operation, and the loan ends then ([`Engine::end_loans`]).
    pub(super) unsafe fn pull_source(&self, dest: u32, ctx: u32, bytes: &[u8]) -> Option<Source> {
        let me = self.worker.rank() as usize;
        if self.hosts.get(dest as usize) == self.hosts.get(me) {
            // Only this job's heap blocks: another world's are refused by the peer's cache.
            let mine = |r: &heap::HeapRef| r.name.job() == self.worker.heaps().job();
            if let Some(r) = heap::lookup(bytes.as_ptr(), bytes.len()).filter(mine) {
                return Some(Source {
                    at: DataAt::Heap(r),
                    loan: None,
                });
            }
        }
        // A collective's context is the second or the fourth of its communicator's
        // (`CTX_STRIDE`): odd, below the RPC contexts.
        let collective = ctx < wire::MAX_CTX && ctx % 2 == 1;
        // SAFETY: the caller keeps `bytes` until the loan ends (this function's contract).
        let loan = unsafe {
            self.worker
                .lend(dest, bytes.as_ptr(), bytes.len(), collective)
        }?;
        Some(Source {
            at: DataAt::Net(loan.at),
            loan: Some(loan.id),
        })
    }

    /// Ends the loans of sends the protocol completed or removed. Called under the lock,
    /// before anyone can see those sends complete and reuse their buffers.
    pub(super) fn end_loans(&self, p: &mut Protocol) {
        while let Some(id) = p.pop_ended_loan() {
            self.worker.end_loan(id);
        }
    }

    /// Makes the copies and reads of senders' bytes the protocol queued (under the
    /// engine's lock, as rendezvous data is written). Bytes that cannot be had (a segment
    /// that cannot be mapped, a read the network refuses) stream instead. Returns the
    /// copies and reads made.
    pub(super) fn run_pulls(&self, p: &mut Protocol) -> usize {
        let mut n = 0;
        while let Some(pull) = p.pop_pull() {
            let took = match pull.at {
                DataAt::Heap(r) => {
                    let src = self.worker.heaps().bytes(&r, pull.len).ok();
                    let mut took = false;
                    p.pulled(pull, |dst| {
                        took = src.is_some_and(|s| s.copy_to(0, dst).is_ok());
                        took
                    });
                    took
                }
                DataAt::Net(at) => {
                    let mut took = false;
                    p.pulled(pull, |dst| {
                        took = self.worker.read_loan(pull.from, at, dst).is_ok();
                        took
                    });
                    took
                }
            };
            n += usize::from(took);
        }
        n
    }
}
