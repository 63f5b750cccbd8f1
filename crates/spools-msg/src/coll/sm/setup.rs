//! Creating and opening a communicator's segment: the lowest local member creates it at
//! the first small collective, the others open it after a point-to-point handshake on the
//! communicator, and everyone agrees whether it is usable before anyone uses it. Where
//! every member is on this host, the same handshake sets up the segment of the
//! communicator's non-blocking collectives (see [`super::inflight`]).

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use spools_am::{Route, SharedArea};
use spools_boot::config::FenceChoice;

use super::slot::SmSlot;
use super::way::ScanWay;
use super::{no_ge, Ledger, SmComm, FIRST_SEQ, NO_MASK};
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
///
/// When `local` is the whole communicator, the handshake also sets up the segment of its
/// non-blocking collectives (on or off with this one), in the slot of its non-blocking
/// core, with the first collective number it serves: one past the most non-blocking
/// collectives any member had started when it took part (each says how many). A
/// non-blocking collective cannot wait for a handshake, and a member may start one before
/// this blocking collective that another starts after it (MPI orders the two apart); a
/// number from there on is started after the handshake on every member, which all then
/// know whether the segment serves it ([`SmSlot::serving`]).
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
    let name = |core: &CommCore| {
        format!(
            "/spools-{:016x}-sm{}-r{creator}",
            boot.job(),
            core.coll_ctx()
        )
    };
    let slot = (limit as usize).next_multiple_of(64);
    let len = SmComm::bytes(n, slot);
    let make = |area: SharedArea, core: &CommCore, scans: ScanWay| SmComm {
        area,
        members: local.members.to_vec(),
        me: local.me,
        slot,
        outs: SmComm::outs(slot),
        ledger: Ledger::new(FIRST_SEQ),
        extra: AtomicU32::new(0),
        scans,
        done: AtomicU32::new(FIRST_SEQ.wrapping_sub(1)),
        watching: AtomicU32::new(0),
        watch: Default::default(),
        started: core.started_count(),
        worker: c.engine.worker.clone(),
        light: false,
    };
    // Whether flags go with light fences: every member can ([`SharedArea::light_fences`])
    // and (`coll_sm_fences = "auto"`, the creator's setting; `light` skips this look,
    // `locked` turns them off) the creator's look at the machine at set-up does not find the job's ranks awake
    // here that may run on its CPUs outnumbering them ([`spools_am::Worker::oversubscribed`],
    // as for scans; binding-aware, and a snapshot: ranks asleep then are not counted, a
    // cost of speed only). Where they do, a member about to sleep is the common case and each of its heavy fences
    // interrupts the other CPUs: a loop of allreduces of 8 bytes at 4 ranks on 2 cores
    // took 1.33 times as long with them (bcasts, reduces, scatters, barriers 0.7 to
    // 0.75 times; every one within a few per cent at 2 ranks, one per core, where a
    // bcast root spent most of its time in the locked store before).
    let light_here = SharedArea::light_fences();
    let lighten = |sm: Option<SmComm>, light: bool| {
        sm.map(|mut s| {
            s.light = light;
            s
        })
    };
    // The non-blocking core, where the whole communicator is here.
    let nb: Option<&Arc<CommCore>> = if n == c.size() as usize {
        c.nonblocking()
    } else {
        None
    };
    let tag = tag + STEP;
    if local.me == 0 {
        // Create, tell the others (with this limit and how scans go), hear whether they
        // could open it, tell the verdict.
        let worker = &c.engine.worker;
        let scans = ScanWay::choose(worker.config().coll_sm_scan, n, worker);
        let create = |core: &CommCore| {
            if !usable {
                return None;
            }
            match SharedArea::create(&name(core), len, n as u32, boot.secret()) {
                Ok(a) => {
                    let sm = make(a, core, scans);
                    sm.init();
                    Some(sm)
                }
                Err(e) => {
                    spools_boot::logger::warn(format_args!(
                        "spools: collectives in shared memory off on this communicator: {e}"
                    ));
                    None
                }
            }
        };
        let sm = create(c);
        let nb_sm = nb.and_then(|nb| sm.as_ref().and_then(|_| create(nb)));
        let mut created = [0u8; 11];
        created[0] = u8::from(sm.is_some());
        created[1..9].copy_from_slice(&limit.to_le_bytes());
        created[9] = u8::from(nb_sm.is_some());
        created[10] = scans.code();
        let heard = (|| {
            for i in 1..n {
                send(c, local, i, tag, &created)?;
            }
            // Folded from this member's own count: `later` compares modulo 2^24, so 0 is
            // no neutral start.
            let (mut all, mut nb_all, mut from) = (true, true, started(c));
            // Light fences where every member can, as `coll_sm_fences` says: by default
            // not where the ranks outnumber the CPUs (every sleep's fence would
            // interrupt the members running).
            let mut light = light_here
                && match worker.config().coll_sm_fences {
                    FenceChoice::Auto => !worker.oversubscribed(),
                    FenceChoice::Light => true,
                    FenceChoice::Locked => false,
                };
            for i in 1..n {
                let mut ok = [0u8; 7];
                recv(c, local, i, tag + 1, &mut ok)?;
                all &= ok[0] == 1;
                nb_all &= ok[1] == 1;
                from = later(from, u32::from_le_bytes([ok[2], ok[3], ok[4], ok[5]]));
                light &= ok[6] == 1;
            }
            Ok::<_, MsgError>((all, nb_all, from, light))
        })();
        // Every member has answered (it mapped the area or could not), or the handshake
        // failed (a member died: the collective fails): nobody is still on its way to open
        // the name, so it goes now, whatever happened (a process that ends with an error
        // leaves nothing in /dev/shm, under any launcher).
        for s in [&sm, &nb_sm].into_iter().flatten() {
            s.area.unlink();
        }
        let (all, nb_all, from, light) = heard?;
        let all = all && sm.is_some();
        let nb_all = all && nb_all && nb_sm.is_some();
        let mut verdict = [0u8; 7];
        verdict[0] = u8::from(all);
        verdict[1] = u8::from(nb_all);
        verdict[2..6].copy_from_slice(&from.to_le_bytes());
        verdict[6] = u8::from(light);
        for i in 1..n {
            send(c, local, i, tag + 2, &verdict)?;
        }
        if let Some(nb) = nb {
            nb.sm
                .set_nonblocking(lighten(nb_sm, light).filter(|_| nb_all), from);
        }
        Ok(lighten(sm, light).filter(|_| all))
    } else {
        let mut created = [0u8; 11];
        recv(c, local, 0, tag, &mut created)?;
        let scans = ScanWay::from_code(created[10]);
        let mut theirs = [0u8; 8];
        theirs.copy_from_slice(&created[1..9]);
        let theirs = u64::from_le_bytes(theirs);
        let open = |core: &CommCore| {
            let opened = SharedArea::open(&name(core), len, creator, boot.secret());
            if let Err(e) = &opened {
                spools_boot::logger::warn(format_args!(
                    "spools: collectives in shared memory off on this communicator: {e}"
                ));
            }
            opened.ok().map(|a| make(a, core, scans))
        };
        let sm = if created[0] != 1 {
            None
        } else if usable && theirs == limit {
            open(c)
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
        let nb_sm = match nb {
            Some(nb) if created[9] == 1 && sm.is_some() => open(nb),
            _ => None,
        };
        let mut ok = [0u8; 7];
        ok[0] = u8::from(sm.is_some());
        ok[1] = u8::from(nb_sm.is_some());
        ok[2..6].copy_from_slice(&started(c).to_le_bytes());
        ok[6] = u8::from(light_here);
        send(c, local, 0, tag + 1, &ok)?;
        let mut verdict = [0u8; 7];
        recv(c, local, 0, tag + 2, &mut verdict)?;
        let light = verdict[6] == 1;
        if let Some(nb) = nb {
            let from = u32::from_le_bytes([verdict[2], verdict[3], verdict[4], verdict[5]]);
            nb.sm
                .set_nonblocking(lighten(nb_sm, light).filter(|_| verdict[1] == 1), from);
        }
        Ok(if verdict[0] == 1 {
            lighten(sm, light)
        } else {
            None
        })
    }
}

/// The number the next non-blocking collective of `c` takes (the count of those started
/// on this member), modulo the collective numbers' range.
fn started(c: &CommCore) -> u32 {
    c.nonblocking_started() & NO_MASK
}

/// The later of two collective numbers.
fn later(a: u32, b: u32) -> u32 {
    if no_ge(a, b) {
        a
    } else {
        b
    }
}
