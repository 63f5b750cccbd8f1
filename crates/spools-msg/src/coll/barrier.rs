//! Barrier in three phases across hosts, each a dissemination ([`super::flat`]).

use super::flat::dissemination;
use super::group::{recv, send, Group};
use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::error::MsgError;

/// Barrier over `g`, hierarchical when it spans hosts.
pub(crate) fn barrier(c: &CommCore, g: &Group, hosts: &[u32], tag: u32) -> Result<(), MsgError> {
    let Some((local, leaders)) = g.hierarchy(hosts) else {
        return dissemination(c, g, tag);
    };
    // Fan in to the host's leader (local member 0), leaders meet, fan out.
    if local.me == 0 {
        for i in 1..local.n() {
            recv(c, &local, i, tag + 100, &mut [])?;
        }
        dissemination(c, &leaders, tag)?;
        for i in 1..local.n() {
            send(c, &local, i, tag + 101, &[])?;
        }
    } else {
        send(c, &local, 0, tag + 100, &[])?;
        recv(c, &local, 0, tag + 101, &mut [])?;
    }
    Ok(())
}

impl Communicator {
    /// Waits until every rank of the communicator has called `barrier`.
    ///
    /// The usual use: every rank registers an RPC function, and the barrier makes sure
    /// all have before anyone calls one (a call that arrives first would find no such
    /// function).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size());
    /// world
    ///     .register_rpc("whoami", move |_| Ok(me.to_le_bytes().to_vec()))
    ///     .unwrap();
    /// world.barrier().unwrap();
    /// let next = (me + 1) % n;
    /// let answer = world.rpc(next, "whoami", b"").unwrap().wait().unwrap();
    /// assert_eq!(answer, next.to_le_bytes());
    /// ```
    ///
    /// # Errors
    /// A dead rank, transport failures.
    pub fn barrier(&self) -> Result<(), MsgError> {
        self.collective(|tag| {
            let hosts = self.core.hosts.as_slice();
            if super::sm::barrier(&self.core, hosts, tag)? {
                return Ok(());
            }
            barrier(&self.core, &Group::all(&self.core), hosts, tag)
        })
    }
}
