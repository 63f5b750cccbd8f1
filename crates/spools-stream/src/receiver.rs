//! A receiver of streams that is not a Spools job: it accepts links on a TCP port, groups
//! them into logical connections by their hello, reassembles each connection's streams
//! and hands out whole ADUs, and serves other senders when one misbehaves.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Sender as Tx};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spools_proto::auth::Secret;
use spools_proto::stream::{Hello, Open};

use crate::acks::AckFan;
use crate::admission::{Admission, Arrival, Gate, Pending};
use crate::connection::{OnHold, Shared};
use crate::control::{Acker, Admit, AdmitFn, OnOpen, Stop, Stopper};
use crate::error::ReassemblyError;
use crate::reassembly::{Event, Limits, Reassembler};
use crate::recycler::Recycler;
use crate::serve_link::{read_link, Msg, Policy};

/// An event of one logical connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The connection's id (from its hellos).
    pub conn: u64,
    /// What happened.
    pub event: Event,
}

/// What a [`Receiver::serve`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Logical connections that ended (every link closed).
    pub connections: usize,
    /// Whole ADUs handed out.
    pub adus: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Clients refused before they said hello (garbage, another protocol or version, no
    /// hello in time, evicted by newer links while the receiver held its most pending
    /// links, see [`Admission`]): nothing of theirs was a stream. The first
    /// [`MAX_REPORTED`]; the others are counted in `refused_more`.
    pub refused: Vec<String>,
    /// Refusals beyond the first [`MAX_REPORTED`], counted and not kept.
    pub refused_more: u64,
    /// Connections or links dropped after their hello (frames that do not fit their
    /// streams, a link that broke mid-frame): data of theirs may be lost. The first
    /// [`MAX_REPORTED`]; the others are counted in `broken_more`.
    pub broken: Vec<String>,
    /// Drops beyond the first [`MAX_REPORTED`], counted and not kept.
    pub broken_more: u64,
    /// The connections of `broken` dropped because the reassembly refused one of their
    /// frames (a checksum mismatch, an SU out of its place, a limit), by connection id,
    /// typed (the first [`MAX_REPORTED`]).
    pub faults: Vec<(u64, ReassemblyError)>,
    /// When the first link said hello (the start of the transfers).
    pub started: Option<Instant>,
    /// The most bytes of whole ADUs that a connection had ready and not yet handed to the
    /// sink at once: its links stop reading above [`Limits::max_buffered`], so this stays
    /// within that plus the ADUs that the SUs being read when it was reached completed.
    pub max_pending: u64,
}

/// Refusals, and drops, that a [`Summary`] keeps word of (the others are counted): what a
/// receiver remembers of peers stays bounded however many there are.
pub const MAX_REPORTED: usize = 1000;

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// Accepting connections failed for good (the listening socket is unusable). Running
    /// out of file descriptors, or of memory, is not such a failure: the receiver waits
    /// and accepts again.
    #[error("accepting a connection: {0}")]
    Accept(std::io::Error),
    /// The sink refused a delivery (writing the output failed).
    #[error("writing what was received: {0}")]
    Output(std::io::Error),
}

/// A TCP port receiving streams. Every whole ADU handed to the sink is acknowledged to the
/// sender (`ack`, on every link of its connection), so that a sender with a window
/// ([`crate::Sender::with_window`]) is held while the sink is slow. A sender without one is
/// held too, by TCP: a connection's links stop reading while the bytes of its whole ADUs
/// not yet handed to the sink exceed [`Limits::max_buffered`].
///
/// ```
/// use spools_stream::{Receiver, Limits};
/// let r = Receiver::bind("127.0.0.1:0", Limits::default())?;
/// assert!(r.local_addr()?.port() > 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Receiver {
    listener: TcpListener,
    limits: Limits,
    policy: Policy,
    recycler: Recycler,
    /// Acks sent when the consumer says so, rather than when the sink took the ADU.
    acker: Option<Acker>,
    stop: Arc<Stop>,
    admission: Admission,
}

impl Receiver {
    /// Listens at `addr` (port 0: any free port, see [`Receiver::local_addr`]).
    ///
    /// # Errors
    /// The operating system's, binding the port (or creating the event that stops it).
    pub fn bind(addr: impl ToSocketAddrs, limits: Limits) -> std::io::Result<Receiver> {
        Ok(Receiver {
            listener: TcpListener::bind(addr)?,
            limits,
            policy: Policy::default(),
            recycler: Recycler::default(),
            acker: None,
            stop: Arc::new(Stop::new()?),
            admission: Admission::default(),
        })
    }

