//! Allgather(v), alltoall and gather through the segment, flat: every member writes its
//! part (for an alltoall, all its blocks) into its data slot and posts it; every member
//! (of a gather, the root alone) reads what it needs from every member's slot once they
//! posted. One step and no root: a member loads the others' lines at once, so their
//! transfers overlap, and nobody waits for a publication; a gather's contributors are
//! done once posted, as a reduce's are. Reduce-scatters are flat too (`fold.rs`); scans
//! are a chain (`chain.rs`). Only within one host (across hosts: the messages).

use std::sync::atomic::Ordering;

use super::coll::place;
use super::kind::Kind;
use super::{clamp_len, coll_no, halves, post_record, seq_ge, Readers, SmComm, Watch};
use crate::coll::args::with_per_rank;
use crate::comm_core::CommCore;
use crate::error::MsgError;

/// One flat collective on one member (its state: the segment comes with each poll).
pub(super) struct Flat {
    seq: u32,
    no: u32,
    kind: Kind,
    /// The member that reads the parts (a gather's root); `None`: every member.
    root: Option<usize>,
    posted: bool,
    done: bool,
    /// The next member to read.
    next: usize,
    /// A member whose part differs from what this member expects: (member, its bytes).
    disagree: Option<(usize, usize)>,
    /// The length this member's post gives when its data goes by messages instead (see
    /// [`Flat::by_messages`]).
    claim: Option<usize>,
    /// The call its errors name (its kind's, or a v collective's: [`Flat::named`]).
    name: &'static str,
}

impl Flat {
    /// Collective `kind` with base tag `tag` on `sm`, read by `root` alone (a gather's)
    /// or by every member (`None`): takes its sequence number.
    pub(super) fn new(sm: &SmComm, tag: u32, kind: Kind, root: Option<usize>) -> Flat {
        Flat {
            seq: sm.take_seq(),
            no: coll_no(tag),
            kind,
            root,
            posted: false,
            done: false,
            next: 0,
            disagree: None,
            claim: None,
            name: kind.name(),
        }
    }

    /// Makes its errors name `name` (a v collective on its kind's machine).
    pub(super) fn named(mut self, name: &'static str) -> Flat {
        self.name = name;
        self
    }

    /// Makes this member's post say `len` bytes without data (its part does not fit the
    /// slot and goes by messages on the collective's tag): its readers see the length,
    /// and take the part from the messages (`varied.rs`).
    pub(super) fn by_messages(mut self, len: usize) -> Flat {
        self.claim = Some(len);
        self
    }

    /// Its sequence number.
    pub(super) fn seq(&self) -> u32 {
        self.seq
    }

    /// Its kind.
    pub(super) fn kind(&self) -> Kind {
        self.kind
    }

    /// What its waits watch for, with a part of `bytes` here (or the length its post
    /// claims: [`Flat::by_messages`]).
    pub(super) fn watch(&self, bytes: usize) -> Watch {
        let bytes = self.claim.unwrap_or(bytes);
        Watch {
            op: self.name,
            ..Watch::posting(self.seq, self.no, self.kind, bytes)
        }
    }

    /// The length its post gives: `part`'s, or the one it claims ([`Flat::by_messages`]).
    pub(super) fn claimed(&self, part: usize) -> usize {
        self.claim.unwrap_or(part)
    }

