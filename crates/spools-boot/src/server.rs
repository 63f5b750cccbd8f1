//! The rendezvous server: ranks join, learn each other's addresses, run the runtime's own
//! collectives, finalise; and the watchdog tells everyone when one of them dies.
//!
//! `spools run` hosts it in the launcher; under another launcher rank 0 hosts it.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use spools_proto::auth::Secret;
use spools_proto::boot::{CollOp, Endpoint, SpawnProc, ToRank, ToServer, NOT_A_LAUNCHER};
use spools_proto::handshake::Purpose;

use crate::admission::{Admission, Ticket, ACCEPT_TIMEOUT};
use crate::error::{BootError, BootStep};
use crate::keepalive::Keepalive;
use crate::net::{accept_admitted, read_frame, write_frame};

/// What the server tells its host (the launcher) about ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A rank joined.
    Joined(u32),
    /// A rank finalised.
    Finalized(u32),
    /// A rank's connection ended before it finalised.
    Lost(u32),
    /// The job ended in a rank's name: it gave up (`ToServer::Abort`), or another rank
    /// found it at fault (`ToServer::Blame`).
    Aborted {
        /// Which.
        rank: u32,
        /// Why, in its words.
        cause: String,
    },
    /// A rank asks the launcher to start processes ([`ToServer::Spawn`]); the launcher
    /// answers through [`RendezvousServer::tell`].
    Spawn {
        /// The rank that asks.
        rank: u32,
        /// Its request's number.
        id: u32,
        /// The processes.
        procs: Vec<SpawnProc>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RankState {
    Waiting,
    Joined,
    Finalized,
    Lost,
    /// Its process ended without ever joining.
    Gone,
}

/// Contributions to pending collectives, by sequence number, then by rank.
type Pending = BTreeMap<u64, Vec<Option<(CollOp, Vec<u8>)>>>;

struct St {
    endpoints: Vec<Endpoint>,
    writers: Vec<Option<TcpStream>>,
    state: Vec<RankState>,
    joined: u32,
    colls: Pending,
    finalized: u32,
    final_sent: bool,
    aborted: Option<(u32, String)>,
}

struct Shared {
    size: u32,
    secret: Secret,
    /// The job's keepalive, set on every rank's connection.
    keepalive: Option<Keepalive>,
    job: u64,
    supervised: bool,
    /// Whether a rank may leave once it announced that it finalises, without waiting for
    /// the others (a job that processes join beside their own: [`RendezvousServer::allow_departures`]).
    departures: std::sync::atomic::AtomicBool,
    /// Set once every rank finalised in a job that allows departures: the listening
    /// thread ends at its next wake-up (its socket closed), since nobody joins any more.
    closing: std::sync::atomic::AtomicBool,
    /// Where it listens, to wake its accept once it closes.
    addr: SocketAddr,
    st: Mutex<St>,
    final_cv: Condvar,
    events: Mutex<Option<Sender<ServerEvent>>>,
}

/// A running rendezvous server (its threads end with the process).
#[derive(Clone)]
pub struct RendezvousServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl std::fmt::Debug for RendezvousServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RendezvousServer")
            .field("addr", &self.addr)
            .field("size", &self.shared.size)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, e: ServerEvent) {
        if let Some(tx) = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = tx.send(e);
        }
    }
}

fn send_to(st: &mut St, rank: usize, msg: &ToRank) {
    if let Some(w) = st.writers.get_mut(rank).and_then(Option::as_mut) {
        // A failed write means the rank is gone; its reader thread reports that.
        if write_frame(w, msg).is_err() {
            st.writers[rank] = None;
        }
    }
}

/// Writes `msg` to every rank but `except`, rank 0 last: a rank 0 that hosts the server
/// may exit as soon as it reads an abort, and the others must have theirs by then.
fn broadcast(st: &mut St, except: Option<usize>, msg: &ToRank) {
    let n = st.writers.len();
    for r in (1..n).chain(0..n.min(1)) {
        if Some(r) != except {
            send_to(st, r, msg);
        }
    }
}

