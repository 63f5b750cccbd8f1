//! Remote memory access, the second face of a transport whose network offers it
//! ([`Transport::rma`](crate::Transport::rma)): memory a rank exposes, and one-sided
//! writes into and reads out of a peer's exposed memory, with no work by the peer's
//! application (the network, or the peer's provider progress, places the bytes).

use crate::error::FabricError;

/// What a peer needs to address memory a rank exposed: the address and key its network
/// expects, and the length (bounds are checked by the initiator before any byte moves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteRegion {
    /// The address that names the first byte (a virtual address or 0, as the provider's
    /// registration mode says).
    pub addr: u64,
    /// The registration's key.
    pub key: u64,
    /// Bytes exposed.
    pub len: u64,
}

/// What peers may do to memory a rank exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Peers may only read it (a send buffer lent for a rendezvous).
    Read,
    /// Peers may read and write it (a region of active messages).
    ReadWrite,
}

/// One-sided access to peers' memory.
///
/// ```no_run
/// # fn demo(t: &dyn spools_fabric::Transport, peer: u32, at: spools_fabric::RemoteRegion)
/// # -> Result<(), spools_fabric::FabricError> {
/// if let Some(rma) = t.rma() {
///     rma.write(peer, at, 0, b"placed without a receive")?;
///     let mut back = [0u8; 24];
///     rma.read(peer, at, 0, &mut back)?;
/// }
/// # Ok(()) }
/// ```
pub trait Rma: Send + Sync {
    /// Registers `len` bytes at `base` so that peers may access them as `access` says;
    /// `id` names the registration at this rank (unique, never reused while exposed).
    ///
    /// # Safety
    /// The memory must stay allocated, and not move, until [`Rma::withdraw`] of `id`
    /// returns; under [`Access::ReadWrite`] peers' writes may change it at any time
    /// meanwhile.
    ///
    /// # Errors
    /// [`FabricError::Ofi`] when the provider refuses the registration (out of
    /// registrations or of lockable memory), [`FabricError::Io`] when shared memory
    /// refuses to lend (writes asked for, too long, too many loans, reads refused to this
    /// process): callers then reach this memory by messages.
    unsafe fn expose(
        &self,
        id: u32,
        base: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<RemoteRegion, FabricError>;

    /// Ends the registration `id`: peers' later accesses fail at the peer (a read that
    /// was under way when it ended too, where the backend cannot stop it: shared
    /// memory's cross-memory reads).
    fn withdraw(&self, id: u32);

    /// Writes `src` into `at` of `peer` at `offset`; returns when the bytes are in the
    /// peer's memory. The caller checked that the range lies inside `at`.
    ///
    /// # Errors
    /// [`FabricError::PeerFailed`] when the peer is gone; [`FabricError::Ofi`] when the
    /// network refused (a registration withdrawn meanwhile); [`FabricError::Io`] when a
    /// cross-memory read failed (the process is gone or is not the peer's any more, the
    /// loan ended meanwhile, the kernel refused) or shared memory was asked to write;
    /// [`FabricError::Unreachable`] for a peer not on this host.
    fn write(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        src: &[u8],
    ) -> Result<(), FabricError>;

    /// Reads `dst.len()` bytes of `at` of `peer` at `offset` into `dst`; returns when
    /// they are there. The caller checked that the range lies inside `at`.
    ///
    /// # Errors
    /// As [`Rma::write`].
    fn read(
        &self,
        peer: u32,
        at: RemoteRegion,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), FabricError>;

    /// Bytes written and read by this rank so far (counted at completion).
    fn moved(&self) -> (u64, u64);
}
