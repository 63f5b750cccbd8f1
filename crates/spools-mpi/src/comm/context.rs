//! Contexts for communicators whose members share no communicator yet: an
//! intercommunicator made from two groups, `MPI_Comm_create_group` and
//! `MPI_Comm_create_from_group` on any group. The members agree on the largest context
//! any of them knows to be free (`Communicator::free_context`) through point-to-point
//! messages on the runtime's bridge (a private duplicate of the world, so that its ranks
//! are job ranks): each sends its own to the group's leader, the leader (after swapping
//! with the other group's leader, for an intercommunicator) sends the largest back.

use spools_msg::Communicator;

use crate::env::error::MpiError;
use crate::runtime::rt;

/// A tag for the bridge from a string tag (`MPI_Comm_create_from_group`): FNV-1a, kept
/// non-negative and below the smallest tag bound MPI allows.
pub(crate) fn tag_of(s: &[u8]) -> i32 {
    let h = s.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x7fff) as i32
}

/// The context the group `members` (job ranks, this rank among them) agrees on, with
/// `members[leader]` collecting; `remote_leader` (a job rank) is the other group's leader
/// for an intercommunicator, whose leader swaps with it. Every member calls it with the
/// same arguments (the other group with its own), and `tag` tells concurrent calls apart.
///
/// # Errors
/// `MPI_Init` not called, a dead member.
pub(crate) fn agree(
    members: &[u32],
    leader: usize,
    tag: i32,
    remote_leader: Option<u32>,
    call: &'static str,
) -> Result<(u32, &'static Communicator), MpiError> {
    let rt = rt(call)?;
    let b = &rt.bridge;
    let me = rt.rank;
    let leader_job = members[leader];
    let free = b.free_context();
    if me != leader_job {
        b.send(&[free], leader_job, tag)?;
        let mut ctx = [0u32];
        b.recv(&mut ctx, leader_job, tag)?;
        return Ok((ctx[0], b));
    }
    let mut most = free;
    for &m in members.iter().filter(|&&m| m != me) {
        let mut f = [0u32];
        b.recv(&mut f, m, tag)?;
        most = most.max(f[0]);
    }
    if let Some(rl) = remote_leader {
        let req = b.isend(most.to_le_bytes().to_vec(), rl, tag)?;
        let mut f = [0u32];
        b.recv(&mut f, rl, tag)?;
        req.wait()?;
        most = most.max(f[0]);
    }
    for &m in members.iter().filter(|&&m| m != me) {
        b.send(&[most], m, tag)?;
    }
    Ok((most, b))
}
