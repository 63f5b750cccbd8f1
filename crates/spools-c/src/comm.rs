//! Communicators: the world's, and those made from it by `dup` and `split`.

use spools::Communicator;

use crate::args::{handle, out, Handle};
use crate::status::{guard, spools_status_t, Failure};

/// A group of ranks with its own message space (MPI's communicator): tagged messages,
/// collectives and RPCs on one never meet another's.
pub struct spools_comm_t {
    magic: u64,
    pub(crate) comm: Communicator,
    /// The world's own communicator: destroyed with the world, not by the caller.
    borrowed: bool,
}

impl Handle for spools_comm_t {
    const MAGIC: u64 = 0x5350_4f4f_4c43_4f4d;
    const NAME: &'static str = "spools_comm_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

impl spools_comm_t {
    /// The world's communicator handle (see `spools_world_comm`).
    pub(crate) fn borrowed(comm: Communicator) -> spools_comm_t {
        spools_comm_t {
            magic: Self::MAGIC,
            comm,
            borrowed: true,
        }
    }

    fn owned(comm: Communicator) -> *mut spools_comm_t {
        Box::into_raw(Box::new(spools_comm_t {
            magic: Self::MAGIC,
            comm,
            borrowed: false,
        }))
    }

    /// Marks the handle dead (its world is going).
    pub(crate) fn retire(&mut self) {
        self.magic = 0;
    }
}

/// This rank's number in `comm`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `comm` is NULL or a live communicator; `rank` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_comm_rank(
    comm: *const spools_comm_t,
    rank: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(rank, "rank") }? = c.comm.rank();
        Ok(())
    })
}

/// The number of ranks in `comm`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `comm` is NULL or a live communicator; `size` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_comm_size(
    comm: *const spools_comm_t,
    size: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(size, "size") }? = c.comm.size();
        Ok(())
    })
}

/// A new communicator of the same ranks with its own message space. Collective over
/// `comm`. Destroy it with `spools_comm_destroy()`.
///
/// Thread safety: as every collective, one call at a time per communicator, in the same
/// order on every rank.
///
/// Errors: `SPOOLS_ERR_PEER_GONE`, `SPOOLS_ERR_TRANSPORT`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `newcomm` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_comm_dup(
    comm: *const spools_comm_t,
    newcomm: *mut *mut spools_comm_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let newcomm = unsafe { out(newcomm, "newcomm") }?;
        *newcomm = spools_comm_t::owned(c.comm.dup()?);
        Ok(())
    })
}

/// `color` value of `spools_comm_split()` for a rank that joins no new communicator.
pub const SPOOLS_UNDEFINED: i32 = -1;

/// Splits `comm` (MPI_Comm_split): ranks giving the same `color` (0 or more) form one new
/// communicator, ordered by `key` then by their rank in `comm`; a rank giving
/// `SPOOLS_UNDEFINED` gets NULL. Collective over `comm`.
///
/// Thread safety: as `spools_comm_dup()`.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a negative color other than `SPOOLS_UNDEFINED`),
/// `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `comm` is NULL or a live communicator; `newcomm` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_comm_split(
    comm: *const spools_comm_t,
    color: i32,
    key: i32,
    newcomm: *mut *mut spools_comm_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        // SAFETY: the caller's contract.
        let newcomm = unsafe { out(newcomm, "newcomm") }?;
        let color = match color {
            SPOOLS_UNDEFINED => None,
            c if c >= 0 => Some(c.unsigned_abs()),
            c => {
                return Err(Failure::arg(format!(
                    "color {c} is negative (0 or more, or SPOOLS_UNDEFINED)"
                )))
            }
        };
        *newcomm = match c.comm.split(color, key)? {
            Some(n) => spools_comm_t::owned(n),
            None => std::ptr::null_mut(),
        };
        Ok(())
    })
}

/// Frees a communicator made by `spools_comm_dup()` or `spools_comm_split()` (not the
/// world's). NULL is accepted and does nothing.
///
/// Thread safety: when no other thread uses `comm`.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` for the world's communicator.
///
/// # Safety
/// `comm` is NULL or a live communicator.
#[no_mangle]
pub unsafe extern "C" fn spools_comm_destroy(comm: *mut spools_comm_t) -> spools_status_t {
    guard(|| {
        if comm.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let c = unsafe { handle(comm) }?;
        if c.borrowed {
            return Err(Failure::arg(
                "the world's communicator belongs to the world: spools_finalize frees it",
            ));
        }
        // SAFETY: a live owned communicator, made by `Box::into_raw` in `owned`.
        let mut b = unsafe { Box::from_raw(comm) };
        b.retire();
        drop(b);
        Ok(())
    })
}
