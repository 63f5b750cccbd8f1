//! Collectives over the communicator's collective context. Each call takes a base tag
//! from the communicator's call counter (every rank calls collectives in the same order,
//! so the tags agree) and uses its low 8 bits for its steps; messages of one step between
//! two ranks match in order.
//!
//! Algorithms (chosen by size, rank count and op):
//! - barrier: dissemination;
//! - broadcast: binomial tree up to 16 KiB, pipelined chain in chunks beyond;
//! - reduce: binomial tree (in rank order for non-commutative operators);
//! - allreduce: recursive doubling (any rank count, order-preserving) up to 64 KiB or
//!   fewer elements than ranks, ring reduce-scatter plus ring allgather beyond;
//! - gather and scatter: direct; allgather: ring; alltoall: all at once up to 256 B per
//!   pair, pairwise exchange beyond; reduce-scatter: ring; scan: recursive doubling.
//!
//! When a communicator spans several hosts, barrier, broadcast and allreduce (with a
//! commutative operator) go in three phases: within each host to a leader, between the
//! leaders, and back within each host, so each host's data crosses the network once (the
//! StarT-X broadcast lesson).

mod barrier;
mod bcast;
mod gather;
mod nonblocking;
mod reduce;

pub use nonblocking::CollRequest;

use crate::communicator::{Inner, Source, Tag};
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::MsgError;

/// A set of communicator ranks taking part in one phase of a collective, in order; `me`
/// is this rank's index in it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) members: Vec<u32>,
    pub(crate) me: usize,
}

impl Group {
    pub(crate) fn all(c: &Inner) -> Group {
        Group {
            members: (0..c.size()).collect(),
            me: c.rank as usize,
        }
    }

    pub(crate) fn n(&self) -> usize {
        self.members.len()
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
        let local: Vec<u32> = self
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
                members: leaders,
                me: me_leader,
            },
        ))
    }
}

/// The collective context of a communicator.
pub(crate) fn cctx(c: &Inner) -> u32 {
    c.ctx + 1
}

/// Sends `data` to member `to` of `g`.
pub(crate) fn send(c: &Inner, g: &Group, to: usize, tag: u32, data: &[u8]) -> Result<(), MsgError> {
    c.send_bytes(cctx(c), g.members[to], tag, data)
}

/// Receives exactly `buf.len()` bytes from member `from` of `g`.
pub(crate) fn recv(
    c: &Inner,
    g: &Group,
    from: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let want = buf.len();
    let st = c.recv_bytes(
        cctx(c),
        Source::Rank(g.members[from]),
        Tag::Is(tag as i32),
        buf,
    )?;
    expect_len(st.len, want)
}

fn expect_len(got: usize, want: usize) -> Result<(), MsgError> {
    if got != want {
        return Err(MsgError::Mismatch {
            op: "collective",
            what: format!("expected {want} bytes, a rank sent {got} (do the counts agree?)"),
        });
    }
    Ok(())
}

/// Sends `data` to member `to` while receiving `buf` from member `from`.
pub(crate) fn exchange(
    c: &Inner,
    g: &Group,
    to: usize,
    from: usize,
    tag: u32,
    data: &[u8],
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let want = buf.len();
    let guard = c.post_bytes(
        cctx(c),
        Source::Rank(g.members[from]),
        Tag::Is(tag as i32),
        buf,
    )?;
    c.send_bytes(cctx(c), g.members[to], tag, data)?;
    let st = c.finish_bytes(guard)?;
    expect_len(st.len, want)
}

pub(crate) fn bytes<T: Element>(s: &[T]) -> &[u8] {
    as_bytes(s)
}

pub(crate) fn bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    as_bytes_mut(s)
}

pub(crate) fn check(
    op: &'static str,
    ok: bool,
    what: impl FnOnce() -> String,
) -> Result<(), MsgError> {
    if ok {
        Ok(())
    } else {
        Err(MsgError::BadBuffer { op, what: what() })
    }
}

/// Checks the arguments of a rooted v-collective: one count per rank, this rank's own
/// buffer (`mine`) of its count, and at the root the whole buffer (`whole`) of their sum.
pub(crate) fn check_rooted(
    op: &'static str,
    c: &Inner,
    counts: &[usize],
    mine: usize,
    whole: usize,
    root: u32,
) -> Result<(), MsgError> {
    let n = c.size() as usize;
    let me = c.rank as usize;
    check(op, counts.len() == n && mine == counts[me], || {
        format!(
            "{} counts for {n} ranks; this rank's buffer holds {mine}",
            counts.len()
        )
    })?;
    let total: usize = counts.iter().sum();
    check(op, c.rank != root || whole == total, || {
        format!("the root's buffer holds {whole}, counts say {total}")
    })
}

/// Prefix sums of `counts`: where each rank's block starts.
pub(crate) fn displs(counts: &[usize]) -> Vec<usize> {
    let mut d = Vec::with_capacity(counts.len());
    let mut at = 0;
    for &c in counts {
        d.push(at);
        at += c;
    }
    d
}

/// `buf` cut into consecutive blocks of `counts` elements.
pub(crate) fn blocks_mut<'a, T>(mut buf: &'a mut [T], counts: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(counts.len());
    for &c in counts {
        let take = c.min(buf.len());
        let (a, b) = std::mem::take(&mut buf).split_at_mut(take);
        out.push(a);
        buf = b;
    }
    out
}
