//! One rank's side of a stream into the job: a [`Receiver`] serving its part of one
//! logical connection on a thread of its own, whose events wait in a bounded queue (a job
//! slower than the sender slows the sender down).
//!
//! Rank 0 (the *lead*) listens where the sender was told to connect. A link whose hello
//! says it can move (`HELLO_CAN_MOVE`) and that rank `s % P` owns is moved there; the lead
//! keeps the links it owns (all of them for a sender that cannot move, or a job of one
//! rank) and names the ADUs in order. The other ranks (*members*) serve only the links
//! moved to them and hand their pieces to the job when it asks for the ADU the lead named.
//! Every rank acks an ADU on its links once the job consumed it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc::{sync_channel, Receiver as Rx, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};

use spools_msg::MsgError;
use spools_proto::auth::Secret;
use spools_proto::stream::{Open, HELLO_CAN_MOVE, VARIABLE};
use spools_stream::{
    Acker, Admit, Event, Limits, ReassemblyError, Receiver, RecvError, Recycler, Share, Stopper,
    Summary,
};

use super::next::{AduInfo, Head, Next};
use super::stash::Stash;
use crate::error::StreamRecvError;
use crate::stream::CHECK_EVERY;

/// Events queued between the receiving thread and the job (whole ADUs among them): a few,
/// so that a slow job holds the sender back instead of buffering the stream.
const QUEUED_EVENTS: usize = 4;

/// What the receiving thread queues.
enum Item {
    Event(Event),
    Served(Result<Summary, RecvError>),
}

/// A rank's listener, bound but not serving yet (the lead needs the others' addresses).
pub(crate) struct Bound {
    receiver: Receiver,
    addr: SocketAddr,
}

/// Which rank's part of the connection a receiver serves.
pub(crate) enum Role {
    /// Rank 0: moves link `s` to `members[s % ranks]` when the sender can move.
    Lead {
        ranks: u32,
        members: Vec<SocketAddr>,
    },
    /// Rank `rank` of `ranks`: serves the links moved to it.
    Member { rank: u32, ranks: u32 },
}

/// A rank's receiver of the stream's one logical connection.
pub(crate) struct Inbox {
    rx: Option<Rx<Item>>,
    served: bool,
    stopper: Stopper,
    acker: Acker,
    /// Where the job hands its pieces' buffers back, for the receiver to fill again.
    recycler: Recycler,
    /// The streams announced on this rank's links, with the connection's link count.
    opens: Arc<Mutex<HashMap<u32, (u16, Open)>>>,
    /// The connection's links when the lead spread them over the ranks (0: not spread).
    spread: Arc<AtomicU16>,
    stash: Stash,
}

