//! Broadcast: binomial tree for short messages, pipelined chain for long ones; in three
//! phases across hosts.

use super::args::bytes_mut;
use super::group::{recv, send, Group};
use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::element::Element;
use crate::error::MsgError;
use crate::status::{Source, Tag};

/// Messages up to this size use the binomial tree.
const TREE_MAX: usize = 16 << 10;

/// Binomial tree from member `root` of `g`: relative rank r receives from r minus its
/// lowest set bit, then sends to r + 2^k for the lower bits.
pub(crate) fn binomial(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            let from = (rel - mask + root) % n;
            recv(c, g, from, tag, buf)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rel + mask < n {
            let to = (rel + mask + root) % n;
            send(c, g, to, tag, buf)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Pipelined chain from member `root`: the message travels in chunks along relative
/// ranks 0, 1, ..., n-1; each member receives chunk i+1 while it forwards chunk i.
pub(crate) fn chain(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
    chunk: usize,
) -> Result<(), MsgError> {
    let n = g.n();
    let rel = (g.me + n - root) % n;
    let next = (rel + 1 < n).then(|| (rel + 1 + root) % n);
    let prev = (rel > 0).then(|| (rel - 1 + root) % n);
    let len = buf.len();
    let chunk = chunk.max(1);
    let Some(prev) = prev else {
        if let Some(next) = next {
            let mut off = 0;
            while off < len {
                let end = (off + chunk).min(len);
                send(c, g, next, tag, &buf[off..end])?;
                off = end;
            }
        }
        return Ok(());
    };
    let from = Source::Rank(g.members[prev]);
    let t = Tag::Is(tag as i32);
    // Receive chunk 0, then: post chunk i+1, forward chunk i, wait for chunk i+1.
    let first = chunk.min(len);
    recv(c, g, prev, tag, &mut buf[..first])?;
    let mut off = 0;
    while off < len {
        let end = (off + chunk).min(len);
        let (done, rest) = buf.split_at_mut(end);
        let next_len = chunk.min(rest.len());
        let guard = if next_len > 0 {
            Some(c.post_bytes(c.coll_ctx(), from, t, &mut rest[..next_len])?)
        } else {
            None
        };
        if let Some(next) = next {
            send(c, g, next, tag, &done[off..end])?;
        }
        if let Some(guard) = guard {
            let st = super::group::finish(c, guard, tag)?;
            if st.len != next_len {
                return Err(MsgError::Mismatch {
                    op: "bcast",
                    from: None,
                    got: st.len,
                    want: next_len,
                });
            }
        }
        off = end;
    }
    Ok(())
}

/// Broadcast over a flat group, choosing the algorithm by size.
pub(crate) fn flat(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    if g.n() <= 1 {
        return Ok(());
    }
    if buf.len() <= TREE_MAX || g.n() == 2 {
        binomial(c, g, root, tag, buf)
    } else {
        let chunk = c.engine.limits.eager_limit.clamp(8 << 10, 64 << 10);
        chain(c, g, root, tag, buf, chunk)
    }
}

/// The phases of a broadcast across hosts before the one within each host: the root
/// hands the data to its host's leader, and the leaders broadcast among themselves.
/// Returns the member of `local` that serves this host (the root on its host, else the
/// leader).
#[allow(clippy::too_many_arguments)]
pub(crate) fn between_hosts(
    c: &CommCore,
    g: &Group,
    local: &Group,
    leaders: &Group,
    hosts: &[u32],
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<usize, MsgError> {
    let root_rank = g.members[root];
    let host_of = |m: u32| hosts.get(m as usize).copied().unwrap_or(0);
    let root_host = host_of(root_rank);
    let root_leader = leaders.leader_of(hosts, root_rank);
    let root_leader_rank = leaders.members[root_leader];
    let me = g.members[g.me];
    // 1. The root hands the data to its host's leader.
    if root_rank != root_leader_rank {
        if me == root_rank {
            let l = g
                .members
                .iter()
                .position(|&m| m == root_leader_rank)
                .unwrap_or(0);
            send(c, g, l, tag + 1, buf)?;
        } else if me == root_leader_rank {
            recv(c, g, root, tag + 1, buf)?;
        }
    }
    // 2. Between leaders.
    if leaders.me != usize::MAX {
        flat(c, leaders, root_leader, tag + 2, buf)?;
    }
    Ok(if host_of(me) == root_host {
        local
            .members
            .iter()
            .position(|&m| m == root_rank)
            .unwrap_or(0)
    } else {
        0
    })
}

/// Broadcast from member `root` of `g`, hierarchical across hosts.
pub(crate) fn bcast(
    c: &CommCore,
    g: &Group,
    hosts: &[u32],
    root: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let Some((local, leaders)) = g.hierarchy(hosts) else {
        return flat(c, g, root, tag, buf);
    };
    let local_root = between_hosts(c, g, &local, &leaders, hosts, root, tag, buf)?;
    // 3. Within each host (the root already has it).
    let root_rank = g.members[root];
    let me = g.members[g.me];
    let root_leader_rank = local.members[0];
    if local.members.contains(&root_rank) && root_rank != root_leader_rank {
        // The root and its leader both have the data; the root serves its host.
        let others: Vec<u32> = local
            .members
            .iter()
            .copied()
            .filter(|&m| m != root_leader_rank)
            .collect();
        if me == root_leader_rank {
            return Ok(());
        }
        let sub = Group {
            me: others.iter().position(|&m| m == me).unwrap_or(0),
            members: others,
        };
        let r = sub
            .members
            .iter()
            .position(|&m| m == root_rank)
            .unwrap_or(0);
        return flat(c, &sub, r, tag + 3, buf);
    }
    flat(c, &local, local_root, tag + 3, buf)
}

impl Communicator {
    /// Copies `buf` of rank `root` into `buf` of every rank.
    ///
    /// ```
    /// use spools::MsgError;
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size());
    /// // Only the last rank knows the table (40 kB: past the tree, the pipelined chain).
    /// let root = n - 1;
    /// let mut table: Vec<u64> = if me == root {
    ///     (0..5000).map(|i| i * 3 + u64::from(root)).collect()
    /// } else {
    ///     vec![u64::MAX; 5000]
    /// };
    /// world.bcast(&mut table, root).unwrap();
    /// assert!(table.iter().enumerate().all(|(i, &x)| x == i as u64 * 3 + u64::from(n - 1)));
    /// // A root outside the communicator is refused on every rank.
    /// assert!(matches!(
    ///     world.bcast(&mut table, n),
    ///     Err(MsgError::BadRank { rank, size }) if rank == n && size == n
    /// ));
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`] for a root outside the communicator,
    /// [`MsgError::Mismatch`] if the ranks' lengths differ, a dead rank.
    pub fn bcast<T: Element>(&self, buf: &mut [T], root: u32) -> Result<(), MsgError> {
        let tag = self.core.next_coll_tag();
        self.core.job_rank(root)?;
        let hosts = self.hosts();
        if super::sm::bcast(&self.core, &hosts, root as usize, tag, bytes_mut(buf))? {
            return Ok(());
        }
        let buf = bytes_mut(buf);
        let g = Group::all(&self.core);
        bcast(&self.core, &g, &hosts, root as usize, tag, buf).inspect_err(|e| {
            let tags = super::sm::BCAST_LEADER_TAGS;
            super::sm::failed(&self.core, &hosts, tag, buf.len(), tags, e);
        })
    }
}
