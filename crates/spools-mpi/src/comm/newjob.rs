//! Joining a new job made for two groups (a spawn's parents and children, or the two
//! programs that meet at a port): every member joins it as a Spools `World` (a second
//! one, for a process that had one), the members make its communicators in one order
//! ([`set_up`]), and each group gets an intercommunicator to the other ([`join`]).

use std::ffi::c_int;
use std::ops::Range;
use std::sync::Arc;

use spools::{Communicator, HostedJob, JobTicket};

use crate::abi::*;
use crate::comm::{insert, CommObj, Key, WorldCtx};
use crate::env::error::MpiError;
use crate::runtime::rt;

/// Where the two groups sit in the new job: this side's ranks and the other's.
#[derive(Debug, Clone)]
pub(crate) struct Sides {
    /// This side's ranks in the new job (in the order of its communicator).
    pub(crate) local: Range<u32>,
    /// The other side's.
    pub(crate) remote: Range<u32>,
}

/// The communicators every member makes of a new job, in this order.
pub(crate) struct Links {
    /// A duplicate of the whole job (the job's bridge: `context.rs`).
    pub(crate) bridge: Communicator,
    /// The intercommunicator's union (`inter.rs`).
    pub(crate) union: Communicator,
    /// The intercommunicator's point-to-point base.
    pub(crate) base: Communicator,
    /// The children's `MPI_COMM_WORLD` (for a child; `None` for a parent).
    pub(crate) side: Option<Communicator>,
    /// Every member's key, by job rank: the job it started in (`MPI_Init`'s) and its
    /// rank there, which names a process in every job it joins (`worlds.rs`).
    pub(crate) keys: Vec<Key>,
}

/// Makes the [`Links`] of a new job `jc` (collective over the whole job: every member
/// calls it alike, `child` saying whether this process is a spawned one, `mine` being
/// its key).
///
/// # Errors
/// A member that died.
pub(crate) fn set_up(jc: &Communicator, child: bool, mine: Key) -> Result<Links, MpiError> {
    let bridge = jc.dup()?;
    let union = jc.dup()?;
    let base = jc.dup()?;
    let side = jc.split(child.then_some(1), jc.rank() as i32)?;
    let mut k = mine.0.to_le_bytes().to_vec();
    k.extend(mine.1.to_le_bytes());
    let keys = bridge
        .allgather_bytes(&k)?
        .iter()
        .map(|b| {
            let job = b
                .get(..8)
                .and_then(|x| x.try_into().ok())
                .map(u64::from_le_bytes);
            let rank = b
                .get(8..12)
                .and_then(|x| x.try_into().ok())
                .map(u32::from_le_bytes);
            job.zip(rank).ok_or_else(|| {
                MpiError::invalid(MPI_ERR_INTERN, "a member of the new job sent no key")
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Links {
        bridge,
        union,
        base,
        side,
        keys,
    })
}

/// Joins the new job of `ticket` as the member of `sides.local` that is rank `c`'s rank
/// there (collective over `c`, whose members make `sides.local`) and returns the
/// intercommunicator to the other side. `hosted` is the job's rendezvous when this
/// process hosts it (kept for the job's life). Processes met for the first time get
/// fresh labels (`worlds.rs`); a failure to join fails with class `fail_class`.
///
/// # Errors
/// A member that never joins or dies meanwhile (`fail_class`).
pub(crate) fn join(
    c: &CommObj,
    ticket: &JobTicket,
    sides: Sides,
    hosted: Option<HostedJob>,
    fail_class: c_int,
    call: &'static str,
) -> Result<MPI_Comm, MpiError> {
    let rt = rt(call)?;
    let size = sides.local.len() as u32 + sides.remote.len() as u32;
    let cfg = crate::comm::world_of(&c.ctx, call)?
        .worker()
        .config()
        .clone();
    let rank = sides.local.start + c.comm.rank();
    let world = spools::init_with(cfg, ticket.env(rank, size)).map_err(|e| {
        MpiError::invalid(
            fail_class,
            format!("{call}: the other processes did not all join: {e}"),
        )
    })?;
    let links = set_up(world.communicator(), false, (rt.ctx.job, rt.ctx.me))?;
    // A process this one knows keeps its label; the others get fresh ones.
    let labels = links
        .keys
        .iter()
        .map(|&k| rt.worlds.label_of(k, &rt.ctx))
        .collect();
    let ctx = WorldCtx::other(Arc::new(world), links.bridge, labels, hosted);
    rt.worlds.add(ctx.clone());
    let first = sides.local.start < sides.remote.start;
    let obj = crate::comm::make_inter(
        c,
        ctx,
        links.union,
        &links.base,
        sides.local.collect(),
        sides.remote.collect(),
        first,
    )?;
    insert(obj)
}