    /// Posts `part` (once), then takes each member's part in rank order as it arrives
    /// (`take(segment, member, sequence number)`, never this member's own), checking its
    /// length against `want(member)`. `Ok(true)` once every member's part was seen, or
    /// for a member that reads nothing (not a gather's root) once posted.
    pub(super) fn poll(
        &mut self,
        sm: &SmComm,
        part: &[u8],
        want: impl Fn(usize) -> usize,
        mut take: impl FnMut(&SmComm, usize, u32),
    ) -> Result<bool, MsgError> {
        let deep = self.kind.deep();
        if !self.posted {
            if !sm.may_post(self.seq) || !sm.part_free(self.seq, part.len(), deep) {
                return Ok(false);
            }
            let readers = match self.root {
                None => Readers::Everyone,
                Some(r) if r == sm.me => Readers::Nobody,
                Some(r) => Readers::Member(r),
            };
            let len = self.claim.unwrap_or(part.len());
            sm.put_part(self.seq, part, readers, deep, clamp_len(len));
            sm.post(self.seq, self.no);
            self.posted = true;
            if self.root.is_some_and(|r| r != sm.me) {
                // A contributor: its slot is reused only once the root posted a later
                // collective, after reading it.
                self.done = true;
                sm.finished(self.seq);
                return Ok(true);
            }
        }
        if sm.n() - self.next > 2 {
            for m in self.next..sm.n() {
                std::hint::black_box(sm.posted(m).load(Ordering::Relaxed));
            }
        }
        while self.next < sm.n() {
            let m = self.next;
            let (posted, rec) = halves(sm.posted(m).load(Ordering::Acquire));
            if !seq_ge(posted, self.seq) {
                return Ok(false);
            }
            if self.disagree.is_none() {
                let len = sm.post_len(m, self.seq, deep).load(Ordering::Relaxed) as usize;
                // A post of this sequence number for another collective, or a part of
                // another length: the ranks disagree.
                if (posted == self.seq && rec != post_record(self.seq, self.no)) || len != want(m) {
                    self.disagree = Some((m, len));
                } else if m != sm.me {
                    take(sm, m, self.seq);
                }
            }
            self.next += 1;
        }
        self.done = true;
        sm.finished(self.seq);
        sm.saw_all_posted(self.seq);
        match self.disagree {
            Some((m, got)) => Err(sm.mismatch(self.name, m, got, want(m))),
            None => Ok(true),
        }
    }

    /// Ends the collective on this member after an error found while waiting.
    pub(super) fn abandon(&mut self, sm: &SmComm) {
        if !self.done && (self.posted || sm.may_post(self.seq)) {
            sm.finished(self.seq);
        }
        self.done = true;
    }
}

/// Runs a flat collective to its end through the segment's wait; on an error, ends it here
/// and, where the ranks disagree, marks it failed for the members still waiting.
pub(super) fn run(
    c: &CommCore,
    sm: &SmComm,
    tag: u32,
    (kind, root): (Kind, Option<usize>),
    part: &[u8],
    want: impl Fn(usize) -> usize,
    take: impl FnMut(&SmComm, usize, u32),
) -> Result<(), MsgError> {
    drive_flat(
        c,
        sm,
        tag,
        &mut Flat::new(sm, tag, kind, root),
        part,
        want,
        take,
    )
}

/// [`run`] with the collective `f` (made by [`Flat::new`], perhaps changed since); `f`
/// stays the caller's to look at afterwards.
pub(super) fn drive_flat(
    c: &CommCore,
    sm: &SmComm,
    tag: u32,
    f: &mut Flat,
    part: &[u8],
    want: impl Fn(usize) -> usize,
    mut take: impl FnMut(&SmComm, usize, u32),
) -> Result<(), MsgError> {
    let w = f.watch(part.len());
    let r = sm.drive((c.coll_ctx(), &c.ranks), tag, w, || {
        f.poll(sm, part, &want, &mut take)
    });
    if let Err(e) = &r {
        f.abandon(sm);
        if matches!(e, MsgError::Mismatch { .. }) {
            sm.mark_failed(f.no, f.claimed(part.len()), e);
        }
    }
    r
}

