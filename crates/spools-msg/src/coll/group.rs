//! The ranks taking part in a collective or in one of its phases ([`Group`]), and the
//! messages between members: the steps every algorithm is made of.

use std::cell::Cell;
use std::marker::PhantomData;

use super::sm::{coll_no, SmComm, Watch};
use crate::buffer::Buf;
use crate::comm_core::CommCore;
use crate::engine::SendStart;
use crate::error::MsgError;
use crate::op_guard::OpGuard;
use crate::status::{Source, Status, Tag};

/// A set of communicator ranks taking part in one phase of a collective, in order; `me`
/// is this rank's index in it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// On the stack up to 8 members: a small communicator's collectives through the
    /// messages allocate nothing for their groups.
    pub(crate) members: Members,
    pub(crate) me: usize,
}

/// The ranks of a [`Group`].
pub(crate) type Members = smallvec::SmallVec<[u32; 8]>;

impl Group {
    pub(crate) fn all(c: &CommCore) -> Group {
        Group {
            members: (0..c.size()).collect(),
            me: c.rank as usize,
        }
    }

    pub(crate) fn n(&self) -> usize {
        self.members.len()
    }

    /// The index in `self` (the host leaders of [`Group::hierarchy`]) of the leader of
    /// the host communicator rank `rank` runs on.
    pub(crate) fn leader_of(&self, hosts: &[u32], rank: u32) -> usize {
        let host_of = |m: u32| hosts.get(m as usize).copied().unwrap_or(0);
        let host = host_of(rank);
        self.members
            .iter()
            .position(|&m| host_of(m) == host)
            .unwrap_or(0)
    }

    /// The members on this rank's host, the leaders (first member of each host, in
    /// order of first appearance), and whether there is more than one host.
    pub(crate) fn hierarchy(&self, hosts: &[u32]) -> Option<(Group, Group)> {
        let host_of = |m: u32| hosts.get(m as usize).copied().unwrap_or(0);
        let my_host = host_of(self.members[self.me]);
        let mut leaders: Vec<u32> = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        for &m in &self.members {
            let h = host_of(m);
            if !seen.contains(&h) {
                seen.push(h);
                leaders.push(m);
            }
        }
        if seen.len() < 2 {
            return None;
        }
        let local: Members = self
            .members
            .iter()
            .copied()
            .filter(|&m| host_of(m) == my_host)
            .collect();
        let me_local = local
            .iter()
            .position(|&m| m == self.members[self.me])
            .unwrap_or(0);
        let me_leader = leaders
            .iter()
            .position(|&m| m == self.members[self.me])
            .unwrap_or(usize::MAX);
        Some((
            Group {
                members: local,
                me: me_local,
            },
            Group {
                members: leaders.into_iter().collect(),
                me: me_leader,
            },
        ))
    }
}

/// Sends `data` to member `to` of `g`. A rendezvous send to a member of this host, in a
/// collective this rank runs through the messages where the segment could have served
/// it, watches the segment while it waits, as receives do (see [`finish`]).
pub(crate) fn send(
    c: &CommCore,
    g: &Group,
    to: usize,
    tag: u32,
    data: &[u8],
) -> Result<(), MsgError> {
    send_during(c, g, to, tag, data, || {})
}

/// [`send`], running `during` once the send started (a rendezvous send's receiver may
/// then take the bytes while `during` runs), before it waits.
fn send_during(
    c: &CommCore,
    g: &Group,
    to: usize,
    tag: u32,
    data: &[u8],
    during: impl FnOnce(),
) -> Result<(), MsgError> {
    let Some((sm, w)) = watched(c, tag, g.members[to]) else {
        return c.send_bytes_during(c.coll_ctx(), g.members[to], tag, data, during);
    };
    let job = c.job_rank(g.members[to])?;
    // SAFETY: `data` stays borrowed until this function returns, and the guard below
    // removes the operation from the engine before that, whatever happens (as in
    // `CommCore::send_bytes`).
    let buf = unsafe { Buf::borrowed_ro(data) };
    match c.engine.start_send(job, c.coll_ctx(), tag, buf)? {
        SendStart::Complete(_) => {
            during();
            Ok(())
        }
        SendStart::Rendezvous(id) => {
            let guard = send_guard(c, tag, id);
            during();
            if let Err(e) = wait_watching(c, &guard, sm, &w) {
                sm.mark_failed(w.no, w.bytes, &e);
                return Err(e);
            }
            guard.wait()
        }
    }
}

/// The guard of rendezvous send `id` of collective step `tag`: dropped, it takes the send
/// out of the engine; its wait ends when a rank that finalised never starts the collective.
fn send_guard(c: &CommCore, tag: u32, id: u64) -> OpGuard<'_> {
    OpGuard {
        engine: &c.engine,
        id,
        recv: false,
        source: None,
        collective: Some((c.coll_ctx(), tag >> 8, &c.ranks)),
        finished: Cell::new(None),
        generation_at_start: None,
        _buf: PhantomData,
    }
}

