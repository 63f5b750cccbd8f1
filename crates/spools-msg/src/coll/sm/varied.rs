//! Gatherv, scatterv and alltoallv through the segment, whose ranks know only their own
//! counts and so cannot choose a path from lengths that all of them see. Every member of
//! a communicator within one host takes the segment whatever its counts, and what a writer
//! posts says where its data lies: data that fits a slot ([`SmComm::slot`] bytes) rides
//! there; a post (or a scatterv root's publication) whose data does not fit says so and the
//! data goes by messages on the collective's tag, which its readers then receive.
//!
//! - gatherv: a contributor posts its part in its deep ring, as a gather's does (done once
//!   posted), or only its length when the part exceeds a slot, and then sends the part;
//!   the root reads the parts that fit and receives the others, by the posted lengths.
//! - scatterv: the root publishes a package (`table.rs`: where each member's block lies,
//!   then the blocks) as a scatter's root publishes every part, or a package that says the
//!   blocks go by messages, and then sends them; each member finds its block.
//! - alltoallv: every member posts a package of its blocks, or, when that exceeds a slot,
//!   only the package's length, and reads its block from every member's, flat, as
//!   alltoall's members do; then each member posts its receives of the blocks that went
//!   by messages, and then, if its own did, sends them.
//!
//! What goes by messages is decided by the whole post: a gatherv's part, a scatterv root's
//! package (a table of `4 (n + 1)` bytes and every block), an alltoallv member's package,
//! against the slot (`coll_sm_limit` rounded up to 64 bytes). A length that disagrees with
//! the reader's count fails with [`MsgError::Mismatch`] where it is read (a gatherv's root,
//! a scatterv's member, an alltoallv's receiver); a rank that fails so leaves the
//! collective (`group::left`), which drops the messages still coming for it and releases
//! their senders, so none waits for a receive that never comes. Within one host only
//! (across hosts: the messages).

use super::coll::place;
use super::gather::{drive_flat, Flat};
use super::kind::Kind;
use super::machine::SmColl;
use super::{clamp_len, coll_no, SmComm};
use crate::coll::args::displs;
use crate::coll::group::{finish, recv_any_poll, send, send_all, Group};
use crate::comm_core::CommCore;
use crate::error::MsgError;
use crate::status::{Source, Tag};

use std::cell::Cell;
use std::sync::atomic::Ordering;

use spools_coll::table::{by_messages, locate, pack_into, table_bytes, Block};

/// Gatherv of bytes to communicator rank `root` within one host: `mine` is this rank's
/// part; at the root, `counts[r]` bytes of rank r's part land one after the other in
/// `out` (elsewhere `counts` is not read). `Ok(false)` when the segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] (at the root) when a member's part has another length, a dead
/// rank.
pub(crate) fn gatherv(
    c: &CommCore,
    root: usize,
    tag: u32,
    mine: &[u8],
    (out, counts): (&mut [u8], &[usize]),
) -> Result<bool, MsgError> {
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Gather, 0), false)? else {
        return Ok(false);
    };
    let (me, cap) = (c.rank as usize, sm.slot);
    let fits = mine.len() <= cap;
    let mut f = Flat::new(sm, tag, Kind::Gather, Some(root)).named("gatherv");
    if !fits {
        f = f.by_messages(mine.len());
    }
    let part = if fits { mine } else { &[] };
    if me != root {
        drive_flat(c, sm, tag, &mut f, part, |_| 0, |_, _, _| {})?;
        if !fits {
            send(c, &Group::all(c), root, tag, mine)?;
        }
        return Ok(true);
    }
    let d = displs(counts);
    out[d[me]..d[me] + mine.len()].copy_from_slice(mine);
    let members = &sm.members;
    let mut late = Vec::new();
    let r = drive_flat(
        c,
        sm,
        tag,
        &mut f,
        part,
        // A length past 32 bits reads as the largest (`clamp_len`) in a post; the
        // message then carries, and its receive checks, the whole length.
        |m| clamp_len(counts[members[m] as usize]) as usize,
        |sm, m, seq| {
            let r = members[m] as usize;
            if read_part(sm, (m, seq), &mut out[d[r]..d[r] + counts[r]]) == Found::Late {
                late.push(r);
            }
        },
    );
    // On a disagreement the parts announced are not taken here: this rank leaves the
    // collective (`group::left`), which drops them and releases their senders.
    r?;
    if !late.is_empty() {
        let g = Group::all(c);
        for r in late {
            recv_any_poll(c, &g, r, tag, &mut out[d[r]..d[r] + counts[r]])?;
        }
    }
    Ok(true)
}

