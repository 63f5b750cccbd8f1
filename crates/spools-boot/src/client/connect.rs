//! Joining a job: [`Connected::connect`] reaches the rendezvous (hosting it on rank 0
//! when the launcher does not), [`Connected::join`] publishes this rank's endpoint, learns
//! everyone's and starts the watchdog thread.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use spools_proto::auth::Secret;
use spools_proto::boot::{Endpoint, ToRank, ToServer};
use spools_proto::handshake::{Identity, Purpose};

use crate::client::bootstrap::{Bootstrap, Reply};
use crate::config::Config;
use crate::error::{Awaited, BootError, BootStep, Lost, RandomFor, Violation};
use crate::health::JobHealth;
use crate::identity::{JobEnv, LauncherKind, Rendezvous};
use crate::keepalive::Keepalive;
use crate::net::{connect, connect_retrying, read_frame, resolve, write_frame};
use crate::pmi::{PmiError, PmiKind, RENDEZVOUS_KEY};
use crate::random::random;
use crate::server::RendezvousServer;

/// A rank connected to its rendezvous but not yet joined.
#[derive(Debug)]
pub struct Connected {
    stream: TcpStream,
    env: JobEnv,
    secret: Secret,
    server: Option<RendezvousServer>,
    timeout: Duration,
}

/// The local address of this process's first connection to a rendezvous on another
/// host: the interface through which its job's hosts reach it (see [`advertised_ip`]).
static JOINED_IP: std::sync::OnceLock<IpAddr> = std::sync::OnceLock::new();

/// The address other hosts can reach this one at, for a rendezvous or port this process
/// hosts: `SPOOLS_BOOTSTRAP_IP` if set, else that of the interface through which it
/// reached its own job's rendezvous (its job's hosts reach it there, default route or
/// not), else the source address of the default route, else loopback.
fn advertised_ip() -> IpAddr {
    if let Some(ip) = std::env::var("SPOOLS_BOOTSTRAP_IP")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return ip;
    }
    if let Some(ip) = JOINED_IP.get() {
        return *ip;
    }
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| {
            u.connect("192.0.2.1:9")?;
            u.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A listening socket on the address other hosts reach this one at (any address when
/// that one cannot be bound), and the address to tell them.
pub(crate) fn bind_advertised() -> Result<(TcpListener, SocketAddr), BootError> {
    let ip = advertised_ip();
    let l = TcpListener::bind((ip, 0))
        .or_else(|_| TcpListener::bind("0.0.0.0:0"))
        .map_err(BootError::io(BootStep::BindRendezvous { at: None }))?;
    let mut addr = l
        .local_addr()
        .map_err(BootError::io(BootStep::RendezvousSocket))?;
    addr.set_ip(ip);
    Ok((l, addr))
}

fn write_rendezvous_file(path: &Path, addr: SocketAddr, secret: &Secret) -> Result<(), BootError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(BootError::io(BootStep::WriteRendezvousFile {
            path: path.to_path_buf(),
        }))?;
    writeln!(f, "spools-rendezvous 1\n{addr}\n{}", secret.to_hex()).map_err(BootError::io(
        BootStep::WriteRendezvousFile {
            path: path.to_path_buf(),
        },
    ))?;
    f.sync_all()
        .map_err(BootError::io(BootStep::WriteRendezvousFile {
            path: path.to_path_buf(),
        }))?;
    std::fs::rename(&tmp, path).map_err(BootError::io(BootStep::WriteRendezvousFile {
        path: path.to_path_buf(),
    }))
}

/// Starts the rendezvous server on rank 0, on the address other hosts reach this one at,
/// with the job secret from the environment or a fresh one.
fn host_rendezvous(
    env: &JobEnv,
    job: u64,
    keepalive: Option<Keepalive>,
) -> Result<(SocketAddr, Secret, RendezvousServer), BootError> {
    let secret = match &env.secret {
        Some(s) => s.clone(),
        None => Secret::from_bytes(
            random().map_err(BootError::io(BootStep::Random(RandomFor::JobSecret)))?,
        ),
    };
    let (l, addr) = bind_advertised()?;
    let server = RendezvousServer::start(l, env.size, secret.clone(), keepalive, job, false, None)?;
    Ok((addr, secret, server))
}

/// Through the launcher's interface `kind`: checks that it places this process where the
/// environment does, puts `publish` (rank 0), fences, reads rank 0's value and finalises
/// the interface. It runs on a thread of its own so that a fence that never completes
/// (PMI2 has no timeout of its own: a rank that died before it) ends in
/// [`BootError::Timeout`] after `timeout`.
fn pmi_exchange(
    kind: PmiKind,
    env: &JobEnv,
    timeout: Duration,
    publish: Option<String>,
) -> Result<String, BootError> {
    let (rank, size, launcher) = (env.rank, env.size, env.launcher);
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("spools-pmi".into())
        .spawn(move || {
            let run = || -> Result<String, BootError> {
                let mut pmi = crate::pmi::open(kind, timeout)?;
                if (pmi.rank(), pmi.size()) != (rank, size) {
                    return Err(crate::identity::IdentityError::PmiDisagrees {
                        launcher: launcher.name(),
                        rank,
                        size,
                        pmi: kind.name(),
                        pmi_rank: pmi.rank(),
                        pmi_size: pmi.size(),
                    }
                    .into());
                }
                if let Some(v) = &publish {
                    pmi.put(RENDEZVOUS_KEY, v)?;
                }
                pmi.fence()?;
                let value = pmi.get(0, RENDEZVOUS_KEY)?;
                pmi.finalize()?;
                Ok(value)
            };
            let _ = tx.send(run());
        })
        .map_err(BootError::io(BootStep::Thread { name: "PMI" }))?;
    match rx.recv_timeout(timeout) {
        Ok(answer) => answer,
        Err(RecvTimeoutError::Timeout) => Err(BootError::Timeout {
            awaited: Awaited::PmiFence { kind, ranks: size },
            secs: timeout.as_secs(),
        }),
        // The library panicked or aborted the thread: no answer will come.
        Err(RecvTimeoutError::Disconnected) => Err(
            BootError::io(BootStep::Thread { name: "PMI" })(std::io::Error::other(
                "the thread talking to the launcher's interface ended without an answer",
            )),
        ),
    }
}

/// Reads what rank 0 published through the launcher's interface: `ADDR/SECRET`.
fn parse_published(value: &str) -> Option<(SocketAddr, Secret)> {
    let (addr, secret) = value.trim().rsplit_once('/')?;
    Some((addr.parse().ok()?, Secret::from_hex(secret).ok()?))
}

fn read_rendezvous_file(path: &Path) -> Option<(SocketAddr, Secret)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != "spools-rendezvous 1" {
        return None;
    }
    let addr = lines.next()?.parse().ok()?;
    let secret = Secret::from_hex(lines.next()?).ok()?;
    Some((addr, secret))
}