/// Sends each of `sends` (a member of `g` and its bytes), every one started before any is
/// waited for, so that the receivers of rendezvous sends take their bytes at once (a
/// root's scatter) rather than one after another. Each wait watches the segment as
/// [`send`]'s does.
pub(crate) fn send_all(
    c: &CommCore,
    g: &Group,
    tag: u32,
    sends: &[(usize, &[u8])],
) -> Result<(), MsgError> {
    let mut started = Vec::with_capacity(sends.len());
    for &(to, data) in sends {
        let job = c.job_rank(g.members[to])?;
        // SAFETY: `data` stays borrowed until this function returns, and each guard
        // below removes its operation from the engine before that, whatever happens (as
        // in `CommCore::send_bytes`).
        let buf = unsafe { Buf::borrowed_ro(data) };
        if let SendStart::Rendezvous(id) = c.engine.start_send(job, c.coll_ctx(), tag, buf)? {
            started.push((to, send_guard(c, tag, id)));
        }
    }
    for (to, guard) in started {
        if let Some((sm, w)) = watched(c, tag, g.members[to]) {
            if let Err(e) = wait_watching(c, &guard, sm, &w) {
                sm.mark_failed(w.no, w.bytes, &e);
                return Err(e);
            }
        }
        guard.wait()?;
    }
    Ok(())
}

/// The segment and what to watch for when this rank runs collective `tag` through the
/// messages where the segment could have served it, in a step with `peer` (a
/// communicator rank): only a peer of this host may have taken the segment instead. (A
/// peer of another host that finds the ranks disagree goes on sending, see
/// [`Poisoned`].)
fn watched(c: &CommCore, tag: u32, peer: u32) -> Option<(&SmComm, Watch)> {
    let sm = c.sm.ready()?;
    let hosts = c.hosts.as_slice();
    let host = |r: u32| hosts.get(r as usize).copied();
    if host(peer) != host(c.rank) {
        return None;
    }
    sm.watch_for(coll_no(tag)).map(|w| (sm, w))
}

/// Receives exactly `buf.len()` bytes from member `from` of `g`.
pub(crate) fn recv(
    c: &CommCore,
    g: &Group,
    from: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    recv_polling(c, g, (from, tag), buf, false)
}

/// [`recv`] waiting with a whole progress round at every poll rather than mostly the
/// source's messages: a member of a root's scatter, whose root sends to every member at
/// once (its rendezvous requests then come in beside other members' traffic; 0.67x the
/// time at 64 KiB among 4 ranks on 2 cores).
pub(crate) fn recv_any_poll(
    c: &CommCore,
    g: &Group,
    from: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    recv_polling(c, g, (from, tag), buf, true)
}

/// [`recv`], polling every source at every poll (`whole_rounds`) or mostly `from`'s.
fn recv_polling(
    c: &CommCore,
    g: &Group,
    (from, tag): (usize, u32),
    buf: &mut [u8],
    whole_rounds: bool,
) -> Result<(), MsgError> {
    let want = buf.len();
    let mut guard = c.post_bytes(
        c.coll_ctx(),
        Source::Rank(g.members[from]),
        Tag::Is(tag as i32),
        buf,
    )?;
    if whole_rounds {
        guard.source = None;
    }
    let st = finish(c, guard, tag, g.members[from])?;
    expect_len(st.len, want, g.members[from])
}

/// Waits for a receive of a collective's step with tag `tag` from `peer` (a communicator
/// rank) and gives its status. When
/// this rank runs the collective through the messages where the communicator's segment
/// could have served it (see [`crate::coll::sm`]), the wait also watches the segment
/// for members that took it instead, while it waits (nothing is looked at before). A
/// message longer than the step's buffer is [`MsgError::Mismatch`]: the ranks disagree.
pub(crate) fn finish(
    c: &CommCore,
    g: OpGuard<'_>,
    tag: u32,
    peer: u32,
) -> Result<Status, MsgError> {
    if let Some((sm, w)) = watched(c, tag, peer) {
        if let Err(e) = wait_watching(c, &g, sm, &w) {
            sm.mark_failed(w.no, w.bytes, &e);
            return Err(e);
        }
    }
    match c.finish_bytes(g) {
        // More than the step's block arrived: the ranks disagree about the collective.
        Err(MsgError::Truncated {
            len,
            capacity,
            source_rank,
            ..
        }) => Err(MsgError::Mismatch {
            op: "collective",
            from: Some(source_rank),
            got: len,
            want: capacity,
        }),
        r => r,
    }
}

/// Waits like the guard's own wait until the operation completes, or until a member
/// of the segment `sm` shows that it took the segment for collective `w`
/// ([`super::sm::SmComm::split_on_messages`]: that error), or until the guard's own wait
/// would give up (it then reports why).
fn wait_watching(c: &CommCore, g: &OpGuard<'_>, sm: &SmComm, w: &Watch) -> Result<(), MsgError> {
    let mut seen = g.generation_at_start;
    let mut split = None;
    let state = c.engine.worker.bootstrap().state();
    c.engine.worker.wait_for_or(
        || {
            let gen = c.engine.generation();
            if seen == Some(gen) {
                return false;
            }
            seen = Some(gen);
            g.is_complete()
        },
        || {
            split = sm.split_on_messages(w);
            split.is_some()
                || g.collective
                    .is_some_and(|(ctx, k, m)| state.collective_blocker(ctx, k, m).is_some())
                || (g.recv && state.any_finalizing() && c.engine.orphaned_recv(g.id).is_some())
        },
    )?;
    split.map_or(Ok(()), Err)
}

