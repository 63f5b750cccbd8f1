//! Broadcast in three phases across hosts; within a host or among the leaders, the flat
//! algorithms of [`super::flat`] (binomial tree for short messages, pipelined chain for
//! long ones).

use super::args::bytes_mut;
use super::flat::{between_hosts, flat};
use super::group::{Group, Poisoned};
use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::element::Element;
use crate::error::MsgError;

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
    // A phase that finds the ranks disagree does not end this rank's part: the member
    // that serves its host then sends it nothing, so that the host's members fail too.
    let mut poisoned = Poisoned::default();
    let local_root = between_hosts(c, g, &local, &leaders, hosts, root, tag, buf, &mut poisoned)?;
    let buf = if poisoned.failed() && local.me == local_root {
        &mut [][..]
    } else {
        buf
    };
    let r = within_host(c, g, &local, (root, local_root), tag, buf);
    poisoned.step(r)?;
    poisoned.end()
}

/// Phase 3 of [`bcast`]: within each host, from `local_root` of `local` (the root
/// already has it).
fn within_host(
    c: &CommCore,
    g: &Group,
    local: &Group,
    (root, local_root): (usize, usize),
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let root_rank = g.members[root];
    let me = g.members[g.me];
    let root_leader_rank = local.members[0];
    if local.members.contains(&root_rank) && root_rank != root_leader_rank {
        // The root and its leader both have the data; the root serves its host.
        let others: crate::coll::group::Members = local
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
    flat(c, local, local_root, tag + 3, buf)
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
        self.collective(|tag| {
            self.core.job_rank(root)?;
            let hosts = self.core.hosts.as_slice();
            if super::sm::bcast(&self.core, hosts, root as usize, tag, bytes_mut(buf))? {
                return Ok(());
            }
            let buf = bytes_mut(buf);
            let g = Group::all(&self.core);
            bcast(&self.core, &g, hosts, root as usize, tag, buf).inspect_err(|e| {
                let tags = super::sm::BCAST_LEADER_TAGS;
                super::sm::failed(&self.core, hosts, tag, buf.len(), tags, e);
            })
        })
    }
}
