//! Intercommunicators (`MPI_Intercomm_create`, `MPI_Intercomm_merge`, their dup and
//! split, remote size and group).
//!
//! An intercommunicator is two Spools communicators over the members of both groups:
//! - `union`, in one order every member agrees on (the group whose leader has the lower
//!   job rank first): merge, dup and split agree on new contexts with collectives on it;
//! - the `CommObj`'s own `comm`, a view of a second context that puts the remote group
//!   first on each side (`Communicator::view`), so that remote rank r is rank r there:
//!   point-to-point calls and the collectives of `vcoll.rs` (built on exchanges with
//!   named peers) work on it unchanged, and a status names the remote rank.
//!
//! The two groups, which share no communicator, agree on the contexts as MPI's
//! intercommunicator creation does: the largest free context of each group (an allreduce
//! on the local communicator), exchanged between the leaders over the peer communicator,
//! then broadcast in each group.

use std::ffi::{c_char, c_int, CStr};

use spools::{HostedJob, JobTicket};
use spools_msg::{Communicator, Op};

use crate::comm::newjob::Sides;

use crate::abi::*;
use std::sync::Arc;

use crate::comm::{comm, insert, make_inter as make, CommObj};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::out::out;

fn bytes_of(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u32s_of(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The union's order: this side first or second.
fn order(local: &[u32], remote: &[u32], first: bool) -> Vec<u32> {
    let (a, b) = if first {
        (local, remote)
    } else {
        (remote, local)
    };
    a.iter().chain(b).copied().collect()
}

/// `MPI_Intercomm_create`: collective over both local communicators; their leaders
/// meet on `peer_comm` with `tag`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let call = "MPI_Intercomm_create";
    let r = (|| {
        let lc = comm(local_comm, call)?;
        // Refused before any communication (as MPICH checks it, first).
        if newintercomm.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: newintercomm is NULL"),
            ));
        }
        if lc.inter.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: the local communicator is an intercommunicator"),
            ));
        }
        let leader = match u32::try_from(local_leader) {
            Ok(l) if l < lc.comm.size() => l,
            _ => {
                return Err(MpiError::invalid(
                    MPI_ERR_RANK,
                    format!(
                        "{call}: local leader {local_leader} is not in the local communicator of {} ranks",
                        lc.comm.size()
                    ),
                ))
            }
        };
        // The job the intercommunicator lives in: the local communicator's, or the peer
        // communicator's when that is another job holding every local process (a
        // parent's MPI_COMM_WORLD, its intercommunicator to its children as the peer).
        // The peer communicator is significant at the leader only: it names the job.
        let local_l = lc.ctx.labels_of(&crate::comm::group::members(&lc)?);
        let peer = (lc.comm.rank() == leader).then(|| comm(peer_comm, call));
        // 0: the local communicator's job; u64::MAX: the leader's peer communicator is
        // not one (every local rank fails, none waits for the leader).
        let mut choice = [0u64];
        match &peer {
            Some(Ok(pc))
                if !Arc::ptr_eq(&pc.ctx, &lc.ctx) && pc.ctx.jobs_of(&local_l).is_some() =>
            {
                choice[0] = pc.ctx.job;
            }
            Some(Err(_)) => choice[0] = u64::MAX,
            _ => {}
        }
        lc.comm.bcast(&mut choice, leader)?;
        let peer = peer.transpose()?;
        let w = match choice[0] {
            0 => lc.ctx.clone(),
            u64::MAX => {
                return Err(MpiError::invalid(
                    MPI_ERR_COMM,
                    format!("{call}: the local leader's peer communicator is not a communicator"),
                ))
            }
            id => crate::comm::by_id(id, call)?,
        };
        let local = w.jobs_of(&local_l).ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: a local process outside the job"),
            )
        })?;
        let b = &w.bridge;
        let mut most = [0u32];
        lc.comm
            .allreduce(&[b.free_context()], &mut most, &Op::Max)?;
        // The leaders swap `mine` over the peer communicator, and each broadcasts what
        // it got to its group.
        let swap = |mine: &[u32]| -> Result<Vec<u32>, MpiError> {
            let got = if let Some(pc) = &peer {
                let rl = crate::p2p::dest(pc, remote_leader, call)?.ok_or_else(|| {
                    MpiError::invalid(
                        MPI_ERR_RANK,
                        format!("{call}: the remote leader is MPI_PROC_NULL"),
                    )
                })?;
                let tag = crate::p2p::send_tag(tag, call)?;
                let req = pc.comm.isend(bytes_of(mine), rl, tag)?;
                let (got, _) = pc.comm.recv_vec(rl, tag)?;
                req.wait()?;
                got
            } else {
                Vec::new()
            };
            Ok(u32s_of(&lc.comm.bcast_bytes(leader, &got)?))
        };
        // [job id (two words), largest free context, leader's job rank, members...].
        let mut mine = vec![
            w.job as u32,
            (w.job >> 32) as u32,
            most[0],
            local[leader as usize],
        ];
        mine.extend(&local);
        let theirs = swap(&mine)?;
        if theirs.len() < 5 {
            return Err(MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: the remote leader sent no group"),
            ));
        }
        let their_job = u64::from(theirs[0]) | (u64::from(theirs[1]) << 32);
        if their_job != w.job {
            // No job holds both groups (a parent's MPI_COMM_WORLD, its intercommunicator
            // to children it spawned alone as the peer): they meet in a new one.
            let meeting = Meeting {
                leader,
                peer: peer.as_deref(),
                remote_leader,
                tag,
                hosts: w.job < their_job,
                theirs: (theirs.len() - 4) as u32,
            };
            let h = meet_over_peer(&lc, &meeting, call)?;
            // SAFETY: the caller's contract.
            return unsafe { out(newintercomm, h, call) };
        }
        let theirs = theirs[2..].to_vec();
        let remote = theirs[2..].to_vec();
        if remote.iter().any(|r| local.contains(r)) {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: the local and remote groups overlap"),
            ));
        }
        let mut ctx = most[0].max(theirs[0]);
        // Whether every member of both groups could claim `ctx` (another thread of a
        // member may have taken it meanwhile), else the next largest free context:
        // the local ranks combine theirs, the leaders swap, the leader broadcasts.
        let both = |mine: u32, op: &Op<u32>| -> Result<u32, MpiError> {
            let mut local_v = [0u32];
            lc.comm.allreduce(&[mine], &mut local_v, op)?;
            let other = swap(&local_v)?.first().copied().unwrap_or(0);
            Ok(if matches!(op, Op::Min) {
                local_v[0].min(other)
            } else {
                local_v[0].max(other)
            })
        };
        while both(u32::from(b.claim_context(ctx, 2)?), &Op::Min)? != 1 {
            ctx = both(b.free_context(), &Op::Max)?;
        }
        let first = local[leader as usize] < theirs[1];
        let all = order(&local, &remote, first);
        let union = b.with_context(ctx, all.clone())?;
        // The next free context: each communicator takes four ids
        // (`Communicator::with_context`).
        let base = b.with_context(ctx + 4, all)?;
        let h = insert(make(&lc, w.clone(), union, &base, local, remote, first)?)?;
        // SAFETY: the caller's contract.
        unsafe { out(newintercomm, h, call) }
    })();
    on_comm(local_comm, r)
}

