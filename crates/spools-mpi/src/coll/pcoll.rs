//! Persistent collectives (`MPI_Bcast_init` and the others) on a communicator of their
//! own.
//!
//! MPI matches persistent collectives by the order of their init calls, not of their
//! starts: a rank may start a broadcast and then a barrier while another starts the
//! barrier first (MPICH's `p_order`). Spools' collectives match in the order they start
//! on a communicator, so each persistent collective runs on a dup of its communicator
//! made for it alone, where its starts are the only collectives, one at a time. The dup
//! is made at the init call (`Communicator::idup`: one broadcast from the
//! communicator's rank 0), so an init call waits for rank 0 to make the same init call,
//! and for no other rank; the start is built then, while the program's datatype and
//! operator handles are valid; the dup is freed with the request.
//!
//! Within a host, each start goes through the dup's segment for non-blocking collectives
//! (`spools_msg`'s `coll/sm/inflight.rs`), as a non-blocking collective does. Such a
//! segment is set up in the handshake of a communicator's first blocking collective,
//! which a persistent collective's dup never runs; so the init call of each of a
//! communicator's first [`SEGMENTS`] persistent collectives (an intracommunicator's)
//! ends with a barrier on the dup that sets it up
//! (`Communicator::set_up_shared_memory`): MPI makes these init calls nonlocal, and
//! the barrier is what makes every member wait for the others. Later ones go through the
//! messages without one: each segment is a file in `/dev/shm` for as long as its request
//! lives.

use crate::abi::*;
use crate::comm::PrivateDup;
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::{give_persistent, Op, Start};

/// How many of a communicator's persistent collectives (counted from its first init call,
/// freed or not) get a segment of their own.
pub(crate) const SEGMENTS: u32 = 32;

/// What builds a persistent collective's start on a given communicator handle.
pub(crate) type Maker = Box<dyn Fn(MPI_Comm) -> Result<Start, MpiError> + Send + Sync>;

/// A closure over the program's arguments of a persistent collective (raw pointers among
/// them), made `Send` and `Sync`.
pub(crate) struct Args<F>(pub(crate) F);

// SAFETY: the pointers are the program's buffers and arrays of a persistent collective,
// which MPI lets the library use from any thread until the request is freed; the other
// arguments are handles and integers.
unsafe impl<F> Send for Args<F> {}
// SAFETY: as above; the closure only reads what it captured.
unsafe impl<F> Sync for Args<F> {}

impl<F: Fn(MPI_Comm) -> Result<Start, MpiError>> Args<F> {
    /// The start on communicator `h`.
    pub(crate) fn make(&self, h: MPI_Comm) -> Result<Start, MpiError> {
        (self.0)(h)
    }
}

/// The communicator a persistent collective owns: freed with its request.
struct Own(MPI_Comm);

impl Drop for Own {
    fn drop(&mut self) {
        crate::comm::remove(self.0);
    }
}

/// Gives a persistent collective on `comm_h` as an inactive request; `maker` builds its
/// start on a communicator handle.
///
/// # Safety
/// `request` is NULL or writable.
///
/// # Errors
/// The arguments' errors (from `maker` on `comm_h`); the dup's.
pub(crate) unsafe fn persistent(
    maker: Maker,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> Result<(), MpiError> {
    // The arguments are checked on the program's communicator first, so that a bad
    // one fails before any communication.
    maker(comm_h)?;
    let c = crate::comm::comm(comm_h, call)?;
    let own = Own(PrivateDup::start(&c)?.finish()?);
    if c.inter.is_none() && c.next_persistent_init() < SEGMENTS {
        crate::comm::comm(own.0, call)?
            .comm
            .set_up_shared_memory()?;
    }
    // The start is made now, while the program's datatype and operator handles are
    // valid (it may free them before it starts the request).
    let start = maker(own.0)?;
    let h = give_persistent(
        Box::new(move || {
            let _owned = &own;
            Ok(Op::Coll(start()?))
        }),
        comm_h,
    )?;
    // SAFETY: the caller's contract.
    unsafe { out(request, h, call) }
}
