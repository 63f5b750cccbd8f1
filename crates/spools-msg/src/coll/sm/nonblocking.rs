//! Non-blocking collectives through the segment: one `Poll` step of a schedule
//! ([`crate::coll::schedule`]) that owns the collective's state between polls.
//!
//! Only a segment set up already serves them (setting one up is a handshake between
//! the local members, which a non-blocking call must not wait for), and only on a
//! communicator within one host (across hosts the phases between hosts are messages).
//! Every rank decides alike: a segment is set up by a blocking collective, which every
//! rank has finished before its next call.

use std::sync::Arc;

use super::coll::{fits, may, FLAT_MAX};
use super::kind::Kind;
use super::machine::{SmColl, SmState};
use super::{coll_no, SmComm, Watch};
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The segment a non-blocking collective could go through, if any (one set
/// up already, over the whole communicator).
pub(crate) fn ready_for(c: &CommCore) -> Option<&SmComm> {
    if !may(c) {
        return None;
    }
    let sm = c.sm.ready()?;
    (sm.n() == c.size() as usize).then_some(sm)
}

/// How a non-blocking collective goes: through the segment (its step and what its wait
/// watches for), or through the messages, where the segment could have served it but
/// for its length (what its wait watches for: ranks that took the segment instead), or
/// could not.
pub(crate) enum Path<F> {
    Segment(F, Watch),
    Messages(Option<Watch>),
}

/// The step of collective `kind` number `tag >> 8` (around communicator rank `root`)
/// over slot 0 of its schedule (a scatter's root publishes slot 1, every member's part),
/// with the next sequence number of `core`'s segment, taken now: the collective's place
/// in the communicator's order is the call's. `bytes`: the collective's bytes here (of a
/// scatter, every member's part).
pub(crate) fn step<T: Element>(
    core: &Arc<CommCore>,
    tag: u32,
    bytes: usize,
    kind: Kind,
    root: usize,
    op: Option<Op<T>>,
) -> Path<impl FnMut(&mut [Vec<T>]) -> Result<bool, MsgError> + Send + 'static> {
    let Some(sm) = ready_for(core) else {
        return Path::Messages(None);
    };
    if !fits(core, bytes) {
        return Path::Messages(Some(sm.enter_messages(kind, tag, bytes)));
    }
    let flat = matches!(kind, Kind::Barrier | Kind::Allreduce) && sm.n() <= FLAT_MAX;
    let state = SmState::new(sm, sm.take_seq(), coll_no(tag), kind, root, flat);
    let watch = state.watch(bytes);
    let mut state = Some(state);
    let core = core.clone();
    Path::Segment(
        move |slots: &mut [Vec<T>]| {
            let (Some(sm), Some(st)) = (core.sm.ready(), state.take()) else {
                return Err(MsgError::Protocol {
                    peer: core.rank,
                    what: "shared-memory collective polled after it ended",
                });
            };
            let (first, rest) = slots.split_at_mut(slots.len().min(1));
            let buf = match first.first_mut() {
                Some(v) => v.as_mut_slice(),
                None => &mut [],
            };
            let mut m = SmColl::resume(sm, buf, op.as_ref(), st);
            if let (Kind::Scatter, true, Some(whole)) =
                (kind, core.rank as usize == root, rest.first())
            {
                m = m.scatters(whole);
            }
            let r = m.poll_through();
            state = Some(m.into_state());
            r
        },
        watch,
    )
}
