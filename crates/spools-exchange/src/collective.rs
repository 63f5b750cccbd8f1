//! Steps every collective I/O operation shares across its ranks: agreeing on the outcome of a local
//! step, checking that a layout's units fit the ranks, and a rank's share of a layout.

use crate::error::{Cause, ExchangeError, Side, Told};

/// The collective end of a step every rank of `comm` takes: every rank learns whether any
/// failed, and why. Ranks that succeeded learn the first failing rank's [`Cause`] (its
/// error's kind and message, told by that rank alone) as `remote(rank, cause)`; a rank
/// that failed keeps its own error. On success it costs one small allreduce.
///
/// The bindings (Python, C, the MPI ABI) call it for their own collective steps, so that
/// every rank maps one error to its class.
///
/// ```
/// use spools_exchange::{agree_on_outcome, ExchangeError, Told};
/// let world = spools::init()?;
/// let comm = world.communicator();
/// let local: Result<u32, ExchangeError> = Ok(7);
/// let v = agree_on_outcome(comm, local, Told::cause, |rank, cause| {
///     ExchangeError::Remote { rank, cause }
/// })?;
/// assert_eq!(v, 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A rank whose agreement itself fails (an interrupt, a dead peer) returns at once; on
/// a failure the others then wait in the broadcast of the cause as in any collective a
/// rank left: the job's watchdog ends a dead rank's job, and an interrupted collective
/// leaves its communicator unusable, as every interrupted collective does.
///
/// # Errors
/// This rank's own error (it wins even when the agreement fails too: a peer that failed
/// first may have ended the job already, and this rank's error is the cause it knows);
/// else `remote` naming the first failing rank and its cause; else the messaging error
/// of a failed agreement.
pub fn agree_on_outcome<T, E: From<spools_msg::MsgError>>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    cause: impl FnOnce(&E) -> Cause,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E> {
    let flag = [match &local {
        Ok(_) => u32::MAX,
        Err(_) => comm.rank(),
    }];
    let mut first = [0u32];
    let agreed = comm.allreduce(&flag, &mut first, &spools_msg::Op::Min);
    let first = match (local, agreed) {
        (Err(e), Err(_)) => return Err(e),
        (Ok(_), Err(e)) => return Err(e.into()),
        (Ok(v), Ok(())) if first[0] == u32::MAX => return Ok(v),
        (local, Ok(())) => (local, first[0]),
    };
    let (local, first) = first;
    // The first failing rank tells the others why.
    let told = match &local {
        Err(e) if comm.rank() == first => cause(e).encode(),
        _ => Vec::new(),
    };
    let heard = comm.bcast_bytes(first, &told);
    match (local, heard) {
        (Err(e), _) => Err(e),
        (Ok(_), Ok(bytes)) => Err(remote(first, Cause::decode(&bytes))),
        (Ok(_), Err(e)) => Err(e.into()),
    }
}

/// [`agree_on_outcome`] for errors that tell their own kind and message ([`Told`]): the
/// I/O layer's.
///
/// # Errors
/// As [`agree_on_outcome`].
pub fn agree<T, E>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E>
where
    E: From<spools_msg::MsgError> + Told,
{
    agree_on_outcome(comm, local, Told::cause, remote)
}

/// Checks that `layout` has no more units than `ranks` (rank `r` holds unit `r`: a unit
/// beyond the ranks would never be sent or received).
///
/// # Errors
/// [`ExchangeError::TooManyUnits`].
pub fn fit_ranks(layout: &spools_map::Layout, ranks: u32, side: Side) -> Result<(), ExchangeError> {
    let units = layout.units();
    if units > u64::from(ranks) {
        return Err(ExchangeError::TooManyUnits { side, units, ranks });
    }
    Ok(())
}

/// Bytes of rank `rank`'s share of `layout` (rank `r` holds unit `r`; none beyond the
/// layout's units).
///
/// # Errors
/// The layout's, for a layout whose share cannot be computed.
pub fn rank_bytes(layout: &spools_map::Layout, rank: u32) -> Result<u64, spools_map::LayoutError> {
    if u64::from(rank) < layout.units() {
        layout.local_bytes(u64::from(rank))
    } else {
        Ok(0)
    }
}