/// The leaders' side of a meeting of two groups in a new job (`meet_over_peer`).
struct Meeting<'a> {
    /// The local leader's rank in the local communicator.
    leader: u32,
    /// The peer communicator, at the leader.
    peer: Option<&'a CommObj>,
    /// The remote leader's rank in it, and the tag of the call.
    remote_leader: c_int,
    tag: c_int,
    /// Whether this side's leader hosts the new job.
    hosts: bool,
    /// How many processes the other group has.
    theirs: u32,
}

/// Two groups that share no job meet in a new one, as at a port: the leader of the side
/// whose job id is the lower hosts it and sends its ticket to the other leader over the
/// peer communicator (an empty one when it could not host: both groups then fail), and
/// each leader broadcasts it to its group; the hosting side takes the new job's first
/// ranks (`newjob.rs`).
fn meet_over_peer(lc: &CommObj, m: &Meeting<'_>, call: &'static str) -> Result<MPI_Comm, MpiError> {
    let nl = lc.comm.size();
    let mut hosted = None;
    let line = match m.peer {
        Some(pc) => {
            let rl = crate::p2p::dest(pc, m.remote_leader, call)?.ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_RANK,
                    format!("{call}: the remote leader is MPI_PROC_NULL"),
                )
            })?;
            let t = crate::p2p::send_tag(m.tag, call)?;
            if m.hosts {
                // Any failure here sends an empty line, so that both groups fail.
                let hosting = crate::comm::world_of(&lc.ctx, call).and_then(|w| {
                    let family = crate::runtime::rt(call)?.ctx.job;
                    HostedJob::host(nl + m.theirs, w.worker().config(), family)
                        .map_err(|e| MpiError::invalid(MPI_ERR_COMM, e.to_string()))
                });
                let line = match hosting {
                    Ok(j) => {
                        let l = j.ticket().to_line().into_bytes();
                        hosted = Some(j);
                        l
                    }
                    Err(_) => Vec::new(),
                };
                pc.comm.send(&line, rl, t)?;
                line
            } else {
                pc.comm.recv_vec(rl, t)?.0
            }
        }
        None => Vec::new(),
    };
    let line = lc.comm.bcast_bytes(m.leader, &line)?;
    let ticket = std::str::from_utf8(&line)
        .ok()
        .and_then(JobTicket::from_line)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_COMM,
                format!(
                    "{call}: the two groups share no job, and no new one could be hosted for them"
                ),
            )
        })?;
    let sides = if m.hosts {
        Sides {
            local: 0..nl,
            remote: nl..nl + m.theirs,
        }
    } else {
        Sides {
            local: m.theirs..m.theirs + nl,
            remote: 0..m.theirs,
        }
    };
    crate::comm::newjob::join(lc, &ticket, sides, hosted, MPI_ERR_COMM, call)
}

