//! Creating and opening a communicator's segment: the lowest local member creates it at
//! the first small collective, the others open it after a point-to-point handshake on the
//! communicator, and everyone agrees whether it is usable before anyone uses it.

use std::sync::atomic::AtomicU32;

use spools_am::{Route, SharedArea};

use super::slot::SmSlot;
use super::{SmComm, FIRST_SEQ, NOBODY};
use crate::coll::group::{recv, send, Group};
use crate::comm_core::CommCore;
use crate::error::MsgError;

/// Low tag bits of the handshake's messages (the collective's other steps use fewer).
const STEP: u32 = 250;

/// The communicator's segment in `slot`, set up on first use (collective over the local
/// members: every one of them must be in the same collective, with the same tag).
///
/// # Errors
/// A dead rank during the handshake.
pub(crate) fn segment<'s>(
    slot: &'s SmSlot,
    c: &CommCore,
    local: &Group,
    tag: u32,
) -> Result<Option<&'s SmComm>, MsgError> {
    slot.get_or_try_init(|| setup(c, local, tag))
}

/// Whether every local member is reached through shared memory (with
/// `SPOOLS_TRANSPORT=tcp` the segment is not used either).
fn shm_routes(c: &CommCore, local: &Group) -> bool {
    local.members.iter().all(|&m| {
        c.job_rank(m)
            .ok()
            .and_then(|j| c.engine.worker.route(j).ok())
            .is_some_and(|r| matches!(r, Route::Shm | Route::Local))
    })
}

/// Sets up the segment among `local` (every one of them calls this in the same
/// collective, whatever its own configuration: each says in the handshake whether it can
/// use the segment, so that all decide alike). Off when any member cannot (shared memory
/// not reached, creation or mapping failed, `coll_sm_limit` 0) or when the members'
/// `coll_sm_limit`s differ: a length would then go through the segment on some and
/// through the messages on others.
fn setup(c: &CommCore, local: &Group, tag: u32) -> Result<Option<SmComm>, MsgError> {
    let n = local.n();
    if n < 2 {
        return Ok(None);
    }
    let limit = c.engine.worker.config().coll_sm_limit;
    let usable = limit > 0 && shm_routes(c, local);
    let boot = c.engine.worker.bootstrap();
    // Named after the creator's job rank as well as the context: sibling communicators
    // of one `split` share the context, and may share a host.
    let creator = c.job_rank(local.members[0])?;
    let name = format!("/spools-{:016x}-sm{}-r{creator}", boot.job(), c.coll_ctx());
    let slot = (limit as usize).next_multiple_of(64);
    let len = SmComm::bytes(n, slot);
    let make = |area: SharedArea| SmComm {
        area,
        members: local.members.clone(),
        me: local.me,
        slot,
        outs: SmComm::outs(slot),
        next: AtomicU32::new(FIRST_SEQ),
        synced: AtomicU32::new(FIRST_SEQ.wrapping_sub(1)),
        slot_readers: [AtomicU32::new(NOBODY), AtomicU32::new(NOBODY)],
        done: AtomicU32::new(FIRST_SEQ.wrapping_sub(1)),
        watching: AtomicU32::new(0),
        watch: Default::default(),
        worker: c.engine.worker.clone(),
    };
    let tag = tag + STEP;
    if local.me == 0 {
        // Create, tell the others (with this limit), hear whether they could open it,
        // tell the verdict.
        let sm = if usable {
            match SharedArea::create(&name, len, n as u32, boot.secret()) {
                Ok(a) => Some(make(a)),
                Err(e) => {
                    spools_boot::logger::warn(format_args!(
                        "spools: collectives in shared memory off on this communicator: {e}"
                    ));
                    None
                }
            }
        } else {
            None
        };
        if let Some(sm) = &sm {
            sm.init();
        }
        let mut created = [0u8; 9];
        created[0] = u8::from(sm.is_some());
        created[1..].copy_from_slice(&limit.to_le_bytes());
        let heard = (|| {
            for i in 1..n {
                send(c, local, i, tag, &created)?;
            }
            let mut all = true;
            for i in 1..n {
                let mut ok = [0u8];
                recv(c, local, i, tag + 1, &mut ok)?;
                all &= ok[0] == 1;
            }
            Ok::<bool, MsgError>(all)
        })();
        // Every member has answered (it mapped the area or could not), or the handshake
        // failed (a member died: the collective fails): nobody is still on its way to open
        // the name, so it goes now, whatever happened (a process that ends with an error
        // leaves nothing in /dev/shm, under any launcher).
        if let Some(sm) = &sm {
            sm.area.unlink();
        }
        let all = heard? && sm.is_some();
        for i in 1..n {
            send(c, local, i, tag + 2, &[u8::from(all)])?;
        }
        Ok(sm.filter(|_| all))
    } else {
        let mut created = [0u8; 9];
        recv(c, local, 0, tag, &mut created)?;
        let mut theirs = [0u8; 8];
        theirs.copy_from_slice(&created[1..]);
        let theirs = u64::from_le_bytes(theirs);
        let sm = if created[0] != 1 {
            None
        } else if usable && theirs == limit {
            let opened = SharedArea::open(&name, len, creator, boot.secret());
            if let Err(e) = &opened {
                spools_boot::logger::warn(format_args!(
                    "spools: collectives in shared memory off on this communicator: {e}"
                ));
            }
            opened.ok().map(make)
        } else {
            if theirs != limit {
                spools_boot::logger::warn(format_args!(
                    "spools: collectives in shared memory off on this communicator: \
                     coll_sm_limit is {limit} here and {theirs} on rank {}",
                    local.members[0]
                ));
            }
            None
        };
        send(c, local, 0, tag + 1, &[u8::from(sm.is_some())])?;
        let mut all = [0u8];
        recv(c, local, 0, tag + 2, &mut all)?;
        Ok(if all[0] == 1 { sm } else { None })
    }
}
