//! Ports: where two programs that share no job meet (`MPI_Open_port`,
//! `MPI_Comm_accept`, `MPI_Comm_connect`, `MPI_Comm_join`).
//!
//! A [`Port`] is a listening socket and a fresh secret; its name
//! (`spools-port:ADDR:SECRET`) carries both, so a program that was given the name may
//! connect and a stranger may not: the connection runs the job handshake
//! ([`spools_proto::handshake`], purpose `Port`) with the port's secret before a byte
//! of the meeting is read. Then the connecting side says how many processes it brings,
//! and the accepting side hosts a new job of both groups ([`HostedJob`]) and answers
//! with its ticket and its own count: every process of both groups then joins that job
//! (the acceptors as its first ranks).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use spools_proto::auth::Secret;
use spools_proto::handshake::{Identity, Purpose};
use thiserror::Error;

use super::hosted::{HostedJob, JobTicket};
use crate::config::Config;
use crate::error::{BootError, BootStep, RandomFor};
use crate::keepalive::Keepalive;
use crate::random::random;

/// The prefix of every port name.
pub const PORT_PREFIX: &str = "spools-port:";

/// The longest message of a meeting (a ticket line is about 90 bytes).
const MAX_MEETING_MESSAGE: u32 = 4096;

/// Why a meeting at a port failed.
#[derive(Debug, Error)]
pub enum PortError {
    /// The name is not one that [`Port::open`] makes.
    #[error("{0:?} is not a Spools port name ({PORT_PREFIX}ADDRESS:SECRET)")]
    BadName(String),
    /// A socket, the handshake or hosting the new job failed.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The other program closed the connection or sent something that is not part of
    /// a meeting.
    #[error("the other program at the port {0}")]
    Peer(&'static str),
}

/// An open port.
#[derive(Debug)]
pub struct Port {
    listener: TcpListener,
    secret: Secret,
    name: String,
}

impl Port {
    /// Opens a port on the address other hosts reach this one at.
    ///
    /// ```
    /// let p = spools_boot::client::Port::open().unwrap();
    /// assert!(p.name().starts_with("spools-port:"));
    /// ```
    ///
    /// # Errors
    /// [`PortError::Boot`] when no socket or random source is to be had.
    pub fn open() -> Result<Port, PortError> {
        let secret = Secret::from_bytes(
            random().map_err(BootError::io(BootStep::Random(RandomFor::JobSecret)))?,
        );
        let (listener, addr) = super::connect::bind_advertised()?;
        let name = format!("{PORT_PREFIX}{addr}:{}", secret.to_hex());
        Ok(Port {
            listener,
            secret,
            name,
        })
    }

