//! Contexts for communicators whose members share no communicator yet: an
//! intercommunicator made from two groups, `MPI_Comm_create_group` and
//! `MPI_Comm_create_from_group` on any group. The members agree on the largest context
//! any of them knows to be free (`Communicator::free_context`) through point-to-point
//! messages on the runtime's bridge (a private duplicate of the world, so that its ranks
//! are job ranks; for a job joined later, that job's: `worlds.rs`): each sends its own to the group's leader, the leader (after swapping
//! with the other group's leader, for an intercommunicator) sends the largest back;
//! then, the same way, whether every member could claim it (threads of a member may be
//! making other communicators at once), until they all could.

use spools_msg::Communicator;

use crate::comm::WorldCtx;
use crate::env::error::MpiError;

/// A tag for the bridge from a string tag (`MPI_Comm_create_from_group`): FNV-1a, kept
/// non-negative and below the smallest tag bound MPI allows.
pub(crate) fn tag_of(s: &[u8]) -> i32 {
    let h = s.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x7fff) as i32
}

/// The context the group `members` (job ranks of `w`, this rank among them) agrees on
/// through `w`'s bridge, with
/// `members[leader]` collecting; `remote_leader` (a job rank) is the other group's leader
/// for an intercommunicator, whose leader swaps with it. Every member calls it with the
/// same arguments (the other group with its own), and `tag` tells concurrent calls apart.
/// The context is for `count` communicators (an intercommunicator takes two). Each
/// round agrees on the largest free context, then on whether every member could claim
/// it (`Communicator::claim_context`: another thread of a member may have taken it
/// meanwhile); a round that failed is followed by another, above it.
///
/// # Errors
/// `MPI_Init` not called, a dead member.
pub(crate) fn agree(
    w: &WorldCtx,
    members: &[u32],
    leader: usize,
    tag: i32,
    remote_leader: Option<u32>,
    count: u32,
) -> Result<u32, MpiError> {
    let b = &w.bridge;
    let me = w.me;
    loop {
        let ctx = round(
            b,
            me,
            members,
            leader,
            tag,
            remote_leader,
            b.free_context(),
            |a, x| a.max(x),
        )?;
        let took = u32::from(b.claim_context(ctx, count)?);
        if round(b, me, members, leader, tag, remote_leader, took, |a, x| {
            a.min(x)
        })? == 1
        {
            return Ok(ctx);
        }
    }
}

/// One round of [`agree`]: every member's `mine`, combined by `f` at the leader (and
/// with the other group's leader), sent back to every member.
#[allow(clippy::too_many_arguments)]
fn round(
    b: &Communicator,
    me: u32,
    members: &[u32],
    leader: usize,
    tag: i32,
    remote_leader: Option<u32>,
    mine: u32,
    f: impl Fn(u32, u32) -> u32,
) -> Result<u32, MpiError> {
    let leader_job = members[leader];
    if me != leader_job {
        b.send(&[mine], leader_job, tag)?;
        let mut got = [0u32];
        b.recv(&mut got, leader_job, tag)?;
        return Ok(got[0]);
    }
    let mut most = mine;
    for &m in members.iter().filter(|&&m| m != me) {
        let mut x = [0u32];
        b.recv(&mut x, m, tag)?;
        most = f(most, x[0]);
    }
    if let Some(rl) = remote_leader {
        let req = b.isend(most.to_le_bytes().to_vec(), rl, tag)?;
        let mut x = [0u32];
        b.recv(&mut x, rl, tag)?;
        req.wait()?;
        most = f(most, x[0]);
    }
    for &m in members.iter().filter(|&&m| m != me) {
        b.send(&[most], m, tag)?;
    }
    Ok(most)
}