/// Allgatherv of bytes through the segment: `mine` is this member's part (not read from
/// `out`, nor written there: the caller puts it in its place); `counts[r]` is rank r's part in elements of `size` bytes (the same on
/// every rank). `Ok(false)` when the segment does not serve it (the caller runs the
/// messages).
///
/// # Errors
/// [`MsgError::Mismatch`] when a member's part has another length, a dead rank.
pub(crate) fn allgatherv(
    c: &CommCore,
    tag: u32,
    mine: &[u8],
    out: &mut [u8],
    counts: &[usize],
    size: usize,
) -> Result<bool, MsgError> {
    let largest = counts.iter().copied().max().unwrap_or(0) * size;
    // Never across hosts (the flat read spans every member).
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Allgather, largest), false)? else {
        return Ok(false);
    };
    let ranks = counts.len();
    let counts = |r: usize| counts[r] * size;
    let members = &sm.members;
    // Where each rank's part starts, without allocating (a file's collective access makes
    // one allgather of fixed records).
    with_per_rank(ranks, |displs| {
        let mut at = 0;
        for (r, d) in displs.iter_mut().enumerate() {
            *d = at;
            at += counts(r);
        }
        run(
            c,
            sm,
            tag,
            (Kind::Allgather, None),
            mine,
            |m: usize| counts(members[m] as usize),
            |sm, m, seq| {
                let r = members[m] as usize;
                sm.read_data(m, seq, &mut out[displs[r]..displs[r] + counts(r)]);
            },
        )
    })?;
    Ok(true)
}

/// Alltoall of bytes through the segment: `send` holds one block per rank (the same
/// length on every rank, and the same on every rank), `recv` gets rank r's block for
/// this rank as block r. `Ok(false)` when the segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] when a member's blocks have another length, a dead rank.
pub(crate) fn alltoall(
    c: &CommCore,
    tag: u32,
    send: &[u8],
    recv: &mut [u8],
) -> Result<bool, MsgError> {
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Alltoall, send.len()), false)? else {
        return Ok(false);
    };
    let n = c.size() as usize;
    let block = send.len() / n.max(1);
    let me = c.rank as usize;
    recv[me * block..(me + 1) * block].copy_from_slice(&send[me * block..(me + 1) * block]);
    let members = &sm.members;
    let total = send.len();
    run(
        c,
        sm,
        tag,
        (Kind::Alltoall, None),
        send,
        |_| total,
        |sm, m, seq| {
            let r = members[m] as usize;
            sm.read_part(
                m,
                seq,
                total,
                me * block,
                &mut recv[r * block..(r + 1) * block],
            );
        },
    )?;
    Ok(true)
}

/// Gather of bytes to communicator rank `root` within one host (across hosts: the
/// messages): `mine` is this rank's part (the same length on every rank); at the root,
/// `out` gets rank r's part as part r. `Ok(false)` when the segment does not serve it.
///
/// # Errors
/// [`MsgError::Mismatch`] (at the root) when a member's part has another length, a dead
/// rank.
pub(crate) fn gather(
    c: &CommCore,
    root: usize,
    tag: u32,
    mine: &[u8],
    out: &mut [u8],
) -> Result<bool, MsgError> {
    let Some((sm, _)) = place(c, &c.hosts, tag, (Kind::Gather, mine.len()), false)? else {
        return Ok(false);
    };
    let part = mine.len();
    let me = c.rank as usize;
    if me == root {
        out[me * part..(me + 1) * part].copy_from_slice(mine);
    }
    // One host: the members are the communicator's ranks.
    let members = &sm.members;
    let kind = (Kind::Gather, Some(root));
    run(
        c,
        sm,
        tag,
        kind,
        mine,
        |_| part,
        |sm, m, seq| {
            let r = members[m] as usize;
            sm.read_post(
                m,
                seq,
                Kind::Gather.deep(),
                &mut out[r * part..(r + 1) * part],
            );
        },
    )?;
    Ok(true)
}

/// What a flat step does with each member's part as it arrives, and at its end.
pub(crate) trait Taker<T>: Send + 'static {
    /// Takes member `m`'s part of collective `seq` (`at`: the two; `part` bytes, posted)
    /// into `out`, this member's result; never called for this member's own part.
    fn take(&mut self, sm: &SmComm, at: (usize, u32), part: usize, out: &mut [T]);
    /// Once every part this member needs was taken.
    fn end(&mut self, out: &mut [T]) {
        let _ = out;
    }
}
