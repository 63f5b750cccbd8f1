//! A receiver of streams that is not a Spools job: it accepts links on a TCP port, groups
//! them into logical connections by their hello, reassembles each connection's streams
//! and hands out whole ADUs, and serves other senders when one misbehaves.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender as Tx};
use std::sync::Arc;
use std::time::Instant;

use spools_proto::auth::Secret;
use spools_proto::stream::{Hello, Open};

use crate::acks::AckFan;
use crate::connection::{OnHold, Shared};
use crate::control::{Acker, Admit, AdmitFn, OnOpen, Stopper};
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
    /// Clients refused before they said hello (garbage, another protocol or version):
    /// nothing of theirs was a stream.
    pub refused: Vec<String>,
    /// Connections or links dropped after their hello (frames that do not fit their
    /// streams, a link that broke mid-frame): data of theirs may be lost.
    pub broken: Vec<String>,
    /// The connections of `broken` dropped because the reassembly refused one of their
    /// frames (a checksum mismatch, an SU out of its place, a limit), by connection id,
    /// typed.
    pub faults: Vec<(u64, ReassemblyError)>,
    /// When the first link said hello (the start of the transfers).
    pub started: Option<Instant>,
    /// The most bytes of whole ADUs that a connection had ready and not yet handed to the
    /// sink at once: its links stop reading above [`Limits::max_buffered`], so this stays
    /// within that plus the ADUs that the SUs being read when it was reached completed.
    pub max_pending: u64,
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// Accepting a connection failed.
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
    stop: Arc<AtomicBool>,
}

impl Receiver {
    /// Listens at `addr` (port 0: any free port, see [`Receiver::local_addr`]).
    ///
    /// # Errors
    /// The operating system's, binding the port.
    pub fn bind(addr: impl ToSocketAddrs, limits: Limits) -> std::io::Result<Receiver> {
        Ok(Receiver {
            listener: TcpListener::bind(addr)?,
            limits,
            policy: Policy::default(),
            recycler: Recycler::default(),
            acker: None,
            stop: Arc::new(AtomicBool::new(false)),
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
            addr: self.listener.local_addr()?,
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
    /// # Errors
    /// [`RecvError`] when accepting fails or `sink` returns an error.
    pub fn serve(
        self,
        connections: usize,
        mut sink: impl FnMut(Delivery) -> std::io::Result<()>,
    ) -> Result<Summary, RecvError> {
        let (tx, rx) = channel::<Msg>();
        let stop = self.stop.clone();
        let addr = self.listener.local_addr().map_err(RecvError::Accept)?;
        let acceptor = {
            let (tx, stop, policy) = (tx.clone(), stop.clone(), Arc::new(self.policy));
            let listener = self.listener;
            std::thread::spawn(move || {
                accept_loop(&listener, &tx, &stop, &policy);
            })
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
                Msg::Refused(why) => summary.refused.push(why),
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
                            summary
                                .broken
                                .push(format!("connection {:016x}: {e}", h.conn));
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
                    summary.broken.push(why);
                    if let Some(f) = fault {
                        summary.faults.push((conn, f));
                    }
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
                            summary.broken.push(e);
                        }
                        continue;
                    };
                    if let Some(e) = error {
                        summary
                            .broken
                            .push(format!("connection {conn:016x}, link {link}: {e}"));
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
        // Wake the acceptor so that it sees the stop and ends.
        stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(addr);
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

fn accept_loop(listener: &TcpListener, tx: &Tx<Msg>, stop: &AtomicBool, policy: &Arc<Policy>) {
    let mut next_id = 0usize;
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            let _ = tx.send(Msg::Stopped);
            return;
        }
        match accepted {
            Ok((sock, peer)) => {
                let (tx, id, policy) = (tx.clone(), next_id, policy.clone());
                next_id += 1;
                std::thread::spawn(move || {
                    read_link(sock, peer, id, &tx, &policy);
                });
            }
            Err(e) => {
                let _ = tx.send(Msg::AcceptFailed(e));
                return;
            }
        }
    }
}
