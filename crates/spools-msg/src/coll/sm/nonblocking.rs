//! Non-blocking collectives through the segment: one `Poll` step of a schedule
//! ([`crate::coll::schedule`]) that owns the collective's state between polls.
//!
//! Only a segment set up already serves them (setting one up is a handshake between
//! the local members, which a non-blocking call must not wait for), and only on a
//! communicator within one host (across hosts the phases between hosts are messages).
//! Every rank decides alike: a segment is set up by a blocking collective, which every
//! rank has finished before its next call.

use std::sync::Arc;

use super::coll::{may, FLAT_MAX};
use super::machine::{Kind, SmColl, SmState};
use super::SmComm;
use crate::comm_core::CommCore;
use crate::element::{Element, Op};
use crate::error::MsgError;

/// The segment a non-blocking collective of `bytes` goes through, if any.
pub(crate) fn ready_for(c: &CommCore, bytes: usize, kind: Kind) -> Option<&SmComm> {
    if !may(c, bytes, kind) {
        return None;
    }
    let sm = c.sm.ready()?;
    (sm.n() == c.size() as usize).then_some(sm)
}

/// The step of collective `kind` (around communicator rank `root`) over slot 0 of its
/// schedule, with the next sequence number of `core`'s segment, taken now: the
/// collective's place in the communicator's order is the call's.
///
/// Returns `None` when no segment serves (see [`ready_for`]).
pub(crate) fn step<T: Element>(
    core: &Arc<CommCore>,
    bytes: usize,
    kind: Kind,
    root: usize,
    op: Option<Op<T>>,
) -> Option<impl FnMut(&mut [Vec<T>]) -> Result<bool, MsgError> + Send + 'static> {
    let sm = ready_for(core, bytes, kind)?;
    let flat = matches!(kind, Kind::Barrier | Kind::Allreduce) && sm.n() <= FLAT_MAX;
    let mut state = Some(SmState::new(sm, sm.take_seq(), kind, root, flat));
    let core = core.clone();
    Some(move |slots: &mut [Vec<T>]| {
        let (Some(sm), Some(st)) = (core.sm.ready(), state.take()) else {
            return Err(MsgError::Protocol {
                peer: core.rank,
                what: "shared-memory collective polled after it ended",
            });
        };
        let buf = match slots.first_mut() {
            Some(v) => v.as_mut_slice(),
            None => &mut [],
        };
        let mut m = SmColl::resume(sm, buf, op.as_ref(), st);
        let r = m.poll_through();
        state = Some(m.into_state());
        r
    })
}
