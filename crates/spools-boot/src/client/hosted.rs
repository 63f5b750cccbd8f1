//! A job whose rendezvous this process hosts for processes it starts itself
//! (`MPI_Comm_spawn`: the root parent hosts the job of the parents and their children).
//! Every member, this process too, then joins it as a rank of `spools run` would: with
//! the [`JobTicket`] (where to meet, the secret, the job id) and a rank.

use std::net::SocketAddr;

use spools_proto::auth::Secret;

use crate::config::Config;
use crate::error::{BootError, BootStep, RandomFor};
use crate::identity::{JobEnv, LauncherKind, Rendezvous};
use crate::keepalive::Keepalive;
use crate::random::random;
use crate::server::RendezvousServer;

/// What a process needs to join a hosted job: where its rendezvous listens, the job's
/// secret (which every connection proves) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTicket {
    /// The rendezvous address.
    pub addr: SocketAddr,
    /// The job secret.
    pub secret: Secret,
    /// The job id (names its shared-memory objects).
    pub job: u64,
}

impl JobTicket {
    /// The ticket as one line of text (`ADDR SECRET JOB`), for a message to the other
    /// members.
    pub fn to_line(&self) -> String {
        format!("{} {} {:016x}", self.addr, self.secret.to_hex(), self.job)
    }

    /// Parses [`JobTicket::to_line`]'s text; `None` if it is not one.
    ///
    /// ```
    /// use spools_boot::client::JobTicket;
    /// use spools_proto::auth::Secret;
    /// let t = JobTicket { addr: "127.0.0.1:4000".parse().unwrap(), secret: Secret::from_bytes([7; 16]), job: 42 };
    /// assert_eq!(JobTicket::from_line(&t.to_line()), Some(t));
    /// assert_eq!(JobTicket::from_line("garbage"), None);
    /// ```
    pub fn from_line(s: &str) -> Option<JobTicket> {
        let mut it = s.split_ascii_whitespace();
        let addr = it.next()?.parse().ok()?;
        let secret = Secret::from_hex(it.next()?).ok()?;
        let job = u64::from_str_radix(it.next()?, 16).ok()?;
        it.next()
            .is_none()
            .then_some(JobTicket { addr, secret, job })
    }

    /// The job description of rank `rank` of `size` (as `spools run` gives its ranks).
    pub fn env(&self, rank: u32, size: u32) -> JobEnv {
        JobEnv {
            rank,
            size,
            rendezvous: Rendezvous::Addr(self.addr.to_string()),
            secret: Some(self.secret.clone()),
            launcher: LauncherKind::Spools,
            job: Some(self.job),
        }
    }

    /// The environment variables that make a started process rank `rank` of `size`.
    pub fn vars(&self, rank: u32, size: u32) -> [(&'static str, String); 5] {
        [
            ("SPOOLS_RANK", rank.to_string()),
            ("SPOOLS_SIZE", size.to_string()),
            ("SPOOLS_BOOTSTRAP", self.addr.to_string()),
            ("SPOOLS_SECRET", self.secret.to_hex()),
            ("SPOOLS_JOB", format!("{:016x}", self.job)),
        ]
    }
}

/// A job of `size` ranks whose rendezvous runs in this process (its threads end with
/// the process). The server is unsupervised: a member whose connection ends before it
/// finalises ends the job, as under a foreign launcher.
#[derive(Debug)]
pub struct HostedJob {
    server: RendezvousServer,
    ticket: JobTicket,
}

impl HostedJob {
    /// Starts the rendezvous of a new job of `size` ranks, with a fresh secret and id,
    /// on the address other hosts reach this one at. The id's upper half is `family`'s
    /// (the job of the process that hosts it), so that the launcher of that job, which
    /// removes what its jobs leave in `/dev/shm` by that half, removes this job's too.
    ///
    /// # Errors
    /// [`BootError::Io`] when no random source or socket is to be had.
    pub fn host(size: u32, cfg: &Config, family: u64) -> Result<HostedJob, BootError> {
        let secret = Secret::from_bytes(
            random().map_err(BootError::io(BootStep::Random(RandomFor::JobSecret)))?,
        );
        let low = u32::from_le_bytes(
            random().map_err(BootError::io(BootStep::Random(RandomFor::JobId)))?,
        );
        let job = (family & !0xffff_ffff) | u64::from(low);
        let (l, addr) = super::connect::bind_advertised()?;
        let keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
        let server = RendezvousServer::start(l, size, secret.clone(), keepalive, job, false, None)?;
        // Members leave as they disconnect, without waiting for the others.
        server.allow_departures();
        Ok(HostedJob {
            server,
            ticket: JobTicket { addr, secret, job },
        })
    }

    /// What the members need to join.
    pub fn ticket(&self) -> &JobTicket {
        &self.ticket
    }

    /// The server, to end the job in the name of a member that never came.
    pub fn server(&self) -> &RendezvousServer {
        &self.server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_round_trip_and_garbage_is_none_never_a_panic() {
        let t = JobTicket {
            addr: "10.1.2.3:40000".parse().unwrap(),
            secret: Secret::from_bytes([0xa5; 16]),
            job: u64::MAX,
        };
        assert_eq!(JobTicket::from_line(&t.to_line()), Some(t.clone()));
        let line = t.to_line();
        // A prefix without the job id (or with part of the secret) is none; a one-byte
        // change anywhere and extra fields never panic.
        let before_job = line.rfind(' ').unwrap();
        for n in 0..=before_job {
            assert_eq!(JobTicket::from_line(&line[..n]), None, "{n}");
        }
        let mut x: u32 = 12345;
        for i in 0..line.len() {
            for _ in 0..8 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let mut b = line.clone().into_bytes();
                b[i] = (x >> 16) as u8;
                if let Ok(s) = std::str::from_utf8(&b) {
                    let _ = JobTicket::from_line(s);
                }
            }
        }
        assert_eq!(JobTicket::from_line(&format!("{line} extra")), None);
    }

    #[test]
    fn a_hosted_job_stops_listening_once_every_member_has_finalised() {
        let cfg = Config::default();
        let job = HostedJob::host(2, &cfg, 5 << 32).unwrap();
        let t = job.ticket().clone();
        let members: Vec<_> = (0..2)
            .map(|r| {
                let t = t.clone();
                std::thread::spawn(move || {
                    let cfg = Config::default();
                    let c = crate::client::Connected::connect(t.env(r, 2), &cfg).unwrap();
                    let b = c.join(spools_proto::boot::Endpoint::default()).unwrap();
                    b.finalize().unwrap();
                })
            })
            .collect();
        for m in members {
            m.join().unwrap();
        }
        assert!(job.server().job_finalized());
        // The listening socket goes with its thread: a connection is refused soon
        // (bounded; the thread ends at the wake-up the last finalisation sent).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(t.addr).is_ok() {
            assert!(std::time::Instant::now() < until, "still listening");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