/// A group's rank argument as an index into its members.
fn leader_in(
    members: &[u32],
    leader: c_int,
    what: &str,
    call: &'static str,
) -> Result<usize, MpiError> {
    match usize::try_from(leader) {
        Ok(l) if l < members.len() => Ok(l),
        _ => Err(MpiError::invalid(
            MPI_ERR_RANK,
            format!(
                "{call}: {what} {leader} is not in its group of {} ranks",
                members.len()
            ),
        )),
    }
}

/// `MPI_Intercomm_create_from_groups`: collective over both groups (no communicator
/// needed: they agree through the runtime's bridge, `comm/context.rs`); `stringtag` tells
/// concurrent calls apart.
#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_create_from_groups(
    local_group: MPI_Group,
    local_leader: c_int,
    remote_group: MPI_Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let _ = info;
    let call = "MPI_Intercomm_create_from_groups";
    let r = (|| {
        let rt = crate::runtime::rt(call)?;
        let local_l = crate::comm::group::members_of(local_group)?;
        let remote_l = crate::comm::group::members_of(remote_group)?;
        let both: Vec<u32> = local_l.iter().chain(&remote_l).copied().collect();
        let w = crate::comm::holding(&both, call)?;
        if !local_l.contains(&w.my_label()) {
            return Err(MpiError::invalid(
                MPI_ERR_GROUP,
                format!("{call}: this process is not in the local group"),
            ));
        }
        if remote_l.iter().any(|r| local_l.contains(r)) {
            return Err(MpiError::invalid(
                MPI_ERR_GROUP,
                format!("{call}: the local and remote groups overlap"),
            ));
        }
        let jobs = |l: &[u32]| {
            w.jobs_of(l).ok_or_else(|| {
                MpiError::invalid(MPI_ERR_GROUP, format!("{call}: a process outside the job"))
            })
        };
        let (local, remote) = (jobs(&local_l)?, jobs(&remote_l)?);
        let ll = leader_in(&local, local_leader, "local leader", call)?;
        let rl = leader_in(&remote, remote_leader, "remote leader", call)?;
        let tag = if stringtag.is_null() {
            0
        } else {
            // SAFETY: a NUL-terminated string (the caller's contract).
            crate::comm::context::tag_of(unsafe { CStr::from_ptr(stringtag) }.to_bytes())
        };
        let ctx = crate::comm::context::agree(&w, &local, ll, tag, Some(remote[rl]), 2)?;
        let first = local[ll] < remote[rl];
        let all = order(&local, &remote, first);
        let union = w.bridge.with_context(ctx, all.clone())?;
        // The next free context, as above.
        let base = w.bridge.with_context(ctx + 4, all)?;
        let obj = make(
            &rt.world_comm,
            w.clone(),
            union,
            &base,
            local,
            remote,
            first,
        )?;
        obj.errhandler.store(
            if crate::env::error::valid_errhandler(errhandler) {
                errhandler
            } else {
                MPI_ERRORS_ARE_FATAL
            },
            std::sync::atomic::Ordering::Relaxed,
        );
        let h = insert(obj)?;
        // SAFETY: the caller's contract.
        unsafe { out(newintercomm, h, call) }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => crate::env::errhandler::raise(MPI_COMM_SELF, &e),
    }
}