    /// Where the consumer hands the buffers of the ADUs it is done with back, for the
    /// receiver to fill again (see [`Recycler`]); handing nothing back is fine.
    pub fn recycler(&self) -> Recycler {
        self.recycler.clone()
    }

    /// Requires every link to prove it knows `secret` (a job's secret, see `spools
    /// secret`) before anything of it is taken: the receiver answers `hello` with
    /// `WELCOME_REQUIRE_PROOF` and runs the job's secret handshake on the link. A link that
    /// cannot or does not prove it is named in [`Summary::refused`] and dropped; the
    /// others are served.
    ///
    /// ```
    /// use spools_proto::auth::Secret;
    /// use spools_stream::{Limits, Receiver};
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?
    ///     .require_proof(Secret::from_bytes([7; 16]));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn require_proof(mut self, secret: Secret) -> Receiver {
        self.policy.secret = Some(secret);
        self
    }

    /// Decides for each link that said hello (and proved the secret, when required):
    /// serve it here, as a whole connection or a [`crate::Share`] of one, move it to
    /// another receiver of the connection, or refuse it. Without it, every link is served
    /// with its whole connection. It runs on the link's thread.
    ///
    /// ```
    /// use spools_stream::{Admit, Limits, Receiver};
    /// let other = "127.0.0.1:7001".parse()?;
    /// // Links 0 and 2 here, the odd ones to another receiver.
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?
    ///     .admit(move |h| match h.link % 2 {
    ///         0 => Admit::Serve(Some(spools_stream::Share::new(
    ///             (0..h.links).filter(|s| s % 2 == 0).collect(),
    ///             true,
    ///         ))),
    ///         _ => Admit::Move(other),
    ///     });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn admit(mut self, f: impl Fn(&Hello) -> Admit + Send + Sync + 'static) -> Receiver {
        self.policy.admit = Some(Arc::new(f) as AdmitFn);
        self
    }

    /// Bounds the links held at once and the time a link has to say its hello (see
    /// [`Admission`]; by default [`Admission::default`]).
    #[must_use]
    pub fn admission(mut self, a: Admission) -> Receiver {
        self.admission = a;
        self
    }

    /// Calls `f` with the connection's link count and each stream announced on a link
    /// (every `open` frame the reassembly takes), on the link's thread.
    #[must_use]
    pub fn on_open(mut self, f: impl Fn(u16, &Open) + Send + Sync + 'static) -> Receiver {
        self.policy.on_open = Some(Arc::new(f) as OnOpen);
        self
    }

    /// Acks ADUs when the consumer says it is done with them ([`Acker::ack`]) instead of
    /// when the sink took them, so that a sender's window holds it to what the consumer
    /// consumed (a job's collective receive).
    #[must_use]
    pub fn consumer_acks(mut self) -> (Receiver, Acker) {
        let a = Acker::default();
        self.acker = Some(a.clone());
        (self, a)
    }

    /// Ends [`Receiver::serve`] from another thread (see [`Stopper`]).
    ///
    /// # Errors
    /// The operating system's, asking the listener's address.
    pub fn stopper(&self) -> std::io::Result<Stopper> {
        Ok(Stopper {
            stop: self.stop.clone(),
        })
    }

    /// Calls `f` each time a link stops reading because its connection's whole ADUs not
    /// yet handed to the sink exceed [`Limits::max_buffered`] (with their bytes): the sink
    /// is behind, and the sender is being held back. It runs on the link's thread.
    ///
    /// ```
    /// use spools_stream::{Limits, Receiver};
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?
    ///     .on_hold(|bytes| eprintln!("the sink is {bytes} bytes behind"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn on_hold(mut self, f: impl Fn(u64) + Send + Sync + 'static) -> Receiver {
        self.policy.on_hold = Some(Arc::new(f) as OnHold);
        self
    }

    /// Where senders connect.
    ///
    /// # Errors
    /// The operating system's.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `connections` logical connections have ended, handing every event to
    /// `sink` in the order the streams' constraints allow. A link that sends garbage, or a
    /// connection whose frames do not fit its streams, is dropped and named in
    /// [`Summary::refused`]; the others go on.
    ///
    /// Each link is read by a thread of its own, which checks every SU's header against
    /// its stream, reads its payload straight into the ADU's buffer and checks its CRC32C
    /// there (the links of a connection in parallel); this thread hands out what is whole.
    ///
    /// Links are taken within the receiver's [`Admission`]: a peer that has not said its
    /// hello costs a thread and a 64 KiB buffer at most, for at most its hello timeout,
    /// and such peers are at most [`Admission::max_pending`] at once. Running out of file
    /// descriptors closes the oldest pending link and accepts again a little later.
    ///
    /// # Errors
    /// [`RecvError`] when the listening socket fails for good or `sink` returns an error.
    pub fn serve(
        self,
        connections: usize,
        mut sink: impl FnMut(Delivery) -> std::io::Result<()>,
    ) -> Result<Summary, RecvError> {
        let (tx, rx) = channel::<Msg>();
        let stop = self.stop.clone();
        let acceptor = {
            let (tx, stop, policy) = (tx.clone(), stop.clone(), Arc::new(self.policy));
            let gate = Arc::new(Gate::new(self.admission));
            let listener = self.listener;
            std::thread::Builder::new()
                .name("spools-stream-accept".into())
                .spawn(move || {
                    accept_loop(&listener, &tx, &stop, &policy, &gate);
                })
                .map_err(RecvError::Accept)?
        };
        drop(tx);
        let mut summary = Summary::default();
        // Link id -> (connection, link index); connection -> state.
        let mut links: HashMap<usize, (u64, u16)> = HashMap::new();
        let mut conns: HashMap<u64, Conn> = HashMap::new();
        // Acks when the sink took an ADU, unless the consumer sends them.
        let auto = self.acker.is_none();
        let result = loop {
            if summary.connections >= connections {
                break Ok(());
            }
            let Ok(msg) = rx.recv() else {
                break Ok(());
            };
            match msg {
                Msg::Stopped => break Ok(()),
                Msg::AcceptFailed(e) => break Err(RecvError::Accept(e)),
                Msg::Refused(why) => note(&mut summary.refused, &mut summary.refused_more, why),
                Msg::Hello {
                    id,
                    hello: h,
                    share,
                    acks,
                    reply,
                } => {
                    summary.started.get_or_insert_with(Instant::now);
                    let added = match conns.get_mut(&h.conn) {
                        Some(c) => c.shared.with(|r| r.add_link(&h)).unwrap_or(Ok(())),
                        None => {
                            let held = share
                                .as_ref()
                                .map_or_else(|| usize::from(h.links), |s| s.links().len());
                            match share {
                                Some(s) => Reassembler::new_shared(&h, self.limits, s),
                                None => Reassembler::new(&h, self.limits),
                            }
                            .map(|mut r| {
                                r.recycle_from(self.recycler.clone());
                                let c = Conn::new(r, held, self.limits);
                                if let Some(a) = &self.acker {
                                    a.add_conn(c.shared.clone());
                                }
                                conns.insert(h.conn, c);
                            })
                        }
                    };
                    let shared = match (added, conns.get_mut(&h.conn)) {
                        (Ok(()), Some(c)) => {
                            links.insert(id, (h.conn, h.link));
                            if let Some(a) = &self.acker {
                                a.add_link(acks.clone());
                            }
                            c.acks.add(acks);
                            Some(c.shared.clone())
                        }
                        (Err(e), _) => {
                            note(
                                &mut summary.broken,
                                &mut summary.broken_more,
                                format!("connection {:016x}: {e}", h.conn),
                            );
                            None
                        }
                        (Ok(()), None) => None,
                    };
                    let _ = reply.send(shared);
                }
                Msg::Ready(conn) => {
                    if let Some(c) = conns.get_mut(&conn) {
                        let events = c.shared.ready_events();
                        if let Err(e) =
                            deliver(conn, &mut c.acks, events, &mut sink, &mut summary, auto)
                        {
                            break Err(e);
                        }
                    }
                }
                Msg::Broken {
                    conn,
                    why,
                    fault,
                    events,
                } => {
                    if summary.faults.len() < MAX_REPORTED {
                        summary.faults.extend(fault.map(|f| (conn, f)));
                    }
                    note(&mut summary.broken, &mut summary.broken_more, why);
                    if let Some(c) = conns.get_mut(&conn) {
                        if let Err(e) =
                            deliver(conn, &mut c.acks, events, &mut sink, &mut summary, auto)
                        {
                            break Err(e);
                        }
                    }
                }
                Msg::End(id, error) => {
                    let Some((conn, link)) = links.remove(&id) else {
                        if let Some(e) = error {
                            note(&mut summary.broken, &mut summary.broken_more, e);
                        }
                        continue;
                    };
                    if let Some(e) = error {
                        note(
                            &mut summary.broken,
                            &mut summary.broken_more,
                            format!("connection {conn:016x}, link {link}: {e}"),
                        );
                    }
                    let Some(c) = conns.get_mut(&conn) else {
                        continue;
                    };
                    c.ended += 1;
                    let events = c.shared.ready_events();
                    if let Err(e) =
                        deliver(conn, &mut c.acks, events, &mut sink, &mut summary, auto)
                    {
                        break Err(e);
                    }
                    if c.ended == c.links {
                        summary.connections += 1;
                        summary.max_pending = summary.max_pending.max(c.shared.max_ready());
                        conns.remove(&conn);
                    }
                }
            }
        };
        // The links of connections still open, held for room or not, go on without them.
        for c in conns.values() {
            summary.max_pending = summary.max_pending.max(c.shared.max_ready());
            c.shared.drop_reassembly();
        }
        // The acceptor wakes, sees the stop and closes the links still pending.
        stop.set();
        let _ = acceptor.join();
        result.map(|()| summary)
    }
}

