//! Persistent collectives (`MPI_Bcast_init` and the others) on a communicator of their
//! own.
//!
//! MPI matches persistent collectives by the order of their init calls, not of their
//! starts: a rank may start a broadcast and then a barrier while another starts the
//! barrier first (MPICH's `p_order`). Spools' collectives match in the order they start
//! on a communicator, so each persistent collective runs on a dup of its communicator
//! made for it alone, where its starts are the only collectives, one at a time. The dup
//! is begun at the init call without blocking (`Communicator::idup`: one broadcast from
//! the communicator's rank 0) and finished at the first start; the arguments are
//! checked at the init call, as the communicator's; the dup is freed with the request.

use std::sync::{Arc, Mutex, PoisonError};

use crate::abi::*;
use crate::comm::PrivateDup;
use crate::error::MpiError;
use crate::out::out;
use crate::request::{give_persistent, Op, Start};

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

/// The communicator of one persistent collective: being made, or made with its start.
enum Own {
    Pending(Option<PrivateDup>),
    Ready { comm: MPI_Comm, start: Start },
}

struct Private {
    maker: Maker,
    own: Mutex<Own>,
}

impl Private {
    /// The start on the collective's own communicator (finishing the dup the first time).
    fn start(&self) -> Result<Start, MpiError> {
        let mut own = self.own.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *own {
            Own::Ready { start, .. } => Ok(start.clone()),
            Own::Pending(dup) => {
                let dup = dup.take().ok_or_else(|| {
                    MpiError::invalid(
                        MPI_ERR_REQUEST,
                        "a persistent collective's communicator failed to be made earlier",
                    )
                })?;
                let comm = dup.finish()?;
                let start = (self.maker)(comm)?;
                *own = Own::Ready {
                    comm,
                    start: start.clone(),
                };
                Ok(start)
            }
        }
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Own::Ready { comm, .. } = *self.own.lock().unwrap_or_else(PoisonError::into_inner) {
            crate::comm::remove(comm);
        }
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
    maker(comm_h)?;
    let c = crate::comm::comm(comm_h, call)?;
    let p = Arc::new(Private {
        maker,
        own: Mutex::new(Own::Pending(Some(PrivateDup::start(&c)?))),
    });
    let h = give_persistent(
        Box::new(move || {
            let start = p.start()?;
            Ok(Op::Coll(start()?))
        }),
        comm_h,
    )?;
    // SAFETY: the caller's contract.
    unsafe { out(request, h, call) }
}