/// The intercommunicator of handle `h`.
///
/// # Errors
/// `MPI_ERR_COMM` for an intracommunicator.
fn inter_of(h: MPI_Comm, call: &'static str) -> Result<std::sync::Arc<CommObj>, MpiError> {
    let c = comm(h, call)?;
    if c.inter.is_none() {
        return Err(MpiError::invalid(
            MPI_ERR_COMM,
            format!("{call}: not an intercommunicator"),
        ));
    }
    Ok(c)
}

/// `MPI_Intercomm_merge`: collective over both groups; an intracommunicator of both,
/// the group that passed `high` false first (the first group of the union when both
/// passed the same).
#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_merge(
    intercomm: MPI_Comm,
    high: c_int,
    newintracomm: *mut MPI_Comm,
) -> c_int {
    let call = "MPI_Intercomm_merge";
    let r = (|| {
        let c = inter_of(intercomm, call)?;
        let i = c.inter.as_ref().ok_or(MpiError::NotInitialized(call))?;
        let n = i.union.size();
        let mut highs = vec![0u32; n as usize];
        i.union.allgather(&[u32::from(high != 0)], &mut highs)?;
        let nx = if i.first {
            i.local.len()
        } else {
            i.remote.len()
        } as u32;
        let x_first = !(highs[0] != 0 && highs[nx as usize] == 0);
        let ur = i.union.rank();
        let key = if x_first || ur >= nx {
            if x_first {
                ur
            } else {
                ur - nx
            }
        } else {
            ur + (n - nx)
        };
        let merged = i.union.split(Some(0), key as i32)?.ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: the merge left this rank out"),
            )
        })?;
        let h = insert(c.child(merged))?;
        // SAFETY: the caller's contract.
        unsafe { out(newintracomm, h, call) }
    })();
    on_comm(intercomm, r)
}

/// A dup of intercommunicator `c`: new contexts for both of its communicators.
pub(crate) fn dup(c: &CommObj) -> Result<CommObj, MpiError> {
    let i = c
        .inter
        .as_ref()
        .ok_or(MpiError::NotInitialized("MPI_Comm_dup"))?;
    let union = i.union.dup()?;
    let base = i.union.dup()?;
    same_groups(c, union, &base)
}

