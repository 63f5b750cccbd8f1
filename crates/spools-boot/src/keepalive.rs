//! Dead-peer detection on the job's TCP connections (the rendezvous and the TCP
//! transport): keepalive probes and a user timeout derived from the configuration's
//! `net_timeout_s` (`SPOOLS_NET_TIMEOUT`).
//!
//! A peer that stops answering (its host lost power or its link, a firewall drops
//! everything) is declared gone once nothing came back from it for about the timeout:
//! an idle connection sends keepalive probes from half the timeout on, one a second,
//! and is dropped when the timeout has passed without an answer; the blocked read then
//! fails with `ETIMEDOUT`. The rendezvous connections also get `TCP_USER_TIMEOUT`, so
//! that one holding unacknowledged data (a runtime collective just sent) ends after the
//! timeout too; the TCP transport's do not: under heavy loss a data transfer may wait
//! longer than the timeout for an acknowledgement, and cutting it would fail a healthy
//! job. A host lost during a transfer is still noticed within the timeout, through the
//! idle rendezvous connections, and every wait of the job then fails. The kernel does
//! all of it: nothing runs on the fast path, and an idle connection exchanges one small
//! probe a second once idle for half the timeout.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use rustix::net::sockopt;

/// Default of [`Config::net_timeout_s`](crate::config::Config::net_timeout_s).
pub const NET_TIMEOUT_DEFAULT_S: u64 = 5;

/// Largest [`Config::net_timeout_s`](crate::config::Config::net_timeout_s): a day.
pub const NET_TIMEOUT_MAX_S: u64 = 86_400;

/// The kernel settings for one timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped.
    pub count: u32,
    /// `TCP_USER_TIMEOUT` (rendezvous connections): how long sent data (or probes) may
    /// stay unacknowledged: half a second short of the timeout (at least a second),
    /// because the kernel checks it at each probe, a second apart, so that the
    /// connection ends within half a second of the timeout.
    pub user_timeout: Duration,
}

impl Keepalive {
    /// The settings for `timeout` seconds; `None` for 0 (the kernel's defaults: hours).
    pub fn for_timeout(timeout_s: u64) -> Option<Keepalive> {
        let t = timeout_s.min(NET_TIMEOUT_MAX_S);
        if t == 0 {
            return None;
        }
        let idle = (t / 2).max(1);
        Some(Keepalive {
            idle: Duration::from_secs(idle),
            interval: Duration::from_secs(1),
            count: u32::try_from(t.saturating_sub(idle).max(1)).unwrap_or(u32::MAX),
            user_timeout: Duration::from_millis((t * 1000).saturating_sub(500).max(1000)),
        })
    }

    /// Sets the keepalive settings on a TCP socket.
    ///
    /// # Errors
    /// The `setsockopt` that failed.
    pub fn apply(&self, fd: impl AsFd) -> io::Result<()> {
        let fd = fd.as_fd();
        sockopt::set_socket_keepalive(fd, true)?;
        sockopt::set_tcp_keepidle(fd, self.idle)?;
        sockopt::set_tcp_keepintvl(fd, self.interval)?;
        sockopt::set_tcp_keepcnt(fd, self.count)?;
        Ok(())
    }

    /// Sets `TCP_USER_TIMEOUT` on a TCP socket.
    ///
    /// # Errors
    /// The `setsockopt` that failed.
    pub fn apply_user_timeout(&self, fd: impl AsFd) -> io::Result<()> {
        let ms = u32::try_from(self.user_timeout.as_millis()).unwrap_or(u32::MAX);
        sockopt::set_tcp_user_timeout(fd, ms)?;
        Ok(())
    }
}

/// Applies `keepalive` (the job's, from its configuration's `net_timeout_s`:
/// [`Keepalive::for_timeout`]; `None`: none) to a job connection, with the user timeout
/// for a rendezvous connection (`rendezvous`). A failure is logged, not fatal: the
/// connection works, only a dead peer is noticed later.
pub fn apply_to(keepalive: Option<Keepalive>, fd: impl AsFd, rendezvous: bool) {
    if let Some(k) = keepalive {
        let fd = fd.as_fd();
        let set = k.apply(fd).and_then(|()| {
            if rendezvous {
                k.apply_user_timeout(fd)
            } else {
                Ok(())
            }
        });
        if let Err(e) = set {
            crate::logger::warn(format_args!(
                "spools: cannot set TCP keepalive (a dead peer is noticed late): {e}"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_split_into_idle_time_and_probes() {
        assert_eq!(Keepalive::for_timeout(0), None);
        let k = Keepalive::for_timeout(5).unwrap();
        assert_eq!(
            (
                k.idle.as_secs(),
                k.interval.as_secs(),
                k.count,
                k.user_timeout.as_millis()
            ),
            (2, 1, 3, 4500)
        );
        for t in [1, 2, 3, 7, 60, 86_400, u64::MAX] {
            let k = Keepalive::for_timeout(t).unwrap();
            let total = k.idle.as_secs() + u64::from(k.count) * k.interval.as_secs();
            let t = t.min(NET_TIMEOUT_MAX_S);
            assert!(total >= t && total <= t + 1, "{t}: {k:?}");
            let ms = k.user_timeout.as_millis() as u64;
            assert!(ms == 1000 || ms == t * 1000 - 500, "{t}: {k:?}");
        }
    }

    #[test]
    fn the_settings_reach_the_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let k = Keepalive::for_timeout(7).unwrap();
        k.apply(&s).unwrap();
        assert_eq!(sockopt::tcp_user_timeout(&s).unwrap(), 0);
        k.apply_user_timeout(&s).unwrap();
        assert!(sockopt::socket_keepalive(&s).unwrap());
        assert_eq!(sockopt::tcp_keepidle(&s).unwrap(), Duration::from_secs(3));
        assert_eq!(sockopt::tcp_keepintvl(&s).unwrap(), Duration::from_secs(1));
        assert_eq!(sockopt::tcp_keepcnt(&s).unwrap(), 4);
        assert_eq!(sockopt::tcp_user_timeout(&s).unwrap(), 6500);
    }
}
