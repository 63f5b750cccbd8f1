//! A rank's side of the rendezvous: join, the runtime's own collectives, finalise, and
//! the watchdog thread that learns of dead ranks.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use spools_proto::auth::Secret;
use spools_proto::boot::{CollOp, Endpoint, ToRank, ToServer};
use spools_proto::handshake::{Identity, Purpose};

use crate::config::Config;
use crate::error::{Awaited, BootError, BootStep, Lost, RandomFor, Violation};
use crate::health::{Failure, JobHealth};
use crate::identity::{JobEnv, LauncherKind, Rendezvous};
use crate::net::{connect, connect_retrying, read_frame, resolve, write_frame};
use crate::random::random;
use crate::server::RendezvousServer;

/// Drives the rank's message progress while it waits in a bootstrap collective; returns
/// how many messages it handled.
pub type ProgressHook = Arc<dyn Fn() -> usize + Send + Sync>;
/// Sleeps until the rank is woken (a message, or a bootstrap reply) or the time passes.
pub type SleepHook = Arc<dyn Fn(Duration) + Send + Sync>;

#[derive(Clone)]
struct Hooks {
    progress: ProgressHook,
    sleep: SleepHook,
    spin: Duration,
}

enum Reply {
    Coll(u64, Vec<Vec<u8>>),
    Finalized,
    Wake,
}

/// A rank connected to its rendezvous but not yet joined.
#[derive(Debug)]
pub struct Connected {
    stream: TcpStream,
    env: JobEnv,
    secret: Secret,
    server: Option<RendezvousServer>,
    timeout: Duration,
}

/// A rank that has joined its job.
pub struct Bootstrap {
    rank: u32,
    size: u32,
    job: u64,
    endpoints: Vec<Endpoint>,
    secret: Secret,
    state: Arc<JobHealth>,
    writer: Mutex<TcpStream>,
    replies: Mutex<(u64, Receiver<Reply>)>,
    finalized: Arc<AtomicBool>,
    /// This rank has told the server it finalises (it takes part in nothing more).
    announced: AtomicBool,
    server: Option<RendezvousServer>,
    launcher: LauncherKind,
    hooks: RwLock<Option<Hooks>>,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("job", &format_args!("{:016x}", self.job))
            .finish_non_exhaustive()
    }
}

fn failure_error(f: Failure) -> BootError {
    match f {
        Failure::Rank { rank, cause } => BootError::PeerDied { rank, cause },
        Failure::ServerLost(why) => BootError::ServerLost(Lost::Watchdog(why)),
    }
}