struct Conn {
    /// The reassembly, shared with the connection's link threads.
    shared: Arc<Shared>,
    /// Links served here (all of the connection's, or a share's).
    links: usize,
    ended: usize,
    /// Its links' acks.
    acks: AckFan,
}

impl Conn {
    fn new(r: Reassembler, links: usize, limits: Limits) -> Conn {
        Conn {
            shared: Arc::new(Shared::new(r, limits.max_buffered)),
            links,
            ended: 0,
            acks: AckFan::default(),
        }
    }
}

/// Hands a connection's events to the sink (outside the reassembly's lock, so that the
/// links go on meanwhile), and acknowledges every whole ADU the sink took on every link of
/// the connection.
fn deliver(
    conn: u64,
    acks: &mut AckFan,
    events: impl IntoIterator<Item = Event>,
    sink: &mut impl FnMut(Delivery) -> std::io::Result<()>,
    summary: &mut Summary,
    auto: bool,
) -> Result<(), RecvError> {
    for event in events {
        let ack = match &event {
            Event::Adu { stream, adu, data } => {
                summary.adus += 1;
                summary.bytes += data.len() as u64;
                auto.then_some((*stream, *adu))
            }
            _ => None,
        };
        sink(Delivery { conn, event }).map_err(RecvError::Output)?;
        if let Some((stream, adu)) = ack {
            acks.post(stream, adu);
        }
    }
    Ok(())
}