/// Scatterv of bytes from communicator rank `root` within one host: at the root, `send`
/// holds `counts[r]` bytes for rank r one after the other (elsewhere neither is read);
/// `recv` gets this rank's. `Ok(false)` when the segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] (at a member) when its block has another length, a dead rank.
pub(crate) fn scatterv(
    c: &CommCore,
    root: usize,
    tag: u32,
    (send, counts): (&[u8], &[usize]),
    recv: &mut [u8],
) -> Result<bool, MsgError> {
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Scatter, 0), false)? else {
        return Ok(false);
    };
    let me = c.rank as usize;
    let mut package = Scratch::take();
    let packed = me == root && pack_into(&mut package.0, send, counts, sm.slot);
    let marker = by_messages();
    let (seq, no) = (sm.take_seq(), coll_no(tag));
    let mut m = SmColl::scatterv(sm, seq, no, root, recv);
    if me == root {
        let at: usize = counts[..me].iter().sum();
        m.buf().copy_from_slice(&send[at..at + counts[me]]);
        m = m.scatters(if packed { &package.0 } else { &marker });
    }
    let w = m.watch();
    if let Err(e) = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || m.poll_through()) {
        m.abandon();
        return Err(e);
    }
    if me == root && !packed {
        let g = Group::all(c);
        let d = displs(counts);
        let sends: Vec<(usize, &[u8])> = (0..g.n())
            .filter(|&r| r != me)
            .map(|r| (r, &send[d[r]..d[r] + counts[r]]))
            .collect();
        send_all(c, &g, tag, &sends)?;
    } else if m.by_messages() {
        drop(m);
        recv_any_poll(c, &Group::all(c), root, tag, recv)?;
    }
    Ok(true)
}

/// Alltoallv of bytes within one host: `send` holds `send_counts[j]` bytes for rank j one
/// after the other, `recv` gets `recv_counts[i]` bytes from rank i one after the other
/// (this rank's own block, which the caller checked, included). `Ok(false)` when the
/// segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] when a block has another length than its receiver's count (at
/// that receiver), a dead rank.
pub(crate) fn alltoallv(
    c: &CommCore,
    tag: u32,
    (send, send_counts): (&[u8], &[usize]),
    (recv, recv_counts): (&mut [u8], &[usize]),
) -> Result<bool, MsgError> {
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Alltoall, 0), false)? else {
        return Ok(false);
    };
    let (me, n) = (c.rank as usize, sm.n());
    let rd = displs(recv_counts);
    let own: usize = send_counts[..me].iter().sum();
    recv[rd[me]..rd[me] + recv_counts[me]].copy_from_slice(&send[own..own + send_counts[me]]);
    let mut package = Scratch::take();
    let packed = pack_into(&mut package.0, send, send_counts, sm.slot);
    let mut f = Flat::new(sm, tag, Kind::Alltoall, None).named("alltoallv");
    if !packed {
        f = f.by_messages(table_bytes(n) + send.len());
    }
    let seq = f.seq();
    let members = &sm.members;
    // Senders whose blocks come by messages, and the first block of another length.
    let mut late = Vec::new();
    let mut disagree = None;
    drive_flat(
        c,
        sm,
        tag,
        &mut f,
        &package.0,
        |m| package_len(sm, m, seq),
        |sm, m, seq| {
            let r = members[m] as usize;
            match read_block(sm, (m, seq), me, &mut recv[rd[r]..rd[r] + recv_counts[r]]) {
                Found::Read => {}
                Found::Late => late.push(r),
                Found::Differs(len) => {
                    disagree.get_or_insert((r, len));
                }
            }
        },
    )?;
    if late.is_empty() && packed {
        return match disagree {
            Some((r, got)) => Err(block_mismatch(r, got, recv_counts[r])),
            None => Ok(true),
        };
    }
    // Every member saw every post: this member posts its receives of the blocks that go
    // by messages before it sends its own (if they go so), so that two such members
    // never wait for each other.
    let g = Group::all(c);
    let mut guards = Vec::with_capacity(late.len());
    let mut blocks: Vec<&mut [u8]> = Vec::with_capacity(late.len());
    let mut rest = &mut recv[..];
    let mut at = 0;
    for &r in &late {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(rd[r] - at);
        let (b, tail) = tail.split_at_mut(recv_counts[r]);
        (rest, at) = (tail, rd[r] + recv_counts[r]);
        blocks.push(b);
    }
    for (b, &r) in blocks.into_iter().zip(&late) {
        let from = Source::Rank(members[r]);
        guards.push((c.post_bytes(c.coll_ctx(), from, Tag::Is(tag as i32), b)?, r));
    }
    if !packed {
        let sd = displs(send_counts);
        let sends: Vec<(usize, &[u8])> = (0..n)
            .filter(|&j| j != me)
            .map(|j| (j, &send[sd[j]..sd[j] + send_counts[j]]))
            .collect();
        send_all(c, &g, tag, &sends)?;
    }
    // Every receive is waited for, whatever came before: a sender waits for each.
    let mut failed = None;
    for (guard, r) in guards {
        match finish(c, guard, tag, members[r]) {
            Ok(st) if st.len != recv_counts[r] => {
                disagree.get_or_insert((r, st.len));
            }
            Ok(_) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    match disagree {
        Some((r, got)) => Err(block_mismatch(r, got, recv_counts[r])),
        None => Ok(true),
    }
}

/// What a reader found of its block in a member's post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Read into place.
    Read,
    /// It comes by messages.
    Late,
    /// It has another length (its bytes; 0 for a package that cannot be read).
    Differs(usize),
}

