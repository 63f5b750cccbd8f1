//! `redistribute`: one collective call moving a dataset between two distributions.

use spools_map::{Layout, Plan};
use spools_msg::Communicator;

use crate::digest::Digest;
use crate::engine::{exchange, open_exchange};
use crate::error::ExchangeError;
use crate::{ExchangeOptions, ExchangeStats, Owners};

/// Moves a distributed dataset from layout `from` to layout `to`, in place of hand-written
/// `MPI_Alltoallv` code. Collective over `comm`: rank `r` holds unit `r` of each layout
/// (a layout may have fewer units than the communicator has ranks: a rank beyond it passes
/// an empty buffer on that side), so the two layouts may use different grids and unit
/// counts. `src` must hold at least [`Layout::local_bytes`] of this rank's source unit,
/// `dst` at least its destination share.
///
/// ```
/// use spools_map::Layout;
/// let world = spools::init()?;
/// let from: Layout = "u8[2,3] block,* on 1x1".parse()?;
/// let to: Layout = "u8[2,3] *,block on 1x1 order=F".parse()?;
/// let src = [1u8, 2, 3, 4, 5, 6];
/// let mut dst = [0u8; 6];
/// spools_exchange::redistribute(world.communicator(), &src, &from, &mut dst, &to, &Default::default())?;
/// assert_eq!(dst, [1, 4, 2, 5, 3, 6]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ExchangeError`]: layouts of different datasets or with more units than ranks, a
/// buffer smaller than its share, ranks that passed different layouts
/// ([`ExchangeError::ArgumentsDiffer`], on every rank alike), a dead peer, a failed
/// checksum. Any of these found before anything moves fails the call on every rank.
pub fn redistribute(
    comm: &Communicator,
    src: &[u8],
    from: &Layout,
    dst: &mut [u8],
    to: &Layout,
    opts: &ExchangeOptions,
) -> Result<ExchangeStats, ExchangeError> {
    match Plan::new(from, to) {
        Ok(plan) => redistribute_plan(comm, &plan, src, dst, opts),
        // This rank's two layouts do not fit each other: the others hear why instead of
        // waiting in the exchange.
        Err(e) => {
            let digest = Digest::of(&(from, to, &Owners::Identity, &Owners::Identity));
            open_exchange(comm, Err(e.into()), digest, opts)
        }
    }
}

/// [`redistribute`] with a plan made beforehand (worth keeping when the same
/// redistribution repeats).
///
/// # Errors
/// As [`redistribute`].
pub fn redistribute_plan(
    comm: &Communicator,
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
    opts: &ExchangeOptions,
) -> Result<ExchangeStats, ExchangeError> {
    let me = u64::from(comm.rank());
    let s: Vec<(u64, &[u8])> = if me < plan.src().units() {
        vec![(me, src)]
    } else {
        Vec::new()
    };
    let mut d: Vec<(u64, &mut [u8])> = if me < plan.dst().units() {
        vec![(me, dst)]
    } else {
        Vec::new()
    };
    exchange(
        comm,
        plan,
        &Owners::Identity,
        &Owners::Identity,
        &s,
        &mut d,
        opts,
    )
}
