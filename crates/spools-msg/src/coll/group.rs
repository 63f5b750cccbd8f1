//! The ranks taking part in a collective or in one of its phases ([`Group`]), and the
//! messages between members: the steps every algorithm is made of.

use crate::comm_core::CommCore;
use crate::error::MsgError;
use crate::status::{Source, Tag};

/// A set of communicator ranks taking part in one phase of a collective, in order; `me`
/// is this rank's index in it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) members: Vec<u32>,
    pub(crate) me: usize,
}

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

/// Sends `data` to member `to` of `g`.
pub(crate) fn send(
    c: &CommCore,
    g: &Group,
    to: usize,
    tag: u32,
    data: &[u8],
) -> Result<(), MsgError> {
    c.send_bytes(c.coll_ctx(), g.members[to], tag, data)
}

/// Receives exactly `buf.len()` bytes from member `from` of `g`.
pub(crate) fn recv(
    c: &CommCore,
    g: &Group,
    from: usize,
    tag: u32,
    buf: &mut [u8],
) -> Result<(), MsgError> {
    let want = buf.len();
    let st = c.recv_bytes(
        c.coll_ctx(),
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
            from: None,
            got,
            want,
        });
    }
    Ok(())
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
    let want = buf.len();
    let guard = c.post_bytes(
        c.coll_ctx(),
        Source::Rank(g.members[from]),
        Tag::Is(tag as i32),
        buf,
    )?;
    c.send_bytes(c.coll_ctx(), g.members[to], tag, data)?;
    let st = c.finish_bytes(guard)?;
    expect_len(st.len, want)
}