impl Bound {
    /// Listens at `addr`, requiring `secret`'s proof when given one.
    pub(crate) fn bind(
        addr: SocketAddr,
        limits: Limits,
        secret: Option<&Secret>,
    ) -> Result<Bound, StreamRecvError> {
        let receiver = Receiver::bind(addr, limits)
            .map_err(|source| StreamRecvError::Bind { addr, source })?;
        let receiver = match secret {
            Some(s) => receiver.require_proof(s.clone()),
            None => receiver,
        };
        let addr = receiver
            .local_addr()
            .map_err(|source| StreamRecvError::Bind { addr, source })?;
        Ok(Bound { receiver, addr })
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves one connection (this rank's part of it) on a thread of its own.
    pub(crate) fn start(self, role: Role) -> Result<Inbox, StreamRecvError> {
        let recycler = self.receiver.recycler();
        let opens = Arc::new(Mutex::new(HashMap::new()));
        let spread = Arc::new(AtomicU16::new(0));
        let told = opens.clone();
        let r = self.receiver.on_open(move |links, o: &Open| {
            told.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(o.stream, (links, *o));
        });
        let r = match role {
            Role::Lead { ranks, members } => {
                let spread = spread.clone();
                r.admit(move |h| {
                    if ranks < 2 || h.flags & HELLO_CAN_MOVE == 0 {
                        return Admit::Serve(None);
                    }
                    match u32::from(h.link) % ranks {
                        0 => {
                            spread.store(h.links, Ordering::SeqCst);
                            Admit::Serve(Some(share(h.links, 0, ranks)))
                        }
                        owner => members
                            .get(owner as usize)
                            .map_or(Admit::Refuse("no rank of the job owns this link"), |&a| {
                                Admit::Move(a)
                            }),
                    }
                })
            }
            Role::Member { rank, ranks } => r.admit(move |h| {
                if h.flags & HELLO_CAN_MOVE != 0 && u32::from(h.link) % ranks == rank {
                    Admit::Serve(Some(share(h.links, rank, ranks)))
                } else {
                    Admit::Refuse("this rank serves only the links rank 0 moved to it")
                }
            }),
        };
        let stopper = r.stopper().map_err(|source| StreamRecvError::Bind {
            addr: self.addr,
            source,
        })?;
        let (r, acker) = r.consumer_acks();
        let (tx, rx) = sync_channel(QUEUED_EVENTS);
        std::thread::Builder::new()
            .name("spools-stream-in".into())
            .spawn(move || serve(r, &tx))
            .map_err(StreamRecvError::Thread)?;
        Ok(Inbox {
            rx: Some(rx),
            served: false,
            stopper,
            acker,
            recycler,
            opens,
            spread,
            stash: Stash::default(),
        })
    }
}

/// Rank `rank`'s share of a connection of `links` links over `ranks` ranks.
fn share(links: u16, rank: u32, ranks: u32) -> Share {
    let mine = (0..links)
        .filter(|&s| u32::from(s) % ranks == rank)
        .collect();
    Share::new(mine, rank == 0)
}

impl Inbox {
    /// The next item of the receiving thread; `check` (the interrupt check) whenever
    /// nothing came for [`CHECK_EVERY`]. `None` when the receiver is gone.
    fn item(&mut self, check: &dyn Fn() -> Result<(), MsgError>) -> Result<Item, MsgError> {
        let Some(rx) = self.rx.as_ref() else {
            return Ok(Item::Served(Err(RecvError::Output(std::io::Error::other(
                "the receiver was shut",
            )))));
        };
        loop {
            match rx.recv_timeout(CHECK_EVERY) {
                Ok(item) => {
                    if matches!(item, Item::Served(_)) {
                        self.served = true;
                    }
                    return Ok(item);
                }
                Err(RecvTimeoutError::Timeout) => check()?,
                Err(RecvTimeoutError::Disconnected) => {
                    self.served = true;
                    self.rx = None;
                    return Ok(Item::Served(Err(RecvError::Output(std::io::Error::other(
                        "the receiving thread ended",
                    )))));
                }
            }
        }
    }

    /// The lead's wait for what comes next, with its piece of a whole ADU (streams that
    /// ended complete are passed over). A sender that dies ends its links, so this ends
    /// too.
    ///
    /// # Errors
    /// `check`'s (nothing was taken from the queue).
    pub(crate) fn next(
        &mut self,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<(Next, Vec<u8>), MsgError> {
        if self.rx.is_none() && self.served {
            return Ok((Next::Receiver("the receiver was shut".into()), Vec::new()));
        }
        loop {
            let next = match self.item(check)? {
                Item::Event(Event::Adu { stream, adu, data }) => {
                    return Ok(self.head(stream, adu, data));
                }
                Item::Event(Event::Ended { complete: true, .. }) => continue,
                Item::Event(Event::Ended { stream, adus, .. }) => Next::Cut { stream, adus },
                Item::Event(Event::Incomplete {
                    stream,
                    adu,
                    have,
                    size,
                }) => Next::Incomplete {
                    stream,
                    adu,
                    have,
                    size,
                },
                Item::Event(Event::Missing { stream, from, to }) => {
                    Next::Missing { stream, from, to }
                }
                Item::Served(s) => match ended(s) {
                    // The lead's links ended: the ranks holding the others wait for theirs.
                    Next::End { .. } => Next::End {
                        spread: self.spread.load(Ordering::SeqCst),
                    },
                    n => n,
                },
            };
            return Ok((next, Vec::new()));
        }
    }

    /// What the lead tells the job of a whole ADU (its piece, or the ADU itself when
    /// every link is here): its size and where its pieces are.
    fn head(&self, stream: u32, adu: u64, data: Vec<u8>) -> (Next, Vec<u8>) {
        let spread = self.spread.load(Ordering::SeqCst) > 0;
        let Some((links, open)) = self
            .opens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&stream)
            .copied()
        else {
            return (
                Next::Receiver(format!("an ADU of stream {stream}, never announced")),
                Vec::new(),
            );
        };
        // A piece's length is not its ADU's: the reassembly kept the size.
        let size = match spread {
            false => Some(data.len() as u64),
            true => self.acker.piece_of(stream, adu),
        };
        let Some(size) = size else {
            return (
                Next::Receiver(format!("stream {stream}, ADU {adu}: no size for its piece")),
                Vec::new(),
            );
        };
        let tu = if open.adu == VARIABLE {
            size.max(1)
        } else {
            open.tu
        };
        let head = Head {
            info: AduInfo { stream, adu, size },
            tu,
            links,
            spread,
        };
        (Next::Adu(head), data)
    }

    /// A member's piece of the ADU the lead named (`Err`: why it will never come, for
    /// every rank).
    ///
    /// # Errors
    /// `check`'s.
    pub(crate) fn piece(
        &mut self,
        h: &Head,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<Result<Vec<u8>, Next>, MsgError> {
        let AduInfo { stream, adu, size } = h.info;
        loop {
            if let Some(p) = self.stash.take(stream, adu, size) {
                return Ok(p);
            }
            match self.item(check)? {
                Item::Event(e) => self.stash.offer(e),
                Item::Served(s) => self.stash.over(ended(s)),
            }
        }
    }

    /// A member's wait, once the lead said the connection ended, for the end of its own
    /// links: its receiver serves them until the sender ended each one (its last frames,
    /// the acks it still waits for), and only then does the rank report the end and close
    /// them (docs/streams.md, "Ending a connection"). What still comes is dropped: every
    /// ADU was received.
    ///
    /// # Errors
    /// `check`'s (asked at least every [`CHECK_EVERY`]).
    pub(crate) fn wait_served(
        &mut self,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<(), MsgError> {
        while !self.served {
            if let Item::Served(s) = self.item(check)? {
                self.stash.over(ended(s));
                break;
            }
        }
        Ok(())
    }

    /// The job consumed ADUs `0..=adu` of `stream` (this rank's piece of the last one was
    /// `piece`): acked on this rank's links, and the piece's buffer handed back to the
    /// receiver to fill again.
    pub(crate) fn consumed(&self, stream: u32, adu: u64, piece: Vec<u8>) {
        self.acker.ack(stream, adu);
        self.recycler.give(piece);
    }
}

/// How a receiver's serving ended, as the job learns it.
fn ended(s: Result<Summary, RecvError>) -> Next {
    match s {
        Ok(s) => match (s.faults.first(), s.broken.first()) {
            (
                Some((
                    _,
                    ReassemblyError::Checksum {
                        stream,
                        adu,
                        tu,
                        su,
                        link,
                        ..
                    },
                )),
                _,
            ) => Next::Checksum {
                stream: *stream,
                adu: *adu,
                tu: *tu,
                su: *su,
                link: *link,
            },
            (_, Some(b)) => Next::Refused(b.clone()),
            (_, None) => Next::End { spread: 0 },
        },
        Err(e) => Next::Receiver(e.to_string()),
    }
}

impl Drop for Inbox {
    /// Ends the receiving thread: with the queue gone its next delivery fails, and when it
    /// still waits for a connection, the stopper ends its wait (without blocking).
    fn drop(&mut self) {
        drop(self.rx.take());
        if !self.served {
            self.stopper.stop();
        }
    }
}

/// The receiving thread: serves one connection, queueing its events, then how it ended.
fn serve(r: Receiver, tx: &SyncSender<Item>) {
    let served = r.serve(1, |d| {
        tx.send(Item::Event(d.event))
            .map_err(|_| std::io::Error::other("the stream reader was dropped"))
    });
    let _ = tx.send(Item::Served(served));
}
