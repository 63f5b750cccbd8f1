//! Memory lent to one peer for one-sided reads: a layer above lends a send buffer to the
//! peer that will receive it (the rendezvous of tagged messages), the peer reads it
//! through its transport's remote memory access, and the lender ends the loan when the
//! peer says it is done. Peers reached through a network transport with remote memory
//! access (libfabric) borrow, and so do peers on this host where the shared-memory
//! transport reads other ranks' memory by cross-memory attach (its single copy, chosen at
//! start-up); every other peer is served by messages or the shared heap, and
//! [`Worker::lend`] says so by lending nothing.

use spools_fabric::{Access, RemoteRegion};

use crate::core::Route;
use crate::error::AmError;
use crate::worker::Worker;

/// Bytes lent to one peer: what the peer needs to read them ([`Loan::at`]) and what ends
/// the loan ([`Worker::end_loan`] of [`Loan::id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loan {
    /// Names the loan at the lender (shares the space of region keys: unique).
    pub id: u32,
    /// Where the borrower reads.
    pub at: RemoteRegion,
}

impl crate::core::Core {
    /// The transport through which `peer` reads what this rank lends it, or this rank
    /// reads what `peer` lends: the network's for a peer reached through it, the shared
    /// memory's for a peer on this host (its reads by cross-memory attach, where single
    /// copy was chosen); the caller asks it for remote memory access.
    fn lender(&self, peer: u32) -> Option<&std::sync::Arc<dyn spools_fabric::Transport>> {
        match self.routes.get(peer as usize) {
            Some(Route::Net) => self.net.as_ref(),
            Some(Route::Shm) => self.shm.as_ref(),
            _ => None,
        }
    }
}

impl Worker {
    /// Lends `len` bytes at `base` to `peer` for one-sided reads, when `peer` is reached
    /// through a transport with remote memory access (a network's, or shared memory's
    /// cross-memory reads) and the bytes take more than one message to it; `None`
    /// otherwise, or when the transport refuses the registration (the caller then sends
    /// the bytes as messages). Within a host, `collective` (the transfer is a
    /// collective's, in which every rank moves data at once) may decide:
    /// [`SingleCopy::reads`](spools_fabric::SingleCopy::reads).
    ///
    /// # Safety
    /// The bytes must stay allocated, unchanged and in place until
    /// [`Worker::end_loan`] of the loan returns.
    pub unsafe fn lend(
        &self,
        peer: u32,
        base: *const u8,
        len: usize,
        collective: bool,
    ) -> Option<Loan> {
        let core = &self.core;
        if len <= core.fragment_for(peer) {
            return None;
        }
        let t = core.lender(peer)?;
        if core.routes.get(peer as usize) == Some(&Route::Shm)
            && !t.caps().single_copy.reads(collective)
        {
            return None;
        }
        let rma = t.rma()?;
        // A key no live region or loan holds (released by `end_loan`, or here if refused).
        let id = core.keys.take()?;
        // SAFETY: the caller keeps the bytes until `end_loan` (this function's contract);
        // peers may only read them (`Access::Read`), so nothing writes through the
        // `*const` origin of `base`.
        match unsafe { rma.expose(id, base.cast_mut(), len, Access::Read) } {
            Ok(at) => Some(Loan { id, at }),
            Err(_) => {
                core.keys.release(id);
                None
            }
        }
    }

    /// Ends loan `id`: the borrower's later reads fail at the borrower.
    pub fn end_loan(&self, id: u32) {
        // The loan is the network's or shared memory's: each forgets ids it never lent.
        for t in [self.core.net.as_ref(), self.core.shm.as_ref()]
            .into_iter()
            .flatten()
        {
            if let Some(rma) = t.rma() {
                rma.withdraw(id);
            }
        }
        // Withdrawn: the key may name another loan or region.
        self.core.keys.release(id);
    }

    /// Reads `dst.len()` bytes that `peer` lent (`at`) into `dst`; returns when they are
    /// there.
    ///
    /// # Errors
    /// [`AmError::LoanExceeded`] when `dst` is longer than the loan (nothing moves);
    /// [`AmError::Fabric`] when `peer` is not reached through a transport with remote
    /// memory access, has failed, or ended the loan meanwhile (a cross-memory read of a
    /// process that is no longer `peer` fails too).
    pub fn read_loan(&self, peer: u32, at: RemoteRegion, dst: &mut [u8]) -> Result<(), AmError> {
        let core = &self.core;
        if dst.len() as u64 > at.len {
            return Err(AmError::LoanExceeded {
                peer,
                lent: at.len,
                asked: dst.len() as u64,
            });
        }
        let rma = core.lender(peer).and_then(|t| t.rma());
        let Some(rma) = rma else {
            return Err(AmError::Fabric(spools_fabric::FabricError::Unreachable(
                peer,
            )));
        };
        rma.read(peer, at, 0, dst).map_err(AmError::Fabric)
    }
}