impl RendezvousServer {
    /// Starts serving on `listener` for a job of `size` ranks, setting `keepalive` (the
    /// job's: [`Keepalive::for_timeout`] of its `net_timeout_s`) on every rank's connection.
    ///
    /// `supervised` servers (hosted by `spools run`) report a lost rank to `events` and let
    /// the launcher abort the job with the cause it learns from the operating system;
    /// unsupervised ones (hosted by rank 0) abort the job themselves.
    ///
    /// # Errors
    /// [`BootError::Io`] if the listener cannot be used.
    pub fn start(
        listener: TcpListener,
        size: u32,
        secret: Secret,
        keepalive: Option<Keepalive>,
        job: u64,
        supervised: bool,
        events: Option<Sender<ServerEvent>>,
    ) -> Result<RendezvousServer, BootError> {
        let addr = listener
            .local_addr()
            .map_err(BootError::io(BootStep::RendezvousSocket))?;
        let shared = Arc::new(Shared {
            size,
            secret,
            keepalive,
            job,
            supervised,
            departures: std::sync::atomic::AtomicBool::new(false),
            closing: std::sync::atomic::AtomicBool::new(false),
            addr,
            st: Mutex::new(St {
                endpoints: vec![Endpoint::default(); size as usize],
                writers: (0..size).map(|_| None).collect(),
                state: vec![RankState::Waiting; size as usize],
                joined: 0,
                colls: BTreeMap::new(),
                finalized: 0,
                final_sent: false,
                aborted: None,
            }),
            final_cv: Condvar::new(),
            events: Mutex::new(events),
        });
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("spools-rendezvous".into())
            .spawn(move || {
                let gate = Admission::new();
                for conn in listener.incoming() {
                    if sh.closing.load(std::sync::atomic::Ordering::Acquire) {
                        // The job is over: the socket closes with this thread.
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let sh = sh.clone();
                    let ticket = gate.admit(&conn);
                    // Without a thread the connection is closed; its rank retries.
                    if let Err(e) = std::thread::Builder::new()
                        .name("spools-rendezvous-conn".into())
                        .spawn(move || serve(&sh, conn, ticket))
                    {
                        crate::logger::warn(format_args!(
                            "spools: rendezvous: cannot serve a connection: {e}"
                        ));
                    }
                }
            })
            .map_err(BootError::io(BootStep::Thread { name: "rendezvous" }))?;
        Ok(RendezvousServer { shared, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The job id it hands out.
    pub fn job(&self) -> u64 {
        self.shared.job
    }

    /// Tells every other rank that `rank` died of `cause`; ranks that join later are told
    /// as they join.
    pub fn abort(&self, rank: u32, cause: &str) {
        abort_shared(&self.shared, rank, cause);
    }

    /// Records that `rank`'s process ended without joining; if other ranks wait for it,
    /// the job is aborted. Returns whether any rank has joined.
    pub fn mark_gone(&self, rank: u32) -> bool {
        let mut st = self.shared.lock();
        if let Some(s) = st.state.get_mut(rank as usize) {
            if *s == RankState::Waiting {
                *s = RankState::Gone;
            }
        }
        st.joined > 0
    }

    /// Whether `rank` joined.
    pub fn joined(&self, rank: u32) -> bool {
        self.shared
            .lock()
            .state
            .get(rank as usize)
            .is_some_and(|s| !matches!(s, RankState::Waiting | RankState::Gone))
    }

    /// Whether `rank` finalised.
    pub fn finalized(&self, rank: u32) -> bool {
        self.shared.lock().state.get(rank as usize) == Some(&RankState::Finalized)
    }

    /// Sends `msg` to `rank` if it is still connected (the launcher's answers to
    /// [`ServerEvent::Spawn`]); a rank that is gone is not told.
    pub fn tell(&self, rank: u32, msg: &ToRank) {
        let mut st = self.shared.lock();
        send_to(&mut st, rank as usize, msg);
    }

    /// Lets a rank whose connection closes after it announced that it finalises leave
    /// without ending the job (MPI's `MPI_Comm_disconnect` of a spawned or connected job,
    /// whose members go on working).
    pub fn allow_departures(&self) {
        self.shared
            .departures
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The rank that ended the job and why, if one did (a rank that gave up, or a death
    /// the server or its host reported).
    pub fn abort_record(&self) -> Option<(u32, String)> {
        self.shared.lock().aborted.clone()
    }

    /// Whether every rank has finalised and been told so (the job is over).
    pub fn job_finalized(&self) -> bool {
        self.shared.lock().final_sent
    }

    /// Waits until an abort has been written to every other rank, or until `timeout`
    /// (used by a rank 0 that hosts the server and gives up).
    pub fn wait_abort_sent(&self, timeout: Duration) {
        let st = self.shared.lock();
        let _ = self
            .shared
            .final_cv
            .wait_timeout_while(st, timeout, |st| st.aborted.is_none());
    }

    /// Waits until the end-of-job message has been written to every rank (used by a rank
    /// 0 that hosts the server before its process exits), or until `timeout`.
    pub fn wait_final_sent(&self, timeout: Duration) {
        let st = self.shared.lock();
        let _ = self
            .shared
            .final_cv
            .wait_timeout_while(st, timeout, |st| !st.final_sent);
    }
}

fn refuse(mut conn: TcpStream, reason: String) {
    let _ = write_frame(&mut conn, &ToRank::Refused { reason });
}

fn serve(sh: &Arc<Shared>, mut conn: TcpStream, ticket: Ticket) {
    // A process without the secret is dropped here, before any frame of it is read.
    let Ok((purpose, identity)) =
        accept_admitted(&mut conn, &sh.secret, sh.keepalive, || ticket.take())
    else {
        return;
    };
    // Proven: a rank of this job, not part of a flood. Its slot is free again, and its
    // connection lasts as long as the job.
    drop(ticket);
    if purpose != Purpose::Bootstrap {
        return;
    }
    let _ = conn.set_read_timeout(Some(ACCEPT_TIMEOUT));
    let Ok(Some(ToServer::Join {
        rank,
        size,
        endpoint,
    })) = read_frame::<ToServer>(&mut conn)
    else {
        return refuse(conn, "expected a join message".into());
    };
    let _ = conn.set_read_timeout(None);
    let _ = conn.set_write_timeout(None);
    if rank != identity.rank || size != sh.size || rank >= sh.size {
        return refuse(
            conn,
            format!(
                "rank {rank} of {size} does not fit this job of {} ranks",
                sh.size
            ),
        );
    }
    let Ok(writer) = conn.try_clone() else { return };
    {
        let mut st = sh.lock();
        if st.state[rank as usize] != RankState::Waiting {
            drop(st);
            return refuse(conn, format!("rank {rank} already joined this job"));
        }
        st.state[rank as usize] = RankState::Joined;
        st.endpoints[rank as usize] = endpoint;
        st.writers[rank as usize] = Some(writer);
        st.joined += 1;
        if let Some((dead, cause)) = st.aborted.clone() {
            send_to(&mut st, rank as usize, &ToRank::Abort { rank: dead, cause });
        } else if let Some(gone) = st.state.iter().position(|s| *s == RankState::Gone) {
            let cause = "its process exited before joining the job".to_string();
            st.aborted = Some((gone as u32, cause.clone()));
            let msg = ToRank::Abort {
                rank: gone as u32,
                cause,
            };
            broadcast(&mut st, None, &msg);
        } else if st.joined == sh.size {
            let table = ToRank::Table {
                job: sh.job,
                endpoints: st.endpoints.clone(),
            };
            broadcast(&mut st, None, &table);
        }
    }
    sh.event(ServerEvent::Joined(rank));
    // Read until the connection ends: a rank that finalised still reports an abort (its
    // process failed after its `World` was dropped), and one that leaves before the job's
    // finalisation completed fails the job.
    let ended = loop {
        match read_frame::<ToServer>(&mut conn) {
            Ok(Some(ToServer::Collective { seq, op, data })) => collective(sh, rank, seq, op, data),
            Ok(Some(ToServer::Finalize { collectives, sent })) => {
                finalize(sh, rank, collectives, &sent)
            }
            Ok(Some(ToServer::Abort { cause })) => break Ended::Aborted(cause),
            Ok(Some(ToServer::Blame {
                rank: culprit,
                cause,
            })) if culprit < sh.size => blame(sh, culprit, &cause),
            Ok(Some(ToServer::Blame { .. })) => {}
            Ok(Some(ToServer::Spawn { id, procs })) => spawn_request(sh, rank, id, procs),
            Ok(Some(ToServer::Join { .. })) | Ok(None) | Err(_) => break Ended::Closed,
        }
    };
    let mut st = sh.lock();
    let state = st.state[rank as usize];
    if state == RankState::Lost {
        return;
    }
    let aborted = matches!(ended, Ended::Aborted(_));
    if !aborted {
        st.writers[rank as usize] = None;
    }
    let cause = match ended {
        Ended::Aborted(cause) => cause,
        Ended::Closed if state == RankState::Joined => {
            "its connection closed before it finalised: it exited, crashed or was killed".into()
        }
        Ended::Closed if sh.departures.load(std::sync::atomic::Ordering::Acquire) => return,
        Ended::Closed if !st.final_sent => {
            "it left the job after finalising but before every rank had: its process ended early"
                .into()
        }
        Ended::Closed => return,
    };
    st.state[rank as usize] = RankState::Lost;
    drop(st);
    // Record and tell the ranks (in the rank's own words; a rank that gave up hears it too,
    // as its confirmation), then the launcher, which also reads the record when another
    // rank's exit reaches it first.
    if aborted || !sh.supervised {
        abort_shared(sh, rank, &cause);
    }
    sh.lock().writers[rank as usize] = None;
    if aborted {
        sh.event(ServerEvent::Aborted { rank, cause });
    } else {
        sh.event(ServerEvent::Lost(rank));
    }
}

/// How a rank's connection ended.
enum Ended {
    /// The rank gave up (`ToServer::Abort`).
    Aborted(String),
    /// The connection closed or carried garbage.
    Closed,
}

fn collective(sh: &Shared, rank: u32, seq: u64, op: CollOp, data: Vec<u8>) {
    let mut st = sh.lock();
    let size = sh.size as usize;
    // A rank that finalised without contributing to this collective never will.
    let contributed = |r: usize| st.colls.get(&seq).is_some_and(|parts| parts[r].is_some());
    if let Some(gone) = (0..size)
        .find(|&r| st.state[r] == RankState::Finalized && !contributed(r))
        .filter(|_| !st.final_sent)
    {
        drop(st);
        abort_shared(
            sh,
            gone as u32,
            &format!("it finalised without joining the runtime's collective #{seq}, which other ranks wait in"),
        );
        return;
    }
    let slot = st.colls.entry(seq).or_insert_with(|| vec![None; size]);
    slot[rank as usize] = Some((op, data));
    if slot.iter().any(Option::is_none) {
        return;
    }
    let Some(parts) = st.colls.remove(&seq) else {
        return;
    };
    let parts: Vec<(CollOp, Vec<u8>)> = parts.into_iter().flatten().collect();
    let first = parts[0].0;
    if let Some(bad) = parts.iter().position(|(o, _)| *o != first) {
        drop(st);
        abort_shared(
            sh,
            bad as u32,
            &format!(
                "it called {:?} as collective #{seq} while rank 0 called {first:?}",
                parts[bad].0
            ),
        );
        return;
    }
    let result = match first {
        CollOp::Barrier => Vec::new(),
        CollOp::Broadcast { root } => parts
            .get(root as usize)
            .map(|(_, d)| vec![d.clone()])
            .unwrap_or_default(),
        CollOp::Allgather => parts.into_iter().map(|(_, d)| d).collect(),
    };
    broadcast(&mut st, None, &ToRank::Collective { seq, parts: result });
}

/// The address that reaches a listener bound at `addr` from this process (loopback for
/// one bound to every interface).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    a
}

/// Hands a request to start processes to the launcher, or, for a server no launcher
/// hosts (rank 0's, a spawn's own), refuses it at once ([`NOT_A_LAUNCHER`]).
fn spawn_request(sh: &Shared, rank: u32, id: u32, procs: Vec<SpawnProc>) {
    let hosted = sh.supervised
        && sh
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
    if hosted {
        sh.event(ServerEvent::Spawn { rank, id, procs });
    } else {
        let msg = ToRank::Spawned {
            id,
            refused: Some(NOT_A_LAUNCHER.into()),
        };
        send_to(&mut sh.lock(), rank as usize, &msg);
    }
}

/// Ends the job in `rank`'s name because another rank found it at fault.
fn blame(sh: &Shared, rank: u32, cause: &str) {
    if sh.lock().aborted.is_some() {
        return;
    }
    abort_shared(sh, rank, cause);
    sh.event(ServerEvent::Aborted {
        rank,
        cause: cause.to_string(),
    });
}

fn abort_shared(sh: &Shared, rank: u32, cause: &str) {
    let mut st = sh.lock();
    if st.aborted.is_some() {
        return;
    }
    st.aborted = Some((rank, cause.to_string()));
    let msg = ToRank::Abort {
        rank,
        cause: cause.to_string(),
    };
    // Everyone still connected, the culprit too: a rank blamed while it waits in its
    // finalisation must learn that the job is over.
    broadcast(&mut st, None, &msg);
    sh.final_cv.notify_all();
}

fn finalize(sh: &Shared, rank: u32, collectives: Vec<(u32, u32)>, sent: &[(u32, u64)]) {
    let mut st = sh.lock();
    if st.state[rank as usize] != RankState::Joined {
        // Finalising twice counts once.
        return;
    }
    st.state[rank as usize] = RankState::Finalized;
    st.finalized += 1;
    if st.finalized == sh.size {
        broadcast(&mut st, None, &ToRank::Finalized);
        st.final_sent = true;
        sh.final_cv.notify_all();
        drop(st);
        sh.event(ServerEvent::Finalized(rank));
        if sh.departures.load(std::sync::atomic::Ordering::Acquire) {
            // A job joined beside its members' own (a spawn's, a port's) ends here,
            // whatever the process that hosts it does next: stop listening.
            sh.closing.store(true, std::sync::atomic::Ordering::Release);
            let _ = TcpStream::connect_timeout(&wake_addr(sh.addr), ACCEPT_TIMEOUT);
        }
        return;
    }
    // The others learn that this rank takes part in nothing more: their waits for it in
    // a collective it never started fail instead of hanging, and each learns how many
    // messages it sent them, so that a receive from it fails once all have arrived.
    let n = st.writers.len();
    let mut to = vec![0u64; n];
    for (r, k) in sent {
        if let Some(t) = to.get_mut(*r as usize) {
            *t = t.saturating_add(*k);
        }
    }
    for r in (1..n).chain(0..n.min(1)) {
        if r != rank as usize {
            let sent_to_you = to[r];
            let msg = ToRank::Finalizing {
                rank,
                collectives: collectives.clone(),
                sent_to_you,
            };
            send_to(&mut st, r, &msg);
        }
    }
    // A runtime collective that others started and this rank never joined can no longer
    // complete.
    let missing = st
        .colls
        .iter()
        .find(|(_, parts)| parts[rank as usize].is_none())
        .map(|(seq, _)| *seq);
    drop(st);
    sh.event(ServerEvent::Finalized(rank));
    if let Some(seq) = missing {
        abort_shared(
            sh,
            rank,
            &format!("it finalised without joining the runtime's collective #{seq}, which other ranks wait in"),
        );
    }
}