/// The address other hosts can reach this one at, for a rank-0-hosted rendezvous:
/// `SPOOLS_BOOTSTRAP_IP` if set, else the source address of the default route, else
/// loopback.
fn advertised_ip() -> IpAddr {
    if let Some(ip) = std::env::var("SPOOLS_BOOTSTRAP_IP")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return ip;
    }
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| {
            u.connect("192.0.2.1:9")?;
            u.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
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
                let server = RendezvousServer::start(l, 1, secret.clone(), job, false, None)?;
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
                    let server =
                        RendezvousServer::start(l, env.size, secret.clone(), job, false, None)?;
                    (addr, secret, Some(server))
                } else {
                    (addr, secret, None)
                }
            }
            Rendezvous::File(path) => {
                if hosted {
                    let secret = match &env.secret {
                        Some(s) => s.clone(),
                        None => Secret::from_bytes(
                            random()
                                .map_err(BootError::io(BootStep::Random(RandomFor::JobSecret)))?,
                        ),
                    };
                    let ip = advertised_ip();
                    let l = TcpListener::bind((ip, 0))
                        .or_else(|_| TcpListener::bind("0.0.0.0:0"))
                        .map_err(BootError::io(BootStep::BindRendezvous { at: None }))?;
                    let mut addr = l
                        .local_addr()
                        .map_err(BootError::io(BootStep::RendezvousSocket))?;
                    addr.set_ip(ip);
                    let server =
                        RendezvousServer::start(l, env.size, secret.clone(), job, false, None)?;
                    write_rendezvous_file(path, addr, &secret)?;
                    (addr, secret, Some(server))
                } else {
                    // Wait for rank 0's file; a stale file from an earlier job fails the
                    // handshake or the connection and is read again.
                    loop {
                        if let Some((addr, secret)) = read_rendezvous_file(path) {
                            match connect(addr, &secret, Purpose::Bootstrap, identity, timeout) {
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
        };
        // The server may not listen yet (rank 0 starting), or cut this connection off
        // while a flood of others lasts: retry.
        let stream = connect_retrying(
            addr,
            &secret,
            Purpose::Bootstrap,
            identity,
            deadline,
            || false,
        )?;
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
        let mut reader = self
            .stream
            .try_clone()
            .map_err(BootError::io(BootStep::RendezvousSocket))?;
        let st = state.clone();
        let fin = finalized.clone();
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
                    Ok(Some(ToRank::Finalizing { rank, collectives })) => {
                        st.mark_finalizing(rank, collectives);
                        let _ = tx.send(Reply::Wake);
                    }
                    Ok(Some(ToRank::Abort { rank, cause })) => {
                        st.mark_dead(rank, &cause);
                        let _ = tx.send(Reply::Wake);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        if !fin.load(Ordering::SeqCst) {
                            st.mark_server_lost("the connection closed");
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
            hooks: RwLock::new(None),
        })
    }
}

impl Bootstrap {
    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job id (same on every rank).
    pub fn job(&self) -> u64 {
        self.job
    }

    /// Everyone's addresses, by rank.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The job secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The watchdog's record of the job.
    pub fn state(&self) -> &Arc<JobHealth> {
        &self.state
    }

    /// Who launched this rank.
    pub fn launcher(&self) -> LauncherKind {
        self.launcher
    }

    fn collective(&self, op: CollOp, data: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        self.collective_with(op, data, true)
    }

    fn collective_with(
        &self,
        op: CollOp,
        data: &[u8],
        serve: bool,
    ) -> Result<Vec<Vec<u8>>, BootError> {
        if self.finalized.load(Ordering::SeqCst) {
            return Err(BootError::Finalized);
        }
        let mut replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = self.state.any_failure() {
            return Err(failure_error(f));
        }
        let seq = replies.0;
        replies.0 += 1;
        write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Collective {
                seq,
                op,
                data: data.to_vec(),
            },
        )?;
        match self.wait_reply(&replies.1, serve)? {
            Reply::Coll(s, parts) if s == seq => Ok(parts),
            Reply::Coll(s, _) => Err(BootError::Protocol(Violation::CollectiveOrder {
                got: s,
                want: seq,
            })),
            _ => Err(BootError::Finalized),
        }
    }

    /// Lets the active-message layer progress while this rank waits in a bootstrap collective or in
    /// `finalize`, so that a rank waiting here still serves peers that need it.
    pub fn set_hooks(&self, progress: ProgressHook, sleep: SleepHook, spin: Duration) {
        *self.hooks.write().unwrap_or_else(PoisonError::into_inner) = Some(Hooks {
            progress,
            sleep,
            spin,
        });
    }

    /// The error once the watchdog thread has stopped: the failure it recorded, if any.
    fn watchdog_gone(&self) -> BootError {
        self.state
            .any_failure()
            .map(failure_error)
            .unwrap_or(BootError::ServerLost(Lost::WatchdogStopped))
    }

    /// Waits for the watchdog thread's next answer (not a wake-up), driving progress.
    fn wait_reply(&self, rx: &Receiver<Reply>, serve: bool) -> Result<Reply, BootError> {
        let hooks = if serve {
            self.hooks
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        } else {
            None
        };
        let mut idle_since = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(Reply::Wake) | Err(TryRecvError::Empty) => {}
                Ok(r) => return Ok(r),
                Err(TryRecvError::Disconnected) => return Err(self.watchdog_gone()),
            }
            if let Some(f) = self.state.any_failure() {
                return Err(failure_error(f));
            }
            match &hooks {
                Some(h) => {
                    if (h.progress)() > 0 {
                        idle_since = Instant::now();
                    } else if idle_since.elapsed() > h.spin {
                        (h.sleep)(Duration::from_millis(50));
                    } else {
                        std::thread::yield_now();
                    }
                }
                None => match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(Reply::Wake) | Err(RecvTimeoutError::Timeout) => {}
                    Ok(r) => return Ok(r),
                    Err(RecvTimeoutError::Disconnected) => return Err(self.watchdog_gone()),
                },
            }
        }
    }

    /// Waits until every rank has called `barrier`.
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died, [`BootError::ServerLost`].
    pub fn barrier(&self) -> Result<(), BootError> {
        self.collective(CollOp::Barrier, &[]).map(|_| ())
    }

    /// A barrier that does not serve the active-message layer while it waits (see
    /// [`Bootstrap::set_hooks`]): for code that drives the transports itself and must
    /// not have its messages consumed by the active-message layer meanwhile.
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn barrier_quiet(&self) -> Result<(), BootError> {
        self.collective_with(CollOp::Barrier, &[], false)
            .map(|_| ())
    }

    /// Returns `root`'s `data` on every rank (other ranks' `data` is ignored).
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn broadcast(&self, root: u32, data: &[u8]) -> Result<Vec<u8>, BootError> {
        if root >= self.size {
            return Err(BootError::BadRoot {
                root,
                size: self.size,
            });
        }
        let mut parts = self.collective(CollOp::Broadcast { root }, data)?;
        parts
            .pop()
            .ok_or(BootError::Protocol(Violation::Parts { got: 0, want: 1 }))
    }

    /// Returns every rank's `data`, indexed by rank.
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        let parts = self.collective(CollOp::Allgather, data)?;
        if parts.len() != self.size as usize {
            return Err(BootError::Protocol(Violation::Parts {
                got: parts.len(),
                want: self.size as usize,
            }));
        }
        Ok(parts)
    }

    /// Ends this rank's part in the job: waits until every rank has finalised, so that no
    /// rank leaves while another may still need it. Same as [`Bootstrap::announce_finalize`]
    /// followed by [`Bootstrap::wait_finalized`].
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died first.
    pub fn finalize(&self) -> Result<(), BootError> {
        self.announce_finalize(Vec::new())?;
        self.wait_finalized()
    }

    /// Tells the server that this rank takes part in nothing more, without waiting for the
    /// other ranks (a dropped `World` does this and waits at process exit). `collectives`
    /// lists, per communicator context this rank holds, how many collectives it started
    /// there: ranks that wait in a later one fail (see [`JobHealth::collective_blocker`]).
    /// Once is enough: later calls do nothing.
    ///
    /// # Errors
    /// [`BootError::Io`] if the rendezvous cannot be written to.
    pub fn announce_finalize(&self, collectives: Vec<(u32, u32)>) -> Result<(), BootError> {
        if self.finalized.load(Ordering::SeqCst) || self.announced.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Finalize { collectives },
        )
    }

    /// Whether this rank has announced that it finalises.
    pub fn announced(&self) -> bool {
        self.announced.load(Ordering::SeqCst)
    }

    /// Waits, serving peers, until every rank has finalised (after
    /// [`Bootstrap::announce_finalize`]).
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died or gave up first.
    pub fn wait_finalized(&self) -> Result<(), BootError> {
        if self.finalized.load(Ordering::SeqCst) {
            return Ok(());
        }
        let replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match self.wait_reply(&replies.1, true) {
                Ok(Reply::Finalized) => break,
                Ok(_) => {}
                Err(_) if self.finalized.load(Ordering::SeqCst) => break,
                Err(e) => return Err(e),
            }
        }
        if let Some(server) = &self.server {
            server.wait_final_sent(Duration::from_secs(10));
        }
        Ok(())
    }

    /// Ends the whole job in the name of `rank`, which this rank found at fault (it
    /// finalised without starting a collective this rank waits in): every rank's pending
    /// operations fail naming it, and `spools run` reports it. Returns once the server
    /// has ended the job (its abort reached this rank too), so that whatever this rank
    /// does next (report an error, exit) comes after; best effort, bounded.
    pub fn blame(&self, rank: u32, cause: &str) {
        let sent = write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Blame {
                rank,
                cause: cause.to_string(),
            },
        );
        if sent.is_ok() {
            let _ = self.state.verdict_on(rank, Duration::from_secs(2));
        }
    }

    /// Ends the whole job on behalf of this rank: the server tells every other rank that
    /// this one gave up because of `cause`, and their pending operations fail naming it.
    /// Best effort (a lost rendezvous is already a failure everyone sees); this rank's own
    /// waits fail from now on too.
    pub fn abort(&self, cause: &str) {
        if self.finalized.load(Ordering::SeqCst) {
            return;
        }
        let sent = write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Abort {
                cause: cause.to_string(),
            },
        );
        if sent.is_ok() {
            // The server's abort comes back to this rank too: once it has, the job ends in
            // this rank's words, whatever this process does next (it usually exits).
            let _ = self.state.verdict_on(self.rank, Duration::from_secs(2));
        }
        self.state.mark_dead(self.rank, cause);
        if let Some(server) = &self.server {
            // Rank 0 hosts the server: give it the chance to tell the others before this
            // process, and the server with it, goes away.
            server.wait_abort_sent(Duration::from_secs(2));
        }
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
    }
}