/// A gatherv root's read of member `m`'s part of collective `seq` into `dst` (as long as
/// the root's count for it, which the post's length matched): from the deep ring, or
/// [`Found::Late`] when a part of that length does not fit a slot.
pub(super) fn read_part(sm: &SmComm, (m, seq): (usize, u32), dst: &mut [u8]) -> Found {
    if dst.len() > sm.slot {
        return Found::Late;
    }
    sm.read_post(m, seq, true, dst);
    Found::Read
}

/// The length of member `m`'s alltoallv package of collective `seq` (or of its data, when
/// it goes by messages): the writer's to say, so every reader's expectation of it.
pub(super) fn package_len(sm: &SmComm, m: usize, seq: u32) -> usize {
    sm.post_len(m, seq, false).load(Ordering::Relaxed) as usize
}

/// An alltoallv member `me`'s read of its block from member `m`'s package of collective
/// `seq` into `dst` (as long as this member's count for it).
pub(super) fn read_block(sm: &SmComm, (m, seq): (usize, u32), me: usize, dst: &mut [u8]) -> Found {
    let total = package_len(sm, m, seq);
    let block = if total > sm.slot {
        Block::ByMessages
    } else {
        locate(total, sm.n(), me, |at, to| {
            sm.read_part(m, seq, total, at, to)
        })
    };
    match block {
        Block::ByMessages => Found::Late,
        Block::At { at, len } if len == dst.len() => {
            sm.read_part(m, seq, total, at, dst);
            Found::Read
        }
        Block::At { len, .. } => Found::Differs(len),
        Block::Bad => Found::Differs(0),
    }
}

/// An alltoallv's block of `got` bytes from rank `r` where this rank's count says `want`.
pub(super) fn block_mismatch(r: usize, got: usize, want: usize) -> MsgError {
    MsgError::Mismatch {
        op: "alltoallv",
        from: Some(r as u32),
        got,
        want,
    }
}

thread_local! {
    /// The package a member builds, kept between calls.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A buffer to pack into, this thread's kept one (no allocation per call once it grew),
/// given back when dropped.
struct Scratch(Vec<u8>);

impl Scratch {
    fn take() -> Scratch {
        Scratch(SCRATCH.take())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        SCRATCH.set(std::mem::take(&mut self.0));
    }
}