/// Keeps `what` in `list` while it holds fewer than [`MAX_REPORTED`], else counts it.
fn note(list: &mut Vec<String>, more: &mut u64, what: String) {
    if list.len() < MAX_REPORTED {
        list.push(what);
    } else {
        *more += 1;
    }
}

/// The longest the acceptor waits before it looks at the stop flag and at the pending
/// links' time again.
const TICK: Duration = Duration::from_millis(250);

/// The longest the acceptor waits after accepting failed for want of resources (file
/// descriptors, memory, threads) before it tries again; it starts at 1 ms and doubles.
const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// Accepts links until the receiver stops: each pending link on a thread of its own, within
/// the gate's bounds (evicting the oldest pending links, closing those out of time). Never
/// ends on a lack of resources (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`, no thread): it
/// closes the oldest pending link, waits a little and accepts again.
fn accept_loop(
    listener: &TcpListener,
    tx: &Tx<Msg>,
    stop: &Stop,
    policy: &Arc<Policy>,
    gate: &Arc<Gate>,
) {
    let mut next_id = 0usize;
    let mut backoff = Duration::ZERO;
    // Non-blocking, so that the loop never waits on `accept` beyond its poll: it sees the
    // stop flag and the pending links' time even when no one can connect to wake it.
    if let Err(e) = listener.set_nonblocking(true) {
        let _ = tx.send(Msg::AcceptFailed(e));
        return;
    }
    let timeout = gate.bounds().hello_timeout;
    while !stop.is_set() {
        let now = Instant::now();
        let (expired, next) = gate.expired(now);
        for p in expired {
            refuse_pending(
                tx,
                &p,
                &format!(
                    "did not say its hello within {} s; closed",
                    timeout.as_secs_f64()
                ),
            );
        }
        let wait = next.map_or(TICK, |t| t.saturating_duration_since(now).min(TICK));
        if backoff.is_zero() {
            if !readable(listener, stop, wait) {
                continue;
            }
        } else {
            std::thread::sleep(backoff.min(wait));
        }
        if stop.is_set() {
            break;
        }
        match listener.accept() {
            Ok((sock, peer)) => {
                backoff = Duration::ZERO;
                let id = next_id;
                next_id += 1;
                if !take(sock, peer, id, tx, policy, gate) {
                    backoff = MAX_BACKOFF;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => backoff = Duration::ZERO,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_fatal(&e) => {
                let _ = tx.send(Msg::AcceptFailed(e));
                break;
            }
            Err(e) => {
                if is_lack(&e) {
                    // The links that have said nothing give their descriptors to the others.
                    if let Some(p) = gate.evict_oldest() {
                        refuse_pending(
                            tx,
                            &p,
                            "closed before its hello: the process is out of file descriptors",
                        );
                    }
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(1), MAX_BACKOFF);
            }
        }
    }
    // The pending links go with the acceptor: nothing is left waiting on a silent peer.
    for p in gate.take_all() {
        p.close();
    }
    if stop.is_set() {
        let _ = tx.send(Msg::Stopped);
    }
}

/// Waits up to `wait` for a connection to accept, or the stop (false: no connection came,
/// the receiver stopped, or the wait was interrupted).
fn readable(listener: &TcpListener, stop: &Stop, wait: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [
        PollFd::new(listener, PollFlags::IN),
        PollFd::new(stop.event(), PollFlags::IN),
    ];
    let t = Timespec {
        tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(wait.subsec_nanos()),
    };
    matches!(poll(&mut fds, Some(&t)), Ok(n) if n > 0) && !fds[0].revents().is_empty()
}

/// An accept error that no waiting cures: the listening socket itself is unusable.
fn is_fatal(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(e).is_some_and(|n| {
        [
            Errno::BADF,
            Errno::INVAL,
            Errno::NOTSOCK,
            Errno::OPNOTSUPP,
            Errno::FAULT,
        ]
        .contains(&n)
    })
}

/// An accept error for want of resources: file descriptors (the process's or the
/// system's), socket buffers, memory.
fn is_lack(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(e)
        .is_some_and(|n| [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&n))
}

/// Names a pending link closed by the acceptor, and closes it.
fn refuse_pending(tx: &Tx<Msg>, p: &Pending, why: &str) {
    p.close();
    let _ = tx.send(Msg::Refused(format!("{}: {why}", p.peer)));
}

/// Takes a link just accepted into the gate, on a thread of its own: false when no thread
/// could be started for it (it is closed; the acceptor waits before the next).
fn take(
    sock: TcpStream,
    peer: SocketAddr,
    id: usize,
    tx: &Tx<Msg>,
    policy: &Arc<Policy>,
    gate: &Arc<Gate>,
) -> bool {
    // Accepted sockets block (they do not inherit the listener's O_NONBLOCK on Linux; made
    // sure of here).
    let _ = sock.set_nonblocking(false);
    let sock = Arc::new(sock);
    match gate.arrive(id, peer, sock.clone()) {
        Arrival::Full(n) => {
            let _ = sock.shutdown(std::net::Shutdown::Both);
            let _ = tx.send(Msg::Refused(format!(
                "{peer}: refused: the receiver serves its most links at once ({n})"
            )));
            true
        }
        Arrival::Pending(evicted) => {
            let most = gate.bounds().max_pending;
            for p in evicted {
                refuse_pending(
                    tx,
                    &p,
                    &format!(
                        "closed before its hello: newer links came while {most} were waiting for theirs"
                    ),
                );
            }
            let (tx, policy, gate2) = (tx.clone(), policy.clone(), gate.clone());
            let spawned = std::thread::Builder::new()
                .name("spools-stream-link".into())
                .spawn(move || read_link(sock, peer, id, &tx, &policy, &gate2));
            match spawned {
                Ok(_) => true,
                Err(_) => {
                    // The thread's closure, and its socket with it, is gone; the gate's
                    // hold on it goes too.
                    gate.leave(id);
                    false
                }
            }
        }
    }
}