impl Connected {
    /// Connects this process to its job's rendezvous, starting the server first when this
    /// is rank 0 under a foreign launcher (or a singleton).
    ///
    /// # Errors
    /// [`BootError`] if the rendezvous cannot be reached in time or refuses the secret.
    pub fn connect(env: JobEnv, cfg: &Config) -> Result<Connected, BootError> {
        let timeout = Duration::from_secs(cfg.bootstrap_timeout_s.max(1));
        let keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
        let deadline = Instant::now() + timeout;
        let identity = Identity {
            rank: env.rank,
            lane: 0,
            priority: 0,
        };
        let hosted = env.rank == 0 && env.launcher != LauncherKind::Spools;
        let job = match env.job {
            Some(j) => j,
            None => u64::from_le_bytes(
                random().map_err(BootError::io(BootStep::Random(RandomFor::JobId)))?,
            ),
        };
        let (addr, secret, server) = match &env.rendezvous {
            Rendezvous::Singleton => {
                let secret = Secret::from_bytes(
                    random().map_err(BootError::io(BootStep::Random(RandomFor::JobSecret)))?,
                );
                let l = TcpListener::bind("127.0.0.1:0")
                    .map_err(BootError::io(BootStep::BindRendezvous { at: None }))?;
                let server =
                    RendezvousServer::start(l, 1, secret.clone(), keepalive, job, false, None)?;
                (server.addr(), secret, Some(server))
            }
            Rendezvous::Addr(a) => {
                let secret = env
                    .secret
                    .clone()
                    .ok_or(crate::identity::IdentityError::NoSecret)?;
                let addr = resolve(a)?;
                if hosted {
                    let l = TcpListener::bind(addr).map_err(BootError::io(
                        BootStep::BindRendezvous {
                            at: Some(a.clone()),
                        },
                    ))?;
                    let server = RendezvousServer::start(
                        l,
                        env.size,
                        secret.clone(),
                        keepalive,
                        job,
                        false,
                        None,
                    )?;
                    (addr, secret, Some(server))
                } else {
                    (addr, secret, None)
                }
            }
            Rendezvous::File(path) => {
                if hosted {
                    let (addr, secret, server) = host_rendezvous(&env, job, keepalive)?;
                    write_rendezvous_file(path, addr, &secret)?;
                    (addr, secret, Some(server))
                } else {
                    // Wait for rank 0's file; a stale file from an earlier job fails the
                    // handshake or the connection and is read again.
                    loop {
                        if let Some((addr, secret)) = read_rendezvous_file(path) {
                            match connect(
                                addr,
                                &secret,
                                keepalive,
                                Purpose::Bootstrap,
                                identity,
                                timeout,
                            ) {
                                Ok(stream) => {
                                    return Ok(Connected {
                                        stream,
                                        env,
                                        secret,
                                        server: None,
                                        timeout,
                                    })
                                }
                                Err(e) if Instant::now() > deadline => return Err(e),
                                Err(_) => {}
                            }
                        }
                        if Instant::now() > deadline {
                            return Err(BootError::Timeout {
                                awaited: Awaited::RendezvousFile { path: path.clone() },
                                secs: timeout.as_secs(),
                            });
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            Rendezvous::Pmi(kind) => {
                if hosted {
                    let (addr, secret, server) = host_rendezvous(&env, job, keepalive)?;
                    let published = format!("{addr}/{}", secret.to_hex());
                    pmi_exchange(*kind, &env, timeout, Some(published))?;
                    (addr, secret, Some(server))
                } else {
                    let value = pmi_exchange(*kind, &env, timeout, None)?;
                    let (addr, secret) =
                        parse_published(&value).ok_or_else(|| PmiError::BadValue {
                            kind: *kind,
                            rank: 0,
                            key: RENDEZVOUS_KEY.into(),
                            // The value may hold the secret: show only what precedes it.
                            what: format!(
                                "{:?} (the rest withheld)",
                                value.split('/').next().unwrap_or_default()
                            ),
                            expected: "ADDRESS:PORT/SECRET (32 hex digits)",
                        })?;
                    (addr, secret, None)
                }
            }
        };
        // The server may not listen yet (rank 0 starting), or cut this connection off
        // while a flood of others lasts: retry.
        let stream = connect_retrying(
            addr,
            &secret,
            keepalive,
            Purpose::Bootstrap,
            identity,
            deadline,
            || false,
        )?;
        // A job on this host alone says nothing about other hosts.
        if let Some(ip) = stream
            .local_addr()
            .ok()
            .map(|a| a.ip())
            .filter(|ip| !ip.is_loopback())
        {
            JOINED_IP.get_or_init(|| ip);
        }
        Ok(Connected {
            stream,
            env,
            secret,
            server,
            timeout,
        })
    }

    /// The local address of the connection: the interface through which this host reaches
    /// the rendezvous, hence a good one to publish.
    pub fn local_ip(&self) -> IpAddr {
        self.stream
            .local_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.env.rank
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.env.size
    }

    /// The job secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// Publishes this rank's endpoint and waits for everyone's.
    ///
    /// # Errors
    /// [`BootError::Timeout`] if the other ranks do not all join in time;
    /// [`BootError::PeerDied`] if one of them died; [`BootError::Refused`].
    pub fn join(mut self, endpoint: Endpoint) -> Result<Bootstrap, BootError> {
        let (rank, size) = (self.env.rank, self.env.size);
        write_frame(
            &mut self.stream,
            &ToServer::Join {
                rank,
                size,
                endpoint,
            },
        )?;
        self.stream
            .set_read_timeout(Some(self.timeout))
            .map_err(BootError::io(BootStep::RendezvousSocket))?;
        let table = match read_frame::<ToRank>(&mut self.stream) {
            Ok(Some(ToRank::Table { job, endpoints })) if endpoints.len() == size as usize => {
                (job, endpoints)
            }
            Ok(Some(ToRank::Table { endpoints, .. })) => {
                return Err(BootError::Protocol(Violation::TableSize {
                    got: endpoints.len(),
                    size,
                }))
            }
            Ok(Some(ToRank::Refused { reason })) => return Err(BootError::Refused { reason }),
            Ok(Some(ToRank::Abort { rank, cause })) => {
                return Err(BootError::PeerDied { rank, cause })
            }
            Ok(Some(other)) => {
                return Err(BootError::Protocol(Violation::WhileJoining {
                    kind: kind_of(&other),
                }))
            }
            Ok(None) => return Err(BootError::ServerLost(Lost::WhileJoining)),
            Err(BootError::Io { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(BootError::Timeout {
                    awaited: Awaited::Join { ranks: size },
                    secs: self.timeout.as_secs(),
                })
            }
            Err(e) => return Err(e),
        };
        self.stream
            .set_read_timeout(None)
            .map_err(BootError::io(BootStep::RendezvousSocket))?;
        // Every rank has joined: nobody needs the rendezvous file any more.
        if let (Some(_), Rendezvous::File(path)) = (&self.server, &self.env.rendezvous) {
            let _ = std::fs::remove_file(path);
        }
        let state = JobHealth::new(size);
        let finalized = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        // For messages (a broken connection no longer knows its peer).
        let rendezvous = self.stream.peer_addr().map_or_else(
            |_| "the rendezvous".to_string(),
            |a| format!("the rendezvous at {a}"),
        );
        let mut reader = self
            .stream
            .try_clone()
            .map_err(BootError::io(BootStep::RendezvousSocket))?;
        let st = state.clone();
        let fin = finalized.clone();
        let requests = Arc::new(super::requests::Requests::default());
        let req = requests.clone();
        std::thread::Builder::new()
            .name("spools-watchdog".into())
            .spawn(move || loop {
                match read_frame::<ToRank>(&mut reader) {
                    Ok(Some(ToRank::Collective { seq, parts })) => {
                        let _ = tx.send(Reply::Coll(seq, parts));
                        st.wake();
                    }
                    Ok(Some(ToRank::Finalized)) => {
                        fin.store(true, Ordering::SeqCst);
                        let _ = tx.send(Reply::Finalized);
                        st.wake();
                        return;
                    }
                    Ok(Some(ToRank::Finalizing {
                        rank,
                        collectives,
                        sent_to_you,
                    })) => {
                        st.mark_finalizing(rank, collectives, sent_to_you);
                        let _ = tx.send(Reply::Wake);
                    }
                    Ok(Some(ToRank::Abort { rank, cause })) => {
                        st.mark_dead(rank, &cause);
                        let _ = tx.send(Reply::Wake);
                    }
                    Ok(Some(ToRank::Spawned { id, refused })) => req.answered(id, refused),
                    Ok(Some(ToRank::SpawnExit {
                        id,
                        index,
                        success,
                        how,
                    })) => req.ended(id, index, success, &how),
                    Ok(Some(_)) => {}
                    end @ (Ok(None) | Err(_)) => {
                        if !fin.load(Ordering::SeqCst) {
                            // A network failure (keepalive, net_timeout_s) says so.
                            st.mark_server_lost(&match end {
                                Err(e) => format!("{rendezvous}: {e}"),
                                _ => "the connection closed".into(),
                            });
                            let _ = tx.send(Reply::Wake);
                        }
                        return;
                    }
                }
            })
            .map_err(BootError::io(BootStep::Thread { name: "watchdog" }))?;
        Ok(Bootstrap {
            rank,
            size,
            job: table.0,
            endpoints: table.1,
            secret: self.secret,
            state,
            writer: Mutex::new(self.stream),
            replies: Mutex::new((0, rx)),
            finalized,
            announced: AtomicBool::new(false),
            server: self.server,
            launcher: self.env.launcher,
            rendezvous: self.env.rendezvous,
            hooks: RwLock::new(None),
            requests,
        })
    }
}

/// A name for a rendezvous message, for protocol errors.
fn kind_of(m: &ToRank) -> &'static str {
    match m {
        ToRank::Table { .. } => "address table",
        ToRank::Collective { .. } => "collective answer",
        ToRank::Finalized => "finalized",
        ToRank::Finalizing { .. } => "finalizing notice",
        ToRank::Abort { .. } => "abort",
        ToRank::Refused { .. } => "refusal",
        ToRank::Spawned { .. } => "spawn answer",
        ToRank::SpawnExit { .. } => "spawned process's end",
    }
}