/// An intercommunicator of `c`'s two groups over new communicators `union` and `base`.
fn same_groups(c: &CommObj, union: Communicator, base: &Communicator) -> Result<CommObj, MpiError> {
    let i = c
        .inter
        .as_ref()
        .ok_or(MpiError::NotInitialized("MPI_Comm_dup"))?;
    make(
        c,
        c.ctx.clone(),
        union,
        base,
        i.local.clone(),
        i.remote.clone(),
        i.first,
    )
}

/// A non-blocking dup of intercommunicator `c` started: its two contexts, each chosen
/// by the union's rank 0 (`spools::Communicator::idup`); [`idup_done`] makes it.
pub(crate) fn idup(c: &CommObj) -> Result<[spools::DupRequest; 2], MpiError> {
    let i = c
        .inter
        .as_ref()
        .ok_or(MpiError::NotInitialized("MPI_Comm_idup"))?;
    Ok([i.union.idup()?, i.union.idup()?])
}

/// The intercommunicator of a non-blocking dup of `c` once its contexts arrived.
pub(crate) fn idup_done(c: &CommObj, reqs: [spools::DupRequest; 2]) -> Result<CommObj, MpiError> {
    let [u, b] = reqs;
    let union = u.wait()?;
    let base = b.wait()?;
    same_groups(c, union, &base)
}

/// `MPI_Comm_split` (and `split_type`) of intercommunicator `c`: the ranks of each
/// colour in both groups form an intercommunicator, each group ordered by `key` then
/// local rank; `MPI_COMM_NULL` for `None` or a colour the other group lacks.
pub(crate) fn split(c: &CommObj, color: Option<u32>, key: c_int) -> Result<MPI_Comm, MpiError> {
    let i = c
        .inter
        .as_ref()
        .ok_or(MpiError::NotInitialized("MPI_Comm_split"))?;
    let n = i.union.size() as usize;
    let mut all = vec![0u32; 2 * n];
    i.union
        .allgather(&[color.unwrap_or(u32::MAX), key as u32], &mut all)?;
    let nx = if i.first {
        i.local.len()
    } else {
        i.remote.len()
    };
    // The members of one side with this colour, by (key, rank on that side).
    let side = |range: std::ops::Range<usize>, col: u32| -> Vec<u32> {
        let mut m: Vec<(i32, usize)> = range
            .filter(|&u| all[2 * u] == col)
            .map(|u| (all[2 * u + 1] as i32, u))
            .collect();
        m.sort_unstable();
        m.into_iter().map(|(_, u)| u as u32).collect()
    };
    let mine = color.and_then(|col| {
        let (x, y) = (side(0..nx, col), side(nx..n, col));
        (!x.is_empty() && !y.is_empty()).then_some((x, y))
    });
    // One split of the union for the new union, then a dup of it for the view: every
    // rank takes part in both (with `None` when it gets no communicator).
    let (colour, key) = match &mine {
        Some((x, y)) => {
            let ur = i.union.rank();
            let pos = x.iter().chain(y).position(|&u| u == ur).unwrap_or(0);
            (color, pos as i32)
        }
        None => (None, 0),
    };
    let union = i.union.split(colour, key)?;
    let base = i.union.split(colour, key)?;
    match (mine, union, base) {
        (Some((x, y)), Some(union), Some(base)) => {
            let job = |u: &u32| i.union.job_rank(*u).map_err(MpiError::from);
            let x: Vec<u32> = x.iter().map(job).collect::<Result<_, _>>()?;
            let y: Vec<u32> = y.iter().map(job).collect::<Result<_, _>>()?;
            let (local, remote) = if i.first { (x, y) } else { (y, x) };
            insert(make(
                c,
                c.ctx.clone(),
                union,
                &base,
                local,
                remote,
                i.first,
            )?)
        }
        _ => Ok(MPI_COMM_NULL),
    }
}