    /// Its name, for the connecting program.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for a program to connect with this port's secret (connections that fail
    /// the handshake are dropped and the wait goes on), then hosts the new job of this
    /// side's `mine` processes and the other side's (of `family`: [`HostedJob::host`]).
    /// Returns the job and the other side's count.
    ///
    /// # Errors
    /// [`PortError`] when the socket fails, or the connected program breaks off.
    pub fn accept(
        &self,
        mine: u32,
        cfg: &Config,
        family: u64,
    ) -> Result<(HostedJob, u32), PortError> {
        let keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
        loop {
            let (mut s, _) = self
                .listener
                .accept()
                .map_err(BootError::io(BootStep::RendezvousSocket))?;
            let _ = s.set_read_timeout(Some(Duration::from_secs(cfg.bootstrap_timeout_s.max(1))));
            match crate::net::accept(&mut s, &self.secret, keepalive) {
                Ok((Purpose::Port, _)) => {}
                // A stranger, or a connection for something else: not a meeting.
                _ => continue,
            }
            // A connector that vanished after the handshake: wait for the next one.
            let Ok(theirs) = read_u32(&mut s) else {
                continue;
            };
            let Some(size) = mine.checked_add(theirs) else {
                return Err(PortError::Peer("brings more processes than a job holds"));
            };
            let job = HostedJob::host(size, cfg, family)?;
            write_msg(&mut s, job.ticket().to_line().as_bytes())?;
            write_msg(&mut s, &mine.to_le_bytes())?;
            return Ok((job, theirs));
        }
    }
}

/// Connects to the port `name` for a meeting of this side's `mine` processes with the
/// accepting side's. Returns the new job's ticket and the other side's count.
///
/// # Errors
/// [`PortError::BadName`], [`PortError::Boot`] when nobody listens there (a closed
/// port) or the handshake fails, [`PortError::Peer`].
pub fn connect_port(name: &str, mine: u32, cfg: &Config) -> Result<(JobTicket, u32), PortError> {
    let bad = || PortError::BadName(name.to_string());
    let rest = name.trim().strip_prefix(PORT_PREFIX).ok_or_else(bad)?;
    let (addr, secret) = rest.rsplit_once(':').ok_or_else(bad)?;
    let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
    let secret = Secret::from_hex(secret).map_err(|_| bad())?;
    let timeout = Duration::from_secs(cfg.bootstrap_timeout_s.max(1));
    let identity = Identity {
        rank: 0,
        lane: 0,
        priority: 0,
    };
    let keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
    // The acceptor answers the handshake only once its program calls accept: a
    // handshake that times out is tried again, for ten bootstrap timeouts (a refused
    // connection is a closed port, at once).
    let deadline = std::time::Instant::now() + timeout * 10;
    let mut s = loop {
        match crate::net::connect(addr, &secret, keepalive, Purpose::Port, identity, timeout) {
            Ok(s) => break s,
            Err(BootError::Io { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && std::time::Instant::now() < deadline => {}
            Err(e) => return Err(e.into()),
        }
    };
    let _ = s.set_read_timeout(None);
    write_msg(&mut s, &mine.to_le_bytes())?;
    let line = read_msg(&mut s)?;
    let ticket = std::str::from_utf8(&line)
        .ok()
        .and_then(JobTicket::from_line)
        .ok_or(PortError::Peer("sent no job ticket"))?;
    let theirs = read_u32(&mut s)?;
    Ok((ticket, theirs))
}

/// The two ends of `MPI_Comm_join`, each a single process with a connected socket:
/// both draw a number, the larger hosts the job of two (its rank 0, of `family`).
/// Returns the ticket, this side's rank, and the job if this side hosts it.
///
/// # Errors
/// [`PortError::Peer`] when the socket fails or the other end is not joining.
pub fn join_socket(
    s: &mut TcpStream,
    cfg: &Config,
    family: u64,
) -> Result<(JobTicket, u32, Option<HostedJob>), PortError> {
    loop {
        let mine = u64::from_le_bytes(
            random().map_err(BootError::io(BootStep::Random(RandomFor::Nonce)))?,
        );
        write_msg(s, &mine.to_le_bytes())?;
        let b = read_msg(s)?;
        let theirs = u64::from_le_bytes(
            b.as_slice()
                .try_into()
                .map_err(|_| PortError::Peer("sent no number to join by"))?,
        );
        if mine == theirs {
            continue;
        }
        if mine > theirs {
            let job = HostedJob::host(2, cfg, family)?;
            write_msg(s, job.ticket().to_line().as_bytes())?;
            return Ok((job.ticket().clone(), 0, Some(job)));
        }
        let line = read_msg(s)?;
        let ticket = std::str::from_utf8(&line)
            .ok()
            .and_then(JobTicket::from_line)
            .ok_or(PortError::Peer("sent no job ticket"))?;
        return Ok((ticket, 1, None));
    }
}

fn write_msg(s: &mut impl Write, b: &[u8]) -> Result<(), PortError> {
    let mut m = (b.len() as u32).to_le_bytes().to_vec();
    m.extend_from_slice(b);
    s.write_all(&m)
        .map_err(|_| PortError::Peer("closed the connection"))
}

fn read_msg(s: &mut impl Read) -> Result<Vec<u8>, PortError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .map_err(|_| PortError::Peer("closed the connection"))?;
    let len = u32::from_le_bytes(len);
    if len > MAX_MEETING_MESSAGE {
        return Err(PortError::Peer("sent a message too long for a meeting"));
    }
    let mut b = vec![0u8; len as usize];
    s.read_exact(&mut b)
        .map_err(|_| PortError::Peer("closed the connection"))?;
    Ok(b)
}

fn read_u32(s: &mut impl Read) -> Result<u32, PortError> {
    let b = read_msg(s)?;
    b.as_slice()
        .try_into()
        .map(u32::from_le_bytes)
        .map_err(|_| PortError::Peer("sent no process count"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_ports_are_refused_before_any_connection() {
        let cfg = Config::default();
        for bad in [
            "",
            "spools-port:",
            "tcp:1.2.3.4:5",
            "spools-port:1.2.3.4:5:zz",
            "spools-port:nohost:abc",
        ] {
            assert!(
                matches!(connect_port(bad, 1, &cfg), Err(PortError::BadName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_connection_with_the_port_name_meets_the_acceptor_and_a_wrong_secret_does_not() {
        let cfg = Config::default();
        let port = Port::open().unwrap();
        let name = port.name().to_string();
        let (addr, _) = name.rsplit_once(':').unwrap();
        let wrong = format!("{addr}:{}", "0".repeat(32));
        let t = std::thread::spawn(move || {
            // A stranger first: refused by the handshake, and the acceptor waits on.
            assert!(connect_port(&wrong, 3, &Config::default()).is_err());
            connect_port(&name, 3, &Config::default()).unwrap()
        });
        let (job, theirs) = port.accept(2, &cfg, 7 << 32).unwrap();
        assert_eq!(job.ticket().job >> 32, 7);
        let (ticket, acceptors) = t.join().unwrap();
        assert_eq!((theirs, acceptors), (3, 2));
        assert_eq!(&ticket, job.ticket());
    }

    #[test]
    fn both_ends_of_a_joined_socket_agree_on_one_host() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            let (t, r, h) = join_socket(&mut c, &Config::default(), 0).unwrap();
            (t, r, h.is_some())
        });
        let (mut s, _) = l.accept().unwrap();
        let (t0, r0, h0) = join_socket(&mut s, &Config::default(), 0).unwrap();
        let (t1, r1, h1) = t.join().unwrap();
        assert_eq!(t0, t1);
        assert_eq!(r0 + r1, 1);
        assert_ne!(h0.is_some(), h1);
        assert_eq!(h0.is_some(), r0 == 0);
    }
}