/// [`finish`] a receive of collective `op` from member `peer` that must bring exactly
/// `want` bytes: [`MsgError::Mismatch`] naming `op` otherwise.
pub(crate) fn finish_exact(
    c: &CommCore,
    g: OpGuard<'_>,
    (tag, peer): (u32, u32),
    want: usize,
    op: &'static str,
) -> Result<(), MsgError> {
    let st = finish(c, g, tag, peer)?;
    if st.len != want {
        return Err(MsgError::Mismatch {
            op,
            from: Some(st.source),
            got: st.len,
            want,
        });
    }
    Ok(())
}

fn expect_len(got: usize, want: usize, from: u32) -> Result<(), MsgError> {
    if got != want {
        return Err(MsgError::Mismatch {
            op: "collective",
            from: Some(from),
            got,
            want,
        });
    }
    Ok(())
}

/// The first disagreement a member's steps found, if any: a member that finds one keeps
/// its part of the collective, sending empty blocks in its remaining steps, so that the
/// members it sends to fail too instead of waiting for a block that never comes.
#[derive(Default)]
pub(crate) struct Poisoned(Option<MsgError>);

impl Poisoned {
    /// What this member sends in a step: `block`, or nothing once it failed.
    pub(crate) fn send<'a>(&self, block: &'a [u8]) -> &'a [u8] {
        if self.0.is_some() {
            &[]
        } else {
            block
        }
    }

    /// Keeps a step's disagreement (the first one) and goes on; any other error (a dead
    /// rank, which fails every member already) ends the member's part.
    pub(crate) fn step(&mut self, r: Result<(), MsgError>) -> Result<bool, MsgError> {
        match r {
            Ok(()) => Ok(self.0.is_none()),
            Err(e) if disagreement(&e) => {
                self.0.get_or_insert(e);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether a step found the ranks disagree.
    pub(crate) fn failed(&self) -> bool {
        self.0.is_some()
    }

    /// The first disagreement, once every step ran.
    pub(crate) fn end(self) -> Result<(), MsgError> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Whether an error means the ranks disagree about a collective's arguments.
pub(crate) fn disagreement(e: &MsgError) -> bool {
    matches!(e, MsgError::Mismatch { .. } | MsgError::Truncated { .. })
}

/// The tags of collective `tag` (its base tag): the low 8 bits are its steps'.
pub(crate) fn coll_tags(tag: u32) -> std::ops::Range<u32> {
    let base = tag & !0xff;
    base..base.saturating_add(0x100)
}

/// The end of blocking collective `tag` on this rank: when it failed because the ranks
/// disagree, this rank leaves it, and nobody here will receive its messages any more:
/// those that come are dropped, and a rank still sending one in a rendezvous is told to
/// discard it instead of waiting forever (ranks that chose another algorithm for their
/// length send what this rank never receives).
pub(crate) fn left<R>(c: &CommCore, tag: u32, r: Result<R, MsgError>) -> Result<R, MsgError> {
    if let Err(e) = &r {
        if disagreement(e) {
            c.engine.drain(c.coll_ctx(), coll_tags(tag));
        }
    }
    r
}

impl crate::communicator::Communicator {
    /// Runs one blocking collective: `f` with the collective's base tag, then
    /// [`left`] with its outcome.
    pub(crate) fn collective<R>(
        &self,
        f: impl FnOnce(u32) -> Result<R, MsgError>,
    ) -> Result<R, MsgError> {
        let tag = self.core.next_coll_tag();
        left(&self.core, tag, f(tag))
    }
}

/// Sends `data` to member `to` while receiving `buf` from member `from`.
pub(crate) fn exchange(
    c: &CommCore,
    g: &Group,
    to: usize,
    from: usize,
    tag: u32,
    data: &[u8],
    buf: &mut [u8],
) -> Result<(), MsgError> {
    exchange_during(c, g, (to, from), tag, (data, buf), || {})
}

/// [`exchange`], running `during` (local work, such as a collective's copy of this
/// rank's own block) once the receive is posted and the send started: with a peer that
/// takes the bytes itself (single copy), both sides' copies overlap.
pub(crate) fn exchange_during(
    c: &CommCore,
    g: &Group,
    (to, from): (usize, usize),
    tag: u32,
    (data, buf): (&[u8], &mut [u8]),
    during: impl FnOnce(),
) -> Result<(), MsgError> {
    let want = buf.len();
    let guard = c.post_bytes(
        c.coll_ctx(),
        Source::Rank(g.members[from]),
        Tag::Is(tag as i32),
        buf,
    )?;
    send_during(c, g, to, tag, data, during)?;
    let st = finish(c, guard, tag, g.members[from])?;
    expect_len(st.len, want, g.members[from])
}