/// `MPI_Comm_test_inter`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_test_inter(comm_h: MPI_Comm, flag: *mut c_int) -> c_int {
    let r = comm(comm_h, "MPI_Comm_test_inter")
        // SAFETY: the caller's contract.
        .and_then(|c| unsafe { out(flag, c_int::from(c.inter.is_some()), "MPI_Comm_test_inter") });
    on_comm(comm_h, r)
}

/// `MPI_Comm_remote_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_remote_size(comm_h: MPI_Comm, size: *mut c_int) -> c_int {
    let r = inter_of(comm_h, "MPI_Comm_remote_size").and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe { out(size, c.peers() as c_int, "MPI_Comm_remote_size") }
    });
    on_comm(comm_h, r)
}

/// `MPI_Comm_remote_group`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_remote_group(comm_h: MPI_Comm, group: *mut MPI_Group) -> c_int {
    let r = inter_of(comm_h, "MPI_Comm_remote_group").and_then(|c| {
        let remote = c
            .inter
            .as_ref()
            .map(|i| c.ctx.labels_of(&i.remote))
            .unwrap_or_default();
        // SAFETY: the caller's contract.
        unsafe { crate::comm::group::give(remote, group, "MPI_Comm_remote_group") }
    });
    on_comm(comm_h, r)
}

/// `MPI_Comm_create`: collective over `comm`; each rank passes the group it belongs to
/// (groups may differ between disjoint sets of ranks) and gets a communicator of it, or
/// `MPI_COMM_NULL` when not in it. On an intercommunicator each side passes a group of
/// its local group, and the ranks in them get an intercommunicator between the two
/// groups, each in its group's order (`MPI_COMM_NULL` for the others, and for everyone
/// when either group is empty): an intercommunicator split whose key is the rank's place
/// in its group, agreed on the union, whose order both sides share.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create(
    comm: MPI_Comm,
    group: MPI_Group,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Comm_create";
        let c = crate::comm::comm(comm, call)?;
        let g = crate::comm::group::members_of(group)?;
        let place = g.iter().position(|&x| x == c.ctx.my_label());
        if c.inter.is_some() {
            let h = split(&c, place.map(|_| 0), place.unwrap_or(0) as c_int)?;
            // SAFETY: the caller's contract.
            return unsafe { out(newcomm, h, call) };
        }
        // A member outside the communicator: ranks may pass different (disjoint)
        // groups, so they agree on whether any found one before they split.
        let mut all = crate::comm::group::members(&c)?;
        all.sort_unstable();
        let outside = g
            .iter()
            .find(|&&x| {
                c.ctx
                    .job_of(x)
                    .is_none_or(|j| all.binary_search(&j).is_err())
            })
            .copied();
        let mut any = [0u32];
        c.comm
            .allreduce(&[u32::from(outside.is_some())], &mut any, &Op::Max)?;
        if any[0] != 0 {
            return Err(MpiError::invalid(
                MPI_ERR_GROUP,
                match outside {
                    Some(x) => {
                        format!("{call}: process {x} of the group is not in the communicator")
                    }
                    None => format!(
                        "{call}: another rank's group holds a process outside the communicator"
                    ),
                },
            ));
        }
        // Ranks of one group share its lowest job rank as colour (labels are this
        // process's own; job ranks are the same everywhere); key: rank in it.
        let (color, key) = match place {
            Some(p) => (g.iter().filter_map(|&x| c.ctx.job_of(x)).min(), p as c_int),
            None => (None, 0),
        };
        let h = match c.comm.split(color, key)? {
            Some(s) => crate::comm::insert_child(&c, s)?,
            None => MPI_COMM_NULL,
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, call) }
    })();
    on_comm(comm, r)
}
